//! Field types and how each goes on the wire.
//!
//! [`Wire`] is implemented for every Rust type a message field can have; the `message!`
//! macro calls it through a [`Codec`] (normally [`Natural`], [`Records`] for record data).
//! Whether a string, bytes or array uses the compact form is decided by [`Ctx::flexible`],
//! which the top-level message sets from its first flexible version.

use std::fmt;
use std::ops::RangeBounds;

use bytes::Bytes;

use super::error::DecodeError;
use super::wire::{
    check_count, read_f64, read_i16, read_i32, read_i64, read_i8, read_length, read_slice,
    read_u16, read_u32, Encoder,
};

/// Version of a message being decoded or encoded, and how the current field is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    /// Message version.
    pub version: i16,
    /// Whether this version is flexible (compact lengths, tagged fields).
    pub flexible: bool,
    /// Whether the current field may be null at this version.
    pub nullable: bool,
}

impl Ctx {
    /// Context for a top-level message at `version`.
    pub fn new(version: i16, first_flexible: i16) -> Self {
        Self {
            version,
            flexible: version >= first_flexible,
            nullable: false,
        }
    }

    /// The same context with nullability set for the next field.
    #[inline]
    pub fn with_nullable(self, nullable: bool) -> Self {
        Self { nullable, ..self }
    }
}

/// Whether `version` lies in `range`; the macro's version gates go through here.
#[inline]
pub fn within<R: RangeBounds<i16>>(range: R, version: i16) -> bool {
    range.contains(&version)
}

/// `value` differs from `default` (tagged fields are written only then).
#[inline]
pub fn differs<T: PartialEq>(value: &T, default: T) -> bool {
    *value != default
}

/// First version of a message that is never flexible.
pub const NEVER: i16 = i16::MAX;

/// A Rust type that can be a message field.
pub trait Wire: Sized + Default {
    /// Fewest bytes one value takes on the wire; bounds array counts before allocating.
    fn wire_min_size(ctx: Ctx) -> usize;
    /// Reads one value.
    fn wire_decode(buf: &mut Bytes, ctx: Ctx) -> Result<Self, DecodeError>;
    /// Writes one value.
    fn wire_encode(&self, enc: &mut Encoder, ctx: Ctx);
    /// Reads a value that may be null (only called when the field is nullable at this version).
    fn wire_decode_nullable(buf: &mut Bytes, ctx: Ctx) -> Result<Option<Self>, DecodeError> {
        Self::wire_decode(buf, ctx).map(Some)
    }
    /// Writes a value that may be null (only called when the field is nullable at this version).
    fn wire_encode_nullable(value: Option<&Self>, enc: &mut Encoder, ctx: Ctx) {
        match value {
            Some(value) => value.wire_encode(enc, ctx),
            None => Self::default().wire_encode(enc, ctx),
        }
    }
}

/// How a field of type `T` is read and written.
pub trait Codec<T> {
    /// See [`Wire::wire_min_size`].
    fn min_size(ctx: Ctx) -> usize;
    /// See [`Wire::wire_decode`].
    fn decode(buf: &mut Bytes, ctx: Ctx) -> Result<T, DecodeError>;
    /// See [`Wire::wire_encode`].
    fn encode(value: &T, enc: &mut Encoder, ctx: Ctx);
}

/// The codec of a field's own Rust type.
pub struct Natural;

impl<T: Wire> Codec<T> for Natural {
    #[inline]
    fn min_size(ctx: Ctx) -> usize {
        T::wire_min_size(ctx)
    }
    #[inline]
    fn decode(buf: &mut Bytes, ctx: Ctx) -> Result<T, DecodeError> {
        T::wire_decode(buf, ctx)
    }
    #[inline]
    fn encode(value: &T, enc: &mut Encoder, ctx: Ctx) {
        value.wire_encode(enc, ctx)
    }
}

/// Record data (`records` in Kafka's schemas): nullable bytes holding record batches, kept as
/// zero-copy slices of the frame on decode and spliced by reference into the output on encode.
pub struct Records;

