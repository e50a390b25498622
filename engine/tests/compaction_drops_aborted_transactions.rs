//! Property: compaction treats transactions as Kafka's cleaner does, so a read-committed
//! consumer of a compacted log loses nothing committed.
//!
//! A compacted log holds plain records, a committed transaction, an aborted one writing
//! newer values for some of the same keys, and an open transaction (past the last stable
//! offset) writing others, each in its own small segments. After a cleaning pass:
//!
//! - the aborted transaction's records are gone (its batches removed, or left as empty
//!   headers where a batch must stay), and its records did not count as the latest of their
//!   keys: the committed values they would have superseded are still there;
//! - the open transaction's batches are byte for byte as they were, and so is everything
//!   from the last stable offset on; the last stable offset has not moved;
//! - every transaction marker is still there;
//! - a read-committed consumer sees, for every key, its latest committed value.
//!
//! Then the open transaction commits, and the next pass treats its records as any others.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use kaas_engine::batch::txn_marker::TxnResult;
use kaas_engine::batch::{self, BatchHeader, BATCH_HEADER_LEN, TRANSACTIONAL_MASK};
use kaas_engine::compaction::{self, records, CleanerConfig, CompactionConfig, Throttle};
use kaas_engine::producer_state::MarkerEpochCheck;
use kaas_engine::{LogConfig, PartitionLog, Storage, TxnMarker};

use common::read_committed::visible_batches;
use common::{partition_dir, read_all, run, split_batches, ReadBatch};

const NOW: i64 = 1_700_000_000_000;
const COMMITTED: i64 = 1;
const ABORTED: i64 = 2;
const OPEN: i64 = 3;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 700,
        retention_age: None,
        compaction: Some(CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            ..CompactionConfig::default()
        }),
        ..LogConfig::default()
    }
}

/// A batch of `keys`, each with a 100-byte value: plain (`producer_id` -1) or
/// transactional.
fn keyed(keys: &[&str], producer_id: i64, sequence: i32) -> Vec<u8> {
    let value = [7u8; 100];
    let pairs: Vec<batch::TestRecord<'_>> = keys
        .iter()
        .map(|k| (Some(k.as_bytes()), Some(&value[..])))
        .collect();
    let (epoch, sequence) = if producer_id < 0 {
        (-1, -1)
    } else {
        (0, sequence)
    };
    let mut bytes = batch::encode_batch_for_tests(&pairs, NOW, producer_id, epoch, sequence);
    if producer_id >= 0 {
        let attributes = TRANSACTIONAL_MASK;
        bytes[batch::ATTRIBUTES_POS..][..2].copy_from_slice(&attributes.to_be_bytes());
        let crc = batch::compute_crc(&bytes);
        bytes[batch::CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
    }
    bytes
}

fn end(producer_id: i64, result: TxnResult) -> TxnMarker {
    TxnMarker {
        producer_id,
        producer_epoch: 0,
        coordinator_epoch: 0,
        result,
        epoch_check: MarkerEpochCheck::AtLeastCurrent,
    }
}

/// Each record's offset and key in `batches`.
fn keys_of(batches: &[ReadBatch]) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    for found in batches {
        let header = BatchHeader::parse(&found.bytes).expect("header");
        if header.is_control() {
            continue;
        }
        let section = &found.bytes[BATCH_HEADER_LEN..];
        for record in records::walk(section, header.records_count).expect("records") {
            let key = String::from_utf8(record.key.expect("keyed").to_vec()).expect("utf-8");
            out.push((header.base_offset as u64 + record.offset_delta as u64, key));
        }
    }
    out
}

/// The latest record of every key a read-committed consumer of the whole log sees.
async fn committed_latest(log: &PartitionLog) -> BTreeMap<String, u64> {
    let stable = log.last_stable_offset();
    let mut latest = BTreeMap::new();
    let mut offset = 0;
    while offset < stable {
        let read = log.read_committed(offset, 1 << 20).await.expect("read");
        let batches = split_batches(&read.records.chunks);
        offset = batches.last().expect("batches").next_offset;
        let visible = visible_batches(&batches, &read.aborted);
        let kept: Vec<ReadBatch> = batches
            .into_iter()
            .filter(|b| visible.contains(&b.base_offset))
            .collect();
        for (offset, key) in keys_of(&kept) {
            latest.insert(key, offset);
        }
    }
    latest
}

