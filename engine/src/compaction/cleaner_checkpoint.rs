//! The `cleaner-offset-checkpoint` file of a partition directory: where the log's last
//! cleaning pass ended, so that after a restart or a takeover the dirty ratio and the first
//! pass start there instead of at the log start (Kafka keeps one such file per log
//! directory; kaas keeps one per partition, beside `recovery-point`).
//!
//! # Layout (big-endian, 30 bytes)
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `KCOC` |
//! | 2 | format version (1) |
//! | 4 | fence epoch of the cleaner that wrote it |
//! | 8 | cleaned-up-to offset: the first dirty offset of the next pass |
//! | 8 | earliest delete horizon the pass kept, in ms (`i64::MIN`: none) |
//! | 4 | CRC-32 (IEEE) of the 26 bytes before it |
//!
//! The name carries the writer's epoch like every other file of the log
//! (`cleaner-offset-checkpoint-e<E>`; no suffix at epoch 0, see [`crate::fence`]).
//!
//! # Write order
//!
//! A pass writes the file at its end, after every swap it made is committed (each swap
//! ends with a directory fsync, [`crate::compaction::swap`]) and, at a fence epoch, after a
//! fence check that follows the last of those swaps ([`crate::fence::check`]); a pass that
//! finds a newer claim writes nothing. The file is replaced atomically (temporary file,
//! fsync, rename, directory fsync). A crash therefore leaves the previous or the new
//! checkpoint, and either names an offset below which every pass it counts on is durable.
//!
//! # Reading it
//!
//! The cleaner reads the file of its own epoch when it first looks at a log. A missing or
//! damaged file (length, magic, version or CRC) makes the whole log dirty again: the next
//! pass re-reads it, which is slower and loses nothing. As in Kafka, an offset below the log
//! start is raised to it, and an offset past the log end (the log lost its tail behind the
//! cleaner's back) is not trusted: the log is dirty from its start.
//!
//! A takeover at epoch E copies the base epoch's file under E's name with the other
//! checkpoints ([`crate::takeover`]). That is safe because of the write order: whatever
//! value a stale cleaner at an older epoch wrote, the swaps it counts on were committed
//! before a fence check that passed, so before E superseded that cleaner and read anything;
//! the files E linked hold them.

use std::path::{Path, PathBuf};

use crate::error::{EngineError, Result};
use crate::fence;
use crate::storage::Storage;

const MAGIC: &[u8; 4] = b"KCOC";
const VERSION: u16 = 1;
/// Encoded size of the file.
pub const CLEANER_CHECKPOINT_LEN: usize = 30;
const NO_HORIZON: i64 = i64::MIN;

/// The file's name at `epoch`.
pub(crate) fn file_name(epoch: u32) -> String {
    fence::with_epoch("cleaner-offset-checkpoint", epoch)
}

fn path(dir: &Path, epoch: u32) -> PathBuf {
    dir.join(file_name(epoch))
}

/// Where a log's last cleaning pass ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanerCheckpoint {
    /// The fence epoch of the cleaner that wrote it.
    pub epoch: u32,
    /// The first dirty offset of the next pass.
    pub cleaned_up_to: u64,
    /// The earliest delete horizon among the batches that pass kept: once it has passed, a
    /// pass drops tombstones whatever the dirty ratio.
    pub earliest_delete_horizon: Option<i64>,
}

