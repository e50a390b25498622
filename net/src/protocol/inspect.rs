//! A generic view of any message as a tree of named values, for field-by-field comparison
//! in tests and for logging.
//!
//! [`Value`]'s `Display` is canonical: struct fields sorted by name, strings quoted, bytes in
//! Rust's escaped byte-string form, UUIDs hyphenated. Two messages are equal field by field
//! exactly when their renderings are equal.

use std::fmt;

use bytes::Bytes;

use super::types::Uuid;

/// One value of a message field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A null string, bytes, array or struct.
    Null,
    /// Any integer.
    Int(i128),
    /// A float64.
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A string.
    Str(String),
    /// Bytes or records.
    Bytes(Bytes),
    /// A UUID.
    Uuid(Uuid),
    /// An array.
    List(Vec<Value>),
    /// A struct: (field name, value) in declaration order.
    Struct(Vec<(String, Value)>),
}

/// A type that can show itself as a [`Value`].
pub trait Inspect {
    /// This value as a tree.
    fn inspect(&self) -> Value;
}

macro_rules! inspect_int {
    ($($ty:ty),*) => {$(
        impl Inspect for $ty {
            fn inspect(&self) -> Value {
                Value::Int(i128::from(*self))
            }
        }
    )*};
}

inspect_int!(i8, i16, i32, i64, u16, u32);

impl Inspect for f64 {
    fn inspect(&self) -> Value {
        Value::Float(*self)
    }
}

impl Inspect for bool {
    fn inspect(&self) -> Value {
        Value::Bool(*self)
    }
}

impl Inspect for String {
    fn inspect(&self) -> Value {
        Value::Str(self.clone())
    }
}

impl Inspect for Bytes {
    fn inspect(&self) -> Value {
        Value::Bytes(self.clone())
    }
}

impl Inspect for Uuid {
    fn inspect(&self) -> Value {
        Value::Uuid(*self)
    }
}

impl<T: Inspect> Inspect for Vec<T> {
    fn inspect(&self) -> Value {
        Value::List(self.iter().map(Inspect::inspect).collect())
    }
}

impl<T: Inspect> Inspect for Option<T> {
    fn inspect(&self) -> Value {
        match self {
            Some(value) => value.inspect(),
            None => Value::Null,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v:?}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::Str(v) => write!(f, "{v:?}"),
            Value::Bytes(v) => write!(f, "{v:?}"),
            Value::Uuid(v) => write!(f, "{v}"),
            Value::List(items) => {
                f.write_str("[")?;
                for (index, item) in items.iter().enumerate() {
                    if index > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
            Value::Struct(fields) => {
                let mut sorted: Vec<&(String, Value)> = fields.iter().collect();
                sorted.sort_by(|a, b| a.0.cmp(&b.0));
                f.write_str("{")?;
                for (index, (name, value)) in sorted.into_iter().enumerate() {
                    if index > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{name}: {value}")?;
                }
                f.write_str("}")
            }
        }
    }
}
