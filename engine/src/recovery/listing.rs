//! The files of a partition directory that recovery lists and reads besides the segments'
//! contents: segment bases, transaction indexes (which exist, and the entries recovery
//! keeps of them), producer-state snapshots (loading the newest readable one, removing old
//! ones) and leftover temporary files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::error::Result;
use crate::producer_state::{parse_snapshot_file_name, ProducerStateTable, Snapshot};
use crate::segment;
use crate::storage::Storage;
use crate::txn_index::{self, Damaged, SegmentTxnIndex};

/// The largest transaction index read (a million entries): a larger one is taken for
/// damage and rebuilt.
const MAX_TXN_INDEX_BYTES: usize = 34 << 20;

/// This epoch's segments, their transaction indexes and the producer snapshots in a
/// partition directory, ascending.
pub(super) struct Listing {
    pub segment_bases: Vec<u64>,
    pub snapshots: Vec<u64>,
    /// Bases of the segments that have a `.txnindex` file.
    pub txn_indexes: BTreeSet<u64>,
}

pub(super) async fn list(storage: &Storage, dir: &Path, epoch: u32) -> Result<Listing> {
    let mut listing = Listing {
        segment_bases: Vec::new(),
        snapshots: Vec::new(),
        txn_indexes: BTreeSet::new(),
    };
    for name in storage.list_dir(dir).await? {
        if let Some(base) = segment::parse_file_name(&name, epoch, "log") {
            listing.segment_bases.push(base);
        } else if let Some(base) =
            segment::parse_file_name(&name, epoch, segment::TXN_INDEX_EXTENSION)
        {
            listing.txn_indexes.insert(base);
        } else if let Some(offset) = parse_snapshot_file_name(&name, epoch) {
            listing.snapshots.push(offset);
        } else if name.ends_with(".tmp") && crate::fence::file_epoch(&name) == epoch {
            // Another epoch's temporary file may be one its (stale) writer is writing.
            storage.remove(&dir.join(&name)).await?;
        }
    }
    listing.segment_bases.sort_unstable();
    listing.snapshots.sort_unstable();
    Ok(listing)
}

/// Removes all but the newest `keep` producer-state snapshots.
pub(crate) async fn remove_old_snapshots(
    storage: &Storage,
    dir: &Path,
    keep: usize,
    epoch: u32,
) -> Result<()> {
    let listing = list(storage, dir, epoch).await?;
    let excess = listing.snapshots.len().saturating_sub(keep);
    for offset in &listing.snapshots[..excess] {
        let name = crate::producer_state::snapshot_file_name(*offset, epoch);
        storage.remove(&dir.join(name)).await?;
    }
    Ok(())
}

/// Loads the newest valid snapshot at or below `limit`.
pub(super) async fn load_snapshot(
    storage: &Storage,
    dir: &Path,
    snapshots: &[u64],
    limit: u64,
    epoch: u32,
) -> Result<Option<Snapshot>> {
    for offset in snapshots.iter().rev().filter(|o| **o <= limit) {
        let name = crate::producer_state::snapshot_file_name(*offset, epoch);
        if let Some(bytes) = storage.read_small(&dir.join(&name)).await? {
            match ProducerStateTable::decode_snapshot(&bytes) {
                Ok(snapshot) if snapshot.covers_up_to_offset == *offset => {
                    return Ok(Some(snapshot))
                }
                Ok(_) | Err(_) => {
                    tracing::warn!(dir = %dir.display(), name, "ignoring unreadable producer snapshot");
                }
            }
        }
    }
    Ok(None)
}

/// The transaction index of every segment as recovery starts it (see [`crate::txn_index`]):
/// for a segment holding offsets below `replay_from`, the entries of its file whose
/// markers lie below `replay_from` (all of them for a segment wholly below it); for the
/// others none (the scan's replay rebuilds them). `with_entries` lists the segments the
/// producer snapshot taken at `replay_from` says have entries below it. `Err` names a
/// segment whose file is missing or holds damage among the entries kept.
pub(super) async fn load_txn_indexes(
    storage: &Storage,
    dir: &Path,
    epoch: u32,
    listing: &Listing,
    bases: &[u64],
    replay_from: u64,
    with_entries: &[u64],
) -> Result<std::result::Result<BTreeMap<u64, SegmentTxnIndex>, (u64, Damaged)>> {
    let mut loaded = BTreeMap::new();
    for (i, &base) in bases.iter().enumerate() {
        let exists = listing.txn_indexes.contains(&base);
        let expected = base < replay_from && with_entries.binary_search(&base).is_ok();
        if expected && !exists {
            return Ok(Err((base, Damaged("missing"))));
        }
        if !exists || base >= replay_from {
            loaded.insert(base, SegmentTxnIndex::loaded(Vec::new(), exists));
            continue;
        }
        let path = segment::txn_index_path(dir, base, epoch);
        let bytes = storage
            .read_prefix(&path, MAX_TXN_INDEX_BYTES + 1)
            .await?
            .unwrap_or_default();
        let parsed = if bytes.len() > MAX_TXN_INDEX_BYTES {
            Err(Damaged("larger than any index recovery reads"))
        } else {
            match bases.get(i + 1) {
                Some(&next_base) if next_base <= replay_from => {
                    txn_index::parse_sealed(&bytes, base, next_base)
                }
                _ => txn_index::parse_below(&bytes, base, replay_from),
            }
        };
        match parsed {
            Ok(entries) if expected && entries.is_empty() => {
                return Ok(Err((
                    base,
                    Damaged("no entry where the snapshot counts some"),
                )));
            }
            Ok(entries) => {
                loaded.insert(base, SegmentTxnIndex::loaded(entries, true));
            }
            Err(damaged) => return Ok(Err((base, damaged))),
        }
    }
    Ok(Ok(loaded))
}
