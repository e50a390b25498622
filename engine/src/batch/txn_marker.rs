//! Transaction markers: the control batch a transaction coordinator has the partition leader
//! write to end a producer's transaction (Kafka's `EndTransactionMarker`, written by
//! `MemoryRecords.withEndTransactionMarker`).
//!
//! # Layout
//!
//! A RecordBatch v2 ([`crate::batch`]) with `attributes` = control | transactional (`0x30`:
//! codec none, `CreateTime`), the producer's id and epoch, `baseSequence` -1,
//! `lastOffsetDelta` 0, `baseTimestamp` = `maxTimestamp` = the broker's clock, and exactly
//! one record (78 bytes in all):
//!
//! | field           | bytes | value                                                    |
//! |-----------------|-------|----------------------------------------------------------|
//! | length          | 1     | varint 16                                                |
//! | attributes      | 1     | 0                                                        |
//! | timestampDelta  | 1     | varlong 0                                                |
//! | offsetDelta     | 1     | varint 0                                                 |
//! | key length      | 1     | varint 4                                                 |
//! | key             | 4     | `version: i16 = 0`, `type: i16` (0 = ABORT, 1 = COMMIT)  |
//! | value length    | 1     | varint 6                                                 |
//! | value           | 6     | `version: i16 = 0`, `coordinator_epoch: i32`             |
//! | header count    | 1     | varint 0                                                 |
//!
//! Key and value are Kafka's `ControlRecordTypeSchema` and `EndTxnMarker` data schemas,
//! each prefixed with its version, big-endian. A `LogAppendTime` log stamps its clock into
//! a marker as into any batch ([`crate::batch::stamp_for_append`]).
//!
//! # Reading
//!
//! [`parse_marker`] reads what a stored control batch says, as Kafka reads it: a key version
//! above 0 is read as version 0 (fields are only ever added), a negative one is not a
//! marker; a control type other than ABORT or COMMIT (Kafka's KRaft control records) is not
//! a transaction marker and changes no producer state; a value shorter than 6 bytes or with
//! a negative version is not one either. A control batch with no records (what Kafka's
//! cleaner leaves of a marker whose transaction is gone) is not one.

use super::records::first_record_key_value;
use super::{
    compute_crc, BatchHeader, BATCH_HEADER_LEN, CONTROL_MASK, CRC_POS, LOG_OVERHEAD, MAGIC_V2,
    NO_SEQUENCE, TRANSACTIONAL_MASK,
};

/// `type` of an ABORT marker's key.
pub const ABORT_TYPE: i16 = 0;
/// `type` of a COMMIT marker's key.
pub const COMMIT_TYPE: i16 = 1;
/// Bytes of a marker batch, framing included.
pub const MARKER_BATCH_LEN: usize = BATCH_HEADER_LEN + MARKER_RECORD_LEN;

/// The one record: its length varint and 16 bytes of body.
const MARKER_RECORD_LEN: usize = 17;
const KEY_LEN: usize = 4;
const VALUE_LEN: usize = 6;
const CURRENT_VERSION: i16 = 0;

/// How a transaction ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnResult {
    /// Its records are dropped by read-committed readers.
    Abort,
    /// Its records become visible to read-committed readers.
    Commit,
}

impl TxnResult {
    /// The control record type Kafka writes for it.
    pub fn control_type(self) -> i16 {
        match self {
            TxnResult::Abort => ABORT_TYPE,
            TxnResult::Commit => COMMIT_TYPE,
        }
    }
}

/// What a stored transaction marker says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkerRecord {
    /// Commit or abort.
    pub result: TxnResult,
    /// The epoch of the coordinator that wrote it.
    pub coordinator_epoch: i32,
}

