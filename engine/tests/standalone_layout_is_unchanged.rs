//! Epoch 0 of the storage fence is today's layout: a log and a group store opened without
//! an epoch (standalone mode) write exactly the file names they always did, no claims, and
//! reopen the same way. A first takeover at epoch 1 of such a directory keeps everything
//! and leaves only epoch-1 names and the claim behind.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{batch, disk_storage, partition_dir, read_all, run};
use kaas_engine::{CommittedOffset, GroupChange, GroupStore, LogConfig, PartitionLog};

const NOW: i64 = 1_700_000_000_000;

/// Every file under `root`, relative to it.
fn files(root: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let relative = path.strip_prefix(root).expect("under root");
                out.insert(relative.to_string_lossy().into_owned());
            }
        }
    }
    out
}

fn legacy_name(name: &str) -> bool {
    let file = name.rsplit('/').next().unwrap_or(name);
    let stem = file.split('.').next().unwrap_or(file);
    let segment_like = stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit());
    let segment_file = ["log", "index", "timeindex", "snapshot"]
        .iter()
        .any(|ext| file == format!("{stem}.{ext}"));
    (segment_like && segment_file)
        || [
            "recovery-point",
            "leader-epoch-checkpoint",
            "offsets.log",
            "dma-probe",
        ]
        .contains(&file)
}

#[test]
fn standalone_writes_todays_names_and_a_takeover_keeps_the_data() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    run(move || async move {
        let storage = disk_storage(&root).await;
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(&storage, &partition_dir(), config.clone())
            .await
            .expect("open");
        for seed in 0..40 {
            log.append(&batch(seed, 2, 300, NOW, None), 0, NOW)
                .await
                .expect("append");
        }
        log.checkpoint().await.expect("checkpoint");
        log.close().await.expect("close");
        let group = GroupStore::open(&storage, "g").await.expect("open group");
        group
            .apply(vec![GroupChange::Commit {
                topic: "t".into(),
                partition: 0,
                committed: CommittedOffset {
                    offset: 7,
                    leader_epoch: -1,
                    metadata: String::new(),
                    commit_timestamp_ms: 1,
                },
            }])
            .await
            .expect("commit");
        drop(group);

        let written = files(&root);
        assert!(written
            .iter()
            .any(|f| f.ends_with("00000000000000000000.log")));
        for name in &written {
            assert!(legacy_name(name), "a standalone open wrote {name}");
        }

        let log = PartitionLog::open(&storage, &partition_dir(), config.clone())
            .await
            .expect("reopen");
        let before: Vec<_> = read_all(&log, 0, 1 << 20)
            .await
            .into_iter()
            .map(|b| (b.base_offset, b.bytes))
            .collect();
        assert_eq!(log.offsets().high_watermark, 80);
        log.close().await.expect("close");
        assert_eq!(files(&root), written, "a standalone reopen renamed files");

        let log = PartitionLog::open_at_epoch(&storage, &partition_dir(), config, 1)
            .await
            .expect("take over at epoch 1");
        let after: Vec<_> = read_all(&log, 0, 1 << 20)
            .await
            .into_iter()
            .map(|b| (b.base_offset, b.bytes))
            .collect();
        assert_eq!(after, before);
        // The takeover's clean-up (the shard's maintenance runs it a minute later).
        assert!(log
            .remove_superseded_files(i64::MAX)
            .await
            .expect("clean-up"));
        log.close().await.expect("close");
        let group = GroupStore::open_at_epoch(&storage, "g", 1)
            .await
            .expect("take over the group at epoch 1");
        assert_eq!(group.offset("t", 0).map(|c| c.offset), Some(7));
        drop(group);

        for name in files(&root) {
            let file = name.rsplit('/').next().unwrap_or(&name);
            let claim = name.contains("/claims/");
            let epoch_one = file.contains("-e1.") || file.ends_with("-e1");
            assert!(
                claim || epoch_one || file == "dma-probe",
                "a superseded file is left: {name}"
            );
        }
    });
}
