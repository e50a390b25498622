//! The file seam: the one place that knows whether a partition's files live on a disk
//! (glommio direct I/O) or in memory (`--in-memory` and unit tests).
//!
//! Everything above this module sees [`Storage`] (a root directory), [`LogFile`] (a segment
//! written with aligned direct writes) and [`IndexFile`] (a small file written with buffered
//! writes). Paths are relative to the storage root. Directory listing, small-file writes,
//! links, removals and directory fsyncs are rare (open, checkpoint, roll, retention) and run
//! on the engine's file threads ([`crate::file_pool`]) so a shard never blocks and many opens
//! overlap; appends, reads and segment fsyncs go through io_uring.
//!
//! Each back-end lives in its own file, `disk` and `memory`, behind the traits of this
//! module ([`Backend`] for the storage, [`SegmentFile`] and [`SmallFile`] for open files);
//! the public types here only pick the back-end. Several small calls as one file-thread
//! job are in `batch` ([`Files`]).

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use glommio::io::{BufferedFile, DmaFile, ReadResult};

use crate::aligned_buffer::{AlignedBuf, MemoryParts};
use crate::error::Result;
use crate::volume_sync::SyncTicket;

mod batch;
mod disk;
mod memory;

pub use batch::Files;
use memory::MemoryFile;
pub use memory::MemoryStore;

/// Where partition files live.
#[derive(Clone, Debug)]
pub enum Storage {
    /// A directory on a disk; segments use direct I/O.
    Disk(Arc<PathBuf>),
    /// Process memory; nothing survives the process.
    Memory(MemoryStore),
}

/// What a back-end does for [`Storage`] (the calls that are not batches; see each
/// method's public twin on [`Storage`] for its contract).
trait Backend {
    async fn read_prefix(&self, relative: &Path, max_len: usize) -> Result<Option<Vec<u8>>>;
    async fn write_small_durable(&self, relative: &Path, bytes: Vec<u8>) -> Result<()>;
    async fn sync_at_once(&self, paths: Vec<PathBuf>) -> Result<()>;
    fn sync_ticket(&self) -> Result<Option<SyncTicket>>;
    async fn sync_volume(&self, ticket: Option<SyncTicket>) -> Result<()>;
    async fn file_exists(&self, relative: &Path) -> Result<bool>;
    async fn write_in_place(&self, relative: &Path, bytes: Vec<u8>) -> Result<()>;
    async fn replace_with_copy(&self, relative: &Path, len: u64) -> Result<()>;
    async fn rename(&self, from: &Path, to: &Path) -> Result<bool>;
    async fn remove_dir_all(&self, relative: &Path) -> Result<()>;
    async fn sync_dir(&self, relative: &Path) -> Result<()>;
    async fn open_log_file(&self, relative: &Path, create: bool) -> Result<LogFile>;
    async fn open_index_file(&self, relative: &Path) -> Result<IndexFile>;
}

/// What a back-end's segment file does for [`LogFile`].
trait SegmentFile: Sized {
    fn alloc_buffer(&self, capacity: usize) -> AlignedBuf;
    /// Writes the first `write_len` bytes of a prepared buffer at `position`.
    async fn write_at(
        &self,
        parts: MemoryParts,
        write_len: usize,
        position: u64,
    ) -> std::io::Result<()>;
    async fn read_buffer(&self, position: u64, len: usize) -> std::io::Result<FileBytes>;
    async fn fdatasync(&self) -> std::io::Result<()>;
    async fn truncate(&self, size: u64) -> std::io::Result<()>;
    async fn preallocate(&self, size: u64) -> std::io::Result<()>;
    async fn size(&self) -> std::io::Result<u64>;
    async fn close(self) -> std::io::Result<()>;
}

/// What a back-end's index file does for [`IndexFile`].
trait SmallFile {
    async fn write_at(&self, bytes: Vec<u8>, position: u64) -> std::io::Result<()>;
    async fn truncate(&self, size: u64) -> std::io::Result<()>;
    async fn fdatasync(&self) -> std::io::Result<()>;
}

