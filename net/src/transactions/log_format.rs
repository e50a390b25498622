//! The records of `__transaction_state`, byte for byte as Apache Kafka 4.4 writes them
//! (`TransactionLog.keyToBytes` / `valueToBytes`; golden bytes from Kafka's own classes in
//! the tests below, printed by `net/tests/golden/TransactionLogGolden.java`).
//!
//! # Layout
//!
//! One record per change of one transactional id, in the partition
//! `abs(javaHashCode(transactional_id)) % 50` of `__transaction_state`. Integers are
//! big-endian; a "string" is an `i16` length and UTF-8 bytes (v0), a "compact string" an
//! unsigned varint of length + 1 and the bytes (v1); a compact array likewise, 0 meaning null.
//!
//! **Key** (`TransactionLogKey`, a coordinator record key):
//!
//! | bytes | field |
//! |---|---|
//! | `i16` | record type: 0 (`TRANSACTION_LOG`; Kafka prefixes every coordinator key with its type) |
//! | string | transactional id |
//!
//! **Value** (`TransactionLogValue`): an `i16` version, then the message at that version.
//! A null value is a tombstone: the transactional id expired and is forgotten.
//!
//! | v0 | v1 (flexible) | field |
//! |---|---|---|
//! | `i64` | `i64` | producer id |
//! | `i16` | `i16` | producer epoch |
//! | `i32` | `i32` | transaction timeout (ms) |
//! | `i8` | `i8` | state id (`TransactionState::id`) |
//! | `i32` count, -1 null | compact count | partitions: per topic a (compact) string and an array of `i32` partition ids (v1: each entry ends with its own empty tagged-field section) |
//! | `i64` | `i64` | last update time (ms) |
//! | `i64` | `i64` | transaction start time (ms), -1 before the first partition |
//! | — | tagged fields | tag 0 previous producer id (`i64`, default -1), tag 1 next producer id (`i64`, -1), tag 2 client transaction version (`i16`, 0), tag 3 next producer epoch (`i16`, -1) |
//!
//! A tagged field is written only when it differs from its default, in tag order, then any
//! unknown tags read earlier (kept so that a decode and encode changes nothing). A server at
//! `transaction.version` 0 writes v0, at 1 and above v1. Kafka writes a null partition list
//! for Empty and a list for every other state; the last producer epoch is not stored (a
//! loaded transactional id has none).
//!
//! # Writes, crashes and recovery
//!
//! The coordinator (`coordinator.rs`) changes a transactional id's state only after the
//! record describing the new state is appended to the partition and durable; until then the
//! old state stays in force and requests for that id answer CONCURRENT_TRANSACTIONS. A crash
//! therefore leaves either the old record or the new one as the id's latest, never a mix: a
//! record whose append was not acknowledged may still be on disk, and then it is the state
//! the next coordinator loads (a PrepareCommit or PrepareAbort found at load has its markers
//! sent again and is completed). Loading replays the partition from its start: the latest
//! value of each key wins, a tombstone removes the key, keys and values of unknown versions
//! are skipped (as Kafka does, they may be left by an aborted upgrade).
//!
//! Decoding never panics and never allocates from a length or count it has not checked
//! against the bytes left.

use bytes::{BufMut, Bytes};

use crate::protocol::wire::{
    check_count, read_i16, read_i32, read_i64, read_i8, read_length, read_slice, read_uvarint,
};
use crate::protocol::DecodeError;

/// The record type prefixed to every `__transaction_state` key.
pub const TRANSACTION_LOG_KEY_TYPE: i16 = 0;

/// The highest `TransactionLogValue` version known.
pub const HIGHEST_VALUE_VERSION: i16 = 1;

/// Why a `__transaction_state` record could not be decoded or encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransactionLogError {
    /// The bytes do not hold a well-formed message.
    #[error("malformed transaction log record: {0}")]
    Decode(#[from] DecodeError),
    /// The key's record type is not `TRANSACTION_LOG` (0); Kafka skips such records.
    #[error("unknown transaction log key type {0}")]
    UnknownKeyType(i16),
    /// The value's version is not one this code knows; Kafka skips such records.
    #[error("unknown transaction log value version {0}")]
    UnknownValueVersion(i16),
    /// A value's state id is none of `TransactionState`'s.
    #[error("unknown transaction state id {0}")]
    UnknownState(i8),
    /// A value's client transaction version is not a known feature level.
    #[error("unknown client transaction version {0}")]
    UnknownTransactionVersion(i16),
    /// A field cannot be written at the value's version (a tagged field in v0, a string
    /// longer than its length prefix allows).
    #[error("{field} cannot be written at version {version}")]
    NotWritable {
        /// The field.
        field: &'static str,
        /// The version being written.
        version: i16,
    },
}

