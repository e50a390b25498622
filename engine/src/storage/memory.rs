//! The in-memory back-end of [`Storage`] (`--in-memory` and unit tests): a file tree in
//! process memory, shareable across shards so a partition can move between them. Nothing
//! survives the process, so every fsync, barrier and directory sync is a no-op; a rename or
//! a small-file write gives the name a new file, so another name of the old one (a hard
//! link) keeps the old contents, as on a disk.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use super::batch::{at, Files};
use super::{Backend, FileBytes, IndexFile, LogFile, SegmentFile, SmallFile};
use crate::aligned_buffer::{AlignedBuf, MemoryParts};
use crate::error::{EngineError, Result};
use crate::volume_sync::SyncTicket;

/// An in-memory file tree, shareable across shards so a partition can move between them.
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    files: Arc<Mutex<BTreeMap<PathBuf, MemoryFile>>>,
}

/// One in-memory file; clones (hard links, open handles) share it.
pub type MemoryFile = Arc<Mutex<Vec<u8>>>;

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

    /// Gives `path` a new file holding `bytes`.
    fn replace(&self, path: &Path, bytes: Vec<u8>) {
        lock(&self.files).insert(path.to_path_buf(), Arc::new(Mutex::new(bytes)));
    }

    /// Total bytes held, for tests and metrics.
    pub fn total_bytes(&self) -> usize {
        lock(&self.files).values().map(|f| lock(f).len()).sum()
    }
}

/// Runs a batch's calls inline: in memory nothing blocks.
pub(super) fn run_batch<R>(
    store: &MemoryStore,
    job: impl FnOnce(&dyn Files) -> io::Result<R>,
) -> io::Result<R> {
    job(&MemoryFiles(store))
}

impl Backend for MemoryStore {
    async fn read_prefix(&self, relative: &Path, max_len: usize) -> Result<Option<Vec<u8>>> {
        Ok(self.get(relative).map(|f| {
            let data = lock(&f);
            data[..data.len().min(max_len)].to_vec()
        }))
    }

    async fn write_small_durable(&self, relative: &Path, bytes: Vec<u8>) -> Result<()> {
        // A rename gives the name a new file; another name of the old file (a hard link)
        // keeps the old contents.
        self.replace(relative, bytes);
        Ok(())
    }

    async fn sync_at_once(&self, _paths: Vec<PathBuf>) -> Result<()> {
        Ok(())
    }

    fn sync_ticket(&self) -> Result<Option<SyncTicket>> {
        Ok(None)
    }

    async fn sync_volume(&self, _ticket: Option<SyncTicket>) -> Result<()> {
        Ok(())
    }

    async fn file_exists(&self, relative: &Path) -> Result<bool> {
        Ok(self.get(relative).is_some())
    }

    async fn write_in_place(&self, relative: &Path, bytes: Vec<u8>) -> Result<()> {
        self.replace(relative, bytes);
        Ok(())
    }

    async fn replace_with_copy(&self, relative: &Path, len: u64) -> Result<()> {
        let Some(file) = self.get(relative) else {
            return Err(EngineError::io(
                format!("copying {}", relative.display()),
                io::Error::from(io::ErrorKind::NotFound),
            ));
        };
        let mut bytes = lock(&file).clone();
        if (bytes.len() as u64) < len {
            return Err(EngineError::io(
                format!("copying {}", relative.display()),
                io::Error::from(io::ErrorKind::UnexpectedEof),
            ));
        }
        bytes.truncate(len as usize);
        self.replace(relative, bytes);
        Ok(())
    }

    async fn rename(&self, from: &Path, to: &Path) -> Result<bool> {
        let mut files = lock(&self.files);
        let Some(file) = files.remove(from) else {
            return Ok(false);
        };
        files.insert(to.to_path_buf(), file);
        Ok(true)
    }

    async fn remove_dir_all(&self, relative: &Path) -> Result<()> {
        lock(&self.files).retain(|path, _| !path.starts_with(relative));
        Ok(())
    }

    async fn sync_dir(&self, _relative: &Path) -> Result<()> {
        Ok(())
    }

    async fn open_log_file(&self, relative: &Path, create: bool) -> Result<LogFile> {
        let file = if create {
            Some(self.get_or_create(relative))
        } else {
            self.get(relative)
        };
        file.map(LogFile::Memory).ok_or_else(|| {
            EngineError::io(
                format!("opening {}", relative.display()),
                io::Error::from(io::ErrorKind::NotFound),
            )
        })
    }

