//! kaas Kafka protocol layer.
//!
//! [`protocol`] is the wire codec: message layouts, request framing, response encoding for
//! vectored writes, version gating and Kafka error codes.

pub mod protocol;
