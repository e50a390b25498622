//! Many partitions taken over at once on one shard (as the takeover driver runs them, many
//! opens in flight): each open is independent, so one that fails leaves the others to
//! finish and serve; and a close that arrives while a partition's takeover is still running
//! waits for it, then closes the log it opened, so the two never overlap.

mod common;

use std::rc::Rc;

use common::{batch, disk_storage, run};
use kaas_engine::{LogConfig, LogManager, PartitionId};

const NOW: i64 = 1_700_000_000_000;
const PARTITIONS: i32 = 24;
const BROKEN: i32 = 7;

fn id(partition: i32) -> PartitionId {
    PartitionId::new("moved", partition)
}

#[test]
fn a_failed_takeover_leaves_the_others_to_finish() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let storage = disk_storage(&root).await;
        let manager = Rc::new(LogManager::new(storage));
        for partition in 0..PARTITIONS {
            let log = manager
                .open_at_epoch(&id(partition), LogConfig::default(), 1)
                .await
                .expect("open at epoch 1");
            log.append_durable(&batch(partition as u64, 1, 100, NOW, None), 1, NOW)
                .await
                .expect("append");
            manager.close(&id(partition)).await.expect("close");
        }
        // One partition's claims directory is replaced by a file: its claim cannot be made.
        let claims = root.join(id(BROKEN).dir().expect("dir")).join("claims");
        std::fs::remove_dir_all(&claims).expect("remove claims");
        std::fs::write(&claims, b"not a directory").expect("block claims");

        let opens: Vec<_> = (0..PARTITIONS)
            .map(|partition| {
                let manager = manager.clone();
                glommio::spawn_local(async move {
                    manager
                        .open_at_epoch(&id(partition), LogConfig::default(), 2)
                        .await
                        .map(|log| log.offsets().log_end_offset)
                })
            })
            .collect();
        for (partition, open) in (0..PARTITIONS).zip(opens) {
            let result = open.await;
            if partition == BROKEN {
                assert!(result.is_err(), "the broken partition cannot be claimed");
                assert!(manager.get(&id(partition)).is_none());
            } else {
                assert_eq!(result.expect("taken over"), 1, "partition {partition}");
                assert!(manager.get(&id(partition)).is_some());
            }
        }
        manager.close_all().await.expect("close all");
    });
}

#[test]
fn a_close_during_a_takeover_waits_for_it_and_closes_the_log() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let storage = disk_storage(&root).await;
        let manager = Rc::new(LogManager::new(storage));
        let partition = id(0);
        let log = manager
            .open_at_epoch(&partition, LogConfig::default(), 1)
            .await
            .expect("open at epoch 1");
        log.append_durable(&batch(1, 1, 100, NOW, None), 1, NOW)
            .await
            .expect("append");
        manager.close(&partition).await.expect("close");

        let opening = {
            let (manager, partition) = (manager.clone(), partition.clone());
            glommio::spawn_local(async move {
                manager
                    .open_at_epoch(&partition, LogConfig::default(), 2)
                    .await
                    .map(drop)
            })
        };
        // Spawned right behind the open: it runs once the open waits on its first file
        // call, in the middle of the takeover.
        let closing = {
            let (manager, partition) = (manager.clone(), partition.clone());
            glommio::spawn_local(async move { manager.close(&partition).await })
        };
        opening.await.expect("the takeover finishes");
        closing.await.expect("the close finishes");
        assert!(
            manager.get(&partition).is_none(),
            "the close came after the open and closed its log"
        );
        // The takeover completed (its record exists): a reopen at epoch 2 reads its files.
        let claims = root.join(partition.dir().expect("dir")).join("claims");
        assert!(claims.join(format!("{:020}.end", 2)).exists());
        let reopened = manager
            .open_at_epoch(&partition, LogConfig::default(), 2)
            .await
            .expect("reopen at epoch 2");
        assert_eq!(reopened.offsets().log_end_offset, 1);
        manager.close_all().await.expect("close all");
    });
}