/// The key of a `__transaction_state` record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TransactionLogKey {
    /// The transactional id the record is about.
    pub transactional_id: String,
}

/// A tagged field this code does not know, kept to be written back unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTaggedField {
    /// The tag.
    pub tag: u32,
    /// The field's bytes.
    pub data: Vec<u8>,
}

/// The partitions of one topic in a transaction (`PartitionsSchema`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogPartitions {
    /// Topic name.
    pub topic: String,
    /// Partition ids, in the order written.
    pub partition_ids: Vec<i32>,
    /// Unknown tagged fields of the entry (v1).
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

/// The value of a `__transaction_state` record: one transactional id's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionLogValue {
    /// The version it is (or is to be) written at: 0 or 1.
    pub version: i16,
    /// Producer id in use.
    pub producer_id: i64,
    /// v1 tag 0: the producer id before the last rotation, -1 if none.
    pub previous_producer_id: i64,
    /// v1 tag 1: the producer id a V2 end hands out once its epoch overflows, -1 if none.
    pub next_producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// v1 tag 3: epoch for `next_producer_id` (Kafka never sets it), -1 if none.
    pub next_producer_epoch: i16,
    /// Transaction timeout (ms).
    pub transaction_timeout_ms: i32,
    /// State id (`TransactionState::id`).
    pub transaction_status: i8,
    /// Partitions of the transaction by topic; Kafka writes null for Empty.
    pub transaction_partitions: Option<Vec<TransactionLogPartitions>>,
    /// Last update (ms).
    pub transaction_last_update_timestamp_ms: i64,
    /// Start of the transaction (ms), -1 if none.
    pub transaction_start_timestamp_ms: i64,
    /// v1 tag 2: the client's transaction version (feature level), 0 by default.
    pub client_transaction_version: i16,
    /// Unknown tagged fields (v1).
    pub unknown_tagged_fields: Vec<RawTaggedField>,
}

const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;
const TAG_NEXT_PRODUCER_EPOCH: u32 = 3;

/// Encodes a key: its record type, then the transactional id as an `i16`-length string.
pub fn encode_key(key: &TransactionLogKey) -> Result<Vec<u8>, TransactionLogError> {
    let mut out = Vec::with_capacity(4 + key.transactional_id.len());
    out.put_i16(TRANSACTION_LOG_KEY_TYPE);
    put_string(
        &mut out,
        &key.transactional_id,
        false,
        "transactional id",
        0,
    )?;
    Ok(out)
}

/// Decodes a key. `UnknownKeyType` for a record of another type.
pub fn decode_key(mut bytes: Bytes) -> Result<TransactionLogKey, TransactionLogError> {
    let record_type = read_i16(&mut bytes)?;
    if record_type != TRANSACTION_LOG_KEY_TYPE {
        return Err(TransactionLogError::UnknownKeyType(record_type));
    }
    let transactional_id = read_string(&mut bytes, false, "transactional id")?;
    finish(&bytes)?;
    Ok(TransactionLogKey { transactional_id })
}

