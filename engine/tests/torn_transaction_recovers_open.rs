//! Property: recovery rebuilds transactions from what survived, never from more.
//!
//! - A tail torn inside a transaction's marker, or inside its data before the marker,
//!   leaves the transaction open after recovery: the last stable offset is back at its first
//!   offset, no aborted transaction is listed for it, and a marker appended then ends it.
//! - An ABORT whose marker lies below the recovery point survives a torn tail after it
//!   (its index entry comes from the `.txnindex` file, not from a replay).
//! - A sealed segment's `.txnindex` that is damaged or missing is rebuilt by replaying the
//!   whole log: the aborted list is the same and the file is written again, byte for byte.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kaas_engine::batch::txn_marker::TxnResult;
use kaas_engine::producer_state::MarkerEpochCheck;
use kaas_engine::producer_state::ProducerStateError;
use kaas_engine::txn_index::{encode_entries, AbortedTxn};
use kaas_engine::{AbortedTransaction, EngineError, LogConfig, PartitionLog, TxnMarker};

use common::read_committed::{transactional_batch, visible_batches};
use common::{batch, files, partition_dir, run, split_batches, ProducerSpec};

const PRODUCER: i64 = 4_242;
const NOW: i64 = 1_700_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        ..LogConfig::default()
    }
}

fn producer(sequence: i32) -> ProducerSpec {
    ProducerSpec {
        producer_id: PRODUCER,
        epoch: 0,
        base_sequence: sequence,
    }
}

fn marker(result: TxnResult) -> TxnMarker {
    TxnMarker {
        producer_id: PRODUCER,
        producer_epoch: 0,
        coordinator_epoch: 1,
        result,
        epoch_check: MarkerEpochCheck::AtLeastCurrent,
    }
}

fn segment_path(root: &Path, base: u64, extension: &str) -> PathBuf {
    root.join(partition_dir())
        .join(format!("{base:020}.{extension}"))
}

/// A plain batch, then the producer's transaction: two data batches and, when `end` is
/// given, its marker; all durable. Returns (first offset of the transaction, byte position
/// of its second data batch, byte position of the marker) in segment 0.
async fn write_transaction(log: &PartitionLog, end: Option<TxnResult>) -> (u64, u64, u64) {
    let plain = batch(1, 2, 100, NOW, None);
    log.append(&plain, 0, NOW).await.expect("plain");
    let first = transactional_batch(2, 3, 100, NOW, producer(0));
    let second = transactional_batch(3, 3, 100, NOW, producer(3));
    let outcome = log.append(&first, 0, NOW).await.expect("first");
    log.append(&second, 0, NOW).await.expect("second");
    if let Some(result) = end {
        log.append_txn_marker(marker(result), 0, NOW)
            .await
            .expect("marker");
    }
    log.flush().await.expect("flush");
    let second_at = (plain.len() + first.len()) as u64;
    (
        outcome.base_offset,
        second_at,
        second_at + second.len() as u64,
    )
}

/// Drops `log` without closing it, as a crash would, and lets its writes land.
async fn crash(log: PartitionLog) {
    drop(log);
    glommio::timer::sleep(Duration::from_millis(20)).await;
}

#[test]
fn a_torn_marker_leaves_its_transaction_open() {
    for tear_data in [false, true] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_path_buf();
        run(move || async move {
            let storage = common::disk_storage(&root).await;
            let log = PartitionLog::open(&storage, &partition_dir(), config())
                .await
                .expect("open");
            let (first, second_at, marker_at) =
                write_transaction(&log, Some(TxnResult::Abort)).await;
            // Ended, durable: stable, and listed as aborted.
            let offsets = log.offsets();
            assert_eq!(offsets.last_stable_offset, offsets.high_watermark);
            assert_eq!(
                log.aborted_transactions(0, offsets.high_watermark)
                    .expect("aborted"),
                vec![AbortedTransaction {
                    producer_id: PRODUCER,
                    first_offset: first
                }]
            );
            crash(log).await;
            // The recovery point is at the log's start: all of it is replayed. Cut inside
            // the marker, or inside the transaction's second batch.
            let cut = if tear_data {
                second_at + 40
            } else {
                marker_at + 30
            };
            files::set_len(&segment_path(&root, 0, "log"), cut);

            let log = PartitionLog::open(&storage, &partition_dir(), config())
                .await
                .expect("reopen");
            let offsets = log.offsets();
            assert_eq!(
                offsets.last_stable_offset, first,
                "the transaction is open again"
            );
            assert!(offsets.high_watermark > first);
            assert!(log
                .aborted_transactions(0, offsets.high_watermark)
                .expect("aborted")
                .is_empty());
            let read = log.read_committed(0, 1 << 20).await.expect("read");
            let batches = split_batches(&read.records.chunks);
            assert_eq!(batches.last().map(|b| b.next_offset), Some(first));
            // The transaction can still end; a data batch outside it cannot come first.
            let stray = batch(9, 1, 10, NOW, Some(producer(if tear_data { 3 } else { 6 })));
            let refused = log.append(&stray, 0, NOW).await;
            assert!(
                matches!(
                    refused,
                    Err(EngineError::ProducerState(ProducerStateError::InvalidTxnState { first_offset, .. }))
                        if first_offset as u64 == first
                ),
                "{refused:?}"
            );
            let marker_offset = log
                .append_txn_marker(marker(TxnResult::Commit), 0, NOW)
                .await
                .expect("marker after recovery");
            log.flush_to(marker_offset + 1).await.expect("flush");
            let offsets = log.offsets();
            assert_eq!(offsets.last_stable_offset, offsets.high_watermark);
            let read = log.read_committed(0, 1 << 20).await.expect("read");
            let batches = split_batches(&read.records.chunks);
            assert!(read.aborted.is_empty());
            assert_eq!(
                visible_batches(&batches, &read.aborted).len(),
                if tear_data { 2 } else { 3 },
                "the plain batch and the committed data"
            );
            log.close().await.expect("close");
        });
    }
}

