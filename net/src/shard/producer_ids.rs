//! Producer ids for InitProducerId, unique across restarts and, in cluster mode, across the
//! brokers sharing one volume.
//!
//! Ids are handed out from blocks of [`BLOCK_SIZE`], each reserved durably before its first id
//! is given out, so an id is never handed out twice even after `kill -9`. Where a block is
//! reserved is the one interface between allocation and the volume, [`IdBlockStore`], chosen at
//! start-up (`server.rs`):
//!
//! - **standalone** ([`IdBlockStore::File`]): the block's end is written durably to
//!   `__cluster/producer-id-block` (8 bytes, big-endian, followed by a CRC-32 of them) through
//!   the engine's `Storage`; after a restart allocation resumes at that end. A corrupt file
//!   stops the allocator rather than risk reusing ids.
//! - **cluster mode** ([`IdBlockStore::Claims`]): several brokers share the volume, so one file
//!   rewritten by each would let two of them reserve the same block: blocks are claimed
//!   instead, one `O_EXCL` file per block (the engine's [`kaas_engine::block_claims`],
//!   its on-disk format), above any block the standalone file reserved (a standalone volume
//!   turned into a cluster).
//!
//! Both go through the engine's `Storage` on shard 0's runtime: this module writes no file
//! itself.

use std::cell::Cell;
use std::ops::Range;
use std::path::Path;
use std::rc::Rc;

use glommio::sync::Semaphore;
use kaas_engine::block_claims;
use kaas_engine::{EngineError, Storage};

use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Ids reserved per durable write.
pub const BLOCK_SIZE: i64 = 1000;
fn block_file() -> std::path::PathBuf {
    kaas_volume::in_cluster_dir(kaas_volume::PRODUCER_ID_BLOCK_FILE)
}

/// Where blocks of producer ids are reserved durably.
pub enum IdBlockStore {
    /// Standalone: the end of the last reserved block, in `__cluster/producer-id-block`.
    File(Storage),
    /// Cluster mode: one claim file per block on the shared volume, above the standalone
    /// file's end.
    Claims(Storage),
}

impl IdBlockStore {
    fn storage(&self) -> &Storage {
        match self {
            IdBlockStore::File(storage) | IdBlockStore::Claims(storage) => storage,
        }
    }

    /// The first id a restarted allocator may hand out: the standalone file's end (0 without
    /// one); cluster claims only ever go above it.
    async fn resume_at(&self) -> Result<i64, EngineError> {
        match self.storage().read_small(&block_file()).await? {
            Some(bytes) => decode(&bytes).ok_or_else(|| EngineError::Corrupt {
                what: block_file().display().to_string(),
                detail: "bad length or checksum".into(),
            }),
            None => Ok(0),
        }
    }

    /// Reserves, durably, the next block of ids at or after `next`.
    async fn reserve(&self, next: i64) -> Result<Range<i64>, EngineError> {
        match self {
            IdBlockStore::File(storage) => {
                let end = next + BLOCK_SIZE;
                storage
                    .create_dir_all(Path::new(kaas_volume::CLUSTER_DIR))
                    .await?;
                storage
                    .write_small_durable(&block_file(), encode(end))
                    .await?;
                Ok(next..end)
            }
            IdBlockStore::Claims(storage) => {
                // The first whole block at or after `next`.
                let from = (next + BLOCK_SIZE - 1).div_euclid(BLOCK_SIZE);
                let block = block_claims::claim_block(
                    storage,
                    &block_claims::producer_id_blocks_dir(),
                    from,
                )
                .await?;
                Ok(block * BLOCK_SIZE..(block + 1) * BLOCK_SIZE)
            }
        }
    }
}

/// Hands out producer ids (lives on shard 0).
pub struct ProducerIdAllocator {
    store: IdBlockStore,
    next: Cell<i64>,
    block_end: Cell<i64>,
    reserving: Semaphore,
}

use kaas_engine::reserved_block::{decode, encode};

impl ProducerIdAllocator {
    /// Resumes after every block `store` reserved before.
    pub async fn load(store: IdBlockStore) -> Result<Self, EngineError> {
        let start = store.resume_at().await?;
        Ok(ProducerIdAllocator {
            store,
            next: Cell::new(start),
            block_end: Cell::new(start),
            reserving: Semaphore::new(1),
        })
    }

    /// A producer id never handed out before.
    pub async fn allocate(&self) -> Result<i64, EngineError> {
        let _permit = self
            .reserving
            .acquire_permit(1)
            .await
            .map_err(|_| EngineError::Closed)?;
        if self.next.get() >= self.block_end.get() {
            let block = self.store.reserve(self.next.get()).await?;
            self.next.set(block.start);
            self.block_end.set(block.end);
        }
        let id = self.next.get();
        self.next.set(id + 1);
        Ok(id)
    }
}

/// A new producer id from shard 0's allocator (one hop there): KAFKA_STORAGE_ERROR when its
/// block store fails, UNKNOWN_SERVER_ERROR when shard 0 has stopped.
pub async fn allocate_on_shard_zero(shard: &Rc<Shard>) -> Result<i64, ErrorCode> {
    let allocated = shard
        .router
        .call(shard, 0, |_| async move {
            match crate::shard::shard_zero::on_this_shard() {
                Some(zero) => zero
                    .producer_ids
                    .allocate()
                    .await
                    .map_err(|e| e.to_string()),
                None => Err("producer ids are allocated on shard 0".to_string()),
            }
        })
        .await;
    match allocated {
        Some(Ok(producer_id)) => Ok(producer_id),
        Some(Err(error)) => {
            tracing::error!(error, "allocating a producer id");
            Err(ErrorCode::KafkaStorageError)
        }
        None => Err(ErrorCode::UnknownServerError),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(storage: &Storage) -> IdBlockStore {
        IdBlockStore::Claims(storage.clone())
    }

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
                let first = ProducerIdAllocator::load(IdBlockStore::File(storage.clone()))
                    .await
                    .expect("load");
                let a = first.allocate().await.expect("id");
                let b = first.allocate().await.expect("id");
                assert_ne!(a, b);
                let second = ProducerIdAllocator::load(IdBlockStore::File(storage))
                    .await
                    .expect("reload");
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
                let standalone = ProducerIdAllocator::load(IdBlockStore::File(storage.clone()))
                    .await
                    .expect("load");
                let old = standalone.allocate().await.expect("id");
                let a = ProducerIdAllocator::load(claims(&storage))
                    .await
                    .expect("load");
                let b = ProducerIdAllocator::load(claims(&storage))
                    .await
                    .expect("load");
                let mut ids = vec![old];
                for _ in 0..(BLOCK_SIZE + 10) {
                    ids.push(a.allocate().await.expect("id"));
                    ids.push(b.allocate().await.expect("id"));
                }
                // A restarted broker resumes above every claimed block.
                let c = ProducerIdAllocator::load(claims(&storage))
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
