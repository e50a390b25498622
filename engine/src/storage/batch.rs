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

use super::{create_dir_all_durable, lock, write_new, MemoryFile, MemoryStore, Storage};
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
            Storage::Disk(root) => {
                let root = root.clone();
                super::blocking(move || job(&DiskFiles(&root))).await
            }
            Storage::Memory(store) => job(&MemoryFiles(store)),
        };
        result.map_err(|e| EngineError::io(what(), e))
    }
}

/// Names the path in an error (a batch makes many calls).
fn at(path: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

fn none_if_missing<T>(result: io::Result<T>) -> io::Result<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

struct DiskFiles<'a>(&'a Path);

impl Files for DiskFiles<'_> {
    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let Some(entries) =
            none_if_missing(std::fs::read_dir(self.0.join(dir))).map_err(at(dir))?
        else {
            return Ok(Vec::new());
        };
        let mut names = Vec::new();
        for entry in entries {
            names.push(
                entry
                    .map_err(at(dir))?
                    .file_name()
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        create_dir_all_durable(&self.0.join(dir)).map_err(at(dir))
    }

    fn create_new(&self, path: &Path) -> io::Result<bool> {
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(self.0.join(path));
        match created {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(at(path)(e)),
        }
    }

    fn create_empty(&self, path: &Path) -> io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.0.join(path))
            .map(drop)
            .map_err(at(path))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        none_if_missing(std::fs::remove_file(self.0.join(path)))
            .map(drop)
            .map_err(at(path))
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<bool> {
        none_if_missing(std::fs::hard_link(self.0.join(from), self.0.join(to)))
            .map(|linked| linked.is_some())
            .map_err(at(to))
    }

    fn copy_new_file(&self, from: &Path, to: &Path) -> io::Result<bool> {
        let Some(bytes) = none_if_missing(std::fs::read(self.0.join(from))).map_err(at(from))?
        else {
            return Ok(false);
        };
        write_new(&self.0.join(to), &bytes).map_err(at(to))?;
        Ok(true)
    }

    fn file_len(&self, path: &Path) -> io::Result<Option<u64>> {
        none_if_missing(std::fs::metadata(self.0.join(path)))
            .map(|metadata| metadata.map(|m| m.len()))
            .map_err(at(path))
    }

    fn read_small(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        none_if_missing(std::fs::read(self.0.join(path))).map_err(at(path))
    }

    fn write_new(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        write_new(&self.0.join(path), bytes).map_err(at(path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(self.0.join(from), self.0.join(to)).map_err(at(from))
    }
}

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
        let file = std::sync::Arc::new(std::sync::Mutex::new(bytes.to_vec()));
        lock(&self.0.files).insert(path.to_path_buf(), file);
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
