//! Kafka RecordBatch v2 (magic 2): header parsing, validation of producer input, stamping at
//! append time, and the scan that crash recovery runs over a segment's bytes.
//!
//! The engine stores batches verbatim, so this layout is also the layout of every `.log`
//! segment file: batches laid end to end with no framing of our own.
//!
//! # Layout
//!
//! All integers are big-endian. Positions are relative to the first byte of the batch.
//!
//! | pos | field                  | type | notes                                         |
//! |-----|------------------------|------|-----------------------------------------------|
//! |   0 | `baseOffset`           | i64  | assigned by the broker at append              |
//! |   8 | `batchLength`          | i32  | bytes after this field; total = 12 + length   |
//! |  12 | `partitionLeaderEpoch` | i32  | stamped by the broker at append               |
//! |  16 | `magic`                | i8   | always 2                                      |
//! |  17 | `crc`                  | u32  | CRC-32C of bytes `21..total`                  |
//! |  21 | `attributes`           | i16  | bits 0-2 codec, 3 timestamp type, 4 txn, 5 ctl|
//! |  23 | `lastOffsetDelta`      | i32  | `recordsCount - 1` for producer batches       |
//! |  27 | `baseTimestamp`        | i64  |                                               |
//! |  35 | `maxTimestamp`         | i64  | rewritten for `LogAppendTime` topics          |
//! |  43 | `producerId`           | i64  | -1 when the producer is not idempotent        |
//! |  51 | `producerEpoch`        | i16  |                                               |
//! |  53 | `baseSequence`         | i32  | -1 when the producer is not idempotent        |
//! |  57 | `recordsCount`         | i32  |                                               |
//! |  61 | records                |      | possibly compressed                           |
//!
//! An uncompressed record is: `length` varint, then `length` bytes holding `attributes` i8,
//! `timestampDelta` varlong, `offsetDelta` varint, `keyLength` varint (-1 = null), key,
//! `valueLength` varint (-1 = null), value, `headerCount` varint, and per header a key length
//! varint, key, value length varint (-1 = null), value. Varints are zigzag-encoded LEB128
//! (at most 5 bytes for a varint, 10 for a varlong).
//!
//! Because the CRC starts at `attributes`, the broker can assign `baseOffset` and
//! `partitionLeaderEpoch` without recomputing it. Setting `LogAppendTime` touches
//! `attributes` and `maxTimestamp`, so it does require a recompute.
//!
//! # Validation
//!
//! [`validate_batches`] is for untrusted producer input, in Apache Kafka's order: size limit,
//! framing, magic and CRC (a mismatch is corruption in transit), then the header's rules
//! (codec, `recordsCount == lastOffsetDelta + 1`, no control batch, a sequence number when a
//! producer id is set), then a walk of every record: exactly `recordsCount` records filling
//! the section, each well formed (varint lengths within its bounds, headers complete) and
//! carrying `offsetDelta` equal to its position, and (for a produce,
//! [`validate_produced_batches`]) meeting the topic's per-record rules ([`record_rules`]: keys
//! on compacted topics, timestamp bounds). A compressed batch is decompressed once for
//! that walk, into a per-thread scratch buffer, with the output capped at the maximum batch
//! size (a batch inflating past it is refused); what is stored stays the producer's bytes.
//! Both kinds of batch take the same walk. Every length is checked against the bytes present
//! before it is used, and nothing is allocated from a count, so a hostile header claiming
//! 2^31 records costs a comparison.
//!
//! # What a crash leaves behind
//!
//! Segments are preallocated and written in pages, so after a crash the written data may be
//! followed by a batch cut short, a batch whose later pages never reached the disk (its CRC
//! fails), and then zeros. [`scan_batches`] walks a segment from a known-good position,
//! checking framing, magic, header counts and CRC (not the records: the CRC already covers
//! them and recovery must be fast) and reports why it stopped; recovery truncates the segment
//! at [`BatchScan::valid_end`]. A zero `batchLength` at a batch boundary is read as "nothing
//! was written past here" rather than as corruption.
//!
//! # Stored batches after compaction
//!
//! The log cleaner ([`crate::compaction`]) removes records but keeps a batch's
//! `baseOffset` and `lastOffsetDelta`, and may leave a batch with no records at all (as
//! Kafka's cleaner does). [`scan_batches`] therefore checks stored batches with
//! [`BatchHeader::check_stored_counts`] (`0 <= recordsCount <= lastOffsetDelta + 1`) and,
//! when walking records, only that offset deltas increase within the span; producer input
//! keeps the exact rules.

