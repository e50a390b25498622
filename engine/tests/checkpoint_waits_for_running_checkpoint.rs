//! Property: a checkpoint asked for while another one is running still covers the state at
//! the time it was asked for. `close` (which flushes through a checkpoint) therefore keeps
//! every append made before it, and `delete_records` has made the new log start offset
//! durable when it returns, even when a periodic checkpoint happens to be running.
//!
//! Both cases interleave deterministically on one executor: the background checkpoint takes
//! the append lock first (the test yields once to let it start), the foreground append
//! waits for that lock and gets it when the background checkpoint moves on to writing its
//! small files, which on disk takes real I/O.

mod common;

use kaas_engine::checkpoint::RecoveryPoint;
use kaas_engine::{LogConfig, PartitionLog, Storage};

use common::{batch, partition_dir, read_all, stamped};

async fn open(storage: &Storage) -> PartitionLog {
    PartitionLog::open(storage, &partition_dir(), LogConfig::default())
        .await
        .expect("open")
}

#[test]
fn close_keeps_appends_made_while_a_checkpoint_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let log = open(&storage).await;
        let first = batch(1, 3, 200, 1_000, None);
        log.append(&first, 0, 0).await.expect("append");
        let background = glommio::spawn_local({
            let log = log.clone();
            async move { log.checkpoint().await }
        });
        futures_lite::future::yield_now().await;
        let second = batch(2, 2, 300, 1_001, None);
        let outcome = log.append(&second, 0, 0).await.expect("append");
        log.close().await.expect("close");
        let _ = background.await;

        let log = open(&storage).await;
        assert_eq!(
            log.offsets().log_end_offset,
            outcome.last_offset + 1,
            "close lost an append"
        );
        let read = read_all(&log, 0, 1 << 20).await;
        assert_eq!(read.len(), 2);
        assert_eq!(
            &read[1].bytes[..],
            &stamped(&second, outcome.base_offset, 0)[..]
        );
        log.close().await.expect("close");
    });
}

#[test]
fn delete_records_is_durable_while_a_checkpoint_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let log = open(&storage).await;
        for i in 0..5 {
            log.append(&batch(i, 2, 100, 1_000, None), 0, 0)
                .await
                .expect("append");
        }
        log.flush().await.expect("flush");
        log.append(&batch(5, 2, 100, 1_000, None), 0, 0)
            .await
            .expect("append");
        let background = glommio::spawn_local({
            let log = log.clone();
            async move { log.checkpoint().await }
        });
        futures_lite::future::yield_now().await;
        log.append(&batch(6, 2, 100, 1_000, None), 0, 0)
            .await
            .expect("append");
        let start = log.delete_records(7).await.expect("delete records");
        assert_eq!(start, 7);

        // What a crash right now would find on the disk.
        let bytes = std::fs::read(root.join(partition_dir()).join("recovery-point"))
            .expect("recovery point file");
        let point = RecoveryPoint::decode(&bytes).expect("recovery point");
        assert_eq!(
            point.log_start_offset, 7,
            "delete_records returned before its log start offset was durable"
        );
        let _ = background.await;
        drop(log);
        let log = open(&storage).await;
        assert_eq!(log.offsets().log_start_offset, 7);
        log.close().await.expect("close");
    });
}