/// Encodes a value at `value.version`, prefixed by that version.
pub fn encode_value(value: &TransactionLogValue) -> Result<Vec<u8>, TransactionLogError> {
    let version = value.version;
    if !(0..=HIGHEST_VALUE_VERSION).contains(&version) {
        return Err(TransactionLogError::UnknownValueVersion(version));
    }
    let flexible = version >= 1;
    let mut out = Vec::with_capacity(64);
    out.put_i16(version);
    out.put_i64(value.producer_id);
    out.put_i16(value.producer_epoch);
    out.put_i32(value.transaction_timeout_ms);
    out.put_i8(value.transaction_status);
    match &value.transaction_partitions {
        None if flexible => put_uvarint(&mut out, 0),
        None => out.put_i32(-1),
        Some(entries) => {
            put_count(&mut out, entries.len(), flexible, "partitions", version)?;
            for entry in entries {
                put_string(&mut out, &entry.topic, flexible, "topic", version)?;
                put_count(
                    &mut out,
                    entry.partition_ids.len(),
                    flexible,
                    "partition ids",
                    version,
                )?;
                for id in &entry.partition_ids {
                    out.put_i32(*id);
                }
                if flexible {
                    put_tagged_fields(&mut out, &[], &entry.unknown_tagged_fields)?;
                } else if !entry.unknown_tagged_fields.is_empty() {
                    return Err(not_writable("tagged fields", version));
                }
            }
        }
    }
    out.put_i64(value.transaction_last_update_timestamp_ms);
    out.put_i64(value.transaction_start_timestamp_ms);
    let mut known: Vec<(u32, Vec<u8>)> = Vec::new();
    if value.previous_producer_id != -1 {
        known.push((
            TAG_PREVIOUS_PRODUCER_ID,
            value.previous_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if value.next_producer_id != -1 {
        known.push((
            TAG_NEXT_PRODUCER_ID,
            value.next_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if value.client_transaction_version != 0 {
        known.push((
            TAG_CLIENT_TRANSACTION_VERSION,
            value.client_transaction_version.to_be_bytes().to_vec(),
        ));
    }
    if value.next_producer_epoch != -1 {
        known.push((
            TAG_NEXT_PRODUCER_EPOCH,
            value.next_producer_epoch.to_be_bytes().to_vec(),
        ));
    }
    if flexible {
        put_tagged_fields(&mut out, &known, &value.unknown_tagged_fields)?;
    } else if !known.is_empty() || !value.unknown_tagged_fields.is_empty() {
        // Kafka refuses a non-default tagged field at v0 the same way.
        return Err(not_writable("tagged fields", version));
    }
    Ok(out)
}

/// Decodes a value (without the tombstone case: a null value never reaches here).
/// `UnknownValueVersion` for a version other than 0 or 1.
pub fn decode_value(mut bytes: Bytes) -> Result<TransactionLogValue, TransactionLogError> {
    let version = read_i16(&mut bytes)?;
    if !(0..=HIGHEST_VALUE_VERSION).contains(&version) {
        return Err(TransactionLogError::UnknownValueVersion(version));
    }
    let flexible = version >= 1;
    let producer_id = read_i64(&mut bytes)?;
    let producer_epoch = read_i16(&mut bytes)?;
    let transaction_timeout_ms = read_i32(&mut bytes)?;
    let transaction_status = read_i8(&mut bytes)?;
    let transaction_partitions = match read_length(&mut bytes, flexible, false, "partitions")? {
        None => None,
        Some(count) => {
            // An entry takes at least an empty topic and an empty id list (v1: and its
            // empty tagged-field section).
            let min_entry = if flexible { 3 } else { 6 };
            check_count(&bytes, count, min_entry, "partitions")?;
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                entries.push(read_partitions(&mut bytes, flexible)?);
            }
            Some(entries)
        }
    };
    let transaction_last_update_timestamp_ms = read_i64(&mut bytes)?;
    let transaction_start_timestamp_ms = read_i64(&mut bytes)?;
    let mut value = TransactionLogValue {
        version,
        producer_id,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch,
        next_producer_epoch: -1,
        transaction_timeout_ms,
        transaction_status,
        transaction_partitions,
        transaction_last_update_timestamp_ms,
        transaction_start_timestamp_ms,
        client_transaction_version: 0,
        unknown_tagged_fields: Vec::new(),
    };
    if flexible {
        for (tag, mut data) in read_tagged_fields(&mut bytes)? {
            let declared = data.len();
            match tag {
                TAG_PREVIOUS_PRODUCER_ID => {
                    value.previous_producer_id = read_i64(&mut data)?;
                }
                TAG_NEXT_PRODUCER_ID => value.next_producer_id = read_i64(&mut data)?,
                TAG_CLIENT_TRANSACTION_VERSION => {
                    value.client_transaction_version = read_i16(&mut data)?;
                }
                TAG_NEXT_PRODUCER_EPOCH => value.next_producer_epoch = read_i16(&mut data)?,
                _ => {
                    value.unknown_tagged_fields.push(RawTaggedField {
                        tag,
                        data: data.to_vec(),
                    });
                    continue;
                }
            }
            if !data.is_empty() {
                return Err(DecodeError::TaggedFieldSize {
                    tag,
                    declared,
                    used: declared - data.len(),
                }
                .into());
            }
        }
    }
    finish(&bytes)?;
    Ok(value)
}

fn read_partitions(
    bytes: &mut Bytes,
    flexible: bool,
) -> Result<TransactionLogPartitions, TransactionLogError> {
    let topic = read_string(bytes, flexible, "topic")?;
    let count =
        read_length(bytes, flexible, false, "partition ids")?.ok_or(DecodeError::UnexpectedNull)?;
    check_count(bytes, count, 4, "partition ids")?;
    let mut partition_ids = Vec::with_capacity(count);
    for _ in 0..count {
        partition_ids.push(read_i32(bytes)?);
    }
    let mut unknown_tagged_fields = Vec::new();
    if flexible {
        for (tag, data) in read_tagged_fields(bytes)? {
            unknown_tagged_fields.push(RawTaggedField {
                tag,
                data: data.to_vec(),
            });
        }
    }
    Ok(TransactionLogPartitions {
        topic,
        partition_ids,
        unknown_tagged_fields,
    })
}

/// A tagged-field section: each field's tag and bytes, in the order read.
fn read_tagged_fields(bytes: &mut Bytes) -> Result<Vec<(u32, Bytes)>, TransactionLogError> {
    let count = read_uvarint(bytes)? as usize;
    // A field takes at least its tag and size varints.
    check_count(bytes, count, 2, "tagged fields")?;
    let mut fields = Vec::with_capacity(count);
    for _ in 0..count {
        let tag = read_uvarint(bytes)?;
        let size = read_uvarint(bytes)? as usize;
        fields.push((tag, read_slice(bytes, size, "tagged field")?));
    }
    Ok(fields)
}

fn read_string(
    bytes: &mut Bytes,
    flexible: bool,
    field: &'static str,
) -> Result<String, TransactionLogError> {
    let len = read_length(bytes, flexible, true, field)?.ok_or(DecodeError::UnexpectedNull)?;
    let raw = read_slice(bytes, len, field)?;
    String::from_utf8(raw.to_vec()).map_err(|_| DecodeError::BadUtf8.into())
}

fn finish(bytes: &Bytes) -> Result<(), TransactionLogError> {
    if bytes.is_empty() {
        Ok(())
    } else {
        Err(DecodeError::TrailingBytes(bytes.len()).into())
    }
}

fn not_writable(field: &'static str, version: i16) -> TransactionLogError {
    TransactionLogError::NotWritable { field, version }
}

fn put_uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

fn put_count(
    out: &mut Vec<u8>,
    count: usize,
    flexible: bool,
    field: &'static str,
    version: i16,
) -> Result<(), TransactionLogError> {
    if flexible {
        let plus_one = u32::try_from(count)
            .ok()
            .and_then(|count| count.checked_add(1))
            .ok_or(not_writable(field, version))?;
        put_uvarint(out, plus_one);
    } else {
        out.put_i32(i32::try_from(count).map_err(|_| not_writable(field, version))?);
    }
    Ok(())
}

fn put_string(
    out: &mut Vec<u8>,
    text: &str,
    flexible: bool,
    field: &'static str,
    version: i16,
) -> Result<(), TransactionLogError> {
    // Kafka's strings are at most i16::MAX bytes in every encoding.
    if text.len() > i16::MAX as usize {
        return Err(not_writable(field, version));
    }
    if flexible {
        put_uvarint(out, text.len() as u32 + 1);
    } else {
        out.put_i16(text.len() as i16);
    }
    out.put_slice(text.as_bytes());
    Ok(())
}

fn put_tagged_fields(
    out: &mut Vec<u8>,
    known: &[(u32, Vec<u8>)],
    unknown: &[RawTaggedField],
) -> Result<(), TransactionLogError> {
    let fields = known
        .iter()
        .map(|(tag, data)| (*tag, data.as_slice()))
        .chain(
            unknown
                .iter()
                .map(|field| (field.tag, field.data.as_slice())),
        );
    let count = known.len() + unknown.len();
    put_uvarint(
        out,
        u32::try_from(count).map_err(|_| not_writable("tagged fields", 1))?,
    );
    for (tag, data) in fields {
        put_uvarint(out, tag);
        put_uvarint(
            out,
            u32::try_from(data.len()).map_err(|_| not_writable("tagged field", 1))?,
        );
        out.put_slice(data);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
