//! The offsets a `__consumer_offsets` partition may hand out, reserved durably in blocks so
//! that no offset is ever given to two records, even across `kill -9`.
//!
//! File: `__cluster/consumer-offsets/<partition>`, 12 bytes: the end of the reserved block
//! (`i64`, big-endian) and a CRC-32 (IEEE) of those 8 bytes. It is written with
//! [`Storage::write_small_durable`] (temporary file, fsync, rename, directory fsync), so a
//! crash leaves the old or the new end, never a torn one. A partition hands out offsets
//! below the durable end only; when it reaches the end, it reserves the next
//! [`BLOCK`] first. After a restart the partition resumes at the reserved end: offsets
//! between the last one used and that end are simply never used (a gap, as compaction
//! leaves). A corrupt file stops the partition from serving rather than risk reusing
//! offsets.
//!
//! That file serves a standalone broker, its only writer. In a cluster a partition's leader
//! changes, and a former leader that was paused may wake and still rewrite the file with an
//! older end, so the next leader would hand out offsets again. There, blocks are claimed
//! instead ([`Reservations::Claims`]): block `n` is offsets `[n × CLAIMED_BLOCK, (n + 1) ×
//! CLAIMED_BLOCK)`, claimed by creating the empty file `__cluster/consumer-offsets/
//! <partition>-blocks/<n>` with `O_EXCL` (the engine's `kaas_engine::block_claims`): one
//! claimant ever gets a block, whoever is stale, and a leader starting on the partition
//! claims above every block claimed so far and above the end the standalone file reserved
//! (a standalone volume turned into a cluster). A stale leader keeps handing out offsets of
//! its own blocks only, which no other leader ever uses.

use std::ops::Range;
use std::path::PathBuf;

use kaas_engine::{block_claims, EngineError, Storage};

/// Offsets reserved per durable write (standalone).
pub const BLOCK: i64 = 1 << 16;

/// Offsets per claimed block (cluster mode). Larger than [`BLOCK`]: each claim leaves a file
/// on the volume for good.
pub const CLAIMED_BLOCK: i64 = 1 << 20;

fn path(partition: i32) -> PathBuf {
    kaas_volume::in_cluster_dir(kaas_volume::CONSUMER_OFFSETS_DIR).join(partition.to_string())
}

fn claims_dir(partition: i32) -> PathBuf {
    kaas_volume::in_cluster_dir(kaas_volume::CONSUMER_OFFSETS_DIR)
        .join(format!("{partition}-blocks"))
}

/// Where a broker reserves the offsets of its `__consumer_offsets` partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reservations {
    /// The reserved end in one file per partition (a standalone broker, the only writer).
    File,
    /// One claimed block at a time (cluster mode, where a stale leader may still write).
    Claims,
}

impl Reservations {
    /// Reserves offsets for a partition this broker starts serving: where it starts and the
    /// end of what is reserved.
    pub async fn start(self, storage: &Storage, partition: i32) -> Result<Range<i64>, EngineError> {
        match self {
            Reservations::File => {
                let start = load(storage, partition).await?;
                let end = start + BLOCK;
                store(storage, partition, end).await?;
                Ok(start..end)
            }
            Reservations::Claims => claim(storage, partition, 0).await,
        }
    }

    /// Reserves offsets from `next` on, once those reserved are used up: the offsets the
    /// partition may hand out next (they start above `next` after a claim).
    pub async fn extend(
        self,
        storage: &Storage,
        partition: i32,
        next: i64,
    ) -> Result<Range<i64>, EngineError> {
        match self {
            Reservations::File => {
                store(storage, partition, next + BLOCK).await?;
                Ok(next..next + BLOCK)
            }
            Reservations::Claims => claim(storage, partition, next).await,
        }
    }
}

/// Claims the first free block whose offsets are all at least `next`, and above what the
/// standalone file reserved.
async fn claim(storage: &Storage, partition: i32, next: i64) -> Result<Range<i64>, EngineError> {
    let floor = next.max(load(storage, partition).await?);
    let from = (floor + CLAIMED_BLOCK - 1).div_euclid(CLAIMED_BLOCK);
    let block = block_claims::claim_block(storage, &claims_dir(partition), from).await?;
    Ok(block * CLAIMED_BLOCK..(block + 1) * CLAIMED_BLOCK)
}

use kaas_engine::reserved_block::{decode, encode};

