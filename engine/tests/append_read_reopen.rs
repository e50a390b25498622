//! Appends, reads back, closes and reopens a partition log on disk and in memory.

use std::path::Path;

use kaas_engine::batch::encode_batch_for_tests;
use kaas_engine::{LogConfig, PartitionLog, Storage};

fn run<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { f().await })
        .expect("executor")
        .join()
        .expect("join");
}

fn batch(i: u32) -> Vec<u8> {
    let key = format!("key-{i}");
    let value = vec![(i % 251) as u8; 100 + (i as usize % 700)];
    encode_batch_for_tests(
        &[(Some(key.as_bytes()), Some(&value))],
        1_000 + i as i64,
        -1,
        0,
        -1,
    )
}

async fn exercise(storage: Storage) {
    let dir = Path::new("topics/t/0");
    let config = LogConfig {
        segment_bytes: 64 << 10,
        ..LogConfig::default()
    };
    let log = PartitionLog::open(&storage, dir, config.clone())
        .await
        .expect("open");
    for i in 0..500u32 {
        let outcome = log.append(&batch(i), 3, 10_000).await.expect("append");
        assert_eq!(outcome.base_offset, i as u64);
    }
    log.flush().await.expect("flush");
    assert!(log.segment_count() > 1, "rolled by size");
    let offsets = log.offsets();
    assert_eq!(offsets.high_watermark, 500);
    let mut offset = 0u64;
    while offset < 500 {
        let fetched = log.read(offset, 3000).await.expect("read");
        assert!(!fetched.is_empty(), "data at {offset}");
        for chunk in &fetched.chunks {
            for scanned in kaas_engine::batch::scan_batches(chunk, 0) {
                assert_eq!(scanned.header.base_offset as u64, offset);
                assert_eq!(scanned.header.partition_leader_epoch, 3);
                offset += 1;
            }
        }
    }
    log.close().await.expect("close");
    let log = PartitionLog::open(&storage, dir, config)
        .await
        .expect("reopen");
    assert_eq!(log.offsets().log_end_offset, 500);
    let fetched = log.read(250, 1).await.expect("read after reopen");
    let chunk = &fetched.chunks[0];
    let header = kaas_engine::batch::BatchHeader::parse(chunk).expect("header");
    assert_eq!(header.base_offset, 250);
    let expected = {
        let mut b = batch(250);
        kaas_engine::batch::stamp_for_append(&mut b, 250, 3, None).expect("stamp");
        b
    };
    assert_eq!(&chunk[..], &expected[..]);
    assert_eq!(log.end_offset_for_epoch(3), Some((3, 500)));
    log.close().await.expect("close");
}

#[test]
fn on_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    run(move || async move {
        kaas_engine::dma_probe::prepare_executor(&root)
            .await
            .expect("probe");
        exercise(Storage::disk(root)).await;
    });
}

#[test]
fn in_memory() {
    run(|| async { exercise(Storage::memory()).await });
}
