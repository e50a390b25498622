//! Property: retention (by time and by bytes) deletes whole sealed segments only, never the
//! active one, and moves the log start offset to the start of the first segment kept;
//! delete-records moves the log start offset to any offset at or below the high watermark,
//! deletes the segments wholly below it and is durable when it returns; reads below the
//! start fail with `OffsetOutOfRange`; `offset_for_timestamp` names the first record whose
//! timestamp is at or after the target and `None` past the largest timestamp. Each holds in
//! memory and on disk, and again after a clean or crash-like reopen.

mod common;

use std::time::Duration;

use kaas_engine::{EngineError, LogConfig, PartitionLog, Storage};

use common::{batch_with_timestamps, partition_dir, read_all, split_batches};

/// Batches appended by [`fill`]; four per segment, four records per batch.
const BATCHES: u64 = 20;
const RECORDS_PER_BATCH: u64 = 4;
const BATCHES_PER_SEGMENT: u64 = 4;
const OFFSETS_PER_SEGMENT: u64 = RECORDS_PER_BATCH * BATCHES_PER_SEGMENT;
const DELTAS: [i64; 4] = [0, 10, 20, 30];

/// Timestamp of record `record` of batch `batch`.
fn timestamp(batch: u64, record: u64) -> i64 {
    100_000 + 1_000 * batch as i64 + DELTAS[record as usize]
}

fn produced(batch: u64) -> Vec<u8> {
    batch_with_timestamps(batch, timestamp(batch, 0), &DELTAS)
}

fn batch_len() -> u64 {
    produced(0).len() as u64
}

fn config() -> LogConfig {
    LogConfig {
        // Room for exactly four batches: the fifth rolls.
        segment_bytes: BATCHES_PER_SEGMENT * batch_len() + 10,
        retention_age: None,
        tail_cache_bytes: 0,
        ..LogConfig::default()
    }
}

async fn open(storage: &Storage, config: LogConfig) -> PartitionLog {
    PartitionLog::open(storage, &partition_dir(), config)
        .await
        .expect("open")
}

/// A log holding [`BATCHES`] batches in five segments (the last one active), all flushed.
async fn fill(storage: &Storage) -> PartitionLog {
    let log = open(storage, config()).await;
    for i in 0..BATCHES {
        assert!(
            batch_len() == produced(i).len() as u64,
            "fixed-size batches"
        );
        let outcome = log.append(&produced(i), 1, 0).await.expect("append");
        assert_eq!(outcome.base_offset, i * RECORDS_PER_BATCH);
    }
    log.flush().await.expect("flush");
    assert_eq!(log.segment_count() as u64, BATCHES / BATCHES_PER_SEGMENT);
    log
}

#[derive(Clone, Copy, Debug)]
enum Restart {
    None,
    Clean,
    Crash,
}

const RESTARTS: [Restart; 3] = [Restart::None, Restart::Clean, Restart::Crash];

async fn restart(
    storage: &Storage,
    log: PartitionLog,
    how: Restart,
    config: LogConfig,
) -> PartitionLog {
    match how {
        Restart::None => log,
        Restart::Clean => {
            log.close().await.expect("close");
            open(storage, config).await
        }
        Restart::Crash => {
            drop(log);
            open(storage, config).await
        }
    }
}

async fn expect_out_of_range(log: &PartitionLog, offset: u64) {
    let result = log.read(offset, 1 << 20).await;
    assert!(
        matches!(result, Err(EngineError::OffsetOutOfRange { .. })),
        "read at {offset}: {result:?}"
    );
}

