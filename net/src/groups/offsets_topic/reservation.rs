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

use std::path::PathBuf;

use kaas_engine::{EngineError, Storage};

/// Offsets reserved per durable write.
pub const BLOCK: i64 = 1 << 16;

fn path(partition: i32) -> PathBuf {
    kaas_volume::in_cluster_dir(kaas_volume::CONSUMER_OFFSETS_DIR).join(partition.to_string())
}

use kaas_engine::reserved_block::{decode, encode};

/// The end of the block reserved last (0 when none was).
pub async fn load(storage: &Storage, partition: i32) -> Result<i64, EngineError> {
    let path = path(partition);
    match storage.read_small(&path).await? {
        None => Ok(0),
        Some(bytes) => decode(&bytes).ok_or_else(|| EngineError::Corrupt {
            what: path.display().to_string(),
            detail: "bad length or checksum".into(),
        }),
    }
}

/// Durably records `end` as the end of the reserved offsets.
pub async fn store(storage: &Storage, partition: i32, end: i64) -> Result<(), EngineError> {
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