async fn roll(log: &PartitionLog) {
    log.set_config(LogConfig {
        segment_age: Duration::ZERO,
        ..config()
    });
    log.roll_if_aged(NOW).await.expect("roll");
    log.set_config(config());
    // Waits for the roll's seal: only sealed segments are cleanable.
    log.checkpoint().await.expect("checkpoint");
}

async fn clean(log: &PartitionLog) {
    let config = log.config().compaction.expect("compacted");
    let first_dirty = compaction::load_checkpoint(log)
        .await
        .expect("checkpoint")
        .cleaned_up_to;
    compaction::clean_log(
        log,
        first_dirty,
        &config,
        &CleanerConfig::default(),
        &Throttle::new(None),
        NOW,
    )
    .await
    .expect("clean")
    .expect("a pass");
}

fn control_batches(batches: &[ReadBatch]) -> usize {
    batches
        .iter()
        .filter(|b| BatchHeader::parse(&b.bytes).expect("header").is_control())
        .count()
}

async fn scenario(storage: Storage) {
    let log = PartitionLog::open(&storage, &partition_dir(), config())
        .await
        .expect("open");
    let append = |bytes: Vec<u8>| {
        let log = log.clone();
        async move {
            log.append(&bytes, 0, NOW)
                .await
                .expect("append")
                .base_offset
        }
    };
    append(keyed(&["a", "b", "c", "d"], -1, -1)).await;
    append(keyed(&["a", "b"], COMMITTED, 0)).await;
    log.append_txn_marker(end(COMMITTED, TxnResult::Commit), 0, NOW)
        .await
        .expect("commit");
    append(keyed(&["a", "c"], ABORTED, 0)).await;
    append(keyed(&["c"], ABORTED, 2)).await;
    log.append_txn_marker(end(ABORTED, TxnResult::Abort), 0, NOW)
        .await
        .expect("abort");
    append(keyed(&["d"], -1, -1)).await;
    let open_first = append(keyed(&["b", "d"], OPEN, 0)).await;
    append(keyed(&["e"], -1, -1)).await;
    roll(&log).await;
    append(keyed(&["f"], -1, -1)).await;
    log.flush().await.expect("flush");
    assert_eq!(log.last_stable_offset(), open_first);
    assert!(log.segment_count() > 3, "the scenario spans segments");

    let before = read_all(&log, 0, 1 << 20).await;
    let expected = committed_latest(&log).await;
    assert_eq!(
        expected.keys().map(String::as_str).collect::<Vec<_>>(),
        ["a", "b", "c", "d"]
    );
    clean(&log).await;

    let after = read_all(&log, 0, 1 << 20).await;
    assert_eq!(log.last_stable_offset(), open_first);
    assert_eq!(
        committed_latest(&log).await,
        expected,
        "latest committed values"
    );
    assert_eq!(
        control_batches(&after),
        control_batches(&before),
        "markers kept"
    );
    let aborted_records: Vec<(u64, String)> = keys_of(
        &after
            .iter()
            .filter(|b| BatchHeader::parse(&b.bytes).expect("header").producer_id == ABORTED)
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert!(
        aborted_records.is_empty(),
        "aborted records left: {aborted_records:?}"
    );
    let unstable = |batches: &[ReadBatch]| -> Vec<(u64, Vec<u8>)> {
        batches
            .iter()
            .filter(|b| b.base_offset >= open_first)
            .map(|b| (b.base_offset, b.bytes.to_vec()))
            .collect()
    };
    assert_eq!(
        unstable(&after),
        unstable(&before),
        "past the last stable offset"
    );
    let superseded = keys_of(&after)
        .into_iter()
        .filter(|(offset, key)| *offset < open_first && expected.get(key) != Some(offset))
        .count();
    assert_eq!(
        superseded, 0,
        "only the latest committed record of each key is left"
    );

    // The open transaction commits: its records are the latest of their keys from now on.
    log.append_txn_marker(end(OPEN, TxnResult::Commit), 0, NOW)
        .await
        .expect("commit the open transaction");
    roll(&log).await;
    append(keyed(&["g"], -1, -1)).await;
    log.flush().await.expect("flush");
    clean(&log).await;
    let latest = committed_latest(&log).await;
    assert_eq!(latest.get("b"), Some(&open_first));
    assert_eq!(latest.get("d"), Some(&(open_first + 1)));
    log.close().await.expect("close");
}

#[test]
fn compaction_drops_aborted_transactions_in_memory() {
    run(|| scenario(Storage::memory()));
}

#[test]
fn compaction_drops_aborted_transactions_on_disk() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move { scenario(common::disk_storage(&root).await).await });
}