impl CleanerCheckpoint {
    /// The file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(CLEANER_CHECKPOINT_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.extend_from_slice(&self.epoch.to_be_bytes());
        out.extend_from_slice(&self.cleaned_up_to.to_be_bytes());
        out.extend_from_slice(
            &self
                .earliest_delete_horizon
                .unwrap_or(NO_HORIZON)
                .to_be_bytes(),
        );
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Parses the file's bytes, checking length, magic, version and CRC.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let corrupt = |detail: &str| EngineError::Corrupt {
            what: "cleaner-offset-checkpoint".into(),
            detail: detail.into(),
        };
        if bytes.len() != CLEANER_CHECKPOINT_LEN {
            return Err(corrupt("wrong length"));
        }
        let (body, crc) = bytes.split_at(CLEANER_CHECKPOINT_LEN - 4);
        if crc32fast::hash(body) != u32::from_be_bytes([crc[0], crc[1], crc[2], crc[3]]) {
            return Err(corrupt("checksum mismatch"));
        }
        if &body[..4] != MAGIC {
            return Err(corrupt("bad magic"));
        }
        if u16::from_be_bytes([body[4], body[5]]) != VERSION {
            return Err(corrupt("unknown version"));
        }
        let word = |at: usize| {
            let mut word = [0u8; 8];
            word.copy_from_slice(&body[at..at + 8]);
            word
        };
        let horizon = i64::from_be_bytes(word(18));
        Ok(CleanerCheckpoint {
            epoch: u32::from_be_bytes([body[6], body[7], body[8], body[9]]),
            cleaned_up_to: u64::from_be_bytes(word(10)),
            earliest_delete_horizon: (horizon != NO_HORIZON).then_some(horizon),
        })
    }
}

/// Reads the checkpoint of `epoch` in `dir`; `None` when it is missing or damaged.
pub(crate) async fn read(
    storage: &Storage,
    dir: &Path,
    epoch: u32,
) -> Result<Option<CleanerCheckpoint>> {
    let Some(bytes) = storage.read_small(&path(dir, epoch)).await? else {
        return Ok(None);
    };
    match CleanerCheckpoint::decode(&bytes) {
        Ok(checkpoint) => Ok(Some(checkpoint)),
        Err(error) => {
            tracing::warn!(dir = %dir.display(), epoch, %error, "ignoring a damaged cleaner checkpoint; the log is dirty from its start");
            Ok(None)
        }
    }
}

/// Replaces the checkpoint of `checkpoint.epoch` in `dir` (see the module doc for when).
pub(crate) async fn write(
    storage: &Storage,
    dir: &Path,
    checkpoint: &CleanerCheckpoint,
) -> Result<()> {
    storage
        .write_small_durable(&path(dir, checkpoint.epoch), checkpoint.encode())
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_round_trip_and_reject_damage() {
        for checkpoint in [
            CleanerCheckpoint {
                epoch: 0,
                cleaned_up_to: 0,
                earliest_delete_horizon: None,
            },
            CleanerCheckpoint {
                epoch: 7,
                cleaned_up_to: 123_456,
                earliest_delete_horizon: Some(1_700_000_000_000),
            },
        ] {
            let bytes = checkpoint.encode();
            assert_eq!(bytes.len(), CLEANER_CHECKPOINT_LEN);
            assert_eq!(
                CleanerCheckpoint::decode(&bytes).expect("decode"),
                checkpoint
            );
            for cut in 0..bytes.len() {
                assert!(
                    CleanerCheckpoint::decode(&bytes[..cut]).is_err(),
                    "cut at {cut}"
                );
            }
            for flip in 0..bytes.len() {
                let mut damaged = bytes.clone();
                damaged[flip] ^= 0x04;
                assert!(
                    CleanerCheckpoint::decode(&damaged).is_err(),
                    "flip at {flip}"
                );
            }
        }
        assert_eq!(file_name(0), "cleaner-offset-checkpoint");
        assert_eq!(file_name(3), "cleaner-offset-checkpoint-e3");
    }

    #[test]
    fn a_missing_or_damaged_file_reads_as_none() {
        futures_lite::future::block_on(async {
            let storage = Storage::memory();
            let dir = Path::new("topics/t/0");
            assert_eq!(read(&storage, dir, 2).await.expect("read"), None);
            let checkpoint = CleanerCheckpoint {
                epoch: 2,
                cleaned_up_to: 40,
                earliest_delete_horizon: Some(9),
            };
            write(&storage, dir, &checkpoint).await.expect("write");
            assert_eq!(
                read(&storage, dir, 2).await.expect("read"),
                Some(checkpoint)
            );
            assert_eq!(read(&storage, dir, 1).await.expect("read"), None);
            storage
                .write_small_durable(&path(dir, 2), b"KCOC".to_vec())
                .await
                .expect("damage");
            assert_eq!(read(&storage, dir, 2).await.expect("read"), None);
        });
    }
}
