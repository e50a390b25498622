//! Record-level offsets and timestamps of one batch, for ListOffsets.
//!
//! A batch header only tells its `maxTimestamp`. Apache Kafka answers ListOffsets at record
//! granularity, even inside compressed batches: `MAX_TIMESTAMP` (-3) names the exact record
//! that holds the largest timestamp (the first one on ties), and a lookup by timestamp names
//! the first record whose timestamp is at or after the target, with that record's own
//! timestamp. This module reads those answers out of one batch, decompressing its records
//! section when it has to. It serves the ListOffsets path only; produce and fetch keep
//! batches opaque and never come here.
//!
//! # Codecs
//!
//! The codec is `attributes` bits 0-2. What the records section (everything after the
//! 61-byte header) holds for each:
//!
//! | id | codec  | records section                                                         |
//! |----|--------|-------------------------------------------------------------------------|
//! | 0  | none   | the records                                                             |
//! | 1  | gzip   | a gzip stream; concatenated members read as one, as `GZIPInputStream`   |
//! | 2  | snappy | snappy-java stream framing, or one raw snappy block (see below)         |
//! | 3  | lz4    | LZ4 frames in the standard frame format (what magic 2 uses), in turn    |
//! | 4  | zstd   | zstd frames, in turn; skippable frames are skipped                      |
//!
//! Snappy has two spellings on the wire. The Java client writes snappy-java's stream
//! framing: the 8-byte magic `82 53 4E 41 50 50 59 00` (`\x82SNAPPY\0`), a 4-byte version and
//! a 4-byte compatible version, then blocks of `[u32 big-endian length][raw snappy block]`
//! (a second magic header between blocks, from concatenated streams, is skipped).
//! librdkafka writes one raw snappy block with no framing at all. Kafka's own reader and
//! franz-go's accept both, telling them apart by the magic, and so does this module; a raw
//! block cannot start with the magic, because its first element would be a back-reference
//! with nothing before it.
//!
//! # Records
//!
//! After decompression the section holds exactly `recordsCount` records in the layout
//! described in [`crate::batch`]. A record's offset is `baseOffset + offsetDelta`; its
//! timestamp is `baseTimestamp + timestampDelta` for `CreateTime` batches and the batch's
//! `maxTimestamp` for `LogAppendTime` batches (the broker's append time stands for every
//! record). Both sums wrap as Kafka's `long` arithmetic does. Control batches are read the
//! same way: their marker is a record too.
//!
//! Parsing follows Kafka's record reader rather than the stricter produce-time walk in
//! [`crate::batch`]: any negative key or value length means null, while a negative record
//! length, header count or header key length is malformed. Every record must fill its
//! declared length exactly, and nothing may follow the last record.
//!
//! # Bounds
//!
//! The batch's bytes came from a producer, so they are treated as hostile.
//!
//! - Decompressed output is capped at the caller's `max_decompressed`. The output buffer
//!   grows with the bytes actually decoded, never past the cap, and one byte too many is
//!   [`RecordTimesError::OutputTooLarge`]; a small compressed "bomb" stops there. A raw snappy
//!   block declares its decompressed length up front, so that claim is checked against the
//!   cap before anything is allocated for it.
//! - The decoders' own working memory is bounded apart from the output: gzip keeps a 32 KiB
//!   window; lz4 keeps buffers sized by the frame's declared block size, about 12 MiB at
//!   most (4 MiB blocks, linked). The zstd decoder reserves the window a frame declares when
//!   it starts the frame, so windows are accepted up to the larger of the cap and 8 MiB (the
//!   size the zstd format asks every decoder to support; producers' windows are of that
//!   order), and a frame declaring more is refused with [`RecordTimesError::OutputTooLarge`]
//!   as well.
//! - `recordsCount` sizes nothing. A count that the bytes cannot hold (every record takes at
//!   least [`MIN_RECORD_LEN`] bytes) is rejected before the walk, and the result vector starts
//!   small and grows only with records that actually parse.
//! - The CRC is not checked here: batches reach ListOffsets from the log, where append and
//!   recovery have already checked it. Corruption the decoders or the record walk notice is
//!   still an error, never a panic.

use std::io::{ErrorKind, Read};

use thiserror::Error;

use crate::batch::{BatchError, BatchHeader, TimestampType, BATCH_HEADER_LEN};

/// Smallest possible encoded record: a one-byte length, then attributes, timestampDelta,
/// offsetDelta, key length, value length and header count of one byte each.
pub const MIN_RECORD_LEN: usize = 7;

/// Records reserved up front, whatever the header claims; more space is added only as
/// records parse.
const INITIAL_RECORDS_CAPACITY: usize = 1024;

/// Bytes moved from a streaming decoder per read.
const READ_CHUNK_LEN: usize = 16 * 1024;

