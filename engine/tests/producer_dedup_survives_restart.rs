//! Property: idempotent-producer state survives a restart. After a clean close, or a crash
//! (dropping the log without closing it) once the batches were flushed, with or without a
//! checkpoint in between (so the state comes from a snapshot plus replay, or from replay
//! alone), a retry of any of a producer's five newest batches is answered as a duplicate with
//! the offsets it got the first time and appends nothing; a batch that skips a sequence
//! number is refused as out of order; a batch from an older producer epoch is refused as
//! fenced; and the producer carries on with its next sequence, or restarts at sequence 0
//! with a newer epoch.

mod common;

use kaas_engine::producer_state::ProducerStateError;
use kaas_engine::{AppendOutcome, EngineError, LogConfig, PartitionLog, Storage};

use common::{batch, partition_dir, read_all, ProducerSpec};

const PRODUCER: i64 = 42;
const OTHER_PRODUCER: i64 = 43;
const EPOCH: i16 = 3;
const RECORDS: i32 = 3;

#[derive(Clone, Copy, Debug)]
enum Restart {
    Clean,
    /// Flush, then drop without closing.
    Crash,
    /// Checkpoint half-way, flush the rest, then drop without closing.
    CrashAfterCheckpoint,
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2_048,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

async fn open(storage: &Storage) -> PartitionLog {
    PartitionLog::open(storage, &partition_dir(), config())
        .await
        .expect("open")
}

fn idempotent(seed: u64, producer_id: i64, epoch: i16, base_sequence: i32) -> Vec<u8> {
    batch(
        seed,
        RECORDS as usize,
        120,
        1_000 + seed as i64,
        Some(ProducerSpec {
            producer_id,
            epoch,
            base_sequence,
        }),
    )
}

async fn restart(storage: &Storage, log: PartitionLog, how: Restart) -> PartitionLog {
    match how {
        Restart::Clean => log.close().await.expect("close"),
        Restart::Crash | Restart::CrashAfterCheckpoint => {
            log.flush().await.expect("flush");
            drop(log);
        }
    }
    open(storage).await
}

async fn expect_duplicate(log: &PartitionLog, produced: &[u8], original: AppendOutcome) {
    let end = log.offsets().log_end_offset;
    let outcome = log.append(produced, 9, 0).await.expect("retry");
    assert!(outcome.duplicate, "retry not recognised: {outcome:?}");
    assert_eq!(
        (outcome.base_offset, outcome.last_offset),
        (original.base_offset, original.last_offset)
    );
    assert_eq!(log.offsets().log_end_offset, end, "a retry appended data");
}

async fn expect_refused(log: &PartitionLog, produced: &[u8], fenced: bool) {
    let end = log.offsets().log_end_offset;
    let result = log.append(produced, 9, 0).await;
    match (&result, fenced) {
        (Err(EngineError::ProducerState(ProducerStateError::ProducerFenced { .. })), true)
        | (Err(EngineError::ProducerState(ProducerStateError::OutOfOrderSequence { .. })), false) =>
            {}
        _ => panic!(
            "expected {} but got {result:?}",
            if fenced { "fenced" } else { "out of order" }
        ),
    }
    assert_eq!(
        log.offsets().log_end_offset,
        end,
        "a refused batch appended data"
    );
}

async fn scenario(storage: Storage, how: Restart) {
    let log = open(&storage).await;
    let mut sent: Vec<(Vec<u8>, AppendOutcome)> = Vec::new();
    for i in 0..8u64 {
        let produced = idempotent(i, PRODUCER, EPOCH, i as i32 * RECORDS);
        let outcome = log.append(&produced, 1, 0).await.expect("append");
        assert!(!outcome.duplicate);
        sent.push((produced, outcome));
        // Another idempotent producer and a plain one in between.
        log.append(
            &idempotent(100 + i, OTHER_PRODUCER, 0, i as i32 * RECORDS),
            1,
            0,
        )
        .await
        .expect("append");
        log.append(&batch(200 + i, 2, 150, 1_000, None), 1, 0)
            .await
            .expect("append");
        if i == 4 && matches!(how, Restart::CrashAfterCheckpoint) {
            log.checkpoint().await.expect("checkpoint");
        }
    }
    assert!(log.segment_count() > 2, "batches span several segments");
    let end = log.offsets().log_end_offset;
    let log = restart(&storage, log, how).await;
    assert_eq!(
        log.offsets().log_end_offset,
        end,
        "{how:?} kept everything flushed"
    );

    // The five newest batches are remembered, the older ones are not.
    for (produced, original) in &sent[3..] {
        expect_duplicate(&log, produced, *original).await;
    }
    expect_refused(&log, &sent[2].0, false).await;
    expect_refused(
        &log,
        &idempotent(50, PRODUCER, EPOCH, 8 * RECORDS + 1),
        false,
    )
    .await;
    expect_refused(
        &log,
        &idempotent(51, PRODUCER, EPOCH - 1, 8 * RECORDS),
        true,
    )
    .await;

    let next = idempotent(52, PRODUCER, EPOCH, 8 * RECORDS);
    let next_outcome = log.append(&next, 1, 0).await.expect("next in sequence");
    assert!(!next_outcome.duplicate);
    assert_eq!(next_outcome.base_offset, end);

    // A newer epoch starts again at sequence 0 and fences the old one.
    expect_refused(&log, &idempotent(53, PRODUCER, EPOCH + 1, 5), false).await;
    let bumped = idempotent(54, PRODUCER, EPOCH + 1, 0);
    let bumped_outcome = log.append(&bumped, 1, 0).await.expect("new epoch");
    assert!(!bumped_outcome.duplicate);

    let log = restart(&storage, log, how).await;
    expect_duplicate(&log, &bumped, bumped_outcome).await;
    expect_refused(&log, &idempotent(55, PRODUCER, EPOCH, 9 * RECORDS), true).await;
    expect_refused(&log, &next, true).await;
    let after = log
        .append(&idempotent(56, PRODUCER, EPOCH + 1, RECORDS), 1, 0)
        .await
        .expect("next in the new epoch");
    assert_eq!(after.base_offset, bumped_outcome.last_offset + 1);

    // Nothing refused or retried left a trace: offsets are dense and every batch is whole.
    log.flush().await.expect("flush");
    let read = read_all(&log, 0, 1 << 20).await;
    assert_eq!(
        read.last().map(|b| b.next_offset),
        Some(after.last_offset + 1)
    );
    log.close().await.expect("close");
}

fn in_memory(how: Restart) {
    common::run(move || scenario(Storage::memory(), how));
}

fn on_disk(how: Restart) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        scenario(storage, how).await;
    });
}

#[test]
fn after_clean_close_in_memory() {
    in_memory(Restart::Clean);
}

#[test]
fn after_clean_close_on_disk() {
    on_disk(Restart::Clean);
}

#[test]
fn after_crash_in_memory() {
    in_memory(Restart::Crash);
}

#[test]
fn after_crash_on_disk() {
    on_disk(Restart::Crash);
}

#[test]
fn after_checkpoint_and_crash_in_memory() {
    in_memory(Restart::CrashAfterCheckpoint);
}

#[test]
fn after_checkpoint_and_crash_on_disk() {
    on_disk(Restart::CrashAfterCheckpoint);
}
