//! Property: a tombstone in a segment inherited from an older epoch is dropped once
//! `delete.retention.ms` has passed since the pass that cleaned it, and the cleaned log
//! survives a reopen at the same epoch and a takeover at the next, record for record.
//!
//! A leader at fence epoch 1 writes 3 values for each of 8 keys and rolls, then tombstones
//! for 4 of them and rolls again (a segment of tombstones only, whose copy grows when its
//! batches get their horizons), so every record sits in sealed segments, and closes. A takeover at epoch 2
//! inherits all of them (hard links to epoch 1's files, bounded by their counted length).
//! Its pass at `NOW` (a fake clock) must keep one value per live key and the 4 tombstones,
//! and no older value of a deleted key. The log is reopened at epoch 2 (the cleaned
//! segments are read whole) and passes run from the cleaner checkpoint at
//! `NOW + retention - 1` (the tombstones stay) and `NOW + retention` (they go). A takeover at
//! epoch 3 then reads exactly the 4 live values.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use kaas_engine::batch;
use kaas_engine::compaction::{self, CleanerConfig, CompactionConfig, Throttle};
use kaas_engine::compression;
use kaas_engine::{LogConfig, PartitionLog};

use common::{disk_storage, partition_dir, run};

const NOW: i64 = 1_700_000_000_000;
const RETENTION_MS: i64 = 60_000;
const KEYS: u32 = 8;
const DELETED: u32 = 4;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        retention_age: None,
        compaction: Some(CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            delete_retention: Duration::from_millis(RETENTION_MS as u64),
            ..CompactionConfig::default()
        }),
        ..LogConfig::default()
    }
}

/// Every record of the log: offset → (key, value; `None` for a tombstone).
type Records = BTreeMap<u64, (String, Option<Vec<u8>>)>;

async fn records(log: &PartitionLog) -> Records {
    let mut out = Records::new();
    let mut offset = log.offsets().log_start_offset;
    while offset < log.offsets().high_watermark {
        let fetched = log.read(offset, 1 << 20).await.expect("read");
        let mut next = offset;
        for chunk in &fetched.chunks {
            for found in batch::scan_batches(chunk, 0) {
                let header = found.header;
                let bytes = &chunk[found.position as usize..][..found.total_len];
                let mut plain = Vec::new();
                compression::decompress(
                    header.codec().expect("codec"),
                    &bytes[batch::BATCH_HEADER_LEN..],
                    &mut plain,
                    1 << 20,
                )
                .expect("decompress");
                for record in
                    compaction::records::walk(&plain, header.records_count).expect("records")
                {
                    let at = header.base_offset as u64 + record.offset_delta as u64;
                    let key = String::from_utf8_lossy(record.key.expect("key")).into_owned();
                    let value = (!record.tombstone).then(|| record.body.to_vec());
                    out.insert(at, (key, value));
                }
                next = next.max(header.next_offset() as u64);
            }
        }
        assert!(next > offset, "no progress at {offset}");
        offset = next;
    }
    out
}

fn tombstones(records: &Records) -> Vec<&str> {
    records
        .values()
        .filter(|(_, value)| value.is_none())
        .map(|(key, _)| key.as_str())
        .collect()
}

fn keys(records: &Records) -> Vec<&str> {
    records.values().map(|(key, _)| key.as_str()).collect()
}

async fn roll(log: &PartitionLog) {
    let mut rolled = log.config();
    rolled.segment_bytes = 1;
    log.set_config(rolled);
    log.roll_if_aged(NOW).await.expect("roll");
    log.set_config(config());
    // Waits for the roll's seal: only sealed segments are cleanable.
    log.checkpoint().await.expect("checkpoint");
}

async fn clean(log: &PartitionLog, now_ms: i64) -> compaction::PassOutcome {
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
        now_ms,
    )
    .await
    .expect("clean")
    .expect("a pass")
}

#[test]
fn compaction_drops_inherited_tombstones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    run(move || async move {
        let storage = disk_storage(&root).await;
        let first = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), 1)
            .await
            .expect("open at 1");
        for version in 0..3 {
            for key in 0..KEYS {
                let key = format!("key-{key}").into_bytes();
                let value = format!("value-{version}-{}", "v".repeat(60)).into_bytes();
                let produced =
                    batch::encode_batch_for_tests(&[(Some(&key), Some(&value))], NOW, -1, 0, -1);
                first
                    .append_durable(&produced, 1, NOW)
                    .await
                    .expect("append");
            }
        }
        roll(&first).await;
        // A segment of tombstones only: cleaning removes nothing from it, so giving its
        // batches their horizons makes its copy longer than the inherited file.
        for key in 0..DELETED {
            let key = format!("key-{key}").into_bytes();
            let produced = batch::encode_batch_for_tests(&[(Some(&key), None)], NOW, -1, 0, -1);
            first
                .append_durable(&produced, 1, NOW)
                .await
                .expect("append");
        }
        roll(&first).await;
        let end = first.offsets().log_end_offset;
        first.close().await.expect("close");

        let leader = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), 2)
            .await
            .expect("take over at 2");
        let outcome = clean(&leader, NOW).await;
        assert!(outcome.segments_swapped > 0, "{outcome:?}");
        assert_eq!(
            outcome.earliest_delete_horizon,
            Some(NOW + RETENTION_MS),
            "the inherited tombstones got their horizon in this pass: {outcome:?}"
        );
        let cleaned = records(&leader).await;
        assert_eq!(
            tombstones(&cleaned),
            vec!["key-0", "key-1", "key-2", "key-3"]
        );
        assert_eq!(
            keys(&cleaned),
            vec!["key-4", "key-5", "key-6", "key-7", "key-0", "key-1", "key-2", "key-3"],
            "one record per key, the latest"
        );
        leader.close().await.expect("close");

        // The cleaned copies (longer than the inherited files once they carry horizons)
        // count whole after a reopen at the same epoch.
        let leader = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), 2)
            .await
            .expect("reopen at 2");
        assert_eq!(leader.offsets().log_end_offset, end);
        assert_eq!(
            records(&leader).await,
            cleaned,
            "a reopen reads the same log"
        );
        clean(&leader, NOW + RETENTION_MS - 1).await;
        assert_eq!(
            records(&leader).await,
            cleaned,
            "tombstones stay until their horizon"
        );
        clean(&leader, NOW + RETENTION_MS).await;
        let live = records(&leader).await;
        assert!(tombstones(&live).is_empty(), "{live:?}");
        assert_eq!(keys(&live), vec!["key-4", "key-5", "key-6", "key-7"]);
        let expected: Records = cleaned
            .into_iter()
            .filter(|(_, (_, value))| value.is_some())
            .collect();
        assert_eq!(live, expected, "the live values are untouched");
        leader.close().await.expect("close");

        let next = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), 3)
            .await
            .expect("take over at 3");
        assert_eq!(next.offsets().log_end_offset, end);
        assert_eq!(
            records(&next).await,
            expected,
            "a takeover reads the same log"
        );
        next.close().await.expect("close");
    });
}