    async fn open_index_file(&self, relative: &Path) -> Result<IndexFile> {
        Ok(IndexFile::Memory(self.get_or_create(relative)))
    }
}

impl SegmentFile for MemoryFile {
    fn alloc_buffer(&self, capacity: usize) -> AlignedBuf {
        AlignedBuf::heap(capacity)
    }

    async fn write_at(
        &self,
        parts: MemoryParts,
        write_len: usize,
        position: u64,
    ) -> io::Result<()> {
        let MemoryParts::Heap(bytes) = parts else {
            return Err(io::Error::other(
                "write buffer does not belong to this kind of file",
            ));
        };
        let mut data = lock(self);
        let start = position as usize;
        let end = start + write_len;
        if data.len() < end {
            data.resize(end, 0);
        }
        data[start..end].copy_from_slice(&bytes[..write_len]);
        Ok(())
    }

    async fn read_buffer(&self, position: u64, len: usize) -> io::Result<FileBytes> {
        let data = lock(self);
        let start = (position as usize).min(data.len());
        let end = start.saturating_add(len).min(data.len());
        Ok(FileBytes::Memory(Bytes::copy_from_slice(&data[start..end])))
    }

    async fn fdatasync(&self) -> io::Result<()> {
        Ok(())
    }

    async fn truncate(&self, size: u64) -> io::Result<()> {
        lock(self).truncate(size as usize);
        Ok(())
    }

    async fn preallocate(&self, _size: u64) -> io::Result<()> {
        Ok(())
    }

    async fn size(&self) -> io::Result<u64> {
        Ok(lock(self).len() as u64)
    }

    async fn close(self) -> io::Result<()> {
        Ok(())
    }
}

impl SmallFile for MemoryFile {
    async fn write_at(&self, bytes: Vec<u8>, position: u64) -> io::Result<()> {
        let mut data = lock(self);
        let start = position as usize;
        if data.len() < start + bytes.len() {
            data.resize(start + bytes.len(), 0);
        }
        data[start..start + bytes.len()].copy_from_slice(&bytes);
        Ok(())
    }

    async fn truncate(&self, size: u64) -> io::Result<()> {
        lock(self).truncate(size as usize);
        Ok(())
    }

    async fn fdatasync(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The calls of a batch on the in-memory tree ([`Files`]).
struct MemoryFiles<'a>(&'a MemoryStore);

impl Files for MemoryFiles<'_> {
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let files = lock(&self.0.files);
        let mut names: Vec<String> = files
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        // Directories are implicit in memory: report child directories too.
        for path in files.keys() {
            if let Ok(rest) = path.strip_prefix(dir) {
                let mut parts = rest.components();
                if let (Some(first), Some(_)) = (parts.next(), parts.next()) {
                    let name = first.as_os_str().to_string_lossy().into_owned();
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
            }
        }
        Ok(names)
    }

    fn create_dir_all(&self, _dir: &Path) -> io::Result<()> {
        Ok(())
    }

    fn create_new(&self, path: &Path) -> io::Result<bool> {
        let mut files = lock(&self.0.files);
        if files.contains_key(path) {
            return Ok(false);
        }
        files.insert(path.to_path_buf(), MemoryFile::default());
        Ok(true)
    }

    fn create_empty(&self, path: &Path) -> io::Result<()> {
        self.0.get_or_create(path);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        lock(&self.0.files).remove(path);
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<bool> {
        let mut files = lock(&self.0.files);
        let Some(file) = files.get(from).cloned() else {
            return Ok(false);
        };
        if files.contains_key(to) {
            return Err(at(to)(io::Error::from(io::ErrorKind::AlreadyExists)));
        }
        files.insert(to.to_path_buf(), file);
        Ok(true)
    }

    fn copy_new_file(&self, from: &Path, to: &Path) -> io::Result<bool> {
        let Some(file) = self.0.get(from) else {
            return Ok(false);
        };
        let bytes = lock(&file).clone();
        self.write_new(to, &bytes)?;
        Ok(true)
    }

    fn file_len(&self, path: &Path) -> io::Result<Option<u64>> {
        Ok(self.0.get(path).map(|f| lock(&f).len() as u64))
    }

    fn read_small(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        Ok(self.0.get(path).map(|f| lock(&f).clone()))
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        // A new file, not the contents of one that a hard link shares.
        self.0.replace(path, bytes.to_vec());
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut files = lock(&self.0.files);
        let file = files
            .remove(from)
            .ok_or_else(|| at(from)(io::Error::from(io::ErrorKind::NotFound)))?;
        files.insert(to.to_path_buf(), file);
        Ok(())
    }
}