/// The end of the block reserved last in the standalone file (0 when none was).
async fn load(storage: &Storage, partition: i32) -> Result<i64, EngineError> {
    let path = path(partition);
    match storage.read_small(&path).await? {
        None => Ok(0),
        Some(bytes) => decode(&bytes).ok_or_else(|| EngineError::Corrupt {
            what: path.display().to_string(),
            detail: "bad length or checksum".into(),
        }),
    }
}

/// Durably records `end` as the end of the reserved offsets in the standalone file.
async fn store(storage: &Storage, partition: i32, end: i64) -> Result<(), EngineError> {
    storage
        .create_dir_all(&kaas_volume::in_cluster_dir(
            kaas_volume::CONSUMER_OFFSETS_DIR,
        ))
        .await?;
    storage
        .write_small_durable(&path(partition), encode(end))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_round_trip_and_corruption() {
        assert_eq!(decode(&encode(BLOCK * 3)), Some(BLOCK * 3));
        let mut bad = encode(5);
        bad[7] ^= 1;
        assert_eq!(decode(&bad), None);
        assert_eq!(decode(&encode(5)[..11]), None);
    }

    fn run<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
        glommio::LocalExecutorBuilder::default()
            .spawn(move || async move { f().await })
            .expect("executor")
            .join()
            .expect("join");
    }

    #[test]
    fn claimed_blocks_never_overlap_and_go_up() {
        run(|| async {
            let storage = Storage::memory();
            // A standalone volume turned into a cluster: claims start above its reserved end.
            store(&storage, 3, 2 * BLOCK).await.expect("store");
            let first = Reservations::Claims
                .start(&storage, 3)
                .await
                .expect("claim");
            assert_eq!(first, CLAIMED_BLOCK..2 * CLAIMED_BLOCK);
            // A stale leader that reserves more after a newer leader started: its own block.
            let newer = Reservations::Claims
                .start(&storage, 3)
                .await
                .expect("claim");
            assert_eq!(newer, 2 * CLAIMED_BLOCK..3 * CLAIMED_BLOCK);
            let stale = Reservations::Claims
                .extend(&storage, 3, first.end)
                .await
                .expect("claim");
            assert_eq!(stale, 3 * CLAIMED_BLOCK..4 * CLAIMED_BLOCK);
            // Whoever claims next goes above every block, whatever it asks for.
            let next = Reservations::Claims
                .extend(&storage, 3, newer.end)
                .await
                .expect("claim");
            assert_eq!(next, 4 * CLAIMED_BLOCK..5 * CLAIMED_BLOCK);
            // Partitions claim apart.
            let other = Reservations::Claims
                .start(&storage, 4)
                .await
                .expect("claim");
            assert_eq!(other, 0..CLAIMED_BLOCK);
        });
    }

    #[test]
    fn a_stale_file_writer_cannot_lower_the_claims() {
        run(|| async {
            let storage = Storage::memory();
            let taken = Reservations::Claims
                .start(&storage, 0)
                .await
                .expect("claim");
            // The standalone file says less than what was claimed: claims still go up.
            store(&storage, 0, BLOCK).await.expect("store");
            let next = Reservations::Claims
                .start(&storage, 0)
                .await
                .expect("claim");
            assert!(next.start >= taken.end, "{next:?} after {taken:?}");
        });
    }

    #[test]
    fn file_reservations_resume_at_the_reserved_end() {
        run(|| async {
            let storage = Storage::memory();
            let first = Reservations::File.start(&storage, 1).await.expect("start");
            assert_eq!(first, 0..BLOCK);
            let more = Reservations::File
                .extend(&storage, 1, BLOCK)
                .await
                .expect("extend");
            assert_eq!(more, BLOCK..2 * BLOCK);
            let restarted = Reservations::File.start(&storage, 1).await.expect("start");
            assert_eq!(restarted, 2 * BLOCK..3 * BLOCK);
        });
    }

    #[test]
    fn reservations_survive_reopen() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let storage = Storage::memory();
                assert_eq!(load(&storage, 7).await.expect("load"), 0);
                store(&storage, 7, BLOCK).await.expect("store");
                store(&storage, 8, 2 * BLOCK).await.expect("store");
                assert_eq!(load(&storage, 7).await.expect("load"), BLOCK);
                assert_eq!(load(&storage, 8).await.expect("load"), 2 * BLOCK);
            })
            .expect("executor")
            .join()
            .expect("join");
    }
}
