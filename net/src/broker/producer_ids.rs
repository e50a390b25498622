//! Producer ids for InitProducerId, unique across restarts.
//!
//! Ids are handed out from blocks of [`BLOCK_SIZE`]. Before the first id of a block is
//! given out, the block's end is written durably to `__cluster/producer-id-block` (8 bytes,
//! big-endian, followed by a CRC-32 of them); after a restart allocation resumes at that
//! end, so an id is never handed out twice even after `kill -9`. A corrupt file stops the
//! allocator rather than risk reusing ids.
//!
//! In cluster mode several brokers share the volume, so one file rewritten by each would let
//! two of them reserve the same block: blocks are claimed instead, one `O_EXCL` file per block
//! ([`crate::broker::producer_id_blocks`]).

use std::cell::Cell;
use std::path::{Path, PathBuf};

use glommio::sync::Semaphore;
use kaas_engine::{EngineError, Storage};

/// Ids reserved per durable write.
pub const BLOCK_SIZE: i64 = 1000;
const BLOCK_FILE: &str = "__cluster/producer-id-block";

/// Hands out producer ids (lives on shard 0).
pub struct ProducerIdAllocator {
    storage: Storage,
    next: Cell<i64>,
    block_end: Cell<i64>,
    reserving: Semaphore,
    /// Cluster mode: the shared data directory blocks are claimed in.
    claims_in: Option<PathBuf>,
}

fn encode(end: i64) -> Vec<u8> {
    let mut bytes = end.to_be_bytes().to_vec();
    bytes.extend_from_slice(&crc32fast::hash(&end.to_be_bytes()).to_be_bytes());
    bytes
}

fn decode(bytes: &[u8]) -> Option<i64> {
    let (value, crc) = (bytes.get(..8)?, bytes.get(8..12)?);
    if bytes.len() != 12 || crc32fast::hash(value).to_be_bytes() != crc {
        return None;
    }
    let mut word = [0u8; 8];
    word.copy_from_slice(value);
    Some(i64::from_be_bytes(word))
}

impl ProducerIdAllocator {
    /// Resumes after the last reserved block.
    pub async fn load(storage: Storage) -> Result<Self, EngineError> {
        let start = match storage.read_small(Path::new(BLOCK_FILE)).await? {
            Some(bytes) => decode(&bytes).ok_or_else(|| EngineError::Corrupt {
                what: BLOCK_FILE.into(),
                detail: "bad length or checksum".into(),
            })?,
            None => 0,
        };
        Ok(ProducerIdAllocator {
            storage,
            next: Cell::new(start),
            block_end: Cell::new(start),
            reserving: Semaphore::new(1),
            claims_in: None,
        })
    }

    /// An allocator of a broker in a cluster sharing `data_dir`: every block is claimed on the
    /// volume, above any block the standalone file reserved.
    pub async fn load_cluster(storage: Storage, data_dir: PathBuf) -> Result<Self, EngineError> {
        let mut allocator = Self::load(storage).await?;
        allocator.claims_in = Some(data_dir);
        Ok(allocator)
    }

    /// A producer id never handed out before.
    pub async fn allocate(&self) -> Result<i64, EngineError> {
        let _permit = self
            .reserving
            .acquire_permit(1)
            .await
            .map_err(|_| EngineError::Closed)?;
        if let (true, Some(dir)) = (self.next.get() >= self.block_end.get(), &self.claims_in) {
            let dir = dir.clone();
            let from =
                crate::broker::producer_id_blocks::block_of(self.next.get() + BLOCK_SIZE - 1);
            let block = glommio::executor()
                .spawn_blocking(move || crate::broker::producer_id_blocks::claim_block(&dir, from))
                .await
                .map_err(|e| EngineError::Io {
                    context: "claiming a producer id block".into(),
                    source: e,
                })?;
            self.next.set(block * BLOCK_SIZE);
            self.block_end.set((block + 1) * BLOCK_SIZE);
        }
        if self.next.get() >= self.block_end.get() {
            let end = self.next.get() + BLOCK_SIZE;
            self.storage.create_dir_all(Path::new("__cluster")).await?;
            self.storage
                .write_small_durable(Path::new(BLOCK_FILE), encode(end))
                .await?;
            self.block_end.set(end);
        }
        let id = self.next.get();
        self.next.set(id + 1);
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_file_round_trip_and_corruption() {
        assert_eq!(decode(&encode(123_000)), Some(123_000));
        let mut bad = encode(5);
        bad[3] ^= 1;
        assert_eq!(decode(&bad), None);
        assert_eq!(decode(&bad[..11]), None);
    }

    #[test]
    fn ids_are_unique_across_reloads() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let storage = Storage::memory();
                let first = ProducerIdAllocator::load(storage.clone())
                    .await
                    .expect("load");
                let a = first.allocate().await.expect("id");
                let b = first.allocate().await.expect("id");
                assert_ne!(a, b);
                let second = ProducerIdAllocator::load(storage).await.expect("reload");
                let c = second.allocate().await.expect("id");
                assert!(c > b, "{c} after {b}");
            })
            .expect("executor")
            .join()
            .expect("join");
    }

    #[test]
    fn brokers_sharing_a_volume_never_share_an_id() {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().to_path_buf();
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move {
                let storage = Storage::disk(root.clone());
                // A standalone broker used the volume first.
                let standalone = ProducerIdAllocator::load(storage.clone())
                    .await
                    .expect("load");
                let old = standalone.allocate().await.expect("id");
                let a = ProducerIdAllocator::load_cluster(storage.clone(), root.clone())
                    .await
                    .expect("load");
                let b = ProducerIdAllocator::load_cluster(storage.clone(), root.clone())
                    .await
                    .expect("load");
                let mut ids = vec![old];
                for _ in 0..(BLOCK_SIZE + 10) {
                    ids.push(a.allocate().await.expect("id"));
                    ids.push(b.allocate().await.expect("id"));
                }
                // A restarted broker resumes above every claimed block.
                let c = ProducerIdAllocator::load_cluster(storage, root)
                    .await
                    .expect("load");
                ids.push(c.allocate().await.expect("id"));
                let count = ids.len();
                ids.sort_unstable();
                ids.dedup();
                assert_eq!(ids.len(), count, "an id was handed out twice");
            })
            .expect("executor")
            .join()
            .expect("join");
    }
}
