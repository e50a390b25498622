//! Numbered blocks claimed on the shared volume, so that brokers sharing one data directory
//! never hand out the same number twice: producer ids (cluster mode; the broker's allocator,
//! kaas-net's `producer_ids`, decides block sizes) and the offsets of a `__consumer_offsets`
//! partition (cluster mode; kaas-net's `offsets_topic::reservation`). This module only claims
//! block numbers, through [`Storage`] (on the caller's shard, async; the blocking calls run
//! on the engine's file threads, never on the shard's thread).
//!
//! On-disk format: one directory per kind of number (producer ids:
//! `<data>/__cluster/producer-id-blocks/`), one empty file per claimed block `n` (a decimal
//! number, no padding). A broker claims a block by creating its file with
//! `O_CREAT | O_EXCL` ([`Storage::create_new`]: exactly one creator wins, on a local disk,
//! CephFS and NFS alike), then `fsync`s the file and the directory before the claim is
//! returned, so a crash can never forget a claim whose numbers were used. It starts looking
//! at one past the highest block listed (so a restart never goes back) and moves up on every
//! claim another broker won. Claim files are never removed: a number is reused only if its
//! file could be created twice. A crash leaves at most a claimed, partly used block: its
//! remaining numbers are skipped, never reused. Names that are not block numbers (a stray
//! editor file) are not claims.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::storage::Storage;

/// The directory of the producer-id claim files, relative to the storage root.
pub fn producer_id_blocks_dir() -> PathBuf {
    kaas_volume::in_cluster_dir(kaas_volume::PRODUCER_ID_BLOCKS_DIR)
}

/// Claims, in `dir` (relative to the storage root), the lowest free block numbered at least
/// `from` and above every block claimed there so far, returning its number; durable (file
/// and directory fsynced) when it returns.
pub async fn claim_block(storage: &Storage, dir: &Path, from: i64) -> Result<i64> {
    storage.create_dir_all(dir).await?;
    let mut block = from.max(highest_claimed(storage, dir).await?.map_or(0, |n| n + 1));
    loop {
        let path = dir.join(block.to_string());
        if storage.create_new(&path).await? {
            storage.sync_at_once(vec![path, dir.to_path_buf()]).await?;
            return Ok(block);
        }
        block += 1;
    }
}

async fn highest_claimed(storage: &Storage, dir: &Path) -> Result<Option<i64>> {
    Ok(storage
        .list_dir(dir)
        .await?
        .iter()
        .filter_map(|name| name.parse::<i64>().ok())
        .max())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;

    #[test]
    fn concurrent_claimers_never_share_a_block() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_path_buf();
        // Four executors on four threads, as four brokers (or shards) on one volume.
        let claimers: Vec<_> = (0..4)
            .map(|_| {
                let root = root.clone();
                glommio::LocalExecutorBuilder::default()
                    .spawn(move || async move {
                        let storage = Storage::disk(root);
                        let mut claimed = Vec::new();
                        for _ in 0..25 {
                            claimed.push(
                                claim_block(&storage, &producer_id_blocks_dir(), 0)
                                    .await
                                    .expect("claim"),
                            );
                        }
                        claimed
                    })
                    .expect("executor")
            })
            .collect();
        let mut all: Vec<i64> = claimers
            .into_iter()
            .flat_map(|c| c.join().expect("join"))
            .collect();
        all.sort_unstable();
        let claimed = all.len();
        all.dedup();
        assert_eq!(all.len(), claimed, "a block was claimed twice");
        std::fs::write(root.join(producer_id_blocks_dir()).join("notes.txt~"), b"")
            .expect("stray file");
        let next = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let storage = Storage::disk(root);
                (
                    claim_block(&storage, &producer_id_blocks_dir(), 0)
                        .await
                        .expect("claim"),
                    claim_block(&storage, &producer_id_blocks_dir(), 500)
                        .await
                        .expect("claim"),
                    claim_block(&storage, &producer_id_blocks_dir(), 0)
                        .await
                        .expect("claim"),
                )
            })
            .expect("executor")
            .join()
            .expect("join");
        assert_eq!(next, (100, 500, 501));
    }

    #[test]
    fn the_claim_files_are_the_format() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_path_buf();
        // Claims written before (by an earlier broker version): empty files named by number.
        std::fs::create_dir_all(root.join(producer_id_blocks_dir())).expect("dir");
        std::fs::write(root.join(producer_id_blocks_dir()).join("7"), b"").expect("claim");
        let storage_root = root.clone();
        let block = glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                claim_block(&Storage::disk(storage_root), &producer_id_blocks_dir(), 3)
                    .await
                    .expect("claim")
            })
            .expect("executor")
            .join()
            .expect("join");
        assert_eq!(block, 8);
        let claim = root.join(producer_id_blocks_dir()).join("8");
        assert_eq!(std::fs::metadata(&claim).expect("claim file").len(), 0);
    }
}