impl Codec<Option<Bytes>> for Records {
    fn min_size(ctx: Ctx) -> usize {
        <Option<Bytes>>::wire_min_size(ctx)
    }
    fn decode(buf: &mut Bytes, ctx: Ctx) -> Result<Option<Bytes>, DecodeError> {
        <Option<Bytes>>::wire_decode(buf, ctx)
    }
    fn encode(value: &Option<Bytes>, enc: &mut Encoder, ctx: Ctx) {
        match value {
            Some(data) => {
                enc.put_length(Some(data.len()), ctx.flexible, false);
                enc.put_shared(data);
            }
            None if ctx.nullable => enc.put_length(None, ctx.flexible, false),
            None => enc.put_length(Some(0), ctx.flexible, false),
        }
    }
}

macro_rules! fixed_width {
    ($ty:ty, $len:expr, $read:ident, $put:ident) => {
        impl Wire for $ty {
            #[inline]
            fn wire_min_size(_ctx: Ctx) -> usize {
                $len
            }
            #[inline]
            fn wire_decode(buf: &mut Bytes, _ctx: Ctx) -> Result<Self, DecodeError> {
                $read(buf)
            }
            #[inline]
            fn wire_encode(&self, enc: &mut Encoder, _ctx: Ctx) {
                enc.$put(*self)
            }
        }
    };
}

fixed_width!(i8, 1, read_i8, put_i8);
fixed_width!(i16, 2, read_i16, put_i16);
fixed_width!(i32, 4, read_i32, put_i32);
fixed_width!(i64, 8, read_i64, put_i64);
fixed_width!(u16, 2, read_u16, put_u16);
fixed_width!(u32, 4, read_u32, put_u32);
fixed_width!(f64, 8, read_f64, put_f64);

impl Wire for bool {
    fn wire_min_size(_ctx: Ctx) -> usize {
        1
    }
    fn wire_decode(buf: &mut Bytes, _ctx: Ctx) -> Result<Self, DecodeError> {
        Ok(read_i8(buf)? != 0)
    }
    fn wire_encode(&self, enc: &mut Encoder, _ctx: Ctx) {
        enc.put_i8(i8::from(*self))
    }
}

