//! Property: after a restart, and after a takeover, the shard cleaner's first pass starts
//! where the last pass ended (the log's `cleaner-offset-checkpoint`), so it maps only the
//! dirty part of the log.
//!
//! Three runs of a broker over one data directory on disk, each with a new `LogManager` and
//! `ShardCleaner`: a run at epoch 0 writes 8 keys × 10 versions in sealed segments and
//! cleans them; a restart at epoch 0 and then a takeover at epoch 1 each append 2 more
//! versions of every key (new sealed segments) before their cleaner starts. Before each
//! of those passes the checkpoint names the previous pass's end, the dirty ratio is that of
//! the new segments only, and the pass reads, by the cleaner's own counter, the dirty
//! bytes once to map them plus every cleanable byte once to rewrite — not the whole log
//! twice, as a pass starting at the log start does. Each pass leaves one record per key.

mod common;

use std::rc::Rc;
use std::time::Duration;

use kaas_engine::batch;
use kaas_engine::compaction::{self, CleanerConfig, CompactionConfig, ShardCleaner};
use kaas_engine::log_manager::now_ms;
use kaas_engine::{LogConfig, LogManager, PartitionId, PartitionLog};

use common::{disk_storage, run};

const KEYS: u32 = 8;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2_048,
        retention_age: None,
        compaction: Some(CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            ..CompactionConfig::default()
        }),
        ..LogConfig::default()
    }
}

async fn append_versions(log: &PartitionLog, versions: std::ops::Range<u32>, epoch: i32) {
    let now = now_ms();
    for version in versions {
        for key in 0..KEYS {
            let key = format!("key-{key}").into_bytes();
            let value = format!("value-{version}-{}", "v".repeat(80)).into_bytes();
            let produced =
                batch::encode_batch_for_tests(&[(Some(&key), Some(&value))], now, -1, 0, -1);
            log.append_durable(&produced, epoch, now)
                .await
                .expect("append");
        }
    }
    let mut rolled = log.config();
    rolled.segment_bytes = 1;
    log.set_config(rolled);
    log.roll_if_aged(now).await.expect("roll");
    log.set_config(config());
    // Waits for the roll's seal: only sealed segments are cleanable.
    log.checkpoint().await.expect("checkpoint");
}

async fn records(log: &PartitionLog) -> usize {
    let mut count = 0;
    let mut offset = log.offsets().log_start_offset;
    while offset < log.offsets().high_watermark {
        let fetched = log.read(offset, 1 << 20).await.expect("read");
        let mut next = offset;
        for chunk in &fetched.chunks {
            for found in batch::scan_batches(chunk, 0) {
                count += found.header.records_count as usize;
                next = next.max(found.header.next_offset() as u64);
            }
        }
        assert!(next > offset);
        offset = next;
    }
    count
}

/// Runs the cleaner until it has made one pass; returns the bytes it read.
async fn one_pass(manager: &Rc<LogManager>) -> u64 {
    let cleaner = ShardCleaner::spawn(
        manager,
        CleanerConfig {
            backoff: Duration::from_millis(20),
            ..CleanerConfig::default()
        },
    );
    let mut waited = Duration::ZERO;
    while cleaner.stats().passes == 0 {
        assert!(waited < Duration::from_secs(20), "no pass within 20 s");
        glommio::timer::sleep(Duration::from_millis(10)).await;
        waited += Duration::from_millis(10);
    }
    // Nothing is dirty after the pass: the next rounds make none.
    glommio::timer::sleep(Duration::from_millis(100)).await;
    let stats = cleaner.stats();
    assert_eq!((stats.passes, stats.failed_passes), (1, 0), "{stats:?}");
    stats.bytes_read
}

/// One broker run: opens the log at `epoch`, appends `versions` of every key, checks the
/// checkpoint it starts from, cleans once; returns where the pass ended.
async fn broker_run(
    root: &std::path::Path,
    epoch: u32,
    versions: std::ops::Range<u32>,
    previous_end: Option<u64>,
) -> u64 {
    let manager = Rc::new(LogManager::new(disk_storage(root).await));
    let id = PartitionId::new("compacted", 0);
    let log = manager
        .open_at_epoch(&id, config(), epoch)
        .await
        .expect("open");
    let before = log.offsets().log_end_offset;
    append_versions(&log, versions, epoch as i32).await;
    let checkpoint = compaction::load_checkpoint(&log).await.expect("checkpoint");
    assert_eq!(
        checkpoint.cleaned_up_to,
        previous_end.unwrap_or(0),
        "the pass starts where the last one ended"
    );
    let compaction = config().compaction.expect("compacted");
    let dirty = compaction::dirty_state(&log, checkpoint.cleaned_up_to, &compaction, now_ms())
        .expect("dirty state");
    assert_eq!(dirty.cleanable_end, log.offsets().log_end_offset);
    let expected_read = match previous_end {
        Some(_) => {
            assert!(dirty.clean_bytes > 0 && dirty.dirty_bytes > 0, "{dirty:?}");
            assert!(dirty.ratio() < 1.0, "{dirty:?}");
            // Only the segments appended in this run are dirty.
            assert_eq!(previous_end, Some(before));
            dirty.dirty_bytes + dirty.clean_bytes + dirty.dirty_bytes
        }
        None => 2 * dirty.dirty_bytes,
    };
    let read = one_pass(&manager).await;
    assert_eq!(
        read, expected_read,
        "bytes read: the dirty part to map, everything cleanable to rewrite ({dirty:?})"
    );
    assert_eq!(records(&log).await, KEYS as usize, "one record per key");
    let end = compaction::load_checkpoint(&log)
        .await
        .expect("checkpoint")
        .cleaned_up_to;
    assert_eq!(end, log.offsets().log_end_offset);
    manager.close_all().await.expect("close");
    end
}

#[test]
fn compaction_resumes_from_checkpoint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    run(move || async move {
        let first = broker_run(&root, 0, 0..10, None).await;
        let restarted = broker_run(&root, 0, 10..12, Some(first)).await;
        broker_run(&root, 1, 12..14, Some(restarted)).await;
    });
}