#[test]
fn an_abort_below_the_recovery_point_survives_a_torn_tail() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let storage = common::disk_storage(&root).await;
        let log = PartitionLog::open(&storage, &partition_dir(), config())
            .await
            .expect("open");
        let (first, _, marker_at) = write_transaction(&log, Some(TxnResult::Abort)).await;
        log.checkpoint().await.expect("checkpoint");
        let index = std::fs::read(segment_path(&root, 0, "txnindex")).expect("txnindex");
        assert_eq!(index.len(), 34);
        let tail = batch(5, 2, 300, NOW, None);
        log.append_durable(&tail, 0, NOW).await.expect("tail");
        crash(log).await;
        files::set_len(
            &segment_path(&root, 0, "log"),
            marker_at + 78 + tail.len() as u64 / 2,
        );

        let log = PartitionLog::open(&storage, &partition_dir(), config())
            .await
            .expect("reopen");
        let offsets = log.offsets();
        assert_eq!(offsets.last_stable_offset, offsets.high_watermark);
        assert_eq!(
            log.aborted_transactions(0, offsets.high_watermark)
                .expect("aborted"),
            vec![AbortedTransaction {
                producer_id: PRODUCER,
                first_offset: first
            }]
        );
        log.close().await.expect("close");
    });
}

#[test]
fn a_damaged_or_missing_txnindex_is_rebuilt() {
    for missing in [false, true] {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().to_path_buf();
        run(move || async move {
            let storage = common::disk_storage(&root).await;
            let log = PartitionLog::open(&storage, &partition_dir(), config())
                .await
                .expect("open");
            let (first, _, _) = write_transaction(&log, Some(TxnResult::Abort)).await;
            let marker_offset = log.offsets().log_end_offset - 1;
            // Seal segment 0 (with its index) and checkpoint past it.
            log.set_config(LogConfig {
                segment_age: Duration::ZERO,
                ..config()
            });
            log.roll_if_aged(NOW).await.expect("roll");
            log.set_config(config());
            log.append_durable(&batch(7, 1, 10, NOW, None), 0, NOW)
                .await
                .expect("append");
            log.close().await.expect("close");
            let path = segment_path(&root, 0, "txnindex");
            let expected = encode_entries(&[AbortedTxn {
                producer_id: PRODUCER,
                first_offset: first as i64,
                last_offset: marker_offset as i64,
                last_stable_offset: marker_offset as i64 + 1,
            }]);
            assert_eq!(std::fs::read(&path).expect("txnindex"), expected);
            if missing {
                std::fs::remove_file(&path).expect("remove");
            } else {
                // A producer id below zero: implausible.
                files::write_at(&path, 2, &[0xff]);
            }

            let log = PartitionLog::open(&storage, &partition_dir(), config())
                .await
                .expect("reopen");
            let end = log.offsets().high_watermark;
            assert_eq!(
                log.aborted_transactions(0, end).expect("aborted"),
                vec![AbortedTransaction {
                    producer_id: PRODUCER,
                    first_offset: first
                }]
            );
            assert_eq!(std::fs::read(&path).expect("txnindex rewritten"), expected);
            log.close().await.expect("close");
        });
    }
}
