//! The records of a stored batch, one by one, as the cleaner reads them (the layout is in
//! [`crate::batch`]'s doc). Bounds-checked: a record that does not parse ends the walk with
//! an error, and the cleaner then keeps its batch as it is.

use crate::batch::BatchError;

/// One record inside a records section.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    /// `timestampDelta` from the batch's base timestamp.
    pub timestamp_delta: i64,
    /// `offsetDelta` from the batch's base offset.
    pub offset_delta: i32,
    /// The key; `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// Whether the value is null (a tombstone).
    pub tombstone: bool,
    /// The value; `None` for a null value (a tombstone).
    pub value: Option<&'a [u8]>,
    /// The record's body (after its length varint).
    pub body: &'a [u8],
    /// Where in `body` the `offsetDelta` field starts: everything from there is copied as it
    /// is when the record is written again with another timestamp delta.
    pub after_timestamp: usize,
}

const INVALID: BatchError = BatchError::InvalidRecords("record does not parse");

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], BatchError> {
        let end = self.pos.checked_add(len).ok_or(INVALID)?;
        let out = self.buf.get(self.pos..end).ok_or(INVALID)?;
        self.pos = end;
        Ok(out)
    }

    fn unsigned(&mut self, max_bytes: usize) -> Result<u64, BatchError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let byte = *self.buf.get(self.pos).ok_or(INVALID)?;
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(INVALID)
    }

    fn varint(&mut self) -> Result<i32, BatchError> {
        let raw = self.unsigned(5)? as u32;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, BatchError> {
        let raw = self.unsigned(10)?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    fn nullable(&mut self) -> Result<Option<&'a [u8]>, BatchError> {
        match self.varint()? {
            -1 => Ok(None),
            len if len < -1 => Err(INVALID),
            len => self.take(len as usize).map(Some),
        }
    }
}

/// Walks exactly `count` records of an (uncompressed) records section.
pub fn walk(section: &[u8], count: i32) -> Result<Vec<RecordView<'_>>, BatchError> {
    let count = usize::try_from(count).map_err(|_| INVALID)?;
    if count > section.len() {
        return Err(INVALID);
    }
    let mut records = Vec::with_capacity(count);
    let mut cursor = Cursor {
        buf: section,
        pos: 0,
    };
    for _ in 0..count {
        let len = usize::try_from(cursor.varint()?).map_err(|_| INVALID)?;
        let body = cursor.take(len)?;
        let mut fields = Cursor { buf: body, pos: 0 };
        fields.take(1)?; // attributes
        let timestamp_delta = fields.varlong()?;
        let after_timestamp = fields.pos;
        let offset_delta = fields.varint()?;
        let key = fields.nullable()?;
        let value = fields.nullable()?;
        records.push(RecordView {
            timestamp_delta,
            offset_delta,
            key,
            tombstone: value.is_none(),
            value,
            body,
            after_timestamp,
        });
    }
    if cursor.pos != section.len() {
        return Err(INVALID);
    }
    Ok(records)
}

/// Appends a zigzag varlong (a varint for values in `i32` range).
pub fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// Appends `record` to `out` with its length, its timestamp delta replaced by
/// `timestamp_delta` when given.
pub fn put_record(out: &mut Vec<u8>, record: &RecordView<'_>, timestamp_delta: Option<i64>) {
    match timestamp_delta {
        None => {
            put_varlong(out, record.body.len() as i64);
            out.extend_from_slice(record.body);
        }
        Some(delta) => {
            let mut body = Vec::with_capacity(record.body.len() + 10);
            body.push(record.body[0]);
            put_varlong(&mut body, delta);
            body.extend_from_slice(&record.body[record.after_timestamp..]);
            put_varlong(out, body.len() as i64);
            out.extend_from_slice(&body);
        }
    }
}
