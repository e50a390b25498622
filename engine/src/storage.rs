//! The file seam: the one place that knows whether a partition's files live on a disk
//! (glommio direct I/O) or in memory (`--in-memory` and unit tests).
//!
//! Everything above this module sees [`Storage`] (a root directory), [`LogFile`] (a segment
//! written with aligned direct writes) and [`IndexFile`] (a small file written with buffered
//! writes). Paths are relative to the storage root. Directory listing, small-file writes,
//! links, removals and directory fsyncs are rare (open, checkpoint, roll, retention) and run
//! on the engine's file threads ([`crate::file_pool`]) so a shard never blocks and many opens
//! overlap; appends, reads and segment fsyncs go through io_uring.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use glommio::io::{BufferedFile, DmaFile, OpenOptions, ReadResult};

use crate::aligned_buffer::{AlignedBuf, MemoryParts};
use crate::error::{EngineError, Result};
use crate::volume_sync::{SyncTicket, VolumeSync};

mod batch;
pub use batch::Files;

/// Where partition files live.
#[derive(Clone, Debug)]
pub enum Storage {
    /// A directory on a disk; segments use direct I/O.
    Disk(Arc<PathBuf>),
    /// Process memory; nothing survives the process.
    Memory(MemoryStore),
}

/// An in-memory file tree, shareable across shards so a partition can move between them.
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    files: Arc<Mutex<BTreeMap<PathBuf, MemoryFile>>>,
}

type MemoryFile = Arc<Mutex<Vec<u8>>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a byte vector half-updated in a way later
    // readers could misinterpret more than a crash would, so poisoning is ignored.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl MemoryStore {
    fn get(&self, path: &Path) -> Option<MemoryFile> {
        lock(&self.files).get(path).cloned()
    }

    fn get_or_create(&self, path: &Path) -> MemoryFile {
        lock(&self.files)
            .entry(path.to_path_buf())
            .or_default()
            .clone()
    }

    /// Total bytes held, for tests and metrics.
    pub fn total_bytes(&self) -> usize {
        lock(&self.files).values().map(|f| lock(f).len()).sum()
    }
}

