#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::snapshot::{ENTRY_FIXED_LEN_V2, SNAPSHOT_CRC_LEN, SNAPSHOT_HEADER_LEN};
use super::*;

/// Records a non-transactional batch.
#[allow(clippy::too_many_arguments)]
fn record(
    table: &mut ProducerStateTable,
    producer_id: i64,
    epoch: i16,
    first_seq: i32,
    last_seq: i32,
    first_offset: i64,
    last_offset: i64,
    max_timestamp: i64,
) {
    table.record(AppendedBatch {
        producer_id,
        epoch,
        first_seq,
        last_seq,
        first_offset,
        last_offset,
        max_timestamp,
        transactional: false,
    });
}

/// Records a batch of three records right after the producer's previous one.
fn append(table: &mut ProducerStateTable, pid: i64, epoch: i16, seq: i32, offset: i64) {
    record(
        table,
        pid,
        epoch,
        seq,
        seq + 2,
        offset,
        offset + 2,
        1000 + offset,
    );
}

#[test]
fn test_non_idempotent_and_unknown_producers_append() {
    let table = ProducerStateTable::new();
    assert_eq!(table.check(-1, 0, -1, -1, false), Ok(SequenceCheck::Append));
    assert_eq!(table.check(7, 3, 42, 44, false), Ok(SequenceCheck::Append));
    let mut table = table;
    record(&mut table, -1, 0, -1, -1, 0, 0, 0);
    assert!(table.is_empty());
}

#[test]
fn test_in_order_sequence_appends() {
    let mut table = ProducerStateTable::new();
    append(&mut table, 1, 0, 0, 0);
    assert_eq!(table.check(1, 0, 3, 5, false), Ok(SequenceCheck::Append));
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
        table.check(1, 0, 3, 5, false),
        Ok(SequenceCheck::Duplicate {
            first_offset: 103,
            last_offset: 105
        })
    );
    // The oldest batch fell out of the cache: now only a gap.
    assert!(matches!(
        table.check(1, 0, 0, 2, false),
        Err(ProducerStateError::OutOfOrderSequence { expected: 18, .. })
    ));
}

