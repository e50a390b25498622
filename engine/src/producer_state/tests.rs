#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::*;

/// Records a batch of `count` records right after the producer's previous one.
fn append(table: &mut ProducerStateTable, pid: i64, epoch: i16, seq: i32, offset: i64) {
    table.record(pid, epoch, seq, seq + 2, offset, offset + 2, 1000 + offset);
}

#[test]
fn test_non_idempotent_and_unknown_producers_append() {
    let table = ProducerStateTable::new();
    assert_eq!(table.check(-1, 0, -1, -1), Ok(SequenceCheck::Append));
    assert_eq!(table.check(7, 3, 42, 44), Ok(SequenceCheck::Append));
    let mut table = table;
    table.record(-1, 0, -1, -1, 0, 0, 0);
    assert!(table.is_empty());
}

#[test]
fn test_in_order_sequence_appends() {
    let mut table = ProducerStateTable::new();
    append(&mut table, 1, 0, 0, 0);
    assert_eq!(table.check(1, 0, 3, 5), Ok(SequenceCheck::Append));
}

#[test]
fn test_retry_of_cached_batch_is_duplicate() {
    let mut table = ProducerStateTable::new();
    for i in 0..6 {
        append(&mut table, 1, 0, i * 3, 100 + i64::from(i) * 3);
    }
    assert_eq!(
        table.get(1).unwrap().batches().len(),
        BATCHES_KEPT_PER_PRODUCER
    );
    assert_eq!(
        table.check(1, 0, 3, 5),
        Ok(SequenceCheck::Duplicate {
            first_offset: 103,
            last_offset: 105
        })
    );
    // The oldest batch fell out of the cache: now only a gap.
    assert!(matches!(
        table.check(1, 0, 0, 2),
        Err(ProducerStateError::OutOfOrderSequence { expected: 18, .. })
    ));
}

#[test]
fn test_sequence_gap_is_out_of_order() {
    let mut table = ProducerStateTable::new();
    append(&mut table, 1, 0, 0, 0);
    assert_eq!(
        table.check(1, 0, 4, 4),
        Err(ProducerStateError::OutOfOrderSequence {
            producer_id: 1,
            expected: 3,
            received: 4
        })
    );
}

#[test]
fn test_older_epoch_is_fenced() {
    let mut table = ProducerStateTable::new();
    append(&mut table, 1, 5, 0, 0);
    assert_eq!(
        table.check(1, 4, 3, 3),
        Err(ProducerStateError::ProducerFenced {
            producer_id: 1,
            epoch: 4,
            current_epoch: 5
        })
    );
}

#[test]
fn test_newer_epoch_must_restart_at_zero() {
    let mut table = ProducerStateTable::new();
    append(&mut table, 1, 5, 0, 0);
    assert_eq!(table.check(1, 6, 0, 0), Ok(SequenceCheck::Append));
    assert!(matches!(
        table.check(1, 6, 3, 3),
        Err(ProducerStateError::OutOfOrderSequence { expected: 0, .. })
    ));
    table.record(1, 6, 0, 0, 3, 3, 0);
    let entry = table.get(1).unwrap();
    assert_eq!((entry.epoch(), entry.batches().len()), (6, 1));
}

#[test]
fn test_negative_sequence_is_invalid() {
    let table = ProducerStateTable::new();
    assert_eq!(
        table.check(1, 0, -1, -1),
        Err(ProducerStateError::InvalidSequence {
            producer_id: 1,
            sequence: -1
        })
    );
}

#[test]
fn test_sequence_wraps_after_max() {
    let mut table = ProducerStateTable::new();
    table.record(1, 0, i32::MAX - 1, i32::MAX, 0, 1, 0);
    assert_eq!(table.check(1, 0, 0, 4), Ok(SequenceCheck::Append));
}