/// Checks the log holds exactly the batches from the one holding `start` to the end.
async fn expect_contents_from(log: &PartitionLog, start: u64) {
    assert_eq!(log.offsets().log_start_offset, start);
    let read = read_all(log, start, 1 << 20).await;
    let first_batch = start / RECORDS_PER_BATCH;
    assert_eq!(read.len() as u64, BATCHES - first_batch);
    for (found, i) in read.iter().zip(first_batch..) {
        assert_eq!(found.base_offset, i * RECORDS_PER_BATCH);
        assert_eq!(
            &found.bytes[..],
            &common::stamped(&produced(i), i * RECORDS_PER_BATCH, 1)[..]
        );
    }
    if start > 0 {
        expect_out_of_range(log, start - 1).await;
        expect_out_of_range(log, 0).await;
    }
}

async fn time_retention(storage: Storage, how: Restart) {
    let log = fill(&storage).await;
    let with_age = LogConfig {
        retention_age: Some(Duration::from_millis(1_000)),
        ..config()
    };
    let log = restart(&storage, log, how, with_age.clone()).await;
    log.set_config(with_age);
    // The cut-off falls inside batch 6, in the second segment: only the first segment
    // (batches 0-3) is wholly older, although batch 4, the first of the second segment, is
    // older too.
    let now = timestamp(6, 1) + 1_000 + 5;
    let size = log.size_bytes();
    assert_eq!(
        log.enforce_retention(now).await.expect("retention"),
        1,
        "{how:?}"
    );
    assert_eq!(log.offsets().log_start_offset, OFFSETS_PER_SEGMENT);
    assert_eq!(log.size_bytes(), size - BATCHES_PER_SEGMENT * batch_len());
    expect_contents_from(&log, OFFSETS_PER_SEGMENT).await;

    // Far in the future every sealed segment has expired, but the active one stays.
    assert_eq!(
        log.enforce_retention(i64::MAX / 2)
            .await
            .expect("retention"),
        3
    );
    let active_base = (BATCHES / BATCHES_PER_SEGMENT - 1) * OFFSETS_PER_SEGMENT;
    assert_eq!(log.segment_count(), 1);
    expect_contents_from(&log, active_base).await;
    let log = restart(&storage, log, Restart::Clean, config()).await;
    expect_contents_from(&log, active_base).await;
    log.close().await.expect("close");
}

async fn byte_retention(storage: Storage, how: Restart) {
    let log = fill(&storage).await;
    let log = restart(&storage, log, how, config()).await;
    let limit = 9 * batch_len() + 1;
    log.set_config(LogConfig {
        retention_bytes: Some(limit),
        ..config()
    });
    // 20 batches: dropping the first segment leaves 16 (≥ the limit), the second 12 (≥ the
    // limit); dropping the third would leave 8, below it.
    assert_eq!(
        log.enforce_retention(0).await.expect("retention"),
        2,
        "{how:?}"
    );
    assert_eq!(log.size_bytes(), 12 * batch_len());
    expect_contents_from(&log, 2 * OFFSETS_PER_SEGMENT).await;
    assert_eq!(log.enforce_retention(0).await.expect("retention"), 0);

    log.set_config(LogConfig {
        retention_bytes: Some(0),
        ..config()
    });
    assert_eq!(log.enforce_retention(0).await.expect("retention"), 2);
    assert_eq!(
        log.segment_count(),
        1,
        "the active segment is never deleted"
    );
    expect_contents_from(&log, 4 * OFFSETS_PER_SEGMENT).await;
    let log = restart(&storage, log, Restart::Clean, config()).await;
    expect_contents_from(&log, 4 * OFFSETS_PER_SEGMENT).await;
    log.close().await.expect("close");
}

