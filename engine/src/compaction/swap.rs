//! The crash-safe swap of a cleaned segment for the one it replaces.
//!
//! # Files
//!
//! A pass at fence epoch E cleaning segment `<base>` writes, next to its live files
//! (`<base:020>-e<E>.log`, `.index`, `.timeindex`; no suffix at epoch 0, see
//! [`crate::fence`]):
//!
//! ```text
//! <base:020>-e<E>.log.cleaned         the cleaned batches, exact size, fdatasync'd
//! <base:020>-e<E>.index.cleaned       its offset index (tmp + fsync + rename)
//! <base:020>-e<E>.timeindex.cleaned   its time index (tmp + fsync + rename)
//! ```
//!
//! The log is written (and synced) before its indexes, so an index `.cleaned` file implies
//! that the log `.cleaned` file was complete.
//!
//! # The swap ([`commit`])
//!
//! 1. Remove the live index files, fsync the directory. The segment now has no index:
//!    whoever opens it rebuilds one from its log, whichever log that is.
//! 2. Rename `log.cleaned` over the live log (atomic), fsync the directory. **This is the
//!    commit point.**
//! 3. Rename the index `.cleaned` files to the live names, fsync the directory.
//!
//! # States a crash leaves, and what recovery does ([`finish_interrupted`], run first by
//! every recovery of the epoch's files)
//!
//! - `log.cleaned` present (writing, or before step 2): roll back — remove the index
//!   `.cleaned` files, then `log.cleaned` (in that order, so that the implication above
//!   holds at every moment). The live log is the old one; if step 1 ran, its indexes are
//!   missing and recovery rebuilds them.
//! - no `log.cleaned` but an index `.cleaned` file (between steps 2 and 3): the live log is
//!   the cleaned one; complete step 3.
//! - neither: nothing to do.
//!
//! Either way the live log is a whole segment, the old or the cleaned one, and both hold
//! the latest record of every key at its offset: the last value per key is the same.
//!
//! # The fence
//!
//! The files carry the cleaner's epoch; files of other epochs are never touched (a stale
//! cleaner's leftovers are removed by the next takeover with the rest of its epoch's names).
//! Before step 1 the cleaner checks for a newer claim ([`crate::fence::check`]) and gives
//! the result up if there is one. A takeover that claims after that check hard-links the
//! live names at some moment of the swap: it gets the old or the cleaned log, and either no
//! index (rebuilt) or the one belonging to that log — never a mix, because the old indexes
//! are gone before the log changes. Renaming over the cleaner's own name never changes the
//! file the new leader linked.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::segment;
use crate::storage::Storage;

const SUFFIX: &str = ".cleaned";
const EXTENSIONS: [&str; 3] = ["log", "index", "timeindex"];

/// The temporary name of segment `base`'s file with `extension` at `epoch`.
pub fn cleaned_path(dir: &Path, base: u64, epoch: u32, extension: &str) -> PathBuf {
    dir.join(format!(
        "{}{SUFFIX}",
        segment::file_name(base, epoch, extension)
    ))
}

fn live_path(dir: &Path, base: u64, epoch: u32, extension: &str) -> PathBuf {
    dir.join(segment::file_name(base, epoch, extension))
}

/// Swaps the cleaned files of segment `base` in (see the module doc).
pub async fn commit(storage: &Storage, dir: &Path, base: u64, epoch: u32) -> Result<()> {
    for extension in ["index", "timeindex"] {
        storage
            .remove(&live_path(dir, base, epoch, extension))
            .await?;
    }
    storage.sync_dir(dir).await?;
    storage
        .rename(
            &cleaned_path(dir, base, epoch, "log"),
            &live_path(dir, base, epoch, "log"),
        )
        .await?;
    storage.sync_dir(dir).await?;
    finish_indexes(storage, dir, base, epoch).await
}

async fn finish_indexes(storage: &Storage, dir: &Path, base: u64, epoch: u32) -> Result<()> {
    for extension in ["index", "timeindex"] {
        storage
            .rename(
                &cleaned_path(dir, base, epoch, extension),
                &live_path(dir, base, epoch, extension),
            )
            .await?;
    }
    storage.sync_dir(dir).await
}

/// Removes the cleaned files of segment `base` (a pass given up, or rolled back).
pub async fn discard(storage: &Storage, dir: &Path, base: u64, epoch: u32) -> Result<()> {
    for extension in ["index", "timeindex", "log"] {
        storage
            .remove(&cleaned_path(dir, base, epoch, extension))
            .await?;
    }
    Ok(())
}

/// Parses `<base:020>[-e<epoch>].<extension>.cleaned` of `epoch`: (base, extension).
fn parse_cleaned(name: &str, epoch: u32) -> Option<(u64, &'static str)> {
    let live = name.strip_suffix(SUFFIX)?;
    EXTENSIONS.into_iter().find_map(|extension| {
        segment::parse_file_name(live, epoch, extension).map(|b| (b, extension))
    })
}

/// Completes or rolls back every swap of `epoch` that a crash interrupted in `dir`.
pub async fn finish_interrupted(storage: &Storage, dir: &Path, epoch: u32) -> Result<()> {
    let mut found: std::collections::BTreeMap<u64, Vec<&'static str>> = Default::default();
    for name in storage.list_dir(dir).await? {
        if let Some((base, extension)) = parse_cleaned(&name, epoch) {
            found.entry(base).or_default().push(extension);
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    for (base, extensions) in found {
        if extensions.contains(&"log") {
            tracing::info!(dir = %dir.display(), base, "rolling back an interrupted compaction swap");
            discard(storage, dir, base, epoch).await?;
        } else {
            tracing::info!(dir = %dir.display(), base, "completing an interrupted compaction swap");
            finish_indexes(storage, dir, base, epoch).await?;
        }
    }
    storage.sync_dir(dir).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaned_names_parse_only_at_their_epoch() {
        let dir = Path::new("d");
        let name = |base, epoch, ext| {
            cleaned_path(dir, base, epoch, ext)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        assert_eq!(name(7, 0, "log"), "00000000000000000007.log.cleaned");
        assert_eq!(name(7, 3, "index"), "00000000000000000007-e3.index.cleaned");
        assert_eq!(parse_cleaned(&name(7, 3, "index"), 3), Some((7, "index")));
        assert_eq!(parse_cleaned(&name(7, 3, "index"), 0), None);
        assert_eq!(
            parse_cleaned(&name(9, 0, "timeindex"), 0),
            Some((9, "timeindex"))
        );
        assert_eq!(parse_cleaned("00000000000000000007.log", 0), None);
    }
}
