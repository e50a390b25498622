//! A leader that gives a partition up to another broker closes it without a checkpoint
//! (`PartitionLog::close_for_takeover`): it writes no recovery point, producer snapshot or
//! leader-epoch file, yet what it appended (acknowledged or still in flight) is flushed, and
//! the broker taking over at the next epoch recovers all of it from the segments, producer
//! de-duplication included. A plain close at the same point writes the checkpoint.

mod common;

use std::path::Path;

use common::{append_acked_batches, assert_holds, batch, disk_storage, run, ProducerSpec};
use kaas_engine::{EngineError, LogConfig, PartitionId, PartitionLog};

const NOW: i64 = 1_700_000_000_000;
const PRODUCER: i64 = 4_000;

/// Checkpoint files (recovery point, producer snapshots, leader epochs) of `epoch` in `dir`.
fn checkpoint_files(root: &Path, dir: &Path, epoch: u32) -> Vec<String> {
    let suffix = format!("-e{epoch}");
    let mut found: Vec<String> = std::fs::read_dir(root.join(dir))
        .expect("list")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8")
        })
        .filter(|name| {
            let stem = name.split('.').next().unwrap_or("");
            stem.ends_with(&suffix)
                && (name.starts_with("recovery-point")
                    || name.starts_with("leader-epoch-checkpoint")
                    || name.ends_with(".snapshot"))
        })
        .collect();
    found.sort();
    found
}

fn idempotent(seed: u64, base_sequence: i32) -> Vec<u8> {
    batch(
        seed,
        2,
        200,
        NOW,
        Some(ProducerSpec {
            producer_id: PRODUCER,
            epoch: 0,
            base_sequence,
        }),
    )
}

#[test]
fn a_partition_given_up_is_flushed_but_not_checkpointed_and_the_next_leader_recovers_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let storage = disk_storage(&root).await;
        let id = PartitionId::new("t", 0);
        let dir = id.dir().expect("dir");
        let old = PartitionLog::open_at_epoch(&storage, &dir, LogConfig::default(), 1)
            .await
            .expect("open at epoch 1");
        let produced = (0..3).map(|n| idempotent(n, 2 * n as i32));
        let mut expected = append_acked_batches(&old, produced, 1, NOW).await;
        // Appended, not flushed yet: the close flushes it before the files close.
        let in_flight = idempotent(3, 6);
        let outcome = old.append(&in_flight, 1, NOW).await.expect("append");
        expected.push((
            outcome.base_offset,
            common::stamped(&in_flight, outcome.base_offset, 1),
        ));

        old.close_for_takeover().await.expect("close for takeover");
        assert_eq!(checkpoint_files(&root, &dir, 1), Vec::<String>::new());
        assert!(matches!(
            old.append(&idempotent(9, 8), 1, NOW).await,
            Err(EngineError::Closed)
        ));

        let new = PartitionLog::open_at_epoch(&storage, &dir, LogConfig::default(), 2)
            .await
            .expect("take over at epoch 2");
        assert_holds(&new, &expected).await;
        // The producer's state came from the segments: its last batch again is a duplicate.
        let retry = new
            .append_durable(&idempotent(3, 6), 2, NOW)
            .await
            .expect("retry");
        assert!(retry.duplicate, "{retry:?}");
        assert_eq!(retry.base_offset, outcome.base_offset);

        // A plain close (a partition this broker reopens) does write the checkpoint.
        new.close().await.expect("close at epoch 2");
        let written = checkpoint_files(&root, &dir, 2);
        assert!(
            written
                .iter()
                .any(|name| name.starts_with("recovery-point")),
            "{written:?}"
        );
    });
}