async fn delete_records(storage: Storage, how: Restart) {
    let log = fill(&storage).await;
    // Offset 37 is inside batch 9, in the third segment.
    assert_eq!(log.delete_records(37).await.expect("delete"), 37);
    assert_eq!(
        log.segment_count() as u64,
        BATCHES / BATCHES_PER_SEGMENT - 2
    );
    expect_contents_from(&log, 37).await;
    let fetched = log.read(37, 1).await.expect("read at the start");
    assert_eq!(split_batches(&fetched.chunks)[0].base_offset, 36);
    assert_eq!(
        log.offset_for_timestamp(0).await.expect("by time"),
        Some((37, timestamp(9, 3))),
        "nothing below the start is found by time"
    );

    // A lower offset does not move the start back; one past the high watermark is refused.
    assert_eq!(log.delete_records(10).await.expect("delete"), 37);
    let high_watermark = log.offsets().high_watermark;
    let past = log.delete_records(high_watermark + 1).await;
    assert!(
        matches!(past, Err(EngineError::OffsetOutOfRange { .. })),
        "{past:?}"
    );

    let log = restart(&storage, log, how, config()).await;
    expect_contents_from(&log, 37).await;
    assert_eq!(log.delete_records(50).await.expect("delete"), 50);
    let log = restart(&storage, log, how, config()).await;
    expect_contents_from(&log, 50).await;
    assert_eq!(
        log.delete_records(high_watermark).await.expect("delete"),
        high_watermark
    );
    let log = restart(&storage, log, how, config()).await;
    assert_eq!(log.offsets().log_start_offset, high_watermark);
    let fetched = log
        .read(high_watermark, 1 << 20)
        .await
        .expect("read at the end");
    assert!(fetched.is_empty());
    log.close().await.expect("close");
}

/// The offset and timestamp of the first record whose timestamp is at least `target`, if
/// any (Kafka answers with that record's own timestamp).
fn expected_offset_for(target: i64) -> Option<(u64, i64)> {
    (0..BATCHES).find_map(|batch| {
        (0..RECORDS_PER_BATCH)
            .find(|&record| timestamp(batch, record) >= target)
            .map(|record| (batch * RECORDS_PER_BATCH + record, timestamp(batch, record)))
    })
}

async fn offsets_by_time(storage: Storage, how: Restart) {
    let log = fill(&storage).await;
    let log = restart(&storage, log, how, config()).await;
    let last = timestamp(BATCHES - 1, 3);
    let mut target = timestamp(0, 0) - 50;
    while target <= last + 50 {
        assert_eq!(
            log.offset_for_timestamp(target).await.expect("by time"),
            expected_offset_for(target),
            "target {target} ({how:?})"
        );
        target += 7;
    }
    // A batch that is not durable yet is not found either.
    let later = batch_with_timestamps(99, last + 1_000, &[0]);
    log.append(&later, 1, 0).await.expect("append");
    assert_eq!(
        log.offset_for_timestamp(last + 1).await.expect("by time"),
        None
    );
    log.flush().await.expect("flush");
    assert_eq!(
        log.offset_for_timestamp(last + 1).await.expect("by time"),
        Some((BATCHES * RECORDS_PER_BATCH, last + 1_000))
    );
    log.close().await.expect("close");
}

fn in_memory<F: std::future::Future<Output = ()> + 'static>(test: fn(Storage, Restart) -> F) {
    for how in RESTARTS {
        common::run(move || test(Storage::memory(), how));
    }
}

fn on_disk<F: std::future::Future<Output = ()> + 'static>(test: fn(Storage, Restart) -> F) {
    for how in RESTARTS {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        common::run(move || async move {
            let storage = common::disk_storage(&root).await;
            test(storage, how).await;
        });
    }
}

#[test]
fn time_retention_in_memory() {
    in_memory(time_retention);
}

#[test]
fn time_retention_on_disk() {
    on_disk(time_retention);
}

#[test]
fn byte_retention_in_memory() {
    in_memory(byte_retention);
}

#[test]
fn byte_retention_on_disk() {
    on_disk(byte_retention);
}

#[test]
fn delete_records_in_memory() {
    in_memory(delete_records);
}

#[test]
fn delete_records_on_disk() {
    on_disk(delete_records);
}

#[test]
fn offset_for_timestamp_in_memory() {
    in_memory(offsets_by_time);
}

#[test]
fn offset_for_timestamp_on_disk() {
    on_disk(offsets_by_time);
}
