//! Property: a cleaner that lost its partition never swaps its result in.
//!
//! A leader at fence epoch 1 writes a compacted log (repeated keys) and rolls. A takeover
//! at epoch 2 opens the same directory. The stale leader's cleaning pass then fails with
//! `Fenced` before its first swap: its live files are unchanged (its log still reads every
//! record), no `.cleaned` file is left, the new leader's log holds every record and nothing
//! of epoch 2 changed, and the stale handle refuses appends from then on. The new leader
//! then cleans its own log: the result carries its epoch in every file name.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use kaas_engine::batch;
use kaas_engine::compaction::{self, CleanerConfig, CompactionConfig, Throttle};
use kaas_engine::{EngineError, LogConfig, PartitionLog};

use common::{disk_storage, partition_dir, read_all, run};

const NOW: i64 = 1_700_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4_096,
        retention_age: None,
        compaction: Some(CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            ..CompactionConfig::default()
        }),
        ..LogConfig::default()
    }
}

async fn produce(log: &PartitionLog, epoch: i32) {
    for round in 0..40u32 {
        let key = format!("key-{}", round % 4).into_bytes();
        let value = format!("value-{round}-{}", "x".repeat(100)).into_bytes();
        let produced = batch::encode_batch_for_tests(&[(Some(&key), Some(&value))], NOW, -1, 0, -1);
        log.append_durable(&produced, epoch, NOW)
            .await
            .expect("append");
    }
    let mut rolled = log.config();
    rolled.segment_bytes = 1;
    log.set_config(rolled);
    log.roll_if_aged(NOW).await.expect("roll");
    log.set_config(config());
    log.checkpoint().await.expect("checkpoint");
}

/// File name → bytes, for every file of the partition directory.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(root.join(partition_dir()))
        .expect("list")
        .filter_map(|entry| {
            let entry = entry.ok()?;
            if !entry.file_type().ok()?.is_file() {
                return None;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            Some((name, std::fs::read(entry.path()).ok()?))
        })
        .collect()
}

async fn clean(log: &PartitionLog) -> kaas_engine::Result<Option<compaction::PassOutcome>> {
    let config = log.config().compaction.expect("compacted");
    compaction::clean_log(
        log,
        0,
        &config,
        &CleanerConfig::default(),
        &Throttle::new(None),
        NOW + 1_000,
    )
    .await
}

#[test]
fn stale_cleaner_is_fenced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    run(move || async move {
        let storage = disk_storage(&root).await;
        let stale = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), 1)
            .await
            .expect("open at 1");
        produce(&stale, 1).await;
        let before = read_all(&stale, 0, 1 << 20).await.len();
        assert_eq!(before, 40);

        let leader = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), 2)
            .await
            .expect("take over at 2");
        let epoch_two = |files: &BTreeMap<String, Vec<u8>>| -> BTreeMap<String, Vec<u8>> {
            files
                .iter()
                .filter(|(name, _)| name.contains("-e2"))
                .map(|(n, b)| (n.clone(), b.clone()))
                .collect()
        };
        let leader_files = epoch_two(&files(&root));
        assert!(!leader_files.is_empty());

        match clean(&stale).await {
            Err(EngineError::Fenced {
                epoch: 1,
                by_epoch: 2,
                ..
            }) => {}
            other => panic!("expected the stale cleaner to be fenced, got {other:?}"),
        }
        let after = files(&root);
        assert!(
            after.keys().all(|name| !name.ends_with(".cleaned")),
            "a fenced pass leaves no cleaned file: {:?}",
            after.keys().collect::<Vec<_>>()
        );
        assert_eq!(
            epoch_two(&after),
            leader_files,
            "epoch 2's files are untouched"
        );
        assert_eq!(read_all(&leader, 0, 1 << 20).await.len(), 40);
        let produced = batch::encode_batch_for_tests(&[(Some(b"k"), Some(b"v"))], NOW, -1, 0, -1);
        assert!(matches!(
            stale.append_durable(&produced, 1, NOW).await,
            Err(EngineError::Fenced { .. })
        ));

        // The leader's own pass writes only names of its epoch (once the takeover's
        // clean-up has removed what epoch 1 left).
        assert!(leader
            .remove_superseded_files(i64::MAX)
            .await
            .expect("clean-up"));
        let outcome = clean(&leader).await.expect("clean").expect("a pass");
        assert!(outcome.segments_swapped > 0, "{outcome:?}");
        for name in files(&root).keys() {
            let segment_file = [".log", ".index", ".timeindex"]
                .iter()
                .any(|ext| name.ends_with(ext));
            assert!(
                !segment_file || name.contains("-e2."),
                "{name} is not of epoch 2"
            );
        }
        let remaining = read_all_records(&leader).await;
        assert_eq!(remaining, 4, "one record per key once cleaned");
        leader.close().await.expect("close");
    });
}

async fn read_all_records(log: &PartitionLog) -> usize {
    let mut count = 0;
    let mut offset = log.offsets().log_start_offset;
    let end = log.offsets().high_watermark;
    while offset < end {
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
