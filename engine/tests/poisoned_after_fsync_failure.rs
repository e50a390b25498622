//! Property: a write or fsync failure poisons the partition. The failing `append_durable`
//! is not acknowledged, the log reports itself poisoned and refuses appends, flushes and
//! reads from then on (never retrying and pretending), and everything acknowledged before
//! the failure is intact after reopening the log once there is room again.
//!
//! The failure is real: the log lives on a tiny tmpfs (direct I/O on tmpfs needs Linux
//! 6.6 or newer) that fills up, so a write fails with ENOSPC; then the tmpfs is remounted
//! larger, keeping its files, and the log is reopened. Mounting needs root (CAP_SYS_ADMIN);
//! without it the test fails rather than passing without having run.

mod common;

use kaas_engine::{EngineError, LogConfig, PartitionLog};

use common::tmpfs::SmallTmpfs;
use common::{batch, partition_dir, read_all, stamped};

fn fill_until_poisoned(preallocate_step: u64) {
    let volume = SmallTmpfs::mount("1m");
    let root = volume.root().to_path_buf();
    let config = LogConfig {
        preallocate_step,
        write_chunk_bytes: 16 << 10,
        ..LogConfig::default()
    };
    let acked = {
        let root = root.clone();
        let config = config.clone();
        let (sender, received) = std::sync::mpsc::channel();
        common::run(move || async move {
            let storage = common::disk_storage(&root).await;
            let log = PartitionLog::open(&storage, &partition_dir(), config)
                .await
                .expect("open");
            let mut acked = Vec::new();
            let failure = loop {
                let produced = batch(acked.len() as u64, 2, 3_000, 1_000, None);
                match log.append_durable(&produced, 1, 0).await {
                    Ok(outcome) => {
                        assert_eq!(outcome.base_offset, 2 * acked.len() as u64);
                        acked.push(produced);
                        assert!(acked.len() < 10_000, "a 1 MiB file system never filled up");
                    }
                    Err(error) => break error,
                }
            };
            // ENOSPC, or a short write when the disk filled in the middle of one.
            assert!(
                matches!(failure, EngineError::Poisoned(_)),
                "the failed write must poison the log: {failure:?}"
            );
            assert!(
                !acked.is_empty(),
                "some writes succeeded before the disk filled"
            );
            assert!(log.is_poisoned());

            // Nothing more is accepted, flushed or served, and nothing is retried.
            let more = batch(99_999, 1, 10, 1_000, None);
            assert!(matches!(
                log.append(&more, 1, 0).await,
                Err(EngineError::Poisoned(_))
            ));
            assert!(matches!(log.flush().await, Err(EngineError::Poisoned(_))));
            assert!(matches!(
                log.read(0, 1 << 20).await,
                Err(EngineError::Poisoned(_))
            ));
            assert!(matches!(
                log.checkpoint().await,
                Err(EngineError::Poisoned(_))
            ));
            let high_watermark = log.offsets().high_watermark;
            assert_eq!(
                high_watermark,
                2 * acked.len() as u64,
                "the high watermark covers exactly what was acknowledged"
            );
            log.close().await.expect("close a poisoned log");
            sender.send(acked).expect("send");
        });
        received.recv().expect("acknowledged batches")
    };

    volume.grow("64m");
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let log = PartitionLog::open(&storage, &partition_dir(), config)
            .await
            .expect("reopen with room");
        assert!(!log.is_poisoned());
        let end = log.offsets().log_end_offset;
        assert!(
            end >= 2 * acked.len() as u64,
            "acknowledged writes lost: end {end}"
        );
        let read = read_all(&log, 0, 1 << 20).await;
        for (i, produced) in acked.iter().enumerate() {
            let offset = 2 * i as u64;
            assert_eq!(read[i].base_offset, offset);
            assert_eq!(&read[i].bytes[..], &stamped(produced, offset, 1)[..]);
        }
        let after = log
            .append_durable(&batch(7, 1, 100, 1_000, None), 1, 0)
            .await
            .expect("append with room again");
        assert_eq!(after.base_offset, end);
        log.close().await.expect("close");
    });
}

#[test]
fn write_failure_poisons_without_preallocation() {
    fill_until_poisoned(0);
}

#[test]
fn preallocation_failure_poisons() {
    fill_until_poisoned(256 << 10);
}