use std::ops::Range;

use thiserror::Error;

use crate::batch::record_rules::{RecordChecks, RecordFaultAt};
use crate::compression::{self, Codec, CompressionError};

pub mod recompress;
pub mod record_rules;
mod records;
mod scan;
pub mod txn_marker;

pub use records::first_offset_at_or_after;
use records::{walk_records_exact, walk_stored_records};
pub use scan::{scan_batches, BatchScan, ScanStop, ScannedBatch};

/// Position of `baseOffset` (i64).
pub const BASE_OFFSET_POS: usize = 0;
/// Position of `batchLength` (i32).
pub const BATCH_LENGTH_POS: usize = 8;
/// Position of `partitionLeaderEpoch` (i32).
pub const PARTITION_LEADER_EPOCH_POS: usize = 12;
/// Position of `magic` (i8).
pub const MAGIC_POS: usize = 16;
/// Position of `crc` (u32).
pub const CRC_POS: usize = 17;
/// Position of `attributes` (i16); the CRC covers everything from here to the end.
pub const ATTRIBUTES_POS: usize = 21;
/// Position of `lastOffsetDelta` (i32).
pub const LAST_OFFSET_DELTA_POS: usize = 23;
/// Position of `baseTimestamp` (i64).
pub const BASE_TIMESTAMP_POS: usize = 27;
/// Position of `maxTimestamp` (i64).
pub const MAX_TIMESTAMP_POS: usize = 35;
/// Position of `producerId` (i64).
pub const PRODUCER_ID_POS: usize = 43;
/// Position of `producerEpoch` (i16).
pub const PRODUCER_EPOCH_POS: usize = 51;
/// Position of `baseSequence` (i32).
pub const BASE_SEQUENCE_POS: usize = 53;
/// Position of `recordsCount` (i32).
pub const RECORDS_COUNT_POS: usize = 57;
/// Length of the fixed v2 header; records start here.
pub const BATCH_HEADER_LEN: usize = 61;
/// Bytes before and including `batchLength`, not counted by `batchLength` itself.
pub const LOG_OVERHEAD: usize = 12;
/// Smallest `batchLength` that can hold a v2 header.
pub const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
/// The only magic this broker accepts or stores.
pub const MAGIC_V2: i8 = 2;
/// `attributes` bits holding the compression codec.
pub const COMPRESSION_CODEC_MASK: i16 = 0x07;
/// `attributes` bit set when timestamps are `LogAppendTime`.
pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
/// `attributes` bit set for transactional batches.
pub const TRANSACTIONAL_MASK: i16 = 0x10;
/// `attributes` bit set for control batches (transaction markers).
pub const CONTROL_MASK: i16 = 0x20;
/// Highest codec id defined by Kafka (zstd).
pub const MAX_COMPRESSION_CODEC: u8 = 4;
/// `producerId` of a producer that is not idempotent.
pub const NO_PRODUCER_ID: i64 = -1;
/// `baseSequence` of a producer that is not idempotent.
pub const NO_SEQUENCE: i32 = -1;