#[test]
fn test_sequence_gap_is_out_of_order() {
    let mut table = ProducerStateTable::new();
    append(&mut table, 1, 0, 0, 0);
    assert_eq!(
        table.check(1, 0, 4, 4, false),
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
        table.check(1, 4, 3, 3, false),
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
    assert_eq!(table.check(1, 6, 0, 0, false), Ok(SequenceCheck::Append));
    assert!(matches!(
        table.check(1, 6, 3, 3, false),
        Err(ProducerStateError::OutOfOrderSequence { expected: 0, .. })
    ));
    record(&mut table, 1, 6, 0, 0, 3, 3, 0);
    let entry = table.get(1).unwrap();
    assert_eq!((entry.epoch(), entry.batches().len()), (6, 1));
}

#[test]
fn test_negative_sequence_is_invalid() {
    let table = ProducerStateTable::new();
    assert_eq!(
        table.check(1, 0, -1, -1, false),
        Err(ProducerStateError::InvalidSequence {
            producer_id: 1,
            sequence: -1
        })
    );
}

#[test]
fn test_sequence_wraps_after_max() {
    let mut table = ProducerStateTable::new();
    record(&mut table, 1, 0, i32::MAX - 1, i32::MAX, 0, 1, 0);
    assert_eq!(table.check(1, 0, 0, 4, false), Ok(SequenceCheck::Append));
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
    assert_eq!(table.check(1, 0, 3, 5, false), Ok(SequenceCheck::Append));
}

#[test]
fn test_remove_expired() {
    let mut table = ProducerStateTable::new();
    record(&mut table, 1, 0, 0, 0, 0, 0, 1_000);
    record(&mut table, 2, 0, 0, 0, 1, 1, 5_000);
    assert_eq!(table.remove_expired(6_000, 2_000), 1);
    assert!(table.get(1).is_none() && table.get(2).is_some());
}

#[test]
fn test_expired_at_exactly_the_expiration_as_in_kafka() {
    let mut table = ProducerStateTable::new();
    record(&mut table, 1, 0, 0, 0, 0, 0, 1_000);
    assert_eq!(table.remove_expired(2_999, 2_000), 0);
    assert_eq!(table.remove_expired(3_000, 2_000), 1);
    assert!(table.is_empty());
}

#[test]
fn test_expired_producer_continuing_its_sequence_is_a_new_producer() {
    let mut table = ProducerStateTable::new();
    record(&mut table, 7, 0, 0, 1, 0, 1, 1_000);
    // Known: a batch after a gap is out of order.
    assert!(matches!(
        table.check(7, 0, 5, 5, false),
        Err(ProducerStateError::OutOfOrderSequence { .. })
    ));
    // A day after its last batch the producer is forgotten.
    assert_eq!(table.remove_expired(1_000 + 86_400_000, 86_400_000), 1);
    assert_eq!(table.check(7, 0, 5, 5, false), Ok(SequenceCheck::Append));
    // The next batch then continues from what it recorded.
    record(&mut table, 7, 0, 5, 5, 2, 2, 86_400_000);
    assert!(matches!(
        table.check(7, 0, 9, 9, false),
        Err(ProducerStateError::OutOfOrderSequence { expected: 6, .. })
    ));
}

#[test]
fn test_remove_expired_keeps_recency_consistent() {
    let mut table = ProducerStateTable::new().with_max_producers(2);
    record(&mut table, 1, 0, 0, 0, 0, 0, 0);
    record(&mut table, 2, 0, 0, 0, 1, 1, 10_000);
    assert_eq!(table.remove_expired(10_000, 5_000), 1);
    record(&mut table, 3, 0, 0, 0, 2, 2, 10_000);
    // Below the cap again: 2 and 3 both stay.
    assert!(table.get(2).is_some() && table.get(3).is_some());
    record(&mut table, 4, 0, 0, 0, 3, 3, 10_000);
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
    let good = table.encode_snapshot(3, &[]);
    let reencode = |mut bytes: Vec<u8>| {
        bytes.truncate(bytes.len() - SNAPSHOT_CRC_LEN);
        let crc = crc32fast::hash(&bytes);
        bytes.extend_from_slice(&crc.to_be_bytes());
        ProducerStateTable::decode_snapshot(&bytes).map(|snapshot| snapshot.covers_up_to_offset)
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
    bad[SNAPSHOT_HEADER_LEN + ENTRY_FIXED_LEN_V2 - 1] = 6; // batch count above the cache size
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

/// Tables of plain and transactional batches, some transactions ended by markers, all
/// below offset 2^40.
fn arb_table() -> impl Strategy<Value = ProducerStateTable> {
    let batches = proptest::collection::vec((0..i32::MAX, 0..4i64, any::<i64>(), 0..4u8), 1..8);
    proptest::collection::vec((0..50i64, 0..3i16, batches), 0..20).prop_map(|producers| {
        let mut table = ProducerStateTable::new();
        let mut offset = 0i64;
        for (pid, epoch, batches) in producers {
            for (seq, span, ts, kind) in batches {
                table.record(AppendedBatch {
                    producer_id: pid,
                    epoch,
                    first_seq: seq,
                    last_seq: seq,
                    first_offset: offset,
                    last_offset: offset + span,
                    max_timestamp: ts,
                    transactional: kind < 2,
                });
                offset += span + 1;
                if kind == 1 {
                    let result = if ts % 2 == 0 {
                        TxnResult::Abort
                    } else {
                        TxnResult::Commit
                    };
                    table.apply_marker(pid, epoch, marker(result, (ts % 7) as i32), offset, ts);
                    offset += 1;
                }
            }
        }
        table
    })
}

proptest! {
    #[test]
    fn prop_snapshot_round_trips(
        table in arb_table(),
        covers in (1u64 << 40)..,
        segments in proptest::collection::btree_set(any::<u64>(), 0..5),
    ) {
        let segments: Vec<u64> = segments.into_iter().collect();
        let bytes = table.encode_snapshot(covers, &segments);
        let decoded = ProducerStateTable::decode_snapshot(&bytes).unwrap();
        prop_assert_eq!(decoded.covers_up_to_offset, covers);
        prop_assert_eq!(decoded.table.entries(), table.entries());
        prop_assert_eq!(&decoded.txn_index_segments, &segments);
        prop_assert_eq!(decoded.table.encode_snapshot(covers, &segments), bytes);
    }

    #[test]
    fn prop_snapshot_bit_flip_is_detected(table in arb_table(), bit in any::<usize>()) {
        let mut bytes = table.encode_snapshot(9, &[4, 7]);
        let bit = bit % (bytes.len() * 8);
        bytes[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(ProducerStateTable::decode_snapshot(&bytes).is_err());
    }

    #[test]
    fn prop_snapshot_truncation_is_detected(table in arb_table(), cut in any::<usize>()) {
        let bytes = table.encode_snapshot(9, &[4, 7]);
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

/// Records a transactional batch of three records at `offset`.
fn append_txn(table: &mut ProducerStateTable, pid: i64, epoch: i16, seq: i32, offset: i64) {
    table.record(AppendedBatch {
        producer_id: pid,
        epoch,
        first_seq: seq,
        last_seq: seq + 2,
        first_offset: offset,
        last_offset: offset + 2,
        max_timestamp: 1000 + offset,
        transactional: true,
    });
}

fn marker(result: TxnResult, coordinator_epoch: i32) -> MarkerRecord {
    MarkerRecord {
        result,
        coordinator_epoch,
    }
}

#[test]
fn test_a_transactional_batch_opens_a_transaction_and_a_marker_ends_it() {
    let mut table = ProducerStateTable::new();
    append_txn(&mut table, 1, 0, 0, 10);
    append_txn(&mut table, 1, 0, 3, 13);
    assert_eq!(table.get(1).unwrap().open_transaction(), Some(10));
    assert_eq!(table.first_unstable_offset(), Some(10));
    let completed = table.apply_marker(1, 0, marker(TxnResult::Commit, 3), 16, 2_000);
    assert_eq!(
        completed,
        Some(CompletedTransaction {
            producer_id: 1,
            first_offset: 10,
            last_offset: 16,
            aborted: false,
            last_stable_offset: 17,
        })
    );
    assert_eq!(completed.unwrap().aborted_txn(), None);
    let entry = table.get(1).unwrap();
    assert_eq!(
        (entry.open_transaction(), entry.coordinator_epoch()),
        (None, 3)
    );
    assert_eq!(entry.last_timestamp(), 2_000);
    // Unstable until the marker is durable.
    assert_eq!(table.first_unstable_offset(), Some(10));
    table.on_durable(16);
    assert_eq!(table.first_unstable_offset(), Some(10));
    table.on_durable(17);
    assert_eq!(table.first_unstable_offset(), None);
    // The same epoch continues its sequence after a marker of transaction version 1.
    assert_eq!(table.check(1, 0, 6, 6, true), Ok(SequenceCheck::Append));
}

#[test]
fn test_an_abort_records_the_earliest_other_open_transaction() {
    let mut table = ProducerStateTable::new();
    append_txn(&mut table, 1, 0, 0, 10);
    append_txn(&mut table, 2, 0, 0, 13);
    append_txn(&mut table, 3, 0, 0, 16);
    // Producer 1's abort: producer 2's transaction is the earliest other one.
    let aborted = table.apply_marker(1, 0, marker(TxnResult::Abort, 0), 19, 0);
    assert_eq!(
        aborted.and_then(|t| t.aborted_txn()),
        Some(AbortedTxn {
            producer_id: 1,
            first_offset: 10,
            last_offset: 19,
            last_stable_offset: 13,
        })
    );
    // Producer 3's: producer 2 is still open and began first.
    let aborted = table.apply_marker(3, 0, marker(TxnResult::Abort, 0), 20, 0);
    assert_eq!(aborted.map(|t| t.last_stable_offset), Some(13));
    // Producer 2's: nobody else is open.
    let aborted = table.apply_marker(2, 0, marker(TxnResult::Abort, 0), 21, 0);
    assert_eq!(aborted.map(|t| t.last_stable_offset), Some(22));
}

#[test]
fn test_a_marker_without_an_open_transaction_ends_nothing() {
    let mut table = ProducerStateTable::new();
    append(&mut table, 1, 0, 0, 0);
    assert_eq!(
        table.apply_marker(1, 0, marker(TxnResult::Abort, 1), 3, 5),
        None
    );
    assert_eq!(table.first_unstable_offset(), None);
    // An unknown producer becomes known at the marker's epochs.
    assert_eq!(
        table.apply_marker(9, 4, marker(TxnResult::Commit, 2), 4, 5),
        None
    );
    let entry = table.get(9).unwrap();
    assert_eq!((entry.epoch(), entry.coordinator_epoch()), (4, 2));
    assert!(entry.batches().is_empty());
    // Its first batch at that epoch starts at sequence 0.
    assert!(matches!(
        table.check(9, 4, 5, 5, false),
        Err(ProducerStateError::OutOfOrderSequence { expected: 0, .. })
    ));
    assert_eq!(table.check(9, 4, 0, 0, false), Ok(SequenceCheck::Append));
}

#[test]
fn test_a_non_transactional_batch_inside_a_transaction_is_refused() {
    let mut table = ProducerStateTable::new();
    append_txn(&mut table, 1, 0, 0, 10);
    assert_eq!(
        table.check(1, 0, 3, 3, false),
        Err(ProducerStateError::InvalidTxnState {
            producer_id: 1,
            first_offset: 10
        })
    );
    // Also at a newer epoch: the transaction stays open across it.
    assert_eq!(
        table.check(1, 1, 0, 0, false),
        Err(ProducerStateError::InvalidTxnState {
            producer_id: 1,
            first_offset: 10
        })
    );
    assert_eq!(table.check(1, 1, 0, 0, true), Ok(SequenceCheck::Append));
    // A transactional batch from an older epoch is fenced.
    assert!(matches!(
        {
            append_txn(&mut table, 1, 1, 0, 13);
            table.check(1, 0, 3, 3, true)
        },
        Err(ProducerStateError::ProducerFenced { .. })
    ));
    assert_eq!(table.get(1).unwrap().open_transaction(), Some(10));
}

#[test]
fn test_marker_epochs_by_transaction_version() {
    let mut table = ProducerStateTable::new();
    append_txn(&mut table, 1, 5, 0, 0);
    let legacy = MarkerEpochCheck::AtLeastCurrent;
    let bumped = MarkerEpochCheck::AboveCurrent;
    assert!(matches!(
        table.check_marker(1, 4, 0, legacy),
        Err(ProducerStateError::ProducerFenced {
            epoch: 4,
            current_epoch: 5,
            ..
        })
    ));
    assert_eq!(table.check_marker(1, 5, 0, legacy), Ok(()));
    // Version 2: the coordinator bumped the epoch; the transaction's own is stale.
    assert!(matches!(
        table.check_marker(1, 5, 0, bumped),
        Err(ProducerStateError::ProducerFenced { .. })
    ));
    assert_eq!(table.check_marker(1, 6, 0, bumped), Ok(()));
    table.apply_marker(1, 6, marker(TxnResult::Commit, 0), 3, 0);
    // A retry of that marker (no transaction open) is written again; an older one is not.
    assert_eq!(table.check_marker(1, 6, 0, bumped), Ok(()));
    assert!(table.check_marker(1, 5, 0, bumped).is_err());
    // The next transaction runs at the bumped epoch from sequence 0.
    assert_eq!(table.check(1, 6, 0, 0, true), Ok(SequenceCheck::Append));
    // Unknown producers take any marker.
    assert_eq!(table.check_marker(2, 0, 0, bumped), Ok(()));
}

#[test]
fn test_an_older_coordinator_is_fenced() {
    let mut table = ProducerStateTable::new();
    append_txn(&mut table, 1, 0, 0, 0);
    table.apply_marker(1, 0, marker(TxnResult::Commit, 7), 3, 0);
    assert_eq!(
        table.check_marker(1, 0, 6, MarkerEpochCheck::AtLeastCurrent),
        Err(ProducerStateError::CoordinatorFenced {
            producer_id: 1,
            coordinator_epoch: 6,
            current: 7
        })
    );
    assert_eq!(
        table.check_marker(1, 0, 7, MarkerEpochCheck::AtLeastCurrent),
        Ok(())
    );
}

#[test]
fn test_open_transactions_are_never_forgotten() {
    let mut table = ProducerStateTable::new().with_max_producers(2);
    append_txn(&mut table, 1, 0, 0, 0);
    append(&mut table, 2, 0, 0, 3);
    append(&mut table, 3, 0, 0, 6);
    // The cap forgot producer 2 (least recent without an open transaction), not 1.
    assert!(table.get(1).is_some() && table.get(2).is_none() && table.get(3).is_some());
    // Expiration skips it too.
    assert_eq!(table.remove_expired(i64::MAX, 1), 1);
    assert_eq!(table.get(1).unwrap().open_transaction(), Some(0));
    assert_eq!(table.first_unstable_offset(), Some(0));
}

#[test]
fn test_truncation_reopens_a_transaction_whose_marker_went() {
    let mut table = ProducerStateTable::new();
    append_txn(&mut table, 1, 0, 0, 0);
    append_txn(&mut table, 2, 0, 0, 3);
    table.apply_marker(1, 0, marker(TxnResult::Abort, 0), 6, 0);
    table.truncate_to(6);
    assert_eq!(table.get(1).unwrap().open_transaction(), Some(0));
    table.truncate_to(3);
    assert!(table.get(2).is_none());
    assert_eq!(table.first_unstable_offset(), Some(0));
}

#[test]
fn test_replay_reads_markers_from_stored_batches() {
    let mut table = ProducerStateTable::new();
    let data = crate::batch::encode_batch_for_tests(&[(None, Some(b"v"))], 1, 9, 0, 0);
    let mut data = data;
    let attributes = crate::batch::TRANSACTIONAL_MASK.to_be_bytes();
    data[crate::batch::ATTRIBUTES_POS..][..2].copy_from_slice(&attributes);
    crate::batch::stamp_for_append(&mut data, 40, 0, None).unwrap();
    assert_eq!(table.replay_stored_bytes(&data), None);
    assert_eq!(table.get(9).unwrap().open_transaction(), Some(40));
    let mut end =
        crate::batch::txn_marker::encode_marker_batch(9, 0, marker(TxnResult::Abort, 2), 77);
    crate::batch::stamp_for_append(&mut end, 41, 0, None).unwrap();
    let completed = table.replay_stored_bytes(&end).unwrap();
    assert_eq!(
        (
            completed.first_offset,
            completed.last_offset,
            completed.aborted
        ),
        (40, 41, true)
    );
    assert_eq!(table.get(9).unwrap().last_timestamp(), 77);
}

#[test]
fn test_snapshot_keeps_open_transactions_and_epochs() {
    let mut table = ProducerStateTable::new();
    append_txn(&mut table, 1, 0, 0, 0);
    append(&mut table, 2, 0, 0, 3);
    table.apply_marker(3, 2, marker(TxnResult::Commit, 5), 6, 99);
    let snapshot = ProducerStateTable::decode_snapshot(&table.encode_snapshot(7, &[0])).unwrap();
    assert_eq!(snapshot.covers_up_to_offset, 7);
    assert_eq!(snapshot.txn_index_segments, vec![0]);
    let decoded = snapshot.table;
    assert_eq!(decoded.entries(), table.entries());
    assert_eq!(decoded.first_unstable_offset(), Some(0));
    let marker_only = decoded.get(3).unwrap();
    assert_eq!(
        (
            marker_only.epoch(),
            marker_only.coordinator_epoch(),
            marker_only.last_timestamp()
        ),
        (2, 5, 99)
    );
    // An open transaction at or past the offset the snapshot covers cannot be.
    let bytes = table.encode_snapshot(0, &[]);
    assert!(matches!(
        ProducerStateTable::decode_snapshot(&bytes),
        Err(ProducerStateError::SnapshotCorrupt(_))
    ));
}

/// A version-1 snapshot (before transactions), spelled out: producer 5 at epoch 2 with one
/// batch, sequences 0..=1 at offsets 10..=11, max timestamp 300, covering up to 12.
#[test]
fn test_version_one_snapshots_still_decode() {
    let mut bytes = Vec::new();
    bytes.extend_from_slice(b"KPST");
    bytes.extend_from_slice(&1u16.to_be_bytes());
    bytes.extend_from_slice(&0u16.to_be_bytes());
    bytes.extend_from_slice(&12u64.to_be_bytes());
    bytes.extend_from_slice(&1u32.to_be_bytes());
    bytes.extend_from_slice(&5i64.to_be_bytes());
    bytes.extend_from_slice(&2i16.to_be_bytes());
    bytes.push(1);
    for field in [0i32, 1] {
        bytes.extend_from_slice(&field.to_be_bytes());
    }
    for field in [10i64, 11, 300] {
        bytes.extend_from_slice(&field.to_be_bytes());
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    let snapshot = ProducerStateTable::decode_snapshot(&bytes).unwrap();
    assert_eq!(snapshot.covers_up_to_offset, 12);
    assert!(snapshot.txn_index_segments.is_empty());
    let table = snapshot.table;
    let entry = table.get(5).unwrap();
    assert_eq!((entry.epoch(), entry.open_transaction()), (2, None));
    assert_eq!(entry.coordinator_epoch(), NO_COORDINATOR_EPOCH);
    assert_eq!(entry.last_timestamp(), 300);
    assert_eq!(table.check(5, 2, 2, 2, false), Ok(SequenceCheck::Append));
    // Written again, it is version 2.
    assert_eq!(&table.encode_snapshot(12, &[])[4..6], &2u16.to_be_bytes());
}