/// Builds the marker batch ending `producer_id`'s transaction (see the module doc), with
/// `baseOffset` 0 and `partitionLeaderEpoch` -1: the append stamps both, as for a produced
/// batch.
pub fn encode_marker_batch(
    producer_id: i64,
    producer_epoch: i16,
    marker: MarkerRecord,
    timestamp: i64,
) -> Vec<u8> {
    let header = BatchHeader {
        base_offset: 0,
        batch_length: (MARKER_BATCH_LEN - LOG_OVERHEAD) as i32,
        partition_leader_epoch: -1,
        magic: MAGIC_V2,
        crc: 0,
        attributes: CONTROL_MASK | TRANSACTIONAL_MASK,
        last_offset_delta: 0,
        base_timestamp: timestamp,
        max_timestamp: timestamp,
        producer_id,
        producer_epoch,
        base_sequence: NO_SEQUENCE,
        records_count: 1,
    };
    let mut batch = Vec::with_capacity(MARKER_BATCH_LEN);
    batch.extend_from_slice(&header.encode());
    // Lengths and zeros as zigzag varints: 16 → 0x20, 4 → 0x08, 6 → 0x0c.
    batch.extend_from_slice(&[0x20, 0, 0, 0, 0x08]);
    batch.extend_from_slice(&CURRENT_VERSION.to_be_bytes());
    batch.extend_from_slice(&marker.result.control_type().to_be_bytes());
    batch.push(0x0c);
    batch.extend_from_slice(&CURRENT_VERSION.to_be_bytes());
    batch.extend_from_slice(&marker.coordinator_epoch.to_be_bytes());
    batch.push(0); // no headers
    let crc = compute_crc(&batch);
    batch[CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
    batch
}

/// The transaction marker a stored batch holds: `None` unless it is an uncompressed control
/// batch whose first record is a well-formed ABORT or COMMIT marker. `records` is the batch's
/// records section (the bytes after its 61-byte header).
pub fn parse_marker(header: &BatchHeader, records: &[u8]) -> Option<MarkerRecord> {
    if !header.is_control() || header.compression_id() != 0 || header.records_count < 1 {
        return None;
    }
    let (key, value) = first_record_key_value(records)?;
    let (key, value) = (key?, value?);
    if key.len() < KEY_LEN || value.len() < VALUE_LEN {
        return None;
    }
    let key_version = i16::from_be_bytes([key[0], key[1]]);
    let value_version = i16::from_be_bytes([value[0], value[1]]);
    if key_version < 0 || value_version < 0 {
        return None;
    }
    let result = match i16::from_be_bytes([key[2], key[3]]) {
        ABORT_TYPE => TxnResult::Abort,
        COMMIT_TYPE => TxnResult::Commit,
        _ => return None,
    };
    Some(MarkerRecord {
        result,
        coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::batch::{validate_batches, BatchError};

    /// What Kafka's `MemoryRecords.withEndTransactionMarker(0, 1_700_000_000_000, -1, 4242,
    /// 7, new EndTransactionMarker(ABORT, 17))` writes, spelled out field by field from
    /// Kafka's schemas (`DefaultRecordBatch`, `ControlRecordTypeSchema`, `EndTxnMarker`),
    /// with the CRC-32C computed by a separate implementation.
    const ABORT_GOLDEN: &str = "0000000000000000 00000042 ffffffff 02 b5fb0f47 0030 00000000 \
        0000018bcfe56800 0000018bcfe56800 0000000000001092 0007 ffffffff 00000001 \
        20 00 00 00 08 0000 0000 0c 0000 00000011 00";

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    #[test]
    fn test_abort_marker_matches_kafkas_bytes() {
        let marker = MarkerRecord {
            result: TxnResult::Abort,
            coordinator_epoch: 17,
        };
        let batch = encode_marker_batch(4242, 7, marker, 1_700_000_000_000);
        assert_eq!(batch, hex(ABORT_GOLDEN));
        assert_eq!(batch.len(), MARKER_BATCH_LEN);
    }

    #[test]
    fn test_commit_marker_differs_only_in_type_and_crc() {
        let abort = hex(ABORT_GOLDEN);
        let commit = encode_marker_batch(
            4242,
            7,
            MarkerRecord {
                result: TxnResult::Commit,
                coordinator_epoch: 17,
            },
            1_700_000_000_000,
        );
        let differing: Vec<usize> = (0..abort.len())
            .filter(|&i| abort[i] != commit[i])
            .collect();
        let type_at = BATCH_HEADER_LEN + 5 + 3;
        assert!(differing
            .iter()
            .all(|&i| (CRC_POS..CRC_POS + 4).contains(&i) || i == type_at));
        assert_eq!(commit[type_at], 1);
    }

    #[test]
    fn test_markers_read_back() {
        for result in [TxnResult::Abort, TxnResult::Commit] {
            let marker = MarkerRecord {
                result,
                coordinator_epoch: -3,
            };
            let batch = encode_marker_batch(9, 2, marker, 5);
            let header = BatchHeader::parse(&batch).unwrap();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!(header.base_sequence, NO_SEQUENCE);
            assert_eq!(
                parse_marker(&header, &batch[BATCH_HEADER_LEN..]),
                Some(marker)
            );
            assert_eq!(compute_crc(&batch), header.crc);
        }
    }

    #[test]
    fn test_clients_may_not_send_markers() {
        let batch = encode_marker_batch(
            9,
            2,
            MarkerRecord {
                result: TxnResult::Commit,
                coordinator_epoch: 0,
            },
            5,
        );
        assert_eq!(
            validate_batches(&batch, 1 << 20),
            Err(BatchError::ControlBatch)
        );
    }

    #[test]
    fn test_other_control_records_are_not_markers() {
        let marker = MarkerRecord {
            result: TxnResult::Commit,
            coordinator_epoch: 1,
        };
        let batch = encode_marker_batch(9, 2, marker, 5);
        let header = BatchHeader::parse(&batch).unwrap();
        let records = &batch[BATCH_HEADER_LEN..];
        // A KRaft control type (2, LEADER_CHANGE) or a negative key version.
        for (at, bytes) in [(7, [0u8, 2]), (5, [0xff, 0xff])] {
            let mut changed = records.to_vec();
            changed[at..at + 2].copy_from_slice(&bytes);
            assert_eq!(parse_marker(&header, &changed), None);
        }
        // A newer key version reads as version 0.
        let mut newer = records.to_vec();
        newer[5..7].copy_from_slice(&[0, 1]);
        assert_eq!(parse_marker(&header, &newer), Some(marker));
        // A plain batch, and a control batch cut short, are not markers.
        let data = crate::batch::encode_batch_for_tests(&[(None, Some(b"v"))], 1, 9, 2, 0);
        let data_header = BatchHeader::parse(&data).unwrap();
        assert_eq!(parse_marker(&data_header, &data[BATCH_HEADER_LEN..]), None);
        assert_eq!(parse_marker(&header, &records[..10]), None);
    }
}