/// A 128-bit UUID (topic ids, directory ids), big-endian on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero UUID Kafka uses as "no id".
    pub const NIL: Uuid = Uuid([0; 16]);
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Uuid {
    /// Lower-case hyphenated form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, byte) in self.0.iter().enumerate() {
            if matches!(index, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

impl Wire for Uuid {
    fn wire_min_size(_ctx: Ctx) -> usize {
        16
    }
    fn wire_decode(buf: &mut Bytes, _ctx: Ctx) -> Result<Self, DecodeError> {
        let raw = read_slice(buf, 16, "uuid")?;
        let mut out = [0u8; 16];
        out.copy_from_slice(&raw);
        Ok(Uuid(out))
    }
    fn wire_encode(&self, enc: &mut Encoder, _ctx: Ctx) {
        enc.put_slice(&self.0)
    }
}

fn read_string_body(buf: &mut Bytes, len: usize) -> Result<String, DecodeError> {
    let raw = read_slice(buf, len, "string")?;
    std::str::from_utf8(&raw)
        .map(str::to_owned)
        .map_err(|_| DecodeError::BadUtf8)
}

impl Wire for String {
    fn wire_min_size(ctx: Ctx) -> usize {
        if ctx.flexible {
            1
        } else {
            2
        }
    }
    fn wire_decode(buf: &mut Bytes, ctx: Ctx) -> Result<Self, DecodeError> {
        match read_length(buf, ctx.flexible, true, "string")? {
            Some(len) => read_string_body(buf, len),
            None => Err(DecodeError::UnexpectedNull),
        }
    }
    fn wire_encode(&self, enc: &mut Encoder, ctx: Ctx) {
        enc.put_length(Some(self.len()), ctx.flexible, true);
        enc.put_slice(self.as_bytes());
    }
    fn wire_decode_nullable(buf: &mut Bytes, ctx: Ctx) -> Result<Option<Self>, DecodeError> {
        match read_length(buf, ctx.flexible, true, "string")? {
            Some(len) => read_string_body(buf, len).map(Some),
            None => Ok(None),
        }
    }
    fn wire_encode_nullable(value: Option<&Self>, enc: &mut Encoder, ctx: Ctx) {
        match value {
            Some(value) => value.wire_encode(enc, ctx),
            None => enc.put_length(None, ctx.flexible, true),
        }
    }
}

impl Wire for Bytes {
    fn wire_min_size(ctx: Ctx) -> usize {
        if ctx.flexible {
            1
        } else {
            4
        }
    }
    fn wire_decode(buf: &mut Bytes, ctx: Ctx) -> Result<Self, DecodeError> {
        match read_length(buf, ctx.flexible, false, "bytes")? {
            Some(len) => read_slice(buf, len, "bytes"),
            None => Err(DecodeError::UnexpectedNull),
        }
    }
    fn wire_encode(&self, enc: &mut Encoder, ctx: Ctx) {
        enc.put_length(Some(self.len()), ctx.flexible, false);
        enc.put_slice(self);
    }
    fn wire_decode_nullable(buf: &mut Bytes, ctx: Ctx) -> Result<Option<Self>, DecodeError> {
        match read_length(buf, ctx.flexible, false, "bytes")? {
            Some(len) => read_slice(buf, len, "bytes").map(Some),
            None => Ok(None),
        }
    }
    fn wire_encode_nullable(value: Option<&Self>, enc: &mut Encoder, ctx: Ctx) {
        match value {
            Some(value) => value.wire_encode(enc, ctx),
            None => enc.put_length(None, ctx.flexible, false),
        }
    }
}

fn read_elements<T: Wire>(buf: &mut Bytes, len: usize, ctx: Ctx) -> Result<Vec<T>, DecodeError> {
    let element_ctx = ctx.with_nullable(false);
    // The count is checked against the bytes left before it sizes the allocation.
    check_count(buf, len, T::wire_min_size(element_ctx), "array")?;
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        out.push(T::wire_decode(buf, element_ctx)?);
    }
    Ok(out)
}

impl<T: Wire> Wire for Vec<T> {
    fn wire_min_size(ctx: Ctx) -> usize {
        if ctx.flexible {
            1
        } else {
            4
        }
    }
    fn wire_decode(buf: &mut Bytes, ctx: Ctx) -> Result<Self, DecodeError> {
        match read_length(buf, ctx.flexible, false, "array")? {
            Some(len) => read_elements(buf, len, ctx),
            None => Err(DecodeError::UnexpectedNull),
        }
    }
    fn wire_encode(&self, enc: &mut Encoder, ctx: Ctx) {
        enc.put_length(Some(self.len()), ctx.flexible, false);
        let element_ctx = ctx.with_nullable(false);
        for element in self {
            element.wire_encode(enc, element_ctx);
        }
    }
    fn wire_decode_nullable(buf: &mut Bytes, ctx: Ctx) -> Result<Option<Self>, DecodeError> {
        match read_length(buf, ctx.flexible, false, "array")? {
            Some(len) => read_elements(buf, len, ctx).map(Some),
            None => Ok(None),
        }
    }
    fn wire_encode_nullable(value: Option<&Self>, enc: &mut Encoder, ctx: Ctx) {
        match value {
            Some(value) => value.wire_encode(enc, ctx),
            None => enc.put_length(None, ctx.flexible, false),
        }
    }
}

impl<T: Wire> Wire for Option<T> {
    fn wire_min_size(ctx: Ctx) -> usize {
        if ctx.nullable {
            1
        } else {
            T::wire_min_size(ctx)
        }
    }
    fn wire_decode(buf: &mut Bytes, ctx: Ctx) -> Result<Self, DecodeError> {
        if ctx.nullable {
            T::wire_decode_nullable(buf, ctx)
        } else {
            T::wire_decode(buf, ctx).map(Some)
        }
    }
    /// A `None` in a version where the field is not nullable is written as the type's default
    /// (empty string, empty array).
    fn wire_encode(&self, enc: &mut Encoder, ctx: Ctx) {
        if ctx.nullable {
            T::wire_encode_nullable(self.as_ref(), enc, ctx)
        } else {
            match self {
                Some(value) => value.wire_encode(enc, ctx),
                None => T::default().wire_encode(enc, ctx),
            }
        }
    }
}