/// Why a batch (or a buffer of batches) was rejected.
#[derive(Error, Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// The input holds no batch at all; a produce must carry at least one.
    #[error("no record batch in input")]
    Empty,
    /// Fewer bytes are present than the batch's framing says it has.
    #[error("truncated batch: needs {needed} bytes, {available} available")]
    Truncated {
        /// Bytes the batch needs.
        needed: usize,
        /// Bytes actually present.
        available: usize,
    },
    /// `batchLength` is negative or too small to hold a v2 header.
    #[error("invalid batchLength {0}")]
    BadLength(i32),
    /// `magic` is not 2; older message formats are not accepted.
    #[error("unsupported magic {0}")]
    UnsupportedMagic(i8),
    /// The stored CRC-32C does not match the bytes.
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch {
        /// CRC found in the header.
        stored: u32,
        /// CRC computed over the batch.
        computed: u32,
    },
    /// `recordsCount` is below one or disagrees with `lastOffsetDelta + 1`.
    #[error("recordsCount {records_count} does not match lastOffsetDelta {last_offset_delta}")]
    RecordCountMismatch {
        /// Header's `recordsCount`.
        records_count: i32,
        /// Header's `lastOffsetDelta`.
        last_offset_delta: i32,
    },
    /// The batch is larger than the configured maximum.
    #[error("batch of {size} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Total size of the batch in bytes.
        size: usize,
        /// Configured maximum.
        max: usize,
    },
    /// The compression codec is not one Kafka defines (0..=4).
    #[error("invalid compression codec {0}")]
    InvalidCompression(u8),
    /// The records (decompressed first when the batch is compressed) do not parse, do not
    /// fill the section exactly, or are not as many as `recordsCount` says.
    #[error("invalid records: {0}")]
    InvalidRecords(&'static str),
    /// A record's `offsetDelta` is not its position in the batch (records are numbered 0 to
    /// `recordsCount - 1`, in order).
    #[error("record {index} has offsetDelta {found}, expected {index}")]
    OffsetDeltaMismatch {
        /// Position of the record in the batch.
        index: u32,
        /// The `offsetDelta` it carries.
        found: i32,
    },
    /// The compressed records section does not decompress, or decompresses to more than the
    /// maximum batch size.
    #[error("{0}")]
    Compression(#[from] CompressionError),
    /// Records break the topic's per-record rules ([`record_rules`]): every such record, in
    /// batch order. The batch is well formed otherwise.
    #[error("{} record(s) break the topic's record rules", .0.len())]
    RecordsRefused(Vec<RecordFaultAt>),
    /// A record of a compressed batch decompresses to more than the topic's
    /// `max.decompressed.message.bytes`.
    #[error("record {index} decompresses to {size} bytes, more than the maximum of {max}")]
    RecordTooLarge {
        /// Position of the record in the batch.
        index: u32,
        /// Its decompressed size (length prefix and body).
        size: usize,
        /// The topic's `max.decompressed.message.bytes`.
        max: usize,
    },
    /// A client sent a control batch (transaction marker); only the broker writes those.
    #[error("clients are not allowed to write control batches")]
    ControlBatch,
    /// An idempotent producer's batch (producer id set) carries no sequence number.
    #[error("invalid sequence number {base_sequence} in a batch with producerId {producer_id}")]
    MissingSequence {
        /// The batch's `producerId`.
        producer_id: i64,
        /// The batch's `baseSequence`.
        base_sequence: i32,
    },
}

/// Which timestamps a batch carries (`attributes` bit 3), and which a log stores
/// (`message.timestamp.type`, [`crate::LogConfig::timestamp_type`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// Set by the producer; a log of this type keeps the producer's timestamps.
    CreateTime,
    /// Set by the broker when the batch was appended; a log of this type stamps the
    /// broker's clock at append (Kafka's `LogAppendTime`).
    LogAppendTime,
}

/// The fixed 61-byte header of a v2 batch, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: i64,
    /// Bytes after the `batchLength` field.
    pub batch_length: i32,
    /// Leader epoch of the broker that appended the batch.
    pub partition_leader_epoch: i32,
    /// Message format version (2).
    pub magic: i8,
    /// Stored CRC-32C.
    pub crc: u32,
    /// Codec, timestamp type, transactional and control flags.
    pub attributes: i16,
    /// Offset of the last record relative to `base_offset`.
    pub last_offset_delta: i32,
    /// Timestamp of the first record.
    pub base_timestamp: i64,
    /// Largest timestamp in the batch (or the append time).
    pub max_timestamp: i64,
    /// Idempotent producer id, or -1.
    pub producer_id: i64,
    /// Idempotent producer epoch.
    pub producer_epoch: i16,
    /// Sequence number of the first record, or -1.
    pub base_sequence: i32,
    /// Number of records in the batch.
    pub records_count: i32,
}