/// Runs `$call` with `$backend` bound to the back-end of the [`Storage`] `$storage`: the
/// one place a storage call picks its back-end.
macro_rules! on_backend {
    ($storage:expr, |$backend:ident| $call:expr) => {
        match $storage {
            Storage::Disk(root) => {
                let $backend = disk::Disk(root);
                $call
            }
            Storage::Memory(store) => {
                let $backend = store;
                $call
            }
        }
    };
}

/// Runs `$call` with `$file` bound to the back-end file inside `$value`, an enum with one
/// variant per back-end.
macro_rules! on_file {
    ($value:expr, $kind:ident { $($variant:ident),+ }, |$file:ident| $call:expr) => {
        match $value {
            $($kind::$variant($file) => $call,)+
        }
    };
}

impl Storage {
    /// Storage rooted at a directory on disk.
    pub fn disk(root: impl Into<PathBuf>) -> Self {
        Storage::Disk(Arc::new(root.into()))
    }

    /// Fresh, empty in-memory storage.
    pub fn memory() -> Self {
        Storage::Memory(MemoryStore::default())
    }

    /// True for the in-memory storage.
    pub fn is_memory(&self) -> bool {
        matches!(self, Storage::Memory(_))
    }

    /// Creates a directory and its parents, fsyncing each parent that gained an entry.
    pub async fn create_dir_all(&self, relative: &Path) -> Result<()> {
        let dir = relative.to_path_buf();
        let what = || format!("creating {}", relative.display());
        self.batch(what, move |files| files.create_dir_all(&dir))
            .await
    }

    /// Names of the entries of a directory (empty when it does not exist).
    pub async fn list_dir(&self, relative: &Path) -> Result<Vec<String>> {
        let dir = relative.to_path_buf();
        let what = || format!("listing {}", relative.display());
        self.batch(what, move |files| files.list(&dir)).await
    }

    /// Reads a whole small file; `None` when it does not exist.
    pub async fn read_small(&self, relative: &Path) -> Result<Option<Vec<u8>>> {
        let path = relative.to_path_buf();
        let what = || format!("reading {}", relative.display());
        self.batch(what, move |files| files.read_small(&path)).await
    }

    /// The length of a file; `None` when it does not exist.
    pub async fn file_len(&self, relative: &Path) -> Result<Option<u64>> {
        let path = relative.to_path_buf();
        let what = || format!("reading the size of {}", relative.display());
        self.batch(what, move |files| files.file_len(&path)).await
    }

    /// Reads at most the first `max_len` bytes of a file; `None` when it does not exist.
    pub async fn read_prefix(&self, relative: &Path, max_len: usize) -> Result<Option<Vec<u8>>> {
        on_backend!(self, |backend| backend.read_prefix(relative, max_len).await)
    }

    /// Replaces a small file atomically and durably: write a temporary file, fsync it,
    /// rename it over the target, fsync the directory. A crash leaves the old or the new
    /// content, never a mix.
    pub async fn write_small_durable(&self, relative: &Path, bytes: Vec<u8>) -> Result<()> {
        on_backend!(self, |backend| backend
            .write_small_durable(relative, bytes)
            .await)
    }

    /// Replaces small files atomically and durably, step by step, with volume barriers
    /// ([`Storage::sync_volume`]) instead of fsyncs: every file of every step is written
    /// under `<name>.tmp` (one file-thread job), a barrier makes them durable, then each
    /// step's files are renamed over their names (one job per step) and a barrier makes the
    /// step durable before the next step's renames. A crash leaves each file old or new,
    /// never a mix, and a later step's file new only if every earlier step's is. For the
    /// checkpoints of a fenced log on the cluster's dedicated volume (see
    /// [`crate::volume_sync`] for what a barrier waits for).
    pub async fn replace_small_files(&self, steps: Vec<Vec<(PathBuf, Vec<u8>)>>) -> Result<()> {
        let what = || "replacing checkpoint files".to_string();
        let ticket = self.sync_ticket()?;
        let steps = self
            .batch(what, move |files| {
                for (path, bytes) in steps.iter().flatten() {
                    files.write_new(&tmp_path(path), bytes)?;
                }
                Ok(steps)
            })
            .await?;
        self.sync_volume(ticket).await?;
        for step in steps {
            let ticket = self.sync_ticket()?;
            let paths: Vec<PathBuf> = step.into_iter().map(|(path, _)| path).collect();
            self.batch(what, move |files| {
                paths
                    .iter()
                    .try_for_each(|path| files.rename(&tmp_path(path), path))
            })
            .await?;
            self.sync_volume(ticket).await?;
        }
        Ok(())
    }