#[test]
fn test_truncate_forgets_batches_above_the_end() {
    let mut table = ProducerStateTable::new();
    append(&mut table, 1, 0, 0, 0);
    append(&mut table, 1, 0, 3, 3);
    append(&mut table, 2, 0, 0, 6);
    table.truncate_to(6);
    assert!(table.get(2).is_none());
    table.truncate_to(4);
    assert_eq!(table.get(1).unwrap().batches().len(), 1);
    assert_eq!(table.check(1, 0, 3, 5), Ok(SequenceCheck::Append));
}

#[test]
fn test_remove_expired() {
    let mut table = ProducerStateTable::new();
    table.record(1, 0, 0, 0, 0, 0, 1_000);
    table.record(2, 0, 0, 0, 1, 1, 5_000);
    assert_eq!(table.remove_expired(6_000, 2_000), 1);
    assert!(table.get(1).is_none() && table.get(2).is_some());
}

#[test]
fn test_expired_at_exactly_the_expiration_as_in_kafka() {
    let mut table = ProducerStateTable::new();
    table.record(1, 0, 0, 0, 0, 0, 1_000);
    assert_eq!(table.remove_expired(2_999, 2_000), 0);
    assert_eq!(table.remove_expired(3_000, 2_000), 1);
    assert!(table.is_empty());
}

#[test]
fn test_expired_producer_continuing_its_sequence_is_a_new_producer() {
    let mut table = ProducerStateTable::new();
    table.record(7, 0, 0, 1, 0, 1, 1_000);
    // Known: a batch after a gap is out of order.
    assert!(matches!(
        table.check(7, 0, 5, 5),
        Err(ProducerStateError::OutOfOrderSequence { .. })
    ));
    // A day after its last batch the producer is forgotten.
    assert_eq!(table.remove_expired(1_000 + 86_400_000, 86_400_000), 1);
    assert_eq!(table.check(7, 0, 5, 5), Ok(SequenceCheck::Append));
    // The next batch then continues from what it recorded.
    table.record(7, 0, 5, 5, 2, 2, 86_400_000);
    assert!(matches!(
        table.check(7, 0, 9, 9),
        Err(ProducerStateError::OutOfOrderSequence { expected: 6, .. })
    ));
}

#[test]
fn test_remove_expired_keeps_recency_consistent() {
    let mut table = ProducerStateTable::new().with_max_producers(2);
    table.record(1, 0, 0, 0, 0, 0, 0);
    table.record(2, 0, 0, 0, 1, 1, 10_000);
    assert_eq!(table.remove_expired(10_000, 5_000), 1);
    table.record(3, 0, 0, 0, 2, 2, 10_000);
    // Below the cap again: 2 and 3 both stay.
    assert!(table.get(2).is_some() && table.get(3).is_some());
    table.record(4, 0, 0, 0, 3, 3, 10_000);
    assert!(table.get(2).is_none() && table.get(3).is_some() && table.get(4).is_some());
}

#[test]
fn test_cap_evicts_least_recently_used() {
    let mut table = ProducerStateTable::new().with_max_producers(2);
    append(&mut table, 1, 0, 0, 0);
    append(&mut table, 2, 0, 0, 3);
    append(&mut table, 1, 0, 3, 6);
    append(&mut table, 3, 0, 0, 9);
    assert_eq!(table.len(), 2);
    assert!(table.get(2).is_none());
    assert!(table.get(1).is_some() && table.get(3).is_some());
}

