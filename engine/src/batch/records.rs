//! Walking the records of a batch: the exact walk of producer input (every record well
//! formed, offset deltas equal to positions, the topic's record rules), the looser walk of
//! stored (possibly compacted) batches, and the timestamp lookup of ListOffsets.

use super::record_rules::{RecordChecks, RecordFacts, RecordFaultAt};
use super::{BatchError, BatchHeader, TimestampType, BATCH_HEADER_LEN};

/// Checks that a stored batch's `records` holds exactly `count` well-formed records and
/// nothing else, with offset deltas increasing and at most `last_offset_delta` (a compacted
/// batch keeps its records' original deltas, with gaps).
pub(super) fn walk_stored_records(
    records: &[u8],
    count: i32,
    last_offset_delta: i32,
) -> Result<(), BatchError> {
    let count = usize::try_from(count).unwrap_or(0);
    if count > records.len() {
        return Err(BatchError::InvalidRecords(
            "more records claimed than bytes present",
        ));
    }
    let mut cursor = Cursor::new(records);
    let mut previous: Option<i32> = None;
    for index in 0..count {
        let len = cursor.varint()?;
        let len = usize::try_from(len)
            .map_err(|_| BatchError::InvalidRecords("negative record length"))?;
        let body = cursor.take(len)?;
        let offset_delta = check_record_body(body)?.offset_delta;
        let increasing = previous.is_none_or(|p| offset_delta > p) && offset_delta >= 0;
        if !increasing || offset_delta > last_offset_delta {
            return Err(BatchError::OffsetDeltaMismatch {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                found: offset_delta,
            });
        }
        previous = Some(offset_delta);
    }
    if cursor.remaining() != 0 {
        return Err(BatchError::InvalidRecords("bytes after the last record"));
    }
    Ok(())
}

/// Checks that `records` holds exactly `header.records_count` well-formed records and nothing
/// else, and each record against `checks` when given.
pub(super) fn walk_records_exact(
    records: &[u8],
    header: &BatchHeader,
    checks: Option<&RecordChecks>,
) -> Result<(), BatchError> {
    let count = usize::try_from(header.records_count).unwrap_or(0);
    // Every record takes at least one byte, so a larger count cannot be honest; this keeps a
    // claim of 2^31 records from costing more than a comparison.
    if count > records.len() {
        return Err(BatchError::InvalidRecords(
            "more records claimed than bytes present",
        ));
    }
    let log_append_time = header.timestamp_type() == TimestampType::LogAppendTime;
    // Kafka bounds each record of a compressed batch, decompressed; an uncompressed batch is
    // bounded as a whole by `max.message.bytes`.
    let max_record = match checks {
        Some(checks) if header.compression_id() != 0 => checks.rules.max_decompressed_record_bytes,
        _ => usize::MAX,
    };
    let mut faults = Vec::new();
    let mut cursor = Cursor::new(records);
    for index in 0..count {
        let start = cursor.pos;
        let len = cursor.varint()?;
        let len = usize::try_from(len)
            .map_err(|_| BatchError::InvalidRecords("negative record length"))?;
        let size = (cursor.pos - start).saturating_add(len);
        if size > max_record {
            return Err(BatchError::RecordTooLarge {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                size,
                max: max_record,
            });
        }
        let body = cursor.take(len)?;
        let fields = check_record_body(body)?;
        if usize::try_from(fields.offset_delta).ok() != Some(index) {
            return Err(BatchError::OffsetDeltaMismatch {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                found: fields.offset_delta,
            });
        }
        let Some(checks) = checks else { continue };
        let facts = RecordFacts {
            has_key: fields.has_key,
            // A LogAppendTime batch's records read as its maxTimestamp, as in Kafka.
            timestamp: if log_append_time {
                header.max_timestamp
            } else {
                header.base_timestamp.wrapping_add(fields.timestamp_delta)
            },
            offset: header
                .base_offset
                .wrapping_add(i64::from(fields.offset_delta)),
        };
        if let Some(fault) = checks.check(facts) {
            faults.push(RecordFaultAt {
                index: u32::try_from(index).unwrap_or(u32::MAX),
                fault,
            });
        }
    }
    if cursor.remaining() != 0 {
        return Err(BatchError::InvalidRecords("bytes after the last record"));
    }
    if !faults.is_empty() {
        return Err(BatchError::RecordsRefused(faults));
    }
    Ok(())
}

