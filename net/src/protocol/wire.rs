//! Wire primitives: bounds-checked reads from `Bytes` and the scatter-gather [`Encoder`].
//!
//! Every read checks the bytes left first and returns [`DecodeError`] instead of panicking;
//! nothing here allocates from a length read off the wire.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::error::DecodeError;

/// Fails unless `buf` still holds `needed` bytes.
#[inline]
pub fn need(buf: &Bytes, needed: usize, field: &'static str) -> Result<(), DecodeError> {
    if buf.len() < needed {
        return Err(DecodeError::Truncated {
            field,
            needed,
            left: buf.len(),
        });
    }
    Ok(())
}

macro_rules! read_fixed {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $get:ident, $len:expr) => {
        $(#[$doc])*
        #[inline]
        pub fn $name(buf: &mut Bytes) -> Result<$ty, DecodeError> {
            need(buf, $len, stringify!($ty))?;
            Ok(buf.$get())
        }
    };
}

read_fixed!(
    /// Reads a big-endian int8.
    read_i8, i8, get_i8, 1
);
read_fixed!(
    /// Reads a big-endian int16.
    read_i16, i16, get_i16, 2
);
read_fixed!(
    /// Reads a big-endian int32.
    read_i32, i32, get_i32, 4
);
read_fixed!(
    /// Reads a big-endian int64.
    read_i64, i64, get_i64, 8
);
read_fixed!(
    /// Reads a big-endian uint16.
    read_u16, u16, get_u16, 2
);
read_fixed!(
    /// Reads a big-endian uint32.
    read_u32, u32, get_u32, 4
);
read_fixed!(
    /// Reads a big-endian IEEE-754 float64.
    read_f64, f64, get_f64, 8
);

/// Reads an unsigned varint of at most 5 bytes that fits in 32 bits.
pub fn read_uvarint(buf: &mut Bytes) -> Result<u32, DecodeError> {
    let mut value: u64 = 0;
    for index in 0..5 {
        need(buf, 1, "unsigned varint")?;
        let byte = buf.get_u8();
        value |= u64::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return u32::try_from(value).map_err(|_| DecodeError::BadVarint);
        }
    }
    Err(DecodeError::BadVarint)
}

/// Splits off the next `len` bytes without copying.
#[inline]
pub fn read_slice(buf: &mut Bytes, len: usize, field: &'static str) -> Result<Bytes, DecodeError> {
    need(buf, len, field)?;
    Ok(buf.split_to(len))
}

/// Checks that `count` elements of at least `min_size` bytes each can fit in what is left,
/// so that a count from the wire never sizes an allocation larger than the frame.
#[inline]
pub fn check_count(
    buf: &Bytes,
    count: usize,
    min_size: usize,
    field: &'static str,
) -> Result<(), DecodeError> {
    match count.checked_mul(min_size.max(1)) {
        Some(total) if total <= buf.len() => Ok(()),
        _ => Err(DecodeError::BadLength {
            field,
            length: count as i64,
            left: buf.len(),
        }),
    }
}

/// Length of a string, bytes or array prefix: `None` for null.
///
/// Non-flexible versions use a signed prefix (`i16` for strings, `i32` otherwise) with -1 as
/// null; flexible versions use an unsigned varint holding length + 1 with 0 as null.
pub fn read_length(
    buf: &mut Bytes,
    flexible: bool,
    short: bool,
    field: &'static str,
) -> Result<Option<usize>, DecodeError> {
    let raw: i64 = if flexible {
        i64::from(read_uvarint(buf)?) - 1
    } else if short {
        i64::from(read_i16(buf)?)
    } else {
        i64::from(read_i32(buf)?)
    };
    match raw {
        -1 => Ok(None),
        n if n >= 0 => Ok(Some(n as usize)),
        n => Err(DecodeError::BadLength {
            field,
            length: n,
            left: buf.len(),
        }),
    }
}

/// Number of bytes `value` takes as an unsigned varint.
pub fn uvarint_len(value: u32) -> usize {
    match value {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0x0fff_ffff => 4,
        _ => 5,
    }
}

/// Record data at least this long goes out as its own chunk instead of being copied.
pub const SHARED_CHUNK_MIN: usize = 512;

/// Builds an outgoing message as a list of buffers for vectored writes.
///
/// Small fields are written into one `BytesMut`; large `records` payloads are kept as the
/// caller's `Bytes` and spliced in by reference, so record data read from disk is never
/// copied into a response buffer.
#[derive(Debug, Default)]
pub struct Encoder {
    buf: BytesMut,
    /// (offset in `buf` where the chunk goes, chunk).
    shared: Vec<(usize, Bytes)>,
    shared_len: usize,
}

