//! A takeover of a partition whose last segment is small copies that segment's counted
//! bytes into a file of the new epoch's own and appends to it (`fence`, "Adopting the
//! inherited tail"), instead of keeping the inherited file open beside a new segment: one
//! segment file per partition after the takeover. The old leader's file is never written by
//! the new one, the old leader's stale appends stay invisible, and the next takeover
//! inherits everything the new leader acknowledged. A last segment above the bound keeps
//! the inherited file and starts a new segment, as before.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use common::{
    append_acked_batches, assert_holds, batch, disk_storage, partition_dir, read_all, run, stamped,
};
use kaas_engine::{EngineError, LogConfig, PartitionLog, Storage};

const NOW: i64 = 1_700_000_000_000;

fn produced(seed: u64, value_len: usize) -> Vec<u8> {
    batch(seed, 2, value_len, NOW + seed as i64, None)
}

async fn append_acked(
    log: &PartitionLog,
    seeds: &[u64],
    value_len: usize,
    epoch: i32,
) -> Vec<(u64, Vec<u8>)> {
    let batches = seeds.iter().map(|&seed| produced(seed, value_len));
    append_acked_batches(log, batches, epoch, NOW).await
}

fn segment_file(root: &Path, epoch: u32) -> std::path::PathBuf {
    let name = match epoch {
        0 => "00000000000000000000.log".to_string(),
        e => format!("00000000000000000000-e{e}.log"),
    };
    root.join(partition_dir()).join(name)
}

/// Disk storage under `root`, the partition's directory, the default config and the
/// partition opened at epoch 1.
async fn first_leader(root: &Path) -> (Storage, std::path::PathBuf, LogConfig, PartitionLog) {
    let storage = disk_storage(root).await;
    let dir = partition_dir();
    let config = LogConfig::default();
    let log = PartitionLog::open_at_epoch(&storage, &dir, config.clone(), 1)
        .await
        .expect("open at epoch 1");
    (storage, dir, config, log)
}

#[test]
fn a_small_inherited_tail_becomes_the_new_leaders_own_segment() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let (storage, dir, config, old) = first_leader(&root).await;
        let mut acked = append_acked(&old, &[1, 2, 3], 300, 1).await;
        // Held open: the takeover removes the epoch-1 name once it has recorded its claim.
        let old_file = std::fs::File::open(segment_file(&root, 1)).expect("epoch 1 file");
        let old_meta = old_file.metadata().expect("stat");

        let new = PartitionLog::open_at_epoch(&storage, &dir, config.clone(), 2)
            .await
            .expect("take over at epoch 2");
        assert_eq!(new.segment_count(), 1, "the tail was adopted, not sealed");
        assert_ne!(
            std::fs::metadata(segment_file(&root, 2))
                .expect("epoch 2 file")
                .ino(),
            old_meta.ino(),
            "epoch 2 appends to a file of its own, not the link"
        );
        assert_holds(&new, &acked).await;
        acked.extend(append_acked(&new, &[20, 21], 300, 2).await);
        assert_eq!(new.segment_count(), 1);
        assert_eq!(
            old_file.metadata().expect("stat").len(),
            old_meta.len(),
            "the new leader never writes the old leader's file"
        );

        // The old leader wakes up: its appends land in its own file, its flush is fenced.
        let stale = produced(99, 300);
        old.append(&stale, 1, NOW).await.expect("stale append");
        match old.flush().await {
            Err(EngineError::Fenced { by_epoch: 2, .. }) => {}
            other => panic!("expected Fenced by 2, got {other:?}"),
        }
        assert_holds(&new, &acked).await;

        // The next takeover inherits all of epoch 2's log (the adopted segment counts whole)
        // and none of the stale append.
        let next = PartitionLog::open_at_epoch(&storage, &dir, config.clone(), 3)
            .await
            .expect("take over at epoch 3");
        assert_eq!(next.segment_count(), 1);
        assert_holds(&next, &acked).await;
        acked.extend(append_acked(&next, &[30], 300, 3).await);
        next.close().await.expect("close");
        let reopened = PartitionLog::open_at_epoch(&storage, &dir, config, 3)
            .await
            .expect("reopen at epoch 3");
        assert_holds(&reopened, &acked).await;
        reopened.close().await.expect("close");
    });
}