#[test]
fn test_snapshot_errors() {
    let mut table = ProducerStateTable::new();
    append(&mut table, 1, 0, 0, 0);
    let good = table.encode_snapshot(3);
    let reencode = |mut bytes: Vec<u8>| {
        bytes.truncate(bytes.len() - SNAPSHOT_CRC_LEN);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        ProducerStateTable::decode_snapshot(&bytes).map(|(offset, _)| offset)
    };
    assert_eq!(reencode(good.clone()), Ok(3));
    assert!(matches!(
        ProducerStateTable::decode_snapshot(&good[..10]),
        Err(ProducerStateError::SnapshotTruncated)
    ));
    assert!(matches!(
        ProducerStateTable::decode_snapshot(&good[..good.len() - 1]),
        Err(ProducerStateError::SnapshotCrcMismatch { .. })
    ));
    let mut bad = good.clone();
    bad[0] = b'X';
    assert_eq!(reencode(bad), Err(ProducerStateError::SnapshotBadMagic));
    let mut bad = good.clone();
    bad[5] = 9;
    assert_eq!(
        reencode(bad),
        Err(ProducerStateError::SnapshotUnsupportedVersion(9))
    );
    let mut bad = good.clone();
    bad[19] = 200; // entry count far beyond the bytes present
    assert_eq!(reencode(bad), Err(ProducerStateError::SnapshotTruncated));
    let mut bad = good.clone();
    bad[SNAPSHOT_HEADER_LEN + 10] = 6; // batch count above the cache size
    assert!(matches!(
        reencode(bad),
        Err(ProducerStateError::SnapshotCorrupt(_))
    ));
    let mut bad = good.clone();
    bad.insert(good.len() - SNAPSHOT_CRC_LEN, 0);
    assert!(matches!(
        reencode(bad),
        Err(ProducerStateError::SnapshotCorrupt(_))
    ));
}

#[test]
fn test_snapshot_file_names() {
    assert_eq!(snapshot_file_name(42, 0), "00000000000000000042.snapshot");
    assert_eq!(
        snapshot_file_name(42, 3),
        "00000000000000000042-e3.snapshot"
    );
    assert_eq!(
        parse_snapshot_file_name(&snapshot_file_name(42, 0), 0),
        Some(42)
    );
    assert_eq!(
        parse_snapshot_file_name(&snapshot_file_name(42, 3), 3),
        Some(42)
    );
    assert_eq!(
        parse_snapshot_file_name(&snapshot_file_name(42, 3), 0),
        None
    );
    assert_eq!(
        parse_snapshot_file_name(&snapshot_file_name(42, 0), 3),
        None
    );
    assert_eq!(parse_snapshot_file_name("42.snapshot", 0), None);
    assert_eq!(
        parse_snapshot_file_name("00000000000000000042.log", 0),
        None
    );
}

fn arb_table() -> impl Strategy<Value = ProducerStateTable> {
    let batches = proptest::collection::vec((0..i32::MAX, 0..4i64, any::<i64>()), 1..8);
    proptest::collection::vec((0..50i64, 0..3i16, batches), 0..20).prop_map(|producers| {
        let mut table = ProducerStateTable::new();
        let mut offset = 0i64;
        for (pid, epoch, batches) in producers {
            for (seq, span, ts) in batches {
                table.record(pid, epoch, seq, seq, offset, offset + span, ts);
                offset += span + 1;
            }
        }
        table
    })
}

proptest! {
    #[test]
    fn prop_snapshot_round_trips(table in arb_table(), covers in any::<u64>()) {
        let bytes = table.encode_snapshot(covers);
        let (decoded_covers, decoded) = ProducerStateTable::decode_snapshot(&bytes).unwrap();
        prop_assert_eq!(decoded_covers, covers);
        prop_assert_eq!(decoded.entries(), table.entries());
        prop_assert_eq!(decoded.encode_snapshot(covers), bytes);
    }

    #[test]
    fn prop_snapshot_bit_flip_is_detected(table in arb_table(), bit in any::<usize>()) {
        let mut bytes = table.encode_snapshot(9);
        let bit = bit % (bytes.len() * 8);
        bytes[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(ProducerStateTable::decode_snapshot(&bytes).is_err());
    }

    #[test]
    fn prop_snapshot_truncation_is_detected(table in arb_table(), cut in any::<usize>()) {
        let bytes = table.encode_snapshot(9);
        let cut = cut % bytes.len();
        prop_assert!(ProducerStateTable::decode_snapshot(&bytes[..cut]).is_err());
    }

    #[test]
    fn prop_snapshot_garbage_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..200)
    ) {
        let _ = ProducerStateTable::decode_snapshot(&bytes);
    }
}
