//! Opening a partition log at a fence epoch: claim, inherit, recover, record (the
//! partition side of [`crate::fence`], which holds the argument).
//!
//! Inheriting from the base epoch B into epoch E, before recovery:
//! 1. B's `recovery-point`, `leader-epoch-checkpoint` and `cleaner-offset-checkpoint` are
//!    hard-linked under E's names first: each is replaced atomically by its writer (a
//!    rename, so the file a link names never changes) and describes segments that exist
//!    by the time they are listed next (a stale writer only removes segments below its log
//!    start; for the cleaner's, see [`crate::compaction::cleaner_checkpoint`]).
//! 2. B's producer snapshots are hard-linked (replaced by a rename too), B's segment logs
//!    hard-linked and their indexes (offset, time and transaction) copied (B may still be
//!    rewriting the active one's in place: a copy is E's own to rewrite), except the offset
//!    and time indexes of a last segment small enough to be adopted: without them recovery
//!    scans it from its start and indexes it itself (its transaction index is copied: the
//!    entries of markers below the recovery point cannot be rebuilt from the scan). A
//!    segment is inherited with the length B's claim recorded
//!    for it, or, for one B created itself, with no bound (recovery scans to its valid
//!    end). A name that vanished meanwhile is skipped: B's retention removed it.
//! 3. Recovery reads E's names only ([`FileScope`]). The new names, the copies, what
//!    recovery wrote and the directory are made durable after it, before the record, by
//!    one volume barrier ([`crate::volume_sync`]) shared with the other takeovers in flight.
//!
//! Links rather than copies wherever the writer never writes in place: on the shared disk
//! measured here (ext4), creating a file was the takeover's largest cost, kernel time
//! allocating an inode among many recently freed ones; a link allocates none, and when
//! the older epoch's names go, the link keeps the inode (it is not freed either).
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
use crate::storage::{Files, Storage};

/// How long after a takeover (or a reopen at a fence epoch) the files of older epochs are
/// removed ([`crate::fence::remove_superseded`], by the shard's maintenance): not on the
/// takeover's critical path. Nothing reads them meanwhile; what they hold is the files the
/// new epoch linked (no space of their own) and the little the takeover did not link (a
/// small tail's old copy and indexes, the old claims). On ext4 without a journal, removals
/// also make the creates that follow them slow for a minute (see the engine README, "What
/// the volume costs a takeover"): removing a burst of takeovers' files at once, one delay
/// later, keeps that cost out of the takeover. Like Kafka's `file.delete.delay.ms`.
pub(crate) const SUPERSEDED_FILES_DELAY_MS: i64 = 60_000;

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
            // What recovery writes (an adopted tail, in a run that stopped mid-way) is
            // durable before the log serves.
            let ticket = storage.sync_ticket()?;
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
            let state = recovery::recover(storage, dir, config, &scope).await?;
            storage.sync_volume(ticket).await?;
            Ok((state, false))
        }
        Claimed::Takeover {
            base_epoch,
            base_record,
        } => {
            // Everything the takeover writes from here to the record (links, copies, an
            // adopted tail) is made durable by one volume barrier before the record.
            let ticket = storage.sync_ticket()?;
            let inherited = inherit(storage, dir, epoch, base_epoch, base_record.as_ref()).await?;
            tracing::info!(dir = %dir.display(), epoch, base_epoch, segments = inherited.len(), "taking over a partition");
            let scope = FileScope { epoch, inherited };
            let state = recovery::recover(storage, dir, config, &scope).await?;
            storage.sync_volume(ticket).await?;
            // Inherited segments count with the length recovery found. A segment of E's own
            // below the recovered end can only be the inherited tail recovery adopted (every
            // other file of E's was removed before inheriting): it is recorded adopted, so a
            // reopen treats it as E's and the next takeover inherits all of it.
            let end_offset = state.next_offset;
            let record = ClaimRecord {
                epoch,
                end_offset,
                segments: state
                    .segments
                    .values()
                    .filter(|segment| segment.inherited || segment.base_offset < end_offset)
                    .map(|segment| {
                        let len = if segment.inherited {
                            segment.size
                        } else {
                            fence::ADOPTED
                        };
                        (segment.base_offset, len)
                    })
                    .collect(),
            };
            fence::complete(storage, dir, &record).await?;
            Ok((state, true))
        }
    }
}