#[test]
fn a_large_inherited_tail_is_sealed_beside_a_new_segment() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let (storage, dir, config, old) = first_leader(&root).await;
        // Two batches of two 256 KiB records each (1 MiB in all, with their headers a little
        // more): above the adoption bound.
        let mut acked = append_acked(&old, &[1, 2], 256 << 10, 1).await;
        old.close().await.expect("close");
        let new = PartitionLog::open_at_epoch(&storage, &dir, config.clone(), 2)
            .await
            .expect("take over at epoch 2");
        assert_eq!(new.segment_count(), 2, "inherited segment plus a new one");
        acked.extend(append_acked(&new, &[3], 300, 2).await);
        new.close().await.expect("close");
        let reopened = PartitionLog::open_at_epoch(&storage, &dir, config, 2)
            .await
            .expect("reopen at epoch 2");
        assert_holds(&reopened, &acked).await;
        reopened.close().await.expect("close");
    });
}

/// The adopted tail's indexes are not copied (two files fewer per takeover): recovery scans
/// the segment from its start instead, so offset and timestamp lookups, the largest
/// timestamp and the indexes written later are those of the whole segment, even though the
/// old leader's recovery point lay inside it.
#[test]
fn an_adopted_tail_is_indexed_by_recovery_not_by_copies() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let (storage, dir, config, old) = first_leader(&root).await;
        // Batches of about 600 bytes: the 4 KiB index interval gives several index entries.
        // The largest timestamp is in the middle, before the recovery point.
        let seeds: Vec<u64> = (1..=40).collect();
        let mut acked = append_acked(&old, &seeds, 300, 1).await;
        let peak = produced_at(41, NOW + 1_000_000);
        let peak_offset = old
            .append_durable(&peak, 1, NOW)
            .await
            .expect("append")
            .base_offset;
        acked.push((peak_offset, stamped(&peak, peak_offset, 1)));
        acked.extend(append_acked(&old, &(42..=60).collect::<Vec<_>>(), 300, 1).await);
        old.checkpoint()
            .await
            .expect("checkpoint inside the segment");
        acked.extend(append_acked(&old, &(61..=70).collect::<Vec<_>>(), 300, 1).await);
        assert!(
            root.join(&dir)
                .join("00000000000000000000-e1.index")
                .exists(),
            "epoch 1 wrote an index"
        );
        old.close().await.expect("close");

        let new = PartitionLog::open_at_epoch(&storage, &dir, config.clone(), 2)
            .await
            .expect("take over at epoch 2");
        assert_eq!(new.segment_count(), 1, "the tail was adopted");
        for extension in ["index", "timeindex"] {
            let name = format!("00000000000000000000-e2.{extension}");
            assert!(!root.join(&dir).join(&name).exists(), "{name} was copied");
        }
        assert_eq!(
            new.max_timestamp().map(|(ts, _)| ts),
            Some(NOW + 1_000_000),
            "the largest timestamp, from before the recovery point"
        );
        assert_eq!(
            new.offset_for_timestamp(NOW + 1_000_000)
                .await
                .expect("lookup")
                .map(|(offset, _)| offset),
            Some(peak_offset)
        );
        for (offset, bytes) in acked.iter().step_by(7) {
            let read = read_all(&new, *offset, 1 << 20).await;
            let first = read.first().expect("a batch");
            assert_eq!(first.base_offset, *offset);
            assert!(
                first.bytes.as_ref() == bytes.as_slice(),
                "bytes at {offset}"
            );
        }
        acked.extend(append_acked(&new, &[80, 81], 300, 2).await);
        new.close().await.expect("close");
        assert!(
            std::fs::metadata(root.join(&dir).join("00000000000000000000-e2.index"))
                .expect("epoch 2 index written at close")
                .len()
                > 0
        );
        let reopened = PartitionLog::open_at_epoch(&storage, &dir, config, 2)
            .await
            .expect("reopen at epoch 2");
        assert_holds(&reopened, &acked).await;
        reopened.close().await.expect("close");
    });
}

fn produced_at(seed: u64, timestamp: i64) -> Vec<u8> {
    batch(seed, 2, 300, timestamp, None)
}
