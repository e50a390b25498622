//! A takeover leaves the older epochs' files where they are and the shard's maintenance
//! removes them a minute later (`fence`, step 4), off the takeover's critical path: until
//! then they are there but nobody reads them, afterwards only the new epoch's files and
//! claim remain, and the log reads the same before, after and across a reopen.

mod common;

use std::path::{Path, PathBuf};

use common::{append_acked_batches, assert_holds, batch, disk_storage, run};
use kaas_engine::log_manager::now_ms;
use kaas_engine::{LogConfig, LogManager, PartitionId, PartitionLog, Storage};

const NOW: i64 = 1_700_000_000_000;
/// More than the clean-up's delay (a minute).
const LATER_MS: i64 = 61_000;

/// Names in the partition directory and its `claims/` that belong to `epoch`.
fn names_of_epoch(root: &Path, dir: &Path, epoch: u32) -> Vec<String> {
    let suffix = format!("-e{epoch}");
    let claim = format!("{epoch:020}");
    let mut found = Vec::new();
    for sub in [dir.to_path_buf(), dir.join("claims")] {
        for entry in std::fs::read_dir(root.join(&sub)).expect("list") {
            let name = entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8");
            let stem = name.split('.').next().unwrap_or("");
            if stem.ends_with(&suffix) || stem == claim {
                found.push(name);
            }
        }
    }
    found.sort();
    found
}

/// The partition led at epoch 1, `batches` acknowledged, then closed: the storage, the
/// partition, its directory and what was acknowledged.
async fn led_at_epoch_one(
    root: &Path,
    batches: u64,
) -> (Storage, PartitionId, PathBuf, Vec<(u64, Vec<u8>)>) {
    let storage = disk_storage(root).await;
    let id = PartitionId::new("t", 0);
    let dir = id.dir().expect("dir");
    let first = PartitionLog::open_at_epoch(&storage, &dir, LogConfig::default(), 1)
        .await
        .expect("open at epoch 1");
    let produced = (1..=batches).map(|seed| batch(seed, 2, 300, NOW, None));
    let acked = append_acked_batches(&first, produced, 1, NOW).await;
    first.close().await.expect("close at epoch 1");
    (storage, id, dir, acked)
}

#[test]
fn the_older_epochs_files_are_removed_by_maintenance_a_minute_after_the_takeover() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let (storage, id, dir, mut acked) = led_at_epoch_one(&root, 3).await;
        let left_by_one = names_of_epoch(&root, &dir, 1);
        assert!(
            left_by_one.iter().any(|name| name.ends_with(".log")),
            "{left_by_one:?}"
        );

        let manager = LogManager::new(storage.clone());
        let opened_ms = now_ms();
        let new = manager
            .open_at_epoch(&id, LogConfig::default(), 2)
            .await
            .expect("take over at epoch 2");
        assert_holds(&new, &acked).await;
        // The takeover itself removes only epoch 1's token (the fence); the rest is kept
        // right after it and at maintenance passes before the delay.
        let kept: Vec<String> = left_by_one
            .iter()
            .filter(|name| !name.ends_with(".live"))
            .cloned()
            .collect();
        assert_eq!(kept.len() + 1, left_by_one.len(), "{left_by_one:?}");
        assert_eq!(names_of_epoch(&root, &dir, 1), kept);
        manager.maintain(opened_ms).await;
        assert_eq!(names_of_epoch(&root, &dir, 1), kept);
        assert!(!new
            .remove_superseded_files(opened_ms + 1_000)
            .await
            .expect("not due"));
        assert_eq!(names_of_epoch(&root, &dir, 1), kept);

        // The pass a minute later removes every one of them; epoch 2's are untouched.
        let own_before = names_of_epoch(&root, &dir, 2);
        manager.maintain(opened_ms + LATER_MS).await;
        assert_eq!(names_of_epoch(&root, &dir, 1), Vec::<String>::new());
        for name in &own_before {
            assert!(
                root.join(&dir).join(name).exists()
                    || root.join(&dir).join("claims").join(name).exists(),
                "epoch 2's {name} was removed"
            );
        }
        assert!(!new
            .remove_superseded_files(opened_ms + 2 * LATER_MS)
            .await
            .expect("done once"));
        assert_holds(&new, &acked).await;
        let more = (10..=11).map(|seed| batch(seed, 2, 300, NOW, None));
        acked.extend(append_acked_batches(&new, more, 2, NOW).await);
        manager.close(&id).await.expect("close at epoch 2");

        let reopened = PartitionLog::open_at_epoch(&storage, &dir, LogConfig::default(), 2)
            .await
            .expect("reopen at epoch 2");
        assert_holds(&reopened, &acked).await;
        reopened.close().await.expect("close");
        let third = PartitionLog::open_at_epoch(&storage, &dir, LogConfig::default(), 3)
            .await
            .expect("take over at epoch 3");
        assert_holds(&third, &acked).await;
        third.close().await.expect("close at epoch 3");
    });
}

#[test]
fn a_fenced_leader_leaves_the_clean_up_to_the_newer_epoch() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let (storage, _, dir, acked) = led_at_epoch_one(&root, 2).await;
        let stale = PartitionLog::open_at_epoch(&storage, &dir, LogConfig::default(), 2)
            .await
            .expect("take over at epoch 2");
        let newer = PartitionLog::open_at_epoch(&storage, &dir, LogConfig::default(), 3)
            .await
            .expect("take over at epoch 3");
        // The stale leader learns of the fence at its next flush.
        let produced = batch(20, 1, 10, NOW, None);
        assert!(stale.append_durable(&produced, 2, NOW).await.is_err());
        assert!(stale.is_fenced());
        let left_by_two = names_of_epoch(&root, &dir, 2);
        assert!(!left_by_two.is_empty());
        assert!(!stale
            .remove_superseded_files(i64::MAX)
            .await
            .expect("nothing to do"));
        assert_eq!(names_of_epoch(&root, &dir, 2), left_by_two);
        assert!(newer
            .remove_superseded_files(i64::MAX)
            .await
            .expect("clean-up"));
        assert_eq!(names_of_epoch(&root, &dir, 1), Vec::<String>::new());
        assert_eq!(names_of_epoch(&root, &dir, 2), Vec::<String>::new());
        assert_holds(&newer, &acked).await;
        newer.close().await.expect("close at epoch 3");
    });
}