    /// Creates an empty file that must not exist yet (`O_EXCL`), without any fsync: the
    /// caller makes it durable with [`Storage::sync_at_once`] (the file and its directory)
    /// before anything depends on it surviving a crash. Returns false, creating nothing,
    /// when the file already exists. On a shared volume this is the claim primitive of
    /// [`crate::fence`]: of several brokers creating the same name, exactly one succeeds,
    /// and the name is visible to all once it returns.
    pub async fn create_new(&self, relative: &Path) -> Result<bool> {
        let path = relative.to_path_buf();
        let what = || format!("creating {}", relative.display());
        self.batch(what, move |files| files.create_new(&path)).await
    }

    /// Fsyncs every file and directory in `paths` at once (one file-thread job each) and
    /// returns when all are durable, or with the first error. Independent fsyncs that run
    /// together share the file system's journal commits, so a batch costs about one fsync's
    /// wait instead of one per path: what a takeover does for the files it just wrote and
    /// the directory that names them. A path that does not exist is an error.
    pub async fn sync_at_once(&self, paths: Vec<PathBuf>) -> Result<()> {
        on_backend!(self, |backend| backend.sync_at_once(paths).await)
    }

    /// A ticket for a volume barrier covering the writes that follow
    /// ([`crate::volume_sync`]); wait for it with [`Storage::sync_volume`].
    pub fn sync_ticket(&self) -> Result<Option<SyncTicket>> {
        on_backend!(self, |backend| backend.sync_ticket())
    }

    /// Returns once everything written on the volume before `ticket` was taken is durable:
    /// one `syncfs` shared with every caller waiting at the same time, instead of an fsync
    /// per file and directory ([`crate::volume_sync`]).
    pub async fn sync_volume(&self, ticket: Option<SyncTicket>) -> Result<()> {
        on_backend!(self, |backend| backend.sync_volume(ticket).await)
    }

    /// Creates an empty file unless it exists, without any fsync: the caller fsyncs the
    /// directory afterwards (the fence's liveness token, [`crate::fence`]).
    pub async fn create_empty(&self, relative: &Path) -> Result<()> {
        let path = relative.to_path_buf();
        let what = || format!("creating {}", relative.display());
        self.batch(what, move |files| files.create_empty(&path))
            .await
    }

    /// Whether a file exists, asked on the shard's ring (an `openat`, and for a file that
    /// exists the `statx` and `close` glommio adds), not on a file thread: the fence's check
    /// after every group commit ([`crate::fence::check`]), a few µs instead of a hop to
    /// another thread and back.
    pub async fn file_exists(&self, relative: &Path) -> Result<bool> {
        on_backend!(self, |backend| backend.file_exists(relative).await)
    }

    /// Gives the file `from` a second name `to` (a hard link: both names are one file, and
    /// removing either leaves the other). Returns false when `from` does not exist. `to`
    /// must not exist. The directory is not fsynced: callers sync it once after a batch.
    pub async fn hard_link(&self, from: &Path, to: &Path) -> Result<bool> {
        let (source, target) = (from.to_path_buf(), to.to_path_buf());
        let what = || format!("linking {} to {}", to.display(), from.display());
        self.batch(what, move |files| files.hard_link(&source, &target))
            .await
    }

    /// Writes a file under a name nobody else uses yet, without any fsync: for batches of
    /// new files that the caller makes durable at once ([`Storage::sync_at_once`], with
    /// their directory), and which count only once a later durable write says so.
    pub async fn write_new_file(&self, relative: &Path, bytes: Vec<u8>) -> Result<()> {
        let path = relative.to_path_buf();
        let what = || format!("writing {}", relative.display());
        self.batch(what, move |files| files.write_new(&path, &bytes))
            .await
    }

