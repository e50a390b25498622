//! Two handles on one group store in one process: a stale coordinator (epoch 1) that keeps
//! committing after a new one (epoch 2) claimed the group. Its applies fail `Fenced` once
//! the claim exists, none of them is visible to the new coordinator, to a reopen at epoch 2
//! or to a takeover at epoch 3, and every acknowledged commit of either survives.

mod common;

use common::run;
use kaas_engine::{CommittedOffset, EngineError, GroupChange, GroupStore, Storage};

fn commit(partition: i32, offset: i64) -> GroupChange {
    GroupChange::Commit {
        topic: "t".into(),
        partition,
        committed: CommittedOffset {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: 1,
        },
    }
}

fn offsets(store: &GroupStore) -> Vec<(i32, i64)> {
    store
        .offsets()
        .into_iter()
        .map(|(_, partition, committed)| (partition, committed.offset))
        .collect()
}

async fn stale_commits_after_the_claim_are_ignored(storage: Storage) {
    // State written by today's code (epoch 0) first.
    let standalone = GroupStore::open(&storage, "g").await.expect("open");
    standalone.apply(vec![commit(0, 5)]).await.expect("commit");
    drop(standalone);

    let old = GroupStore::open_at_epoch(&storage, "g", 1)
        .await
        .expect("open at epoch 1");
    assert_eq!(offsets(&old), vec![(0, 5)]);
    old.apply(vec![commit(0, 10), commit(1, 3)])
        .await
        .expect("commit at epoch 1");

    let new = GroupStore::open_at_epoch(&storage, "g", 2)
        .await
        .expect("take over at epoch 2");
    assert_eq!(offsets(&new), vec![(0, 10), (1, 3)]);

    // The stale coordinator writes and syncs, then finds the claim.
    let stale = old.apply(vec![commit(0, 999), commit(2, 999)]).await;
    assert!(
        matches!(
            stale,
            Err(EngineError::Fenced {
                epoch: 1,
                by_epoch: 2,
                ..
            })
        ),
        "{stale:?}"
    );
    assert!(matches!(
        old.apply(vec![commit(3, 999)]).await,
        Err(EngineError::Fenced { by_epoch: 2, .. })
    ));
    assert_eq!(
        offsets(&old),
        vec![(0, 10), (1, 3)],
        "not applied in memory"
    );
    assert!(old.is_fenced() && !new.is_fenced());
    assert_eq!((old.fence_epoch(), new.fence_epoch()), (1, 2));
    assert!(matches!(
        old.delete().await,
        Err(EngineError::Fenced { .. })
    ));

    new.apply(vec![commit(1, 4)])
        .await
        .expect("commit at epoch 2");
    assert_eq!(offsets(&new), vec![(0, 10), (1, 4)]);
    drop(new);

    let reopened = GroupStore::open_at_epoch(&storage, "g", 2)
        .await
        .expect("reopen at epoch 2");
    assert_eq!(offsets(&reopened), vec![(0, 10), (1, 4)]);
    reopened
        .apply(vec![commit(2, 7)])
        .await
        .expect("commit after reopen");
    drop(reopened);

    let third = GroupStore::open_at_epoch(&storage, "g", 3)
        .await
        .expect("take over at epoch 3");
    assert_eq!(offsets(&third), vec![(0, 10), (1, 4), (2, 7)]);
    assert_eq!(GroupStore::list(&storage).await.expect("list"), vec!["g"]);
    assert!(matches!(
        GroupStore::open_at_epoch(&storage, "g", 2).await,
        Err(EngineError::Fenced { by_epoch: 3, .. })
    ));

    // A delete at the newest epoch empties the group; the claims keep older ones out.
    third.delete().await.expect("delete");
    assert!(GroupStore::list(&storage).await.expect("list").is_empty());
    assert!(matches!(
        GroupStore::open_at_epoch(&storage, "g", 1).await,
        Err(EngineError::Fenced { by_epoch: 3, .. })
    ));
    let fourth = GroupStore::open_at_epoch(&storage, "g", 4)
        .await
        .expect("take over at epoch 4");
    assert!(fourth.is_empty());
}

#[test]
fn stale_commits_after_the_claim_are_ignored_on_disk() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        stale_commits_after_the_claim_are_ignored(Storage::disk(root)).await;
    });
}

#[test]
fn stale_commits_after_the_claim_are_ignored_in_memory() {
    run(|| async { stale_commits_after_the_claim_are_ignored(Storage::memory()).await });
}