/// zstd window accepted whatever the cap: the zstd format asks every decoder to support
/// windows up to 8 MiB, and producers declare windows of that order even for small batches.
const ZSTD_ALWAYS_ACCEPTED_WINDOW: u64 = 8 << 20;

/// snappy-java's stream magic: `\x82SNAPPY\0`.
const SNAPPY_JAVA_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];

/// snappy-java's stream header: the magic, a version and a compatible version (i32 each).
const SNAPPY_JAVA_HEADER_LEN: usize = 16;

/// One record's offset and timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordTime {
    /// The record's offset in the partition.
    pub offset: i64,
    /// The record's timestamp (the batch's `maxTimestamp` for `LogAppendTime` batches).
    pub timestamp: i64,
}

/// Why the records of a batch could not be read.
#[derive(Error, Debug, Clone, PartialEq, Eq)]
pub enum RecordTimesError {
    /// The batch header is unusable, or the batch is shorter than its `batchLength` says.
    #[error("invalid batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// The codec bits name a codec Kafka does not define (5 to 7).
    #[error("unsupported compression codec {0}")]
    UnsupportedCodec(u8),
    /// The compressed records section does not decode.
    #[error("corrupt {codec} data: {reason}")]
    CorruptCompressed {
        /// Name of the codec whose data failed.
        codec: &'static str,
        /// The decoder's complaint.
        reason: String,
    },
    /// Decompressing would pass the cap, or a zstd frame declares a window past the limit.
    #[error("decompressed records exceed the cap of {cap} bytes")]
    OutputTooLarge {
        /// The cap the caller passed.
        cap: usize,
    },
    /// The records section does not hold exactly `recordsCount` well-formed records.
    #[error("malformed records: {0}")]
    MalformedRecords(&'static str),
}

/// Every record's offset and timestamp of one whole v2 batch (header included), in batch
/// order, decompressing the records section when the batch is compressed.
///
/// `LogAppendTime` batches give every record the batch's `maxTimestamp`. Control batches are
/// read like any other. Bytes past the batch's `batchLength` are ignored. At most
/// `max_decompressed` bytes of decompressed records are produced.
pub fn record_times(
    batch: &[u8],
    max_decompressed: usize,
) -> Result<Vec<RecordTime>, RecordTimesError> {
    let header = BatchHeader::parse(batch)?;
    let total = header.total_len();
    let section = batch
        .get(BATCH_HEADER_LEN..total)
        .ok_or(BatchError::Truncated {
            needed: total,
            available: batch.len(),
        })?;
    let decompressed;
    let records = match header.compression_id() {
        0 => section,
        1 => {
            decompressed = gunzip(section, max_decompressed)?;
            &decompressed[..]
        }
        2 => {
            decompressed = unsnappy(section, max_decompressed)?;
            &decompressed[..]
        }
        3 => {
            decompressed = unlz4(section, max_decompressed)?;
            &decompressed[..]
        }
        4 => {
            decompressed = unzstd(section, max_decompressed)?;
            &decompressed[..]
        }
        other => return Err(RecordTimesError::UnsupportedCodec(other)),
    };
    walk_records(&header, records)
}

/// The record with the largest timestamp, the first of them when several share it: Kafka's
/// answer to ListOffsets `MAX_TIMESTAMP` within one batch. `None` for a batch with no records.
pub fn max_timestamp_record(
    batch: &[u8],
    max_decompressed: usize,
) -> Result<Option<RecordTime>, RecordTimesError> {
    let times = record_times(batch, max_decompressed)?;
    let mut best: Option<RecordTime> = None;
    for time in times {
        // Strictly greater, so the first record keeps a tie.
        if best.is_none_or(|best| time.timestamp > best.timestamp) {
            best = Some(time);
        }
    }
    Ok(best)
}

/// The first record, in batch order, whose timestamp is at least `target`, with its own
/// timestamp: Kafka's answer to a ListOffsets lookup by timestamp within one batch. `None`
/// when no record qualifies.
///
/// The whole batch is read and checked even when an early record qualifies, so a batch
/// answers either fully or with an error.
pub fn first_record_at_or_after(
    batch: &[u8],
    target: i64,
    max_decompressed: usize,
) -> Result<Option<RecordTime>, RecordTimesError> {
    let times = record_times(batch, max_decompressed)?;
    Ok(times.into_iter().find(|time| time.timestamp >= target))
}

/// Walks exactly `recordsCount` records and collects their offsets and timestamps.
fn walk_records(header: &BatchHeader, records: &[u8]) -> Result<Vec<RecordTime>, RecordTimesError> {
    let count = usize::try_from(header.records_count)
        .map_err(|_| RecordTimesError::MalformedRecords("negative recordsCount"))?;
    if count > records.len() / MIN_RECORD_LEN {
        return Err(RecordTimesError::MalformedRecords(
            "more records claimed than the bytes can hold",
        ));
    }
    let log_append_time = header.timestamp_type() == TimestampType::LogAppendTime;
    let mut times = Vec::with_capacity(count.min(INITIAL_RECORDS_CAPACITY));
    let mut section = FieldReader::new(records);
    for _ in 0..count {
        let length = usize::try_from(section.varint()?)
            .map_err(|_| RecordTimesError::MalformedRecords("negative record length"))?;
        let mut record = FieldReader::new(section.take(length)?);
        record.take(1)?; // attributes: unused in v2
        let timestamp_delta = record.varlong()?;
        let offset_delta = record.varint()?;
        record.skip_nullable()?; // key
        record.skip_nullable()?; // value
        let header_count = record.varint()?;
        if header_count < 0 {
            return Err(RecordTimesError::MalformedRecords("negative header count"));
        }
        // Each header takes at least two bytes or fails, so the record's length bounds this.
        for _ in 0..header_count {
            let key_len = usize::try_from(record.varint()?)
                .map_err(|_| RecordTimesError::MalformedRecords("negative header key length"))?;
            record.take(key_len)?;
            record.skip_nullable()?; // header value
        }
        if record.remaining() != 0 {
            return Err(RecordTimesError::MalformedRecords(
                "record length does not match its fields",
            ));
        }
        let timestamp = if log_append_time {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(timestamp_delta)
        };
        times.push(RecordTime {
            offset: header.base_offset.wrapping_add(i64::from(offset_delta)),
            timestamp,
        });
    }
    if section.remaining() != 0 {
        return Err(RecordTimesError::MalformedRecords(
            "bytes after the last record",
        ));
    }
    Ok(times)
}

/// Bounds-checked reader over record bytes.
struct FieldReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> FieldReader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], RecordTimesError> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&end| end <= self.buf.len())
            .ok_or(RecordTimesError::MalformedRecords(
                "field extends past its record",
            ))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn unsigned_varint(&mut self, max_bytes: usize) -> Result<u64, RecordTimesError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let byte = *self
                .buf
                .get(self.pos)
                .ok_or(RecordTimesError::MalformedRecords(
                    "varint runs past its record",
                ))?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordTimesError::MalformedRecords("varint too long"))
    }

    fn varint(&mut self) -> Result<i32, RecordTimesError> {
        // As in Kafka, bits past 32 in the fifth byte are dropped rather than rejected.
        let raw = self.unsigned_varint(5)? as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, RecordTimesError> {
        let raw = self.unsigned_varint(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// Skips a length-prefixed field; Kafka reads any negative length as null.
    fn skip_nullable(&mut self) -> Result<(), RecordTimesError> {
        if let Ok(len) = usize::try_from(self.varint()?) {
            self.take(len)?;
        }
        Ok(())
    }
}

fn corrupt(codec: &'static str, reason: impl std::fmt::Display) -> RecordTimesError {
    RecordTimesError::CorruptCompressed {
        codec,
        reason: reason.to_string(),
    }
}

/// Makes room in `out` for `additional` more bytes without letting it pass `cap`.
///
/// Capacity doubles as data arrives (so appends stay amortised) but is clamped at the cap,
/// and nothing is reserved for bytes that would pass it.
fn reserve_within_cap(
    out: &mut Vec<u8>,
    additional: usize,
    cap: usize,
) -> Result<(), RecordTimesError> {
    let needed = out
        .len()
        .checked_add(additional)
        .filter(|&needed| needed <= cap)
        .ok_or(RecordTimesError::OutputTooLarge { cap })?;
    if needed > out.capacity() {
        let target = out.capacity().saturating_mul(2).max(needed).min(cap);
        out.reserve_exact(target - out.len());
    }
    Ok(())
}

/// Reads `decoder` to its end, appending to `out`, and fails as soon as `out` would pass
/// `cap` bytes.
fn read_capped(
    decoder: &mut impl Read,
    out: &mut Vec<u8>,
    cap: usize,
    codec: &'static str,
) -> Result<(), RecordTimesError> {
    let mut chunk = [0u8; READ_CHUNK_LEN];
    loop {
        let read = match decoder.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(read) => read,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(corrupt(codec, error)),
        };
        let bytes = chunk
            .get(..read)
            .ok_or_else(|| corrupt(codec, "decoder reported more bytes than it was given"))?;
        reserve_within_cap(out, bytes.len(), cap)?;
        out.extend_from_slice(bytes);
    }
}

fn gunzip(compressed: &[u8], cap: usize) -> Result<Vec<u8>, RecordTimesError> {
    let mut out = Vec::new();
    let mut decoder = flate2::bufread::MultiGzDecoder::new(compressed);
    read_capped(&mut decoder, &mut out, cap, "gzip")?;
    Ok(out)
}

fn unlz4(compressed: &[u8], cap: usize) -> Result<Vec<u8>, RecordTimesError> {
    let mut out = Vec::new();
    let mut decoder = lz4_flex::frame::FrameDecoder::new(compressed);
    // The decoder reports end of data at the end of each frame; frames that follow are
    // read on, as librdkafka does (producers write one frame per batch).
    loop {
        let before = decoder.get_ref().len();
        read_capped(&mut decoder, &mut out, cap, "lz4")?;
        let after = decoder.get_ref().len();
        if after == 0 {
            return Ok(out);
        }
        if after == before {
            return Err(corrupt("lz4", "undecodable bytes after the last frame"));
        }
    }
}

fn unsnappy(compressed: &[u8], cap: usize) -> Result<Vec<u8>, RecordTimesError> {
    let mut out = Vec::new();
    if !compressed.starts_with(&SNAPPY_JAVA_MAGIC) {
        append_snappy_block(compressed, &mut out, cap)?;
        return Ok(out);
    }
    let mut rest = compressed;
    while !rest.is_empty() {
        if rest.starts_with(&SNAPPY_JAVA_MAGIC) {
            // Stream header, at the start or where two streams were concatenated; its
            // versions do not change the block format.
            rest = rest
                .get(SNAPPY_JAVA_HEADER_LEN..)
                .ok_or_else(|| corrupt("snappy", "truncated snappy-java stream header"))?;
            continue;
        }
        let (length, after_length) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt("snappy", "truncated snappy-java block length"))?;
        let length = usize::try_from(u32::from_be_bytes(*length))
            .map_err(|_| corrupt("snappy", "snappy-java block length overflows"))?;
        if length > after_length.len() {
            return Err(corrupt(
                "snappy",
                "snappy-java block extends past the records",
            ));
        }
        let (block, after_block) = after_length.split_at(length);
        append_snappy_block(block, &mut out, cap)?;
        rest = after_block;
    }
    Ok(out)
}