impl BatchHeader {
    /// Decodes a v2 header from the start of `buf`.
    ///
    /// Checks only what makes the header usable for framing: enough bytes for the header,
    /// a `batchLength` that can hold it, and magic 2. It does not check that the whole batch
    /// is present, nor the CRC or counts; see [`validate_batches`] and [`scan_batches`].
    pub fn parse(buf: &[u8]) -> Result<Self, BatchError> {
        if buf.len() < BATCH_HEADER_LEN {
            return Err(BatchError::Truncated {
                needed: BATCH_HEADER_LEN,
                available: buf.len(),
            });
        }
        let batch_length = be_i32(buf, BATCH_LENGTH_POS);
        if batch_length < MIN_BATCH_LENGTH {
            return Err(BatchError::BadLength(batch_length));
        }
        let magic = buf[MAGIC_POS] as i8;
        if magic != MAGIC_V2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        Ok(Self {
            base_offset: be_i64(buf, BASE_OFFSET_POS),
            batch_length,
            partition_leader_epoch: be_i32(buf, PARTITION_LEADER_EPOCH_POS),
            magic,
            crc: be_u32(buf, CRC_POS),
            attributes: be_i16(buf, ATTRIBUTES_POS),
            last_offset_delta: be_i32(buf, LAST_OFFSET_DELTA_POS),
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_POS),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_POS),
            producer_id: be_i64(buf, PRODUCER_ID_POS),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_POS),
            base_sequence: be_i32(buf, BASE_SEQUENCE_POS),
            records_count: be_i32(buf, RECORDS_COUNT_POS),
        })
    }

    /// Encodes the header verbatim (the `crc` field is written as stored, not recomputed).
    pub fn encode(&self) -> [u8; BATCH_HEADER_LEN] {
        let mut out = [0u8; BATCH_HEADER_LEN];
        out[BASE_OFFSET_POS..][..8].copy_from_slice(&self.base_offset.to_be_bytes());
        out[BATCH_LENGTH_POS..][..4].copy_from_slice(&self.batch_length.to_be_bytes());
        out[PARTITION_LEADER_EPOCH_POS..][..4]
            .copy_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out[MAGIC_POS] = self.magic as u8;
        out[CRC_POS..][..4].copy_from_slice(&self.crc.to_be_bytes());
        out[ATTRIBUTES_POS..][..2].copy_from_slice(&self.attributes.to_be_bytes());
        out[LAST_OFFSET_DELTA_POS..][..4].copy_from_slice(&self.last_offset_delta.to_be_bytes());
        out[BASE_TIMESTAMP_POS..][..8].copy_from_slice(&self.base_timestamp.to_be_bytes());
        out[MAX_TIMESTAMP_POS..][..8].copy_from_slice(&self.max_timestamp.to_be_bytes());
        out[PRODUCER_ID_POS..][..8].copy_from_slice(&self.producer_id.to_be_bytes());
        out[PRODUCER_EPOCH_POS..][..2].copy_from_slice(&self.producer_epoch.to_be_bytes());
        out[BASE_SEQUENCE_POS..][..4].copy_from_slice(&self.base_sequence.to_be_bytes());
        out[RECORDS_COUNT_POS..][..4].copy_from_slice(&self.records_count.to_be_bytes());
        out
    }

    /// Total size of the batch in bytes, framing included.
    pub fn total_len(&self) -> usize {
        // `parse` guarantees batch_length >= MIN_BATCH_LENGTH, so this is never negative.
        LOG_OVERHEAD + usize::try_from(self.batch_length).unwrap_or(0)
    }

    /// Codec id from `attributes`: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd (higher ids are
    /// rejected by [`Self::check_counts`]).
    pub fn compression_id(&self) -> u8 {
        (self.attributes & COMPRESSION_CODEC_MASK) as u8
    }

    /// The batch's codec; `None` for the ids Kafka leaves undefined.
    pub fn codec(&self) -> Option<Codec> {
        Codec::from_id(self.compression_id())
    }

    /// Whether timestamps are producer-set or broker-set.
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }

    /// Whether the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_MASK != 0
    }

    /// Whether the batch is a control batch (transaction marker).
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_MASK != 0
    }

    /// Whether the batch comes from an idempotent producer.
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }

    /// Offset of the last record.
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .wrapping_add(i64::from(self.last_offset_delta))
    }

    /// Offset the next batch in the log gets.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }

    /// Sequence number of the last record, wrapping past `i32::MAX` to 0 as Kafka does;
    /// [`NO_SEQUENCE`] when the batch has none.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            NO_SEQUENCE
        } else {
            increment_sequence(self.base_sequence, self.last_offset_delta)
        }
    }

    /// Checks the codec and that `recordsCount` agrees with `lastOffsetDelta`.
    pub fn check_counts(&self) -> Result<(), BatchError> {
        if self.compression_id() > MAX_COMPRESSION_CODEC {
            return Err(BatchError::InvalidCompression(self.compression_id()));
        }
        let count_mismatch = self.records_count < 1
            || i64::from(self.records_count) != i64::from(self.last_offset_delta) + 1;
        if count_mismatch {
            return Err(BatchError::RecordCountMismatch {
                records_count: self.records_count,
                last_offset_delta: self.last_offset_delta,
            });
        }
        Ok(())
    }
}

