//! Property: a write or fsync failure poisons a group store. The failing `apply` is not
//! acknowledged and its changes never become visible; every later call fails (never
//! retrying and pretending); everything acknowledged before the failure is there after
//! reopening the store once there is room again.
//!
//! The failure is real: the store lives on a tiny tmpfs that fills up, so a write fails
//! with ENOSPC; then the tmpfs is remounted larger, keeping its files, and the store is
//! reopened. Mounting needs root; without it the test fails rather than passing without
//! having run.

mod common;

use bytes::Bytes;
use kaas_engine::{CommittedOffset, EngineError, GroupChange, GroupStore};

use common::tmpfs::SmallTmpfs;

fn commit(partition: i32, offset: i64) -> GroupChange {
    GroupChange::Commit {
        topic: "t".into(),
        partition,
        committed: CommittedOffset {
            offset,
            leader_epoch: 0,
            // Distinct per commit, so that the file grows until the disk is full.
            metadata: format!("{offset:0>16384}"),
            commit_timestamp_ms: offset,
        },
    }
}

#[test]
fn write_failure_poisons_the_group_store() {
    let volume = SmallTmpfs::mount("1m");
    let root = volume.root().to_path_buf();
    let acked = {
        let root = root.clone();
        let (sender, received) = std::sync::mpsc::channel();
        common::run(move || async move {
            let storage = common::disk_storage(&root).await;
            let store = GroupStore::open(&storage, "g").await.expect("open");
            let mut acked = 0i64;
            let failure = loop {
                match store.apply(vec![commit((acked % 8) as i32, acked)]).await {
                    Ok(()) => {
                        acked += 1;
                        assert!(acked < 10_000, "a 1 MiB file system never filled up");
                    }
                    Err(error) => break error,
                }
            };
            assert!(
                matches!(failure, EngineError::Poisoned(_)),
                "the failed write must poison the store: {failure:?}"
            );
            assert!(acked > 0, "some applies succeeded before the disk filled");
            assert!(store.is_poisoned());
            let visible: Vec<i64> = store.offsets().iter().map(|(_, _, c)| c.offset).collect();
            assert_eq!(
                visible.iter().max(),
                Some(&(acked - 1)),
                "the failed apply is not visible"
            );
            assert!(matches!(
                store
                    .apply(vec![GroupChange::Metadata(Bytes::from_static(b"m"))])
                    .await,
                Err(EngineError::Poisoned(_))
            ));
            assert!(matches!(
                store.remove_topic("t").await,
                Err(EngineError::Poisoned(_))
            ));
            sender.send(acked).expect("send");
        });
        received.recv().expect("acknowledged count")
    };

    volume.grow("64m");
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let store = GroupStore::open(&storage, "g").await.expect("reopen");
        assert!(!store.is_poisoned());
        for partition in 0..8i64 {
            // The last acknowledged commit to each partition.
            let last = (0..acked).filter(|o| o % 8 == partition).max();
            let found = store.offset("t", partition as i32).map(|c| c.offset);
            match last {
                Some(last) => assert!(
                    found == Some(last) || found == Some(acked),
                    "partition {partition}: acknowledged {last}, found {found:?}"
                ),
                None => assert!(found.is_none() || found == Some(acked)),
            }
        }
        store
            .apply(vec![commit(0, acked + 1)])
            .await
            .expect("apply with room again");
    });
}
