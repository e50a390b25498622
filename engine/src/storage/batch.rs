//! Several small file-system calls as one file-thread job ([`Storage::batch`]).
//!
//! A takeover's claim and its inheritance are a dozen small calls each (listings, creates,
//! links, removals). Made one by one, each is a hop to a file thread and back, and the hops
//! (two thread wake-ups, a channel, the shard's poll) cost more CPU than most of the calls:
//! at 1,000 partitions a takeover's shards spent most of their time switching threads. A
//! batch runs a closure over [`Files`] on one file thread (inline for in-memory storage),
//! so a step costs one hop whatever it does. The single-call methods of [`Storage`] are
//! one-call batches.

use std::io;
use std::path::Path;

use super::{disk, memory, Storage};
use crate::error::{EngineError, Result};

/// The calls a batch makes, on paths relative to the storage root. None of them fsyncs
/// (except [`Files::create_dir_all`], as [`Storage::create_dir_all`]).
pub trait Files {
    /// The names in a directory (none when it does not exist).
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Creates a directory and its parents, fsyncing each parent that gained an entry.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Creates an empty file that must not exist yet (`O_EXCL`); false when it exists.
    fn create_new(&self, path: &Path) -> io::Result<bool>;
    /// Creates an empty file unless it exists.
    fn create_empty(&self, path: &Path) -> io::Result<()>;
    /// Removes a file; one that is gone already is not an error.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Links `to` to the file `from` names; false, linking nothing, when `from` is missing.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<bool>;
    /// Copies the small file `from` to the new name `to` (never writing through an
    /// existing `to`); false when `from` is missing.
    fn copy_new_file(&self, from: &Path, to: &Path) -> io::Result<bool>;
    /// A file's length; `None` when it does not exist.
    fn file_len(&self, path: &Path) -> io::Result<Option<u64>>;
    /// A whole small file; `None` when it does not exist.
    fn read_small(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;
    /// Writes `bytes` as a new file `path` (never writing through an existing one: a name
    /// already there is removed first).
    fn write_new(&self, path: &Path, bytes: &[u8]) -> io::Result<()>;
    /// Renames `from` over `to` (replacing it atomically).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
}

impl Storage {
    /// Runs `job` with every call it makes in one file-thread job (`what` names it in an
    /// error).
    pub async fn batch<R: Send + 'static>(
        &self,
        what: impl FnOnce() -> String,
        job: impl FnOnce(&dyn Files) -> io::Result<R> + Send + 'static,
    ) -> Result<R> {
        let result = match self {
            Storage::Disk(root) => disk::run_batch(root.clone(), job).await,
            Storage::Memory(store) => memory::run_batch(store, job),
        };
        result.map_err(|e| EngineError::io(what(), e))
    }
}

/// Names the path in an error (a batch makes many calls).
pub(super) fn at(path: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

pub(super) fn none_if_missing<T>(result: io::Result<T>) -> io::Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