    /// Copies the small file `from` under the new name `to` ([`Storage::write_new_file`]:
    /// no fsync) in one file-thread job; returns false, writing nothing, when `from` does
    /// not exist.
    pub async fn copy_new_file(&self, from: &Path, to: &Path) -> Result<bool> {
        let (source, target) = (from.to_path_buf(), to.to_path_buf());
        let what = || format!("copying {} to {}", from.display(), to.display());
        self.batch(what, move |files| files.copy_new_file(&source, &target))
            .await
    }

    /// Writes `bytes` as the whole content of `relative` in place (created or truncated, no
    /// temporary file, no fsync): for a file whose readers treat a torn or empty copy as
    /// absent (the claim record of [`crate::fence`], checked by its CRC), made durable by
    /// the caller.
    pub async fn write_in_place(&self, relative: &Path, bytes: Vec<u8>) -> Result<()> {
        on_backend!(self, |backend| backend
            .write_in_place(relative, bytes)
            .await)
    }

    /// Gives `relative` a new file of its own holding the first `len` bytes of the file it
    /// names now (which may be a hard link shared with another epoch): the bytes are copied
    /// to `<name>.tmp` and renamed over `relative`, so the old file, under its other names,
    /// is left as it was. Nothing is synced: the caller makes the copy and the rename
    /// durable ([`Storage::sync_volume`]) before anything depends on them after a crash.
    pub async fn replace_with_copy(&self, relative: &Path, len: u64) -> Result<()> {
        on_backend!(self, |backend| backend
            .replace_with_copy(relative, len)
            .await)
    }

    /// Renames `from` to `to`, replacing `to` atomically when it exists (another name of
    /// the replaced file, a hard link, keeps it). Returns false when `from` does not exist.
    /// The directory is not fsynced: callers sync it once after a batch of renames.
    pub async fn rename(&self, from: &Path, to: &Path) -> Result<bool> {
        on_backend!(self, |backend| backend.rename(from, to).await)
    }

    /// Removes a file; a missing file is not an error.
    pub async fn remove(&self, relative: &Path) -> Result<()> {
        let path = relative.to_path_buf();
        let what = || format!("removing {}", relative.display());
        self.batch(what, move |files| files.remove(&path)).await
    }

    /// Removes a directory and everything below it.
    pub async fn remove_dir_all(&self, relative: &Path) -> Result<()> {
        on_backend!(self, |backend| backend.remove_dir_all(relative).await)
    }

    /// Fsyncs a directory so that entries created or removed in it are durable.
    pub async fn sync_dir(&self, relative: &Path) -> Result<()> {
        on_backend!(self, |backend| backend.sync_dir(relative).await)
    }

    /// Opens (or creates) a segment file for direct I/O.
    pub async fn open_log_file(&self, relative: &Path, create: bool) -> Result<LogFile> {
        on_backend!(self, |backend| backend
            .open_log_file(relative, create)
            .await)
    }

    /// Opens (or creates) an index file for buffered writes.
    pub async fn open_index_file(&self, relative: &Path) -> Result<IndexFile> {
        on_backend!(self, |backend| backend.open_index_file(relative).await)
    }
}

/// `<path>.tmp`: where a file is written before it is renamed over `path`.
fn tmp_path(path: &Path) -> PathBuf {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    PathBuf::from(tmp_name)
}

/// A segment file: aligned direct writes, reads at any position, fdatasync.
#[derive(Clone)]
pub enum LogFile {
    /// A glommio DMA file.
    Dma(Rc<DmaFile>),
    /// An in-memory file.
    Memory(MemoryFile),
}

/// Bytes read from a [`LogFile`], in the buffer they were read into.
pub enum FileBytes {
    /// A direct-I/O read buffer (shard-local).
    Dma(ReadResult),
    /// A copy out of an in-memory file.
    Memory(Bytes),
}

impl FileBytes {
    /// The bytes in a buffer that can leave the shard (a copy of a direct-I/O buffer).
    pub fn into_bytes(self) -> Bytes {
        match self {
            FileBytes::Dma(bytes) => Bytes::copy_from_slice(&bytes),
            FileBytes::Memory(bytes) => bytes,
        }
    }
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Dma(bytes) => bytes,
            FileBytes::Memory(bytes) => bytes,
        }
    }
}