impl BatchHeader {
    /// [`Self::check_counts`] for a batch the log already holds: compaction may have removed
    /// records (keeping the offset span, `lastOffsetDelta`), down to none (an empty batch
    /// kept for its producer's state), so `0 <= recordsCount <= lastOffsetDelta + 1`.
    pub fn check_stored_counts(&self) -> Result<(), BatchError> {
        if self.compression_id() > MAX_COMPRESSION_CODEC {
            return Err(BatchError::InvalidCompression(self.compression_id()));
        }
        if self.records_count < 0
            || self.last_offset_delta < 0
            || i64::from(self.records_count) > i64::from(self.last_offset_delta) + 1
        {
            return Err(BatchError::RecordCountMismatch {
                records_count: self.records_count,
                last_offset_delta: self.last_offset_delta,
            });
        }
        Ok(())
    }
}

/// Adds `delta` to a producer sequence number, wrapping from `i32::MAX` to 0 (sequences are
/// never negative, so the wrap is modulo 2^31, not two's complement).
pub fn increment_sequence(sequence: i32, delta: i32) -> i32 {
    let sum = i64::from(sequence) + i64::from(delta);
    let wrapped = if sum > i64::from(i32::MAX) {
        sum - (1i64 << 31)
    } else {
        sum
    };
    i32::try_from(wrapped).unwrap_or(NO_SEQUENCE)
}

/// CRC-32C of a batch as stored in its header: over bytes from `attributes` to the end of
/// `batch`. `batch` must be exactly one batch.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(ATTRIBUTES_POS..).unwrap_or(&[]))
}

/// One validated batch inside a produce buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSummary {
    /// Byte range of the batch within the validated buffer.
    pub range: Range<usize>,
    /// The batch's header.
    pub header: BatchHeader,
    /// Number of records (at least one).
    pub record_count: u32,
}

/// Validates a buffer of one or more concatenated batches as a producer sends them.
///
/// Every batch gets the full check (framing, size against `max_batch_bytes` counting the
/// 12-byte framing, magic, CRC, codec, counts, and for uncompressed batches every record).
/// The first failure rejects the whole buffer, as Kafka does for a partition's records.
pub fn validate_batches(
    buf: &[u8],
    max_batch_bytes: usize,
) -> Result<Vec<BatchSummary>, BatchError> {
    validate(buf, max_batch_bytes, None)
}

/// [`validate_batches`] for a produce, which also checks every record against the topic's
/// per-record rules ([`record_rules`]) in the same walk; records breaking them are
/// [`BatchError::RecordsRefused`].
pub fn validate_produced_batches(
    buf: &[u8],
    max_batch_bytes: usize,
    checks: &RecordChecks,
) -> Result<Vec<BatchSummary>, BatchError> {
    validate(buf, max_batch_bytes, Some(checks))
}