/// A record's key and value (`None` for a null one).
pub(super) type KeyValue<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// The key and value of the first record of an uncompressed records section; `None` when
/// the section holds no well-formed first record. Control batches (transaction markers,
/// [`super::txn_marker`]) carry their meaning there.
pub(super) fn first_record_key_value(records: &[u8]) -> Option<KeyValue<'_>> {
    let mut cursor = Cursor::new(records);
    let len = usize::try_from(cursor.varint().ok()?).ok()?;
    let mut record = Cursor::new(cursor.take(len).ok()?);
    record.take(1).ok()?; // attributes
    record.varlong().ok()?; // timestampDelta
    record.varint().ok()?; // offsetDelta
    let key = record.nullable_slice().ok()?;
    let value = record.nullable_slice().ok()?;
    Some((key, value))
}

/// The fields of one record the checks use.
struct RecordFields {
    offset_delta: i32,
    timestamp_delta: i64,
    has_key: bool,
}

/// Checks one record's fields fill its body exactly; returns what the checks use.
fn check_record_body(body: &[u8]) -> Result<RecordFields, BatchError> {
    let mut cursor = Cursor::new(body);
    cursor.take(1)?; // attributes: unused in v2
    let timestamp_delta = cursor.varlong()?;
    let offset_delta = cursor.varint()?;
    let has_key = cursor.nullable_bytes()?; // key
    cursor.nullable_bytes()?; // value
    let headers = cursor.varint()?;
    if headers < 0 {
        return Err(BatchError::InvalidRecords("negative header count"));
    }
    // Each header consumes at least two bytes or fails, so this loop is bounded by the body.
    for _ in 0..headers {
        let key_len = cursor.varint()?;
        let key_len = usize::try_from(key_len)
            .map_err(|_| BatchError::InvalidRecords("negative header key length"))?;
        cursor.take(key_len)?;
        cursor.nullable_bytes()?;
    }
    if cursor.remaining() != 0 {
        return Err(BatchError::InvalidRecords(
            "record length does not match its fields",
        ));
    }
    Ok(RecordFields {
        offset_delta,
        timestamp_delta,
        has_key,
    })
}

/// Bounds-checked reader over record bytes.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], BatchError> {
        if len > self.remaining() {
            return Err(BatchError::InvalidRecords("field extends past its record"));
        }
        let out = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(out)
    }

    fn unsigned_varint(&mut self, max_bytes: usize) -> Result<u64, BatchError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let byte = *self
                .buf
                .get(self.pos)
                .ok_or(BatchError::InvalidRecords("varint runs past its record"))?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(BatchError::InvalidRecords("varint too long"))
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        // Like Kafka, bits beyond 32 in the fifth byte are dropped rather than rejected.
        let raw = self.unsigned_varint(5)? as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let raw = self.unsigned_varint(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    /// Reads a nullable field: `None` when it is null.
    fn nullable_slice(&mut self) -> Result<Option<&'a [u8]>, BatchError> {
        let len = self.varint()?;
        match len {
            -1 => Ok(None),
            len if len < -1 => Err(BatchError::InvalidRecords("negative field length")),
            len => self
                .take(usize::try_from(len).unwrap_or(usize::MAX))
                .map(Some),
        }
    }

    /// Skips a nullable field; true when it is present (not null).
    fn nullable_bytes(&mut self) -> Result<bool, BatchError> {
        let len = self.varint()?;
        match len {
            -1 => Ok(false),
            len if len < -1 => Err(BatchError::InvalidRecords("negative field length")),
            len => self
                .take(usize::try_from(len).unwrap_or(usize::MAX))
                .map(|_| true),
        }
    }
}

/// The offset of the first record whose timestamp is at least `target`, for ListOffsets by
/// timestamp. Walks the records of an uncompressed batch; for a compressed batch (whose
/// records cannot be read without decompressing) or a `LogAppendTime` batch (one timestamp
/// for all records) it answers the batch's base offset when its max timestamp qualifies.
/// `None` when no record qualifies or the batch does not parse.
pub fn first_offset_at_or_after(batch: &[u8], target: i64) -> Option<i64> {
    let header = BatchHeader::parse(batch).ok()?;
    if header.max_timestamp < target {
        return None;
    }
    if header.compression_id() != 0 || header.timestamp_type() == TimestampType::LogAppendTime {
        return Some(header.base_offset);
    }
    let records = batch.get(BATCH_HEADER_LEN..header.total_len())?;
    let mut cursor = Cursor::new(records);
    for _ in 0..header.records_count {
        let length = usize::try_from(cursor.varint().ok()?).ok()?;
        let mut record = Cursor::new(cursor.take(length).ok()?);
        record.take(1).ok()?; // attributes
        let timestamp_delta = record.varlong().ok()?;
        let offset_delta = record.varint().ok()?;
        if header.base_timestamp.saturating_add(timestamp_delta) >= target {
            return Some(header.base_offset + i64::from(offset_delta));
        }
    }
    Some(header.base_offset)
}
