//! Property: the shard's background cleaner compacts the open logs that are due, and only
//! those, and reports what it did as counters.
//!
//! Two logs with the same records (8 keys, 10 versions each, in sealed segments): one
//! compacted, one not. With the cleaner running, the compacted one ends with one record per
//! key and the other keeps all 80; the counters show a pass, its bytes, the compacted log's
//! time of last clean and a dirty ratio of 0 once clean.

mod common;

use std::rc::Rc;
use std::time::Duration;

use kaas_engine::batch;
use kaas_engine::compaction::{CleanerConfig, CompactionConfig, ShardCleaner};
use kaas_engine::{LogConfig, LogManager, PartitionId, PartitionLog, Storage};

use common::run;

const NOW: i64 = 1_700_000_000_000;

fn config(compacted: bool) -> LogConfig {
    LogConfig {
        segment_bytes: 2_048,
        retention_age: None,
        compaction: compacted.then(CompactionConfig::default),
        ..LogConfig::default()
    }
}

async fn fill(log: &PartitionLog) {
    for version in 0..10 {
        for key in 0..8 {
            let key = format!("key-{key}").into_bytes();
            let value = format!("value-{version}").into_bytes();
            let produced =
                batch::encode_batch_for_tests(&[(Some(&key), Some(&value))], NOW, -1, 0, -1);
            log.append_durable(&produced, 0, NOW).await.expect("append");
        }
    }
    let mut rolled = log.config();
    rolled.segment_bytes = 1;
    log.set_config(rolled);
    log.roll_if_aged(NOW).await.expect("roll");
    let mut restored = log.config();
    restored.segment_bytes = 2_048;
    log.set_config(restored);
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

#[test]
fn shard_cleaner_compacts_due_logs() {
    run(|| async {
        let manager = Rc::new(LogManager::new(Storage::memory()));
        let compacted_id = PartitionId::new("compacted", 0);
        let plain_id = PartitionId::new("plain", 0);
        let compacted = manager
            .open(&compacted_id, config(true))
            .await
            .expect("open");
        let plain = manager.open(&plain_id, config(false)).await.expect("open");
        fill(&compacted).await;
        fill(&plain).await;
        let cleaner = ShardCleaner::spawn(
            &manager,
            CleanerConfig {
                backoff: Duration::from_millis(20),
                ..CleanerConfig::default()
            },
        );
        let mut waited = Duration::ZERO;
        while cleaner.stats().passes == 0 {
            assert!(waited < Duration::from_secs(10), "no pass within 10 s");
            glommio::timer::sleep(Duration::from_millis(20)).await;
            waited += Duration::from_millis(20);
        }
        assert_eq!(records(&compacted).await, 8, "one record per key");
        assert_eq!(
            records(&plain).await,
            80,
            "a log that is not compacted keeps all"
        );
        // The next round sees the compacted log clean.
        glommio::timer::sleep(Duration::from_millis(100)).await;
        let stats = cleaner.stats();
        assert!(stats.bytes_read > 0 && stats.bytes_written > 0, "{stats:?}");
        assert!(stats.segments_swapped > 0);
        let entry = stats
            .partitions
            .get(&compacted_id)
            .expect("compacted log reported");
        assert!(entry.last_clean_ms.is_some());
        assert_eq!(entry.dirty_ratio, 0.0, "{stats:?}");
        assert!(
            !stats.partitions.contains_key(&plain_id),
            "only compacted logs are reported"
        );
        assert_eq!(stats.failed_passes, 0);
        manager.close_all().await.expect("close");
    });
}