fn validate(
    buf: &[u8],
    max_batch_bytes: usize,
    checks: Option<&RecordChecks>,
) -> Result<Vec<BatchSummary>, BatchError> {
    if buf.is_empty() {
        return Err(BatchError::Empty);
    }
    let mut summaries = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let (header, total) = check_batch(&buf[pos..], max_batch_bytes, RecordWalk::All, checks)?;
        check_producer_rules(&header)?;
        summaries.push(BatchSummary {
            range: pos..pos + total,
            header,
            record_count: u32::try_from(header.records_count).unwrap_or(0),
        });
        pos += total;
    }
    Ok(summaries)
}

/// Rules for batches a client sends that do not apply to what the log already holds.
fn check_producer_rules(header: &BatchHeader) -> Result<(), BatchError> {
    if header.is_control() {
        return Err(BatchError::ControlBatch);
    }
    if header.has_producer_id() && header.base_sequence < 0 {
        return Err(BatchError::MissingSequence {
            producer_id: header.producer_id,
            base_sequence: header.base_sequence,
        });
    }
    Ok(())
}

/// Which batches [`check_batch`] walks record by record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RecordWalk {
    /// None: framing, header and CRC only.
    Nothing,
    /// Uncompressed batches only (offline checks of stored segments).
    Uncompressed,
    /// Every batch, decompressing compressed ones (producer input).
    All,
}

/// Checks the batch at the start of `buf`; returns its header and total length.
fn check_batch(
    buf: &[u8],
    max_batch_bytes: usize,
    walk: RecordWalk,
    checks: Option<&RecordChecks>,
) -> Result<(BatchHeader, usize), BatchError> {
    if buf.len() < LOG_OVERHEAD {
        return Err(BatchError::Truncated {
            needed: BATCH_HEADER_LEN,
            available: buf.len(),
        });
    }
    let batch_length = be_i32(buf, BATCH_LENGTH_POS);
    let body_len = match usize::try_from(batch_length) {
        Ok(len) if batch_length >= MIN_BATCH_LENGTH => len,
        _ => return Err(BatchError::BadLength(batch_length)),
    };
    let total = LOG_OVERHEAD + body_len;
    // Size before presence: an oversized batch is MESSAGE_TOO_LARGE even if it was cut short.
    if total > max_batch_bytes {
        return Err(BatchError::TooLarge {
            size: total,
            max: max_batch_bytes,
        });
    }
    if buf.len() < total {
        return Err(BatchError::Truncated {
            needed: total,
            available: buf.len(),
        });
    }
    let batch = &buf[..total];
    let header = BatchHeader::parse(batch)?;
    let computed = compute_crc(batch);
    if computed != header.crc {
        return Err(BatchError::CrcMismatch {
            stored: header.crc,
            computed,
        });
    }
    if walk == RecordWalk::All {
        header.check_counts()?;
    } else {
        // What the log holds may be compacted (see `crate::compaction`): fewer records than
        // the offset span, down to none.
        header.check_stored_counts()?;
    }
    let section = &batch[BATCH_HEADER_LEN..];
    match header.codec() {
        Some(Codec::None) if walk == RecordWalk::Uncompressed => {
            walk_stored_records(section, header.records_count, header.last_offset_delta)?;
        }
        Some(Codec::None) if walk != RecordWalk::Nothing => {
            walk_records_exact(section, &header, checks)?;
        }
        Some(codec) if walk == RecordWalk::All => compression::with_scratch(|records| {
            let limit = compression::decompressed_limit(max_batch_bytes);
            compression::decompress(codec, section, records, limit)?;
            walk_records_exact(records, &header, checks)
        })?,
        // The other cases walk nothing (check_counts refused undefined codecs).
        _ => {}
    }
    Ok((header, total))
}