impl Encoder {
    /// An empty encoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty encoder whose inline buffer starts with `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: BytesMut::with_capacity(capacity),
            ..Self::default()
        }
    }

    /// Bytes written so far, inline and shared.
    pub fn len(&self) -> usize {
        self.buf.len() + self.shared_len
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes an int8.
    pub fn put_i8(&mut self, v: i8) {
        self.buf.put_i8(v);
    }
    /// Writes a big-endian int16.
    pub fn put_i16(&mut self, v: i16) {
        self.buf.put_i16(v);
    }
    /// Writes a big-endian int32.
    pub fn put_i32(&mut self, v: i32) {
        self.buf.put_i32(v);
    }
    /// Writes a big-endian int64.
    pub fn put_i64(&mut self, v: i64) {
        self.buf.put_i64(v);
    }
    /// Writes a big-endian uint16.
    pub fn put_u16(&mut self, v: u16) {
        self.buf.put_u16(v);
    }
    /// Writes a big-endian uint32.
    pub fn put_u32(&mut self, v: u32) {
        self.buf.put_u32(v);
    }
    /// Writes a big-endian float64.
    pub fn put_f64(&mut self, v: f64) {
        self.buf.put_f64(v);
    }
    /// Writes raw bytes inline (copied).
    pub fn put_slice(&mut self, v: &[u8]) {
        self.buf.put_slice(v);
    }

    /// Writes an unsigned varint.
    pub fn put_uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.put_u8((v as u8 & 0x7f) | 0x80);
            v >>= 7;
        }
        self.buf.put_u8(v as u8);
    }

    /// Writes a length prefix (see [`read_length`]); `None` writes null. Lengths beyond what
    /// the prefix can hold (a non-compact string over 32767 bytes) are invalid in Kafka and are
    /// clamped, which makes the frame undecodable rather than silently different.
    pub fn put_length(&mut self, len: Option<usize>, flexible: bool, short: bool) {
        match (len, flexible) {
            (None, true) => self.put_uvarint(0),
            (Some(n), true) => self.put_uvarint(u32::try_from(n).unwrap_or(u32::MAX - 1) + 1),
            (None, false) if short => self.put_i16(-1),
            (None, false) => self.put_i32(-1),
            (Some(n), false) if short => self.put_i16(i16::try_from(n).unwrap_or(i16::MAX)),
            (Some(n), false) => self.put_i32(i32::try_from(n).unwrap_or(i32::MAX)),
        }
    }

    /// Appends `data` by reference when it is large, inline otherwise.
    pub fn put_shared(&mut self, data: &Bytes) {
        if data.len() < SHARED_CHUNK_MIN {
            self.buf.put_slice(data);
        } else {
            self.shared.push((self.buf.len(), data.clone()));
            self.shared_len += data.len();
        }
    }

    /// Appends everything written into `other`, keeping its shared chunks shared.
    pub fn append(&mut self, other: Encoder) {
        let base = self.buf.len();
        self.buf.extend_from_slice(&other.buf);
        for (offset, chunk) in other.shared {
            self.shared_len += chunk.len();
            self.shared.push((base + offset, chunk));
        }
    }

    /// Overwrites 4 bytes at `offset` of the inline buffer (used for size prefixes).
    pub(crate) fn patch_i32(&mut self, offset: usize, v: i32) {
        if let Some(slot) = self.buf.get_mut(offset..offset + 4) {
            slot.copy_from_slice(&v.to_be_bytes());
        }
    }

    /// The written bytes as chunks in order, empty chunks left out.
    pub fn into_chunks(self) -> Vec<Bytes> {
        let inline = self.buf.freeze();
        let mut chunks = Vec::with_capacity(self.shared.len() * 2 + 1);
        let mut start = 0;
        for (offset, chunk) in self.shared {
            if offset > start {
                chunks.push(inline.slice(start..offset));
            }
            chunks.push(chunk);
            start = offset;
        }
        if inline.len() > start || chunks.is_empty() {
            chunks.push(inline.slice(start..));
        }
        chunks
    }

    /// The written bytes as one contiguous buffer (copies shared chunks; for tests and small
    /// messages).
    pub fn into_bytes(self) -> Bytes {
        if self.shared.is_empty() {
            return self.buf.freeze();
        }
        let total = self.len();
        let mut out = BytesMut::with_capacity(total);
        for chunk in self.into_chunks() {
            out.extend_from_slice(&chunk);
        }
        out.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uvarint_round_trips_and_rejects_overlong() {
        for v in [0u32, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut enc = Encoder::new();
            enc.put_uvarint(v);
            let mut bytes = enc.into_bytes();
            assert_eq!(bytes.len(), uvarint_len(v));
            assert_eq!(read_uvarint(&mut bytes), Ok(v));
        }
        let mut overlong = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
        assert_eq!(read_uvarint(&mut overlong), Err(DecodeError::BadVarint));
        let mut too_big = Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x1f]);
        assert_eq!(read_uvarint(&mut too_big), Err(DecodeError::BadVarint));
    }

    #[test]
    fn shared_chunks_are_not_copied() {
        let big = Bytes::from(vec![7u8; SHARED_CHUNK_MIN * 2]);
        let mut enc = Encoder::new();
        enc.put_i32(1);
        enc.put_shared(&big);
        enc.put_i16(2);
        let chunks = enc.into_chunks();
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[1].as_ptr(), big.as_ptr());
        assert_eq!(&chunks[0][..], &[0, 0, 0, 1]);
        assert_eq!(&chunks[2][..], &[0, 2]);
    }
}
