//! Two handles on one partition directory in one process: a stale leader (epoch 1) that
//! keeps appending and flushing after a new leader (epoch 2) claimed the partition. Its
//! flushes fail `Fenced`, and nothing it wrote after the claim is visible to the new
//! leader, to a reopen at epoch 2 or to a takeover at epoch 3 — also when it rolled to a
//! new segment after the claim. Everything either leader acknowledged survives.

mod common;

use std::path::Path;

use common::{
    append_acked_batches, assert_holds, batch, disk_storage, partition_dir, read_all, run,
};
use kaas_engine::{EngineError, LogConfig, PartitionLog, Storage};

const NOW: i64 = 1_700_000_000_000;

fn config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        ..LogConfig::default()
    }
}

/// A batch whose values are unique to `seed` (so its bytes can be searched for on disk).
fn produced(seed: u64) -> Vec<u8> {
    batch(seed, 2, 200, NOW + seed as i64, None)
}

fn assert_fenced(result: Result<impl std::fmt::Debug, EngineError>, by: u32) {
    match result {
        Err(EngineError::Fenced {
            epoch: 1, by_epoch, ..
        }) if by_epoch == by => {}
        other => panic!("expected Fenced by epoch {by}, got {other:?}"),
    }
}

/// Appends `seeds` durably at `epoch`, returning the bytes the log must hold for each.
async fn append_acked(log: &PartitionLog, seeds: &[u64], epoch: i32) -> Vec<(u64, Vec<u8>)> {
    append_acked_batches(log, seeds.iter().map(|&seed| produced(seed)), epoch, NOW).await
}

/// Whether any file under `root` contains `needle` (the stale writes did reach the disk).
fn on_disk(root: &Path, needle: &[u8]) -> bool {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if std::fs::read(&path)
                .expect("read")
                .windows(needle.len())
                .any(|w| w == needle)
            {
                return true;
            }
        }
    }
    false
}

/// The value bytes of `seed`'s first record, to search for.
fn marker(seed: u64) -> Vec<u8> {
    common::value_for(seed, 0, 200)
}

async fn stale_appends_after_the_claim_are_ignored(storage: Storage, root: Option<&Path>) {
    let dir = partition_dir();
    // A directory written by today's code (epoch 0) first.
    let standalone = PartitionLog::open(&storage, &dir, config(1 << 30))
        .await
        .expect("open at epoch 0");
    let mut acked = append_acked(&standalone, &[1, 2, 3], 0).await;
    standalone.close().await.expect("close");

    let old = PartitionLog::open_at_epoch(&storage, &dir, config(1 << 30), 1)
        .await
        .expect("open at epoch 1");
    assert_holds(&old, &acked).await;
    acked.extend(append_acked(&old, &[10, 11, 12], 1).await);
    // Appended, not yet flushed, before the claim: may or may not survive (not acked).
    old.append(&produced(13), 1, NOW).await.expect("append");

    let new = PartitionLog::open_at_epoch(&storage, &dir, config(1 << 30), 2)
        .await
        .expect("take over at epoch 2");
    let mut reads = read_all(&new, 0, 1 << 20).await;
    assert!(
        reads.len() == acked.len(),
        "unflushed batch was never written"
    );
    reads.clear();
    assert_holds(&new, &acked).await;
    // The takeover's clean-up (the shard's maintenance runs it a minute later).
    assert!(new
        .remove_superseded_files(i64::MAX)
        .await
        .expect("clean-up"));

    // The stale leader goes on: its flush writes and syncs, then finds the claim.
    old.append(&produced(20), 1, NOW)
        .await
        .expect("stale append");
    assert_fenced(old.flush().await, 2);
    assert_fenced(old.append(&produced(21), 1, NOW).await, 2);
    assert_fenced(old.flush().await, 2);
    assert!(old.offsets().high_watermark < old.offsets().log_end_offset);
    assert!(old.is_fenced() && !new.is_fenced());
    if let Some(root) = root {
        // The takeover adopted the small inherited tail (a copy of its own) and removed the
        // epoch-1 names: the stale flush wrote into a file no name on the volume leads to.
        assert!(
            !on_disk(root, &marker(20)),
            "a stale write is in a named file"
        );
    }

    acked.extend(append_acked(&new, &[30, 31], 2).await);
    // Stale bytes sit past the counted end of the segment both handles share.
    old.append(&produced(22), 1, NOW).await.ok();
    assert_holds(&new, &acked).await;
    assert!(!log_has(&new, &[13, 20, 21, 22]).await);
    new.close().await.expect("close new");
    let _ = old.close().await;

    let reopened = PartitionLog::open_at_epoch(&storage, &dir, config(1 << 30), 2)
        .await
        .expect("reopen at epoch 2");
    assert_holds(&reopened, &acked).await;
    acked.extend(append_acked(&reopened, &[40], 2).await);
    drop(reopened); // a crash: no close, no checkpoint

    let third = PartitionLog::open_at_epoch(&storage, &dir, config(1 << 30), 3)
        .await
        .expect("take over at epoch 3");
    assert_holds(&third, &acked).await;
    third.close().await.expect("close");
    // An epoch below the newest claim cannot open.
    assert!(matches!(
        PartitionLog::open_at_epoch(&storage, &dir, config(1 << 30), 2).await,
        Err(EngineError::Fenced { by_epoch: 3, .. })
    ));
}

