//! A group store's side of the storage fence ([`crate::fence`] holds the argument).
//!
//! A takeover at epoch E claims the group directory, replays the newest completed older
//! epoch's file (`offsets.log` for epoch 0, `offsets-e<B>.log` after) without cutting it,
//! and writes the live state as a new file of its own, `offsets-e<E>.log` (temporary file,
//! fsync, rename, directory fsync, as a compaction does). A stale coordinator can only go
//! on appending to its own epoch's file, which no newer epoch reads again. The claim's
//! record (no segments; the end offset is the new file's length) is written after the
//! file, so a takeover that died midway is redone from the same base.

use std::path::Path;

use crate::error::Result;
use crate::fence::{self, ClaimRecord, Claimed};
use crate::storage::Storage;

use super::{log_file_name, record, replay_checked, view::View};

/// Claims `dir` for `epoch` and, on a takeover, writes this epoch's file from the base's.
pub(super) async fn claim_and_inherit(
    storage: &Storage,
    group_id: &str,
    dir: &Path,
    epoch: u32,
) -> Result<()> {
    let base_epoch = match fence::claim(storage, dir, epoch).await? {
        Claimed::Reopen(_) => return Ok(()),
        Claimed::Takeover { base_epoch, .. } => base_epoch,
    };
    fence::remove_unfinished(storage, dir, epoch, is_group_file).await?;
    let base_path = dir.join(log_file_name(base_epoch));
    let view = match storage.read_small(&base_path).await? {
        Some(bytes) if !bytes.is_empty() => replay_checked(&bytes, &base_path, group_id)?.view,
        _ => View::default(),
    };
    let (file, _) = view.encode_snapshot(group_id, record::FIRST_VERSION);
    let record = ClaimRecord {
        epoch,
        end_offset: file.len() as u64,
        segments: Vec::new(),
    };
    tracing::info!(
        group = group_id,
        epoch,
        base_epoch,
        "taking over a group store"
    );
    storage
        .write_small_durable(&dir.join(log_file_name(epoch)), file)
        .await?;
    fence::complete(storage, dir, &record).await?;
    // A group store is one small file: its clean-up costs too little to defer (unlike a
    // partition's, `crate::log::PartitionLog::remove_superseded_files`).
    fence::remove_superseded(storage, dir, epoch, is_group_file).await
}

/// The name of the newest epoch's offsets file in a group directory, if any.
pub(super) async fn newest_log_file(storage: &Storage, dir: &Path) -> Result<Option<String>> {
    Ok(storage
        .list_dir(dir)
        .await?
        .into_iter()
        .filter_map(|name| log_file_epoch(&name).map(|epoch| (epoch, name)))
        .max()
        .map(|(_, name)| name))
}

/// Removes the offsets files of epochs up to `epoch` (a delete at a fence epoch: a newer
/// epoch's file and the claims stay).
pub(super) async fn remove_files_up_to(storage: &Storage, dir: &Path, epoch: u32) -> Result<()> {
    for name in storage.list_dir(dir).await? {
        if is_group_file(&name) && fence::file_epoch(&name) <= epoch {
            storage.remove(&dir.join(&name)).await?;
        }
    }
    storage.sync_dir(dir).await
}

/// The epoch of an offsets file name (`offsets.log`, `offsets-e<epoch>.log`).
fn log_file_epoch(name: &str) -> Option<u32> {
    let (stem, epoch) = fence::split_epoch(name.strip_suffix(".log")?);
    (stem == "offsets").then_some(epoch)
}

/// Whether `name` is an offsets file of any epoch, or its temporary file.
fn is_group_file(name: &str) -> bool {
    log_file_epoch(name.strip_suffix(".tmp").unwrap_or(name)).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_files_are_recognised_at_every_epoch() {
        assert_eq!(log_file_epoch("offsets.log"), Some(0));
        assert_eq!(log_file_epoch("offsets-e9.log"), Some(9));
        assert_eq!(log_file_epoch("offsets-e09.log"), None);
        assert_eq!(log_file_epoch("claims"), None);
        assert!(is_group_file("offsets-e9.log.tmp"));
        assert!(!is_group_file("other.log"));
    }
}
