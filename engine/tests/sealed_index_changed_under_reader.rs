//! A sealed segment's index file cut short or removed by someone else (on a shared volume,
//! the broker that took the partition over) while this log still reads the segment: reads
//! keep answering with the right batches. An index kept as a memory map of the file would
//! kill the process with SIGBUS at the next lookup instead.

mod common;

use std::path::Path;

use kaas_engine::batch::{encode_batch_for_tests, scan_batches};
use kaas_engine::{LogConfig, PartitionLog};

const BATCHES: u32 = 400;

fn batch(i: u32) -> Vec<u8> {
    let value = vec![(i % 251) as u8; 300 + (i as usize % 400)];
    encode_batch_for_tests(
        &[(Some(b"k".as_slice()), Some(&value))],
        i as i64,
        -1,
        0,
        -1,
    )
}

/// The base offset of the first batch a read of `offset` returns.
async fn first_batch_read(log: &PartitionLog, offset: u64) -> u64 {
    let fetched = log.read(offset, 1).await.expect("read");
    let chunk = fetched.chunks.first().expect("a batch");
    let first = scan_batches(chunk, 0).next().expect("a whole batch");
    first.header.base_offset as u64
}

fn index_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "index" || e == "timeindex")
        })
        .collect();
    files.sort();
    files
}

#[test]
fn reads_survive_index_files_cut_or_removed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let dir = &common::partition_dir();
        let config = LogConfig {
            segment_bytes: 32 << 10,
            index_interval_bytes: 1024,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(&storage, dir, config.clone())
            .await
            .expect("open");
        for i in 0..BATCHES {
            log.append(&batch(i), 1, 10_000).await.expect("append");
        }
        log.close().await.expect("close");
        // Reopened: nothing in the tail cache, every segment but the last one sealed.
        let log = PartitionLog::open(&storage, dir, config)
            .await
            .expect("reopen");
        assert!(log.segment_count() > 4, "rolled by size");

        // Each lookup below starts a new read (offsets going down), so none is served
        // by read-ahead: every one goes through the segment's offset index.
        for offset in [60, 50, 12] {
            assert_eq!(first_batch_read(&log, offset).await, offset);
        }
        let files = index_files(&root.join(dir));
        assert!(
            files.len() >= 8,
            "index files of the sealed segments: {files:?}"
        );
        for (i, file) in files.iter().enumerate() {
            if i % 2 == 0 {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(file)
                    .and_then(|f| f.set_len(0))
                    .expect("cut the index");
            } else {
                std::fs::remove_file(file).expect("remove the index");
            }
        }
        for offset in [55, 40, 11, 3, 0] {
            assert_eq!(first_batch_read(&log, offset).await, offset);
        }
        // Segments whose index was never read find their batches without it.
        for offset in (0..u64::from(BATCHES)).rev().step_by(37) {
            assert_eq!(first_batch_read(&log, offset).await, offset);
        }
        log.close().await.expect("close");
    });
}