/// Assigns offsets and epoch to a validated batch, and for `LogAppendTime` topics sets the
/// timestamp type and `maxTimestamp` to `log_append_time`.
///
/// `baseOffset` and `partitionLeaderEpoch` lie outside the CRC, so the common path does not
/// touch the CRC; the `LogAppendTime` path recomputes it over the batch. `batch` must start
/// with the batch; bytes past its `batchLength` are ignored.
pub fn stamp_for_append(
    batch: &mut [u8],
    base_offset: i64,
    leader_epoch: i32,
    log_append_time: Option<i64>,
) -> Result<(), BatchError> {
    let header = BatchHeader::parse(batch)?;
    let total = header.total_len();
    if batch.len() < total {
        return Err(BatchError::Truncated {
            needed: total,
            available: batch.len(),
        });
    }
    let batch = &mut batch[..total];
    batch[BASE_OFFSET_POS..][..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[PARTITION_LEADER_EPOCH_POS..][..4].copy_from_slice(&leader_epoch.to_be_bytes());
    if let Some(timestamp) = log_append_time {
        let attributes = header.attributes | TIMESTAMP_TYPE_MASK;
        batch[ATTRIBUTES_POS..][..2].copy_from_slice(&attributes.to_be_bytes());
        batch[MAX_TIMESTAMP_POS..][..8].copy_from_slice(&timestamp.to_be_bytes());
        let crc = compute_crc(batch);
        batch[CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
    }
    Ok(())
}

/// A `(key, value)` record for [`encode_batch_for_tests`]; `None` is a null key or value.
pub type TestRecord<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Builds a correct, uncompressed v2 batch for tests and benchmarks.
///
/// Each `(key, value)` becomes one record with no headers, `timestampDelta` 0 and
/// `offsetDelta` equal to its index. The batch has `baseOffset` 0, `partitionLeaderEpoch` -1
/// (as producers send it), `CreateTime` timestamps with `maxTimestamp == base_timestamp`, and
/// a valid CRC. Pass `producer_id` -1 and `base_sequence` -1 for a non-idempotent producer.
/// An empty `records` slice yields a zero-record batch, which validation rejects.
pub fn encode_batch_for_tests(
    records: &[TestRecord<'_>],
    base_timestamp: i64,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Vec<u8> {
    let mut body = Vec::new();
    let mut record = Vec::new();
    for (index, (key, value)) in records.iter().enumerate() {
        record.clear();
        record.push(0); // attributes
        put_varlong(&mut record, 0); // timestampDelta
        put_varint_len(&mut record, index);
        for field in [key, value] {
            match field {
                Some(bytes) => {
                    put_varint_len(&mut record, bytes.len());
                    record.extend_from_slice(bytes);
                }
                None => put_varlong(&mut record, -1),
            }
        }
        put_varlong(&mut record, 0); // header count
        put_varint_len(&mut body, record.len());
        body.extend_from_slice(&record);
    }
    let count = i32::try_from(records.len()).unwrap_or(i32::MAX);
    let header = BatchHeader {
        base_offset: 0,
        batch_length: i32::try_from(BATCH_HEADER_LEN - LOG_OVERHEAD + body.len())
            .unwrap_or(i32::MAX),
        partition_leader_epoch: -1,
        magic: MAGIC_V2,
        crc: 0,
        attributes: 0,
        last_offset_delta: count - 1,
        base_timestamp,
        max_timestamp: base_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count: count,
    };
    let mut batch = Vec::with_capacity(BATCH_HEADER_LEN + body.len());
    batch.extend_from_slice(&header.encode());
    batch.extend_from_slice(&body);
    let crc = compute_crc(&batch);
    batch[CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// Sets the transactional bit of the v2 batch `batch` (as [`encode_batch_for_tests`] builds
/// it) and recomputes its CRC, for tests and benchmarks of transactional producers.
pub fn set_transactional_for_tests(batch: &mut [u8]) {
    let attributes = be_i16(batch, ATTRIBUTES_POS) | TRANSACTIONAL_MASK;
    batch[ATTRIBUTES_POS..][..2].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
}

fn put_varint_len(out: &mut Vec<u8>, len: usize) {
    put_varlong(out, i64::try_from(len).unwrap_or(i64::MAX));
}

/// Zigzag LEB128; for values in i32 range this is also the varint encoding.
fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// Copies `N` bytes at `at`; callers check lengths first.
fn field<const N: usize>(buf: &[u8], at: usize) -> [u8; N] {
    let mut bytes = [0u8; N];
    bytes.copy_from_slice(&buf[at..at + N]);
    bytes
}

fn be_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(field(buf, at))
}

fn be_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(field(buf, at))
}

fn be_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(field(buf, at))
}

fn be_i64(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(field(buf, at))
}

#[cfg(test)]
mod tests;