/// Runs a blocking file-system call on the engine's file threads ([`crate::file_pool`]),
/// not on glommio's one blocking thread per shard.
async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<R> + Send + 'static,
) -> std::io::Result<R> {
    crate::file_pool::run(f).await
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

    fn absolute(&self, relative: &Path) -> PathBuf {
        match self {
            Storage::Disk(root) => root.join(relative),
            Storage::Memory(_) => relative.to_path_buf(),
        }
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
        match self {
            Storage::Disk(_) => {
                let path = self.absolute(relative);
                let context = format!("reading {}", relative.display());
                blocking(move || -> std::io::Result<Option<Vec<u8>>> {
                    use std::io::Read;
                    let file = match std::fs::File::open(&path) {
                        Ok(file) => file,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                        Err(e) => return Err(e),
                    };
                    let mut bytes = Vec::new();
                    file.take(max_len as u64).read_to_end(&mut bytes)?;
                    Ok(Some(bytes))
                })
                .await
                .map_err(|e| EngineError::io(context, e))
            }
            Storage::Memory(store) => Ok(store.get(relative).map(|f| {
                let data = lock(&f);
                data[..data.len().min(max_len)].to_vec()
            })),
        }
    }

    /// Replaces a small file atomically and durably: write a temporary file, fsync it,
    /// rename it over the target, fsync the directory. A crash leaves the old or the new
    /// content, never a mix.
    pub async fn write_small_durable(&self, relative: &Path, bytes: Vec<u8>) -> Result<()> {
        match self {
            Storage::Disk(_) => {
                let path = self.absolute(relative);
                let context = format!("writing {}", relative.display());
                blocking(move || write_atomic(&path, &bytes))
                    .await
                    .map_err(|e| EngineError::io(context, e))
            }
            Storage::Memory(store) => {
                // A rename gives the name a new file; another name of the old file (a hard
                // link) keeps the old contents.
                lock(&store.files).insert(relative.to_path_buf(), Arc::new(Mutex::new(bytes)));
                Ok(())
            }
        }
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
        let Storage::Disk(_) = self else {
            return Ok(());
        };
        let syncs = paths.into_iter().map(|relative| {
            let path = self.absolute(&relative);
            async move {
                blocking(move || std::fs::File::open(&path)?.sync_all())
                    .await
                    .map_err(|e| EngineError::io(format!("syncing {}", relative.display()), e))
            }
        });
        for result in futures_util::future::join_all(syncs).await {
            result?;
        }
        Ok(())
    }

    /// A ticket for a volume barrier covering the writes that follow
    /// ([`crate::volume_sync`]); wait for it with [`Storage::sync_volume`].
    pub fn sync_ticket(&self) -> Result<Option<SyncTicket>> {
        match self {
            Storage::Disk(root) => VolumeSync::of(root)
                .map(|volume| Some(volume.ticket()))
                .map_err(|e| EngineError::io(format!("syncing {}", root.display()), e)),
            Storage::Memory(_) => Ok(None),
        }
    }

    /// Returns once everything written on the volume before `ticket` was taken is durable:
    /// one `syncfs` shared with every caller waiting at the same time, instead of an fsync
    /// per file and directory ([`crate::volume_sync`]).
    pub async fn sync_volume(&self, ticket: Option<SyncTicket>) -> Result<()> {
        let (Storage::Disk(root), Some(ticket)) = (self, ticket) else {
            return Ok(());
        };
        let context = || format!("syncing {}", root.display());
        VolumeSync::of(root)
            .map_err(|e| EngineError::io(context(), e))?
            .wait(ticket)
            .await
            .map_err(|e| EngineError::io(context(), e))
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
        match self {
            Storage::Disk(_) => {
                let path = self.absolute(relative);
                match BufferedFile::open(&path).await {
                    Ok(file) => {
                        // Nothing was written through it; a failing close changes nothing.
                        let _ = file.close().await;
                        Ok(true)
                    }
                    Err(error) => {
                        let error = std::io::Error::from(error);
                        if error.kind() == std::io::ErrorKind::NotFound {
                            Ok(false)
                        } else {
                            Err(EngineError::io(
                                format!("opening {}", relative.display()),
                                error,
                            ))
                        }
                    }
                }
            }
            Storage::Memory(store) => Ok(store.get(relative).is_some()),
        }
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
        match self {
            Storage::Disk(_) => {
                let path = self.absolute(relative);
                let context = format!("writing {}", relative.display());
                blocking(move || std::fs::write(&path, &bytes))
                    .await
                    .map_err(|e| EngineError::io(context, e))
            }
            Storage::Memory(store) => {
                lock(&store.files).insert(relative.to_path_buf(), Arc::new(Mutex::new(bytes)));
                Ok(())
            }
        }
    }

    /// Gives `relative` a new file of its own holding the first `len` bytes of the file it
    /// names now (which may be a hard link shared with another epoch): the bytes are copied
    /// to `<name>.tmp` and renamed over `relative`, so the old file, under its other names,
    /// is left as it was. Nothing is synced: the caller makes the copy and the rename
    /// durable ([`Storage::sync_volume`]) before anything depends on them after a crash.
    pub async fn replace_with_copy(&self, relative: &Path, len: u64) -> Result<()> {
        match self {
            Storage::Disk(_) => {
                let path = self.absolute(relative);
                let context = format!("copying {} to a file of its own", relative.display());
                blocking(move || -> std::io::Result<()> {
                    use std::io::Read;
                    let mut bytes = Vec::new();
                    std::fs::File::open(&path)?
                        .take(len)
                        .read_to_end(&mut bytes)?;
                    if bytes.len() as u64 != len {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            format!("{} bytes to copy, {} there", len, bytes.len()),
                        ));
                    }
                    let tmp = tmp_path(&path);
                    write_new(&tmp, &bytes)?;
                    std::fs::rename(&tmp, &path)
                })
                .await
                .map_err(|e| EngineError::io(context, e))
            }
            Storage::Memory(store) => {
                let Some(file) = store.get(relative) else {
                    return Err(EngineError::io(
                        format!("copying {}", relative.display()),
                        std::io::Error::from(std::io::ErrorKind::NotFound),
                    ));
                };
                let mut bytes = lock(&file).clone();
                if (bytes.len() as u64) < len {
                    return Err(EngineError::io(
                        format!("copying {}", relative.display()),
                        std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                    ));
                }
                bytes.truncate(len as usize);
                lock(&store.files).insert(relative.to_path_buf(), Arc::new(Mutex::new(bytes)));
                Ok(())
            }
        }
    }

    /// Renames `from` to `to`, replacing `to` atomically when it exists (another name of
    /// the replaced file, a hard link, keeps it). Returns false when `from` does not exist.
    /// The directory is not fsynced: callers sync it once after a batch of renames.
    pub async fn rename(&self, from: &Path, to: &Path) -> Result<bool> {
        match self {
            Storage::Disk(_) => {
                let (from_path, to_path) = (self.absolute(from), self.absolute(to));
                let context = format!("renaming {} to {}", from.display(), to.display());
                blocking(move || source_existed(std::fs::rename(&from_path, &to_path)))
                    .await
                    .map_err(|e| EngineError::io(context, e))
            }
            Storage::Memory(store) => {
                let mut files = lock(&store.files);
                let Some(file) = files.remove(from) else {
                    return Ok(false);
                };
                files.insert(to.to_path_buf(), file);
                Ok(true)
            }
        }
    }

    /// Removes a file; a missing file is not an error.
    pub async fn remove(&self, relative: &Path) -> Result<()> {
        let path = relative.to_path_buf();
        let what = || format!("removing {}", relative.display());
        self.batch(what, move |files| files.remove(&path)).await
    }

    /// Removes a directory and everything below it.
    pub async fn remove_dir_all(&self, relative: &Path) -> Result<()> {
        match self {
            Storage::Disk(_) => {
                self.remove_on_disk(relative, |p| std::fs::remove_dir_all(p))
                    .await
            }
            Storage::Memory(store) => {
                lock(&store.files).retain(|path, _| !path.starts_with(relative));
                Ok(())
            }
        }
    }

    /// Runs `remove` on the blocking pool; a path that is already gone is not an error.
    async fn remove_on_disk(
        &self,
        relative: &Path,
        remove: fn(&Path) -> std::io::Result<()>,
    ) -> Result<()> {
        let path = self.absolute(relative);
        let context = format!("removing {}", relative.display());
        blocking(move || match remove(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        })
        .await
        .map_err(|e| EngineError::io(context, e))
    }

    /// Fsyncs a directory so that entries created or removed in it are durable.
    pub async fn sync_dir(&self, relative: &Path) -> Result<()> {
        let Storage::Disk(_) = self else {
            return Ok(());
        };
        let path = self.absolute(relative);
        let context = format!("syncing directory {}", relative.display());
        blocking(move || std::fs::File::open(&path)?.sync_all())
            .await
            .map_err(|e| EngineError::io(context, e))
    }

    /// Opens (or creates) a segment file for direct I/O.
    pub async fn open_log_file(&self, relative: &Path, create: bool) -> Result<LogFile> {
        match self {
            Storage::Disk(_) => {
                let path = self.absolute(relative);
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(create)
                    .dma_open(&path)
                    .await
                    .map_err(|e| EngineError::io(format!("opening {}", relative.display()), e))?;
                Ok(LogFile::Dma(Rc::new(file)))
            }
            Storage::Memory(store) => {
                let file = if create {
                    Some(store.get_or_create(relative))
                } else {
                    store.get(relative)
                };
                file.map(LogFile::Memory).ok_or_else(|| {
                    EngineError::io(
                        format!("opening {}", relative.display()),
                        std::io::Error::from(std::io::ErrorKind::NotFound),
                    )
                })
            }
        }
    }

    /// Opens (or creates) an index file for buffered writes.
    pub async fn open_index_file(&self, relative: &Path) -> Result<IndexFile> {
        match self {
            Storage::Disk(_) => {
                let path = self.absolute(relative);
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .buffered_open(&path)
                    .await
                    .map_err(|e| EngineError::io(format!("opening {}", relative.display()), e))?;
                Ok(IndexFile::Buffered(Rc::new(file)))
            }
            Storage::Memory(store) => Ok(IndexFile::Memory(store.get_or_create(relative))),
        }
    }

    /// Maps a whole file read-only (an index of a sealed segment); `None` when missing.
    pub async fn map_file(&self, relative: &Path) -> Result<Option<MappedFile>> {
        match self {
            Storage::Disk(_) => {
                let path = self.absolute(relative);
                let context = format!("mapping {}", relative.display());
                blocking(move || -> std::io::Result<Option<MappedFile>> {
                    let file = match std::fs::File::open(&path) {
                        Ok(file) => file,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                        Err(e) => return Err(e),
                    };
                    if file.metadata()?.len() == 0 {
                        return Ok(Some(MappedFile::Owned(Vec::new())));
                    }
                    // SAFETY: index files are only ever appended to by this process while
                    // their segment is active, and only mapped once it is sealed; a
                    // concurrent truncation by another process is outside the contract.
                    let map = unsafe { memmap2::Mmap::map(&file)? };
                    Ok(Some(MappedFile::Mapped(map)))
                })
                .await
                .map_err(|e| EngineError::io(context, e))
            }
            Storage::Memory(store) => Ok(store
                .get(relative)
                .map(|f| MappedFile::Owned(lock(&f).clone()))),
        }
    }
}