/// Decodes one raw snappy block onto the end of `out`, checking the length the block
/// declares against the cap before allocating for it.
fn append_snappy_block(
    block: &[u8],
    out: &mut Vec<u8>,
    cap: usize,
) -> Result<(), RecordTimesError> {
    let declared = snap::raw::decompress_len(block).map_err(|error| corrupt("snappy", error))?;
    reserve_within_cap(out, declared, cap)?;
    let start = out.len();
    out.resize(start + declared, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|error| corrupt("snappy", error))?;
    if written != declared {
        return Err(corrupt(
            "snappy",
            "block decoded to a length other than it declared",
        ));
    }
    Ok(())
}

fn unzstd(compressed: &[u8], cap: usize) -> Result<Vec<u8>, RecordTimesError> {
    use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
    use ruzstd::decoding::{FrameDecoder, StreamingDecoder, DEFAULT_MAX_WINDOW_SIZE};

    let mut out = Vec::new();
    let mut frames = FrameDecoder::new();
    // The decoder reserves a frame's declared window before decoding it, so the window is
    // bounded like the output, except that the windows every decoder must support stay
    // readable under a small cap.
    // `clamp` cannot panic: the bounds are ordered, checked at compile time below.
    const _: () = assert!(ZSTD_ALWAYS_ACCEPTED_WINDOW <= DEFAULT_MAX_WINDOW_SIZE);
    let max_window = u64::try_from(cap)
        .unwrap_or(u64::MAX)
        .clamp(ZSTD_ALWAYS_ACCEPTED_WINDOW, DEFAULT_MAX_WINDOW_SIZE);
    frames.set_max_window_size(max_window);
    let mut rest = compressed;
    while !rest.is_empty() {
        let mut frame = match StreamingDecoder::new_with_decoder(&mut rest, &mut frames) {
            Ok(frame) => frame,
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                // The skippable frame's magic and length are consumed; skip its payload.
                let skip = usize::try_from(length).unwrap_or(usize::MAX);
                rest = rest
                    .get(skip..)
                    .ok_or_else(|| corrupt("zstd", "skippable frame extends past the records"))?;
                continue;
            }
            Err(FrameDecoderError::WindowSizeTooBig { .. }) => {
                return Err(RecordTimesError::OutputTooLarge { cap });
            }
            Err(error) => return Err(corrupt("zstd", error)),
        };
        read_capped(&mut frame, &mut out, cap, "zstd")?;
        // The streaming reader does not compare the frame's checksum; do it here.
        let decoder = frame.into_frame_decoder();
        if let (Some(stored), Some(computed)) = (
            decoder.get_checksum_from_data(),
            decoder.get_calculated_checksum(),
        ) {
            if stored != computed {
                return Err(corrupt("zstd", "content checksum mismatch"));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
