//! The files of a partition directory that recovery lists and reads besides the segments'
//! contents: segment bases, producer-state snapshots (loading the newest readable one,
//! removing old ones) and leftover temporary files.

use std::path::Path;

use crate::error::Result;
use crate::producer_state::{parse_snapshot_file_name, ProducerStateTable};
use crate::segment;
use crate::storage::Storage;

/// This epoch's segments and producer snapshots in a partition directory, ascending.
pub(super) struct Listing {
    pub segment_bases: Vec<u64>,
    pub snapshots: Vec<u64>,
}

pub(super) async fn list(storage: &Storage, dir: &Path, epoch: u32) -> Result<Listing> {
    let mut listing = Listing {
        segment_bases: Vec::new(),
        snapshots: Vec::new(),
    };
    for name in storage.list_dir(dir).await? {
        if let Some(base) = segment::parse_file_name(&name, epoch, "log") {
            listing.segment_bases.push(base);
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
) -> Result<Option<(u64, ProducerStateTable)>> {
    for offset in snapshots.iter().rev().filter(|o| **o <= limit) {
        let name = crate::producer_state::snapshot_file_name(*offset, epoch);
        if let Some(bytes) = storage.read_small(&dir.join(&name)).await? {
            match ProducerStateTable::decode_snapshot(&bytes) {
                Ok((covered, table)) if covered == *offset => return Ok(Some((covered, table))),
                Ok(_) | Err(_) => {
                    tracing::warn!(dir = %dir.display(), name, "ignoring unreadable producer snapshot");
                }
            }
        }
    }
    Ok(None)
}