/// Steps 1–3 of the module documentation, after removing what an unfinished takeover at
/// `epoch` left: one file-thread job. Returns the inherited segments and their bounds.
/// Nothing is synced here: the caller's volume barrier after recovery makes the links, the
/// copies and the directory durable with whatever recovery wrote, before the record.
async fn inherit(
    storage: &Storage,
    dir: &Path,
    epoch: u32,
    base_epoch: u32,
    base_record: Option<&ClaimRecord>,
) -> Result<BTreeMap<u64, Option<u64>>> {
    let owned = dir.to_path_buf();
    let base_record = base_record.cloned();
    let what = || format!("inheriting {} from epoch {base_epoch}", dir.display());
    storage
        .batch(what, move |files| {
            fence::remove_unfinished_files(files, &owned, epoch, is_partition_file)?;
            inherit_files(files, &owned, epoch, base_epoch, base_record.as_ref())
        })
        .await
}

/// [`inherit`]'s calls. Links rather than copies wherever the writer only ever replaces a
/// file by a rename (checkpoints, leader epochs, producer snapshots:
/// `Storage::write_small_durable`), so the file a link names never changes: no new inode,
/// no bytes written. Copies for the segment indexes, which their writer may rewrite in
/// place. A missing source is skipped.
fn inherit_files(
    files: &dyn Files,
    dir: &Path,
    epoch: u32,
    base_epoch: u32,
    base_record: Option<&ClaimRecord>,
) -> std::io::Result<BTreeMap<u64, Option<u64>>> {
    // The checkpoints first, before the listing (step 1 of the module documentation).
    let checkpoints = [
        (recovery_point_file(base_epoch), recovery_point_file(epoch)),
        (leader_epoch_file(base_epoch), leader_epoch_file(epoch)),
        (
            cleaner_checkpoint::file_name(base_epoch),
            cleaner_checkpoint::file_name(epoch),
        ),
    ];
    for (from, to) in &checkpoints {
        files.hard_link(&dir.join(from), &dir.join(to))?;
    }
    let names = files.list(dir)?;
    for name in &names {
        if let Some(offset) = parse_snapshot_file_name(name, base_epoch) {
            files.hard_link(
                &dir.join(name),
                &dir.join(snapshot_file_name(offset, epoch)),
            )?;
        }
    }
    let mut segments = BTreeMap::new();
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
        segments.insert(base, (name, bound));
    }
    let small_tail = match segments.last_key_value() {
        Some((_, (name, bound))) => is_small_tail(files, &dir.join(name), *bound)?,
        None => false,
    };
    let last_base = segments.keys().next_back().copied();
    let mut inherited = BTreeMap::new();
    for (base, (name, bound)) in segments {
        if !files.hard_link(&dir.join(name), &segment::log_path(dir, base, epoch))? {
            continue;
        }
        // A small last segment is adopted and its offset and time indexes rebuilt by
        // recovery (the executor's `Recovery::start_own_segment`, `recovery/mod.rs`):
        // copying them would only create two files. Its transaction index is copied all the
        // same: recovery replays producer state only from the snapshot's offset, so the
        // entries of markers below it come from the file (most segments have none).
        let tail = small_tail && Some(base) == last_base;
        let extensions: &[&str] = if tail {
            &[segment::TXN_INDEX_EXTENSION]
        } else {
            &["index", "timeindex", segment::TXN_INDEX_EXTENSION]
        };
        for extension in extensions {
            files.copy_new_file(
                &dir.join(segment::file_name(base, base_epoch, extension)),
                &dir.join(segment::file_name(base, epoch, extension)),
            )?;
        }
        inherited.insert(base, bound);
    }
    Ok(inherited)
}

/// Whether an inherited last segment counts few enough bytes for recovery to adopt it
/// (at most [`recovery::ADOPT_TAIL_MAX_BYTES`]): its recorded bound, or for one the base
/// epoch created itself, its file's length (which only grows past what counts).
fn is_small_tail(files: &dyn Files, path: &Path, bound: Option<u64>) -> std::io::Result<bool> {
    let counted = match bound {
        Some(len) => Some(len),
        None => files.file_len(path)?,
    };
    Ok(counted.is_some_and(|len| len <= recovery::ADOPT_TAIL_MAX_BYTES))
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
        Some("log" | "index" | "timeindex" | "txnindex" | "snapshot") => {
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
            "00000000000000000007-e2.txnindex",
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