impl LogFile {
    /// A write buffer of at least `capacity` bytes (rounded up to whole pages).
    pub fn alloc_buffer(&self, capacity: usize) -> AlignedBuf {
        let capacity = crate::aligned_buffer::align_up(capacity.max(1) as u64) as usize;
        on_file!(self, LogFile { Dma, Memory }, |file| file
            .alloc_buffer(capacity))
    }

    /// Writes the buffer's whole pages at an aligned position.
    pub async fn write_at(&self, mut buffer: AlignedBuf, position: u64) -> std::io::Result<()> {
        buffer.prepare_for_write();
        let write_len = buffer.write_len();
        let parts = buffer.into_memory();
        on_file!(self, LogFile { Dma, Memory }, |file| {
            SegmentFile::write_at(file, parts, write_len, position).await
        })
    }

    /// Reads up to `len` bytes at `position` (fewer at the end of the file).
    pub async fn read_at(&self, position: u64, len: usize) -> std::io::Result<Bytes> {
        Ok(self.read_buffer(position, len).await?.into_bytes())
    }

    /// Like [`LogFile::read_at`], but the bytes stay in the buffer they were read into, which
    /// cannot leave the shard.
    pub async fn read_buffer(&self, position: u64, len: usize) -> std::io::Result<FileBytes> {
        on_file!(self, LogFile { Dma, Memory }, |file| {
            file.read_buffer(position, len).await
        })
    }

    /// Makes every completed write durable.
    pub async fn fdatasync(&self) -> std::io::Result<()> {
        on_file!(self, LogFile { Dma, Memory }, |file| {
            SegmentFile::fdatasync(file).await
        })
    }

    /// Cuts the file to `size` bytes.
    pub async fn truncate(&self, size: u64) -> std::io::Result<()> {
        on_file!(self, LogFile { Dma, Memory }, |file| {
            SegmentFile::truncate(file, size).await
        })
    }

    /// Reserves disk blocks up to `size` without changing the file size, so that later
    /// writes and fdatasyncs rarely need block allocation.
    pub async fn preallocate(&self, size: u64) -> std::io::Result<()> {
        on_file!(self, LogFile { Dma, Memory }, |file| file
            .preallocate(size)
            .await)
    }

    /// The file's size in bytes.
    pub async fn size(&self) -> std::io::Result<u64> {
        on_file!(self, LogFile { Dma, Memory }, |file| file.size().await)
    }

    /// Closes the file (the descriptor goes when the last clone is dropped).
    pub async fn close(self) -> std::io::Result<()> {
        on_file!(self, LogFile { Dma, Memory }, |file| SegmentFile::close(
            file
        )
        .await)
    }
}

/// A small file written with buffered writes (segment indexes).
#[derive(Clone)]
pub enum IndexFile {
    /// A glommio buffered file.
    Buffered(Rc<BufferedFile>),
    /// An in-memory file.
    Memory(MemoryFile),
}

impl IndexFile {
    /// Writes `bytes` at `position`.
    pub async fn write_at(&self, bytes: Vec<u8>, position: u64) -> std::io::Result<()> {
        on_file!(self, IndexFile { Buffered, Memory }, |file| {
            SmallFile::write_at(file, bytes, position).await
        })
    }

    /// Cuts the file to `size` bytes.
    pub async fn truncate(&self, size: u64) -> std::io::Result<()> {
        on_file!(self, IndexFile { Buffered, Memory }, |file| {
            SmallFile::truncate(file, size).await
        })
    }

    /// Makes completed writes durable.
    pub async fn fdatasync(&self) -> std::io::Result<()> {
        on_file!(self, IndexFile { Buffered, Memory }, |file| {
            SmallFile::fdatasync(file).await
        })
    }
}

/// A call on a file `from` that is gone answers false rather than failing: the callers of
/// [`Storage::hard_link`] and [`Storage::rename`] treat a missing source as "nothing to do".
fn source_existed(result: std::io::Result<()>) -> std::io::Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}
