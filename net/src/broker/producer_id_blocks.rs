//! Producer-id blocks claimed on the shared volume (cluster mode), so that brokers sharing one
//! data directory never hand out the same producer id.
//!
//! On-disk format: `<data>/__cluster/producer-id-blocks/<n>`, one empty file per claimed
//! block; block `n` is the ids `[n * BLOCK_SIZE, (n + 1) * BLOCK_SIZE)`
//! (`producer_ids::BLOCK_SIZE`; this module deals in block numbers only). A broker claims a
//! block by creating its file with `O_CREAT | O_EXCL` (exactly one creator wins, on a local
//! disk, CephFS and NFSv3+ alike), then `fsync`s the directory before it hands out any id of
//! the block, so a crash can never forget a claim whose ids were used. It starts looking at
//! one past the highest block listed (so a restart never goes back) and moves up on every
//! claim another broker won. A crash leaves at most a claimed, partly used block: its
//! remaining ids are skipped, never reused. Blocks numbered below the standalone
//! `producer-id-block` file's end are never claimed, so a standalone volume turned into a
//! cluster keeps its ids unique too.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

/// The directory of claim files, under the data directory.
pub const BLOCKS_DIR: &str = "__cluster/producer-id-blocks";

/// Claims the lowest free block numbered at least `from`, returning its number.
pub fn claim_block(data_dir: &Path, from: i64) -> io::Result<i64> {
    let dir = data_dir.join(BLOCKS_DIR);
    std::fs::create_dir_all(&dir)?;
    let mut block = from.max(highest_claimed(&dir)?.map_or(0, |n| n + 1));
    loop {
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(claim_path(&dir, block))
        {
            Ok(_) => {
                std::fs::File::open(&dir)?.sync_all()?;
                return Ok(block);
            }
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => block += 1,
            Err(error) => return Err(error),
        }
    }
}

fn claim_path(dir: &Path, block: i64) -> PathBuf {
    dir.join(block.to_string())
}

fn highest_claimed(dir: &Path) -> io::Result<Option<i64>> {
    let mut highest = None;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        // Anything that is not a block number (a stray editor file) is not a claim.
        if let Some(block) = name.to_str().and_then(|n| n.parse::<i64>().ok()) {
            highest = highest.max(Some(block));
        }
    }
    Ok(highest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_claimers_never_share_a_block() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_path_buf();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let root = root.clone();
                std::thread::spawn(move || {
                    (0..25)
                        .map(|_| claim_block(&root, 0).expect("claim"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<i64> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("join"))
            .collect();
        all.sort_unstable();
        let claimed = all.len();
        all.dedup();
        assert_eq!(all.len(), claimed, "a block was claimed twice");
        assert_eq!(claim_block(&root, 0).expect("claim"), 100);
        assert_eq!(claim_block(&root, 500).expect("claim"), 500);
    }
}
