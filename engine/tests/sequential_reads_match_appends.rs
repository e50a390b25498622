//! A consumer reading a log from disk, fetch after fetch, gets exactly the batches that were
//! appended — while appends continue, across segment rolls, with reads of varying size and
//! with seeks back (the reads the log reads ahead for, and the ones that miss the window).

mod common;

use kaas_engine::batch::scan_batches;
use kaas_engine::{LogConfig, PartitionLog};

use common::{partition_dir, stamped};

/// Batch `i`: one record of 50 B to 5 KB.
fn batch(i: u64) -> Vec<u8> {
    common::batch(i, 1, 50 + (i as usize * 37) % 5000, 1_000 + i as i64, None)
}

async fn append(log: &PartitionLog, from: u64, to: u64) {
    for i in from..to {
        let outcome = log.append(&batch(i), 0, 10_000).await.expect("append");
        assert_eq!(outcome.base_offset, i);
    }
    log.flush().await.expect("flush");
}

/// Reads from `offset` and checks every batch served; returns the offset after them.
async fn read_and_check(log: &PartitionLog, offset: u64, max_bytes: usize) -> u64 {
    let fetched = log.read(offset, max_bytes).await.expect("read");
    let mut next = offset;
    for chunk in &fetched.chunks {
        let mut position = 0usize;
        for scanned in scan_batches(chunk, 0) {
            let base = scanned.header.base_offset as u64;
            assert_eq!(base, next, "batches are dense from the offset asked for");
            let len = scanned.header.total_len();
            assert_eq!(
                &chunk[position..position + len],
                &stamped(&batch(base), base, 0)[..],
                "batch {base} is what was appended"
            );
            position += len;
            next += 1;
        }
    }
    next
}

#[test]
fn sequential_reads_with_appends_rolls_and_seeks_serve_exactly_what_was_appended() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let config = LogConfig {
            segment_bytes: 256 << 10,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(&storage, &partition_dir(), config)
            .await
            .expect("open");
        let mut appended = 600u64;
        append(&log, 0, appended).await;
        let sizes = [1usize, 3000, 8192, 65_536, 300_000];
        let mut offset = 0u64;
        let mut reads = 0usize;
        while offset < appended {
            let next = read_and_check(&log, offset, sizes[reads % sizes.len()]).await;
            assert!(
                next > offset,
                "a read below the high watermark serves a batch"
            );
            reads += 1;
            // Seeks back: the window read ahead is for `next`, not for these offsets.
            offset = if reads.is_multiple_of(9) {
                offset.saturating_sub(3)
            } else if reads.is_multiple_of(13) {
                next - 1
            } else {
                next
            };
            if reads.is_multiple_of(5) && appended < 1500 {
                append(&log, appended, appended + 40).await;
                appended += 40;
            }
        }
        assert_eq!(offset, appended);
        assert!(log.segment_count() > 3, "the reads crossed segments");
        log.close().await.expect("close with a window read ahead");
    });
}