fn create_dir_all_durable(path: &Path) -> std::io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        create_dir_all_durable(parent)?;
    }
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// Writes a new file at `path`, never through an existing name (it may be a hard link to
/// a file that is not ours to change): a leftover under that name is removed first.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(bytes)
}

/// `<path>.tmp`: where a file is written before it is renamed over `path`.
fn tmp_path(path: &Path) -> PathBuf {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    PathBuf::from(tmp_name)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = tmp_path(path);
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
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
        match self {
            LogFile::Dma(file) => AlignedBuf::dma(file.alloc_dma_buffer(capacity)),
            LogFile::Memory(_) => AlignedBuf::heap(capacity),
        }
    }

    /// Writes the buffer's whole pages at an aligned position.
    pub async fn write_at(&self, mut buffer: AlignedBuf, position: u64) -> std::io::Result<()> {
        buffer.prepare_for_write();
        let write_len = buffer.write_len();
        match (self, buffer.into_memory()) {
            (LogFile::Dma(file), MemoryParts::Dma(dma)) => {
                let written = file.write_at(dma, position).await?;
                if written != write_len {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        format!("short direct write: {written} of {write_len} bytes"),
                    ));
                }
                Ok(())
            }
            (LogFile::Memory(file), MemoryParts::Heap(bytes)) => {
                let mut data = lock(file);
                let start = position as usize;
                let end = start + write_len;
                if data.len() < end {
                    data.resize(end, 0);
                }
                data[start..end].copy_from_slice(&bytes[..write_len]);
                Ok(())
            }
            _ => Err(std::io::Error::other(
                "write buffer does not belong to this kind of file",
            )),
        }
    }

    /// Reads up to `len` bytes at `position` (fewer at the end of the file).
    pub async fn read_at(&self, position: u64, len: usize) -> std::io::Result<Bytes> {
        Ok(self.read_buffer(position, len).await?.into_bytes())
    }

    /// Like [`LogFile::read_at`], but the bytes stay in the buffer they were read into, which
    /// cannot leave the shard.
    pub async fn read_buffer(&self, position: u64, len: usize) -> std::io::Result<FileBytes> {
        match self {
            LogFile::Dma(file) => Ok(FileBytes::Dma(file.read_at(position, len).await?)),
            LogFile::Memory(file) => {
                let data = lock(file);
                let start = (position as usize).min(data.len());
                let end = start.saturating_add(len).min(data.len());
                Ok(FileBytes::Memory(Bytes::copy_from_slice(&data[start..end])))
            }
        }
    }

    /// Makes every completed write durable.
    pub async fn fdatasync(&self) -> std::io::Result<()> {
        match self {
            LogFile::Dma(file) => Ok(file.fdatasync().await?),
            LogFile::Memory(_) => Ok(()),
        }
    }

    /// Cuts the file to `size` bytes.
    pub async fn truncate(&self, size: u64) -> std::io::Result<()> {
        match self {
            LogFile::Dma(file) => Ok(file.truncate(size).await?),
            LogFile::Memory(file) => {
                lock(file).truncate(size as usize);
                Ok(())
            }
        }
    }

    /// Reserves disk blocks up to `size` without changing the file size, so that later
    /// writes and fdatasyncs rarely need block allocation.
    pub async fn preallocate(&self, size: u64) -> std::io::Result<()> {
        match self {
            LogFile::Dma(file) => Ok(file.pre_allocate(size, true).await?),
            LogFile::Memory(_) => Ok(()),
        }
    }

    /// The file's size in bytes.
    pub async fn size(&self) -> std::io::Result<u64> {
        match self {
            LogFile::Dma(file) => Ok(file.file_size().await?),
            LogFile::Memory(file) => Ok(lock(file).len() as u64),
        }
    }

    /// Closes the file (the descriptor goes when the last clone is dropped).
    pub async fn close(self) -> std::io::Result<()> {
        match self {
            LogFile::Dma(file) => {
                file.close_rc().await?;
                Ok(())
            }
            LogFile::Memory(_) => Ok(()),
        }
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
        match self {
            IndexFile::Buffered(file) => {
                let len = bytes.len();
                let written = file.write_at(bytes, position).await?;
                if written != len {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "short index write",
                    ));
                }
                Ok(())
            }
            IndexFile::Memory(file) => {
                let mut data = lock(file);
                let start = position as usize;
                if data.len() < start + bytes.len() {
                    data.resize(start + bytes.len(), 0);
                }
                data[start..start + bytes.len()].copy_from_slice(&bytes);
                Ok(())
            }
        }
    }

    /// Cuts the file to `size` bytes.
    pub async fn truncate(&self, size: u64) -> std::io::Result<()> {
        match self {
            IndexFile::Buffered(file) => Ok(file.truncate(size).await?),
            IndexFile::Memory(file) => {
                lock(file).truncate(size as usize);
                Ok(())
            }
        }
    }

    /// Makes completed writes durable.
    pub async fn fdatasync(&self) -> std::io::Result<()> {
        match self {
            IndexFile::Buffered(file) => Ok(file.fdatasync().await?),
            IndexFile::Memory(_) => Ok(()),
        }
    }
}

/// A read-only view of a whole file.
pub enum MappedFile {
    /// A memory map of a file on disk.
    Mapped(memmap2::Mmap),
    /// A copy (in-memory storage, or an empty file, which cannot be mapped).
    Owned(Vec<u8>),
}

impl std::ops::Deref for MappedFile {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            MappedFile::Mapped(map) => map,
            MappedFile::Owned(bytes) => bytes,
        }
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
