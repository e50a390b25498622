//! Opening a partition log at a fence epoch: claim, inherit, recover, record (the
//! partition side of [`crate::fence`], which holds the argument).
//!
//! Inheriting from the base epoch B into epoch E, before recovery:
//! 1. B's `recovery-point`, `leader-epoch-checkpoint` and `cleaner-offset-checkpoint` are
//!    copied under E's names first: each is replaced atomically by its writer and describes
//!    segments that exist by the time they are listed next (a stale writer only removes
//!    segments below its log start; for the cleaner's, see
//!    [`crate::compaction::cleaner_checkpoint`]).
//! 2. B's producer snapshots are copied, B's segment logs hard-linked and their indexes
//!    copied (index files are small, and B may still be rewriting the active one's: a copy
//!    is E's own to rewrite). A segment is inherited with the length B's claim recorded
//!    for it, or, for one B created itself, with no bound (recovery scans to its valid
//!    end). A name that vanished meanwhile is skipped: B's retention removed it.
//! 3. The directory is fsynced; recovery then reads E's names only ([`FileScope`]).
//!
//! A takeover that fails or crashes before its record is written leaves files of epoch E
//! that nobody reads; a retry at E removes them first.

use std::collections::BTreeMap;
use std::path::Path;

use crate::compaction::cleaner_checkpoint;
use crate::config::LogConfig;
use crate::error::Result;
use crate::fence::{self, ClaimRecord, Claimed};
use crate::log::{leader_epoch_file, recovery_point_file, LogState};
use crate::producer_state::{parse_snapshot_file_name, snapshot_file_name};
use crate::recovery::{self, FileScope};
use crate::segment;
use crate::storage::Storage;

/// Claims `dir` for `epoch`, inherits and recovers. Returns the recovered state and whether
/// this was a takeover (false: a reopen of an epoch whose takeover completed before).
pub(crate) async fn recover_at_epoch(
    storage: &Storage,
    dir: &Path,
    config: &LogConfig,
    epoch: u32,
) -> Result<(LogState, bool)> {
    match fence::claim(storage, dir, epoch).await? {
        Claimed::Reopen(record) => {
            let scope = FileScope {
                epoch,
                // An adopted segment's file is this epoch's own (`fence`, "Adopting").
                inherited: record
                    .segments
                    .iter()
                    .filter(|&&(_, len)| len != fence::ADOPTED)
                    .map(|&(base, len)| (base, Some(len)))
                    .collect(),
            };
            Ok((
                recovery::recover(storage, dir, config, &scope).await?,
                false,
            ))
        }
        Claimed::Takeover {
            base_epoch,
            base_record,
        } => {
            fence::remove_unfinished(storage, dir, epoch, is_partition_file).await?;
            let inherited = inherit(storage, dir, epoch, base_epoch, base_record.as_ref()).await?;
            tracing::info!(dir = %dir.display(), epoch, base_epoch, segments = inherited.len(), "taking over a partition");
            let scope = FileScope { epoch, inherited };
            let state = recovery::recover(storage, dir, config, &scope).await?;
            let record = ClaimRecord {
                epoch,
                end_offset: state.next_offset,
                segments: state
                    .segments
                    .values()
                    .filter(|segment| segment.inherited)
                    .map(|segment| (segment.base_offset, segment.size))
                    .collect(),
            };
            fence::complete(storage, dir, &record, is_partition_file).await?;
            Ok((state, true))
        }
    }
}

/// Steps 1–3 of the module documentation. Returns the inherited segments and their bounds.
async fn inherit(
    storage: &Storage,
    dir: &Path,
    epoch: u32,
    base_epoch: u32,
    base_record: Option<&ClaimRecord>,
) -> Result<BTreeMap<u64, Option<u64>>> {
    for (from, to) in [
        (recovery_point_file(base_epoch), recovery_point_file(epoch)),
        (leader_epoch_file(base_epoch), leader_epoch_file(epoch)),
        (
            cleaner_checkpoint::file_name(base_epoch),
            cleaner_checkpoint::file_name(epoch),
        ),
    ] {
        copy(storage, dir, &from, &to).await?;
    }
    let names = storage.list_dir(dir).await?;
    for name in &names {
        if let Some(offset) = parse_snapshot_file_name(name, base_epoch) {
            copy(storage, dir, name, &snapshot_file_name(offset, epoch)).await?;
        }
    }
    let mut inherited = BTreeMap::new();
    for name in &names {
        let Some(base) = segment::parse_file_name(name, base_epoch, "log") else {
            continue;
        };
        let bound = match base_record {
            Some(record) => match record.length_of(base) {
                Some(len) => Some(len),
                None if base >= record.end_offset => None,
                // Not part of the base epoch's log (it cannot arise from our writes).
                None => continue,
            },
            None => None,
        };
        let own = segment::log_path(dir, base, epoch);
        if !storage.hard_link(&dir.join(name), &own).await? {
            continue;
        }
        for extension in ["index", "timeindex"] {
            copy(
                storage,
                dir,
                &segment::file_name(base, base_epoch, extension),
                &segment::file_name(base, epoch, extension),
            )
            .await?;
        }
        inherited.insert(base, bound);
    }
    storage.sync_dir(dir).await?;
    Ok(inherited)
}

/// Copies a small file of `dir` under a new name; a missing one is skipped.
async fn copy(storage: &Storage, dir: &Path, from: &str, to: &str) -> Result<()> {
    if let Some(bytes) = storage.read_small(&dir.join(from)).await? {
        storage.write_new_file(&dir.join(to), bytes).await?;
    }
    Ok(())
}

/// Whether `name` is one of the files a partition log keeps in its directory, at any epoch
/// (what superseded epochs leave is removed by this test, nothing else).
pub(crate) fn is_partition_file(name: &str) -> bool {
    let name = name.strip_suffix(".tmp").unwrap_or(name);
    // A cleaned segment not yet swapped in (`crate::compaction::swap`).
    let name = name.strip_suffix(".cleaned").unwrap_or(name);
    let (stem, extension) = match name.rfind('.') {
        Some(dot) => (&name[..dot], Some(&name[dot + 1..])),
        None => (name, None),
    };
    let stem = fence::split_epoch(stem).0;
    match extension {
        Some("log" | "index" | "timeindex" | "snapshot") => {
            stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit())
        }
        Some(_) => false,
        None => {
            stem == "recovery-point"
                || stem == "leader-epoch-checkpoint"
                || stem == "cleaner-offset-checkpoint"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_partition_file;

    #[test]
    fn partition_files_are_recognised_at_every_epoch() {
        for name in [
            "00000000000000000000.log",
            "00000000000000000000-e3.log",
            "00000000000000000007-e3.index",
            "00000000000000000007.timeindex",
            "00000000000000000007-e12.snapshot",
            "00000000000000000007-e12.snapshot.tmp",
            "recovery-point",
            "recovery-point-e4",
            "leader-epoch-checkpoint-e4.tmp",
            "cleaner-offset-checkpoint",
            "cleaner-offset-checkpoint-e4",
            "00000000000000000007-e3.log.cleaned",
            "00000000000000000007-e3.timeindex.cleaned.tmp",
        ] {
            assert!(is_partition_file(name), "{name}");
        }
        for name in [
            "claims",
            "notes.txt",
            "0.log",
            "recovery-point-x",
            "dma-probe",
        ] {
            assert!(!is_partition_file(name), "{name}");
        }
    }
}