/// Whether any batch of the log carries one of `seeds`' values.
async fn log_has(log: &PartitionLog, seeds: &[u64]) -> bool {
    let read = read_all(log, 0, 1 << 20).await;
    seeds.iter().any(|&seed| {
        let needle = marker(seed);
        read.iter()
            .any(|b| b.bytes.windows(needle.len()).any(|w| w == needle))
    })
}

async fn stale_roll_after_the_claim_is_ignored(storage: Storage, root: Option<&Path>) {
    let dir = partition_dir();
    // Two 2-record batches of 200-byte values fill a segment; the third rolls.
    let small = config(1000);
    let old = PartitionLog::open_at_epoch(&storage, &dir, small.clone(), 1)
        .await
        .expect("open at epoch 1");
    let mut acked = append_acked(&old, &[1, 2], 1).await;
    let segments_before = old.segment_count();

    let new = PartitionLog::open_at_epoch(&storage, &dir, small.clone(), 2)
        .await
        .expect("take over at epoch 2");
    // Nothing is pending, so the roll creates its segment before any flush checks.
    old.append(&produced(50), 1, NOW).await.expect("stale roll");
    assert_eq!(
        old.segment_count(),
        segments_before + 1,
        "the stale leader rolled"
    );
    assert_fenced(old.flush().await, 2);
    if let (Some(root), Storage::Disk(_)) = (root, &storage) {
        let rolled = root
            .join(&dir)
            .join(format!("{:020}-e1.log", acked.len() * 2));
        assert!(rolled.exists(), "no stale segment at {}", rolled.display());
        assert!(on_disk(root, &marker(50)), "the stale flush did not write");
    }

    acked.extend(append_acked(&new, &[60, 61, 62], 2).await);
    assert_holds(&new, &acked).await;
    assert!(!log_has(&new, &[50]).await);
    drop(new);
    drop(old);

    let third = PartitionLog::open_at_epoch(&storage, &dir, small, 3)
        .await
        .expect("take over at epoch 3");
    assert_holds(&third, &acked).await;
    assert!(!log_has(&third, &[50]).await);
    third.close().await.expect("close");
}

#[test]
fn stale_appends_after_the_claim_are_ignored_on_disk() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let storage = disk_storage(&root).await;
        stale_appends_after_the_claim_are_ignored(storage, Some(&root)).await;
    });
}

#[test]
fn stale_appends_after_the_claim_are_ignored_in_memory() {
    run(|| async { stale_appends_after_the_claim_are_ignored(Storage::memory(), None).await });
}

#[test]
fn stale_roll_after_the_claim_is_ignored_on_disk() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let storage = disk_storage(&root).await;
        stale_roll_after_the_claim_is_ignored(storage, Some(&root)).await;
    });
}

#[test]
fn stale_roll_after_the_claim_is_ignored_in_memory() {
    run(|| async { stale_roll_after_the_claim_is_ignored(Storage::memory(), None).await });
}

/// A superseded leader's close writes no checkpoint: no recovery point, leader epochs or
/// producer snapshot of its epoch appear after the takeover removed its names (nobody newer
/// reads them, and writing them would only load the volume during the takeover). The close
/// answers Fenced, and the new leader holds everything acknowledged.
#[test]
fn a_superseded_leaders_close_writes_no_checkpoint() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let storage = disk_storage(&root).await;
        let dir = partition_dir();
        let old = PartitionLog::open_at_epoch(&storage, &dir, config(1 << 20), 1)
            .await
            .expect("open at epoch 1");
        let acked = append_acked(&old, &[1, 2, 3], 1).await;
        let new = PartitionLog::open_at_epoch(&storage, &dir, config(1 << 20), 2)
            .await
            .expect("take over at epoch 2");
        assert_fenced(old.close().await, 2);
        let leftovers: Vec<String> = std::fs::read_dir(root.join(&dir))
            .expect("list")
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| {
                name.starts_with("recovery-point-e1")
                    || name.starts_with("leader-epoch-checkpoint-e1")
                    || name.ends_with("-e1.snapshot")
                    || name.ends_with("-e1.snapshot.tmp")
            })
            .collect();
        assert!(
            leftovers.is_empty(),
            "written after the takeover: {leftovers:?}"
        );
        assert_holds(&new, &acked).await;
        new.close().await.expect("close");
    });
}
