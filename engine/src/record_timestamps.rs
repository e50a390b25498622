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
//! The codec is `attributes` bits 0-2; the records section is decompressed by
//! [`crate::compression::decompress`], the one decoder of every codec in kaas (produce
//! validation uses it too), into this thread's scratch buffer
//! ([`crate::compression::with_scratch`]). Its module doc describes each codec's wire format.
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
//! - Decompressed output is capped at the caller's `max_decompressed`, as
//!   [`crate::compression`] bounds it (output grows with the bytes decoded, never past the
//!   cap; a raw snappy block's declared length is checked before anything is allocated; zstd
//!   decodes in one pass, so a frame's declared window reserves nothing). One byte too many is
//!   [`RecordTimesError::OutputTooLarge`].
//! - `recordsCount` sizes nothing. A count that the bytes cannot hold (every record takes at
//!   least [`MIN_RECORD_LEN`] bytes) is rejected before the walk, and the result vector starts
//!   small and grows only with records that actually parse.
//! - The CRC is not checked here: batches reach ListOffsets from the log, where append and
//!   recovery have already checked it. Corruption the decoders or the record walk notice is
//!   still an error, never a panic.

use thiserror::Error;

use crate::batch::{BatchError, BatchHeader, TimestampType, BATCH_HEADER_LEN};
use crate::compression::{self, Codec, CompressionError};

/// Smallest possible encoded record: a one-byte length, then attributes, timestampDelta,
/// offsetDelta, key length, value length and header count of one byte each.
pub const MIN_RECORD_LEN: usize = 7;

/// Records reserved up front, whatever the header claims; more space is added only as
/// records parse.
const INITIAL_RECORDS_CAPACITY: usize = 1024;

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
    /// Decompressing would pass the cap.
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
    let codec = Codec::from_id(header.compression_id())
        .ok_or(RecordTimesError::UnsupportedCodec(header.compression_id()))?;
    if codec == Codec::None {
        return walk_records(&header, section);
    }
    compression::with_scratch(|records| {
        compression::decompress(codec, section, records, max_decompressed)?;
        walk_records(&header, records)
    })
}

impl From<CompressionError> for RecordTimesError {
    fn from(error: CompressionError) -> Self {
        match error {
            CompressionError::TooLarge { cap } => RecordTimesError::OutputTooLarge { cap },
            CompressionError::Corrupt { codec, reason }
            | CompressionError::Encode { codec, reason } => {
                RecordTimesError::CorruptCompressed { codec, reason }
            }
        }
    }
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

#[cfg(test)]
mod tests;
