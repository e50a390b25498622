//! The disk back-end of [`Storage`]: files under a root directory. Segments are glommio
//! DMA files (direct I/O through io_uring), indexes glommio buffered files; directory
//! listing, small-file writes, links, removals and fsyncs of files and directories run on
//! the engine's file threads ([`crate::file_pool`]), so a shard never blocks on them.

use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use glommio::io::{BufferedFile, DmaFile, OpenOptions};

use super::batch::{at, none_if_missing, Files};
use super::{
    source_existed, tmp_path, Backend, FileBytes, IndexFile, LogFile, SegmentFile, SmallFile,
};
use crate::aligned_buffer::{AlignedBuf, MemoryParts};
use crate::error::{EngineError, Result};
use crate::volume_sync::{SyncTicket, VolumeSync};

/// The disk back-end: the storage root every relative path is joined to.
pub(super) struct Disk<'a>(pub &'a Path);

impl Disk<'_> {
    fn absolute(&self, relative: &Path) -> PathBuf {
        self.0.join(relative)
    }
}

/// Runs a blocking file-system call on the engine's file threads ([`crate::file_pool`]),
/// not on glommio's one blocking thread per shard.
pub(super) async fn blocking<R: Send + 'static>(
    f: impl FnOnce() -> io::Result<R> + Send + 'static,
) -> io::Result<R> {
    crate::file_pool::run(f).await
}

/// Runs a batch's calls on one file thread.
pub(super) async fn run_batch<R: Send + 'static>(
    root: Arc<PathBuf>,
    job: impl FnOnce(&dyn Files) -> io::Result<R> + Send + 'static,
) -> io::Result<R> {
    blocking(move || job(&DiskFiles(&root))).await
}

impl Backend for Disk<'_> {
    async fn read_prefix(&self, relative: &Path, max_len: usize) -> Result<Option<Vec<u8>>> {
        let path = self.absolute(relative);
        let context = format!("reading {}", relative.display());
        blocking(move || -> io::Result<Option<Vec<u8>>> {
            use std::io::Read;
            let file = match std::fs::File::open(&path) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            let mut bytes = Vec::new();
            file.take(max_len as u64).read_to_end(&mut bytes)?;
            Ok(Some(bytes))
        })
        .await
        .map_err(|e| EngineError::io(context, e))
    }

    async fn write_small_durable(&self, relative: &Path, bytes: Vec<u8>) -> Result<()> {
        let path = self.absolute(relative);
        let context = format!("writing {}", relative.display());
        blocking(move || write_atomic(&path, &bytes))
            .await
            .map_err(|e| EngineError::io(context, e))
    }

    async fn sync_at_once(&self, paths: Vec<PathBuf>) -> Result<()> {
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

    fn sync_ticket(&self) -> Result<Option<SyncTicket>> {
        VolumeSync::of(self.0)
            .map(|volume| Some(volume.ticket()))
            .map_err(|e| EngineError::io(format!("syncing {}", self.0.display()), e))
    }

    async fn sync_volume(&self, ticket: Option<SyncTicket>) -> Result<()> {
        let Some(ticket) = ticket else {
            return Ok(());
        };
        let context = || format!("syncing {}", self.0.display());
        VolumeSync::of(self.0)
            .map_err(|e| EngineError::io(context(), e))?
            .wait(ticket)
            .await
            .map_err(|e| EngineError::io(context(), e))
    }

    async fn file_exists(&self, relative: &Path) -> Result<bool> {
        let path = self.absolute(relative);
        match BufferedFile::open(&path).await {
            Ok(file) => {
                // Nothing was written through it; a failing close changes nothing.
                let _ = file.close().await;
                Ok(true)
            }
            Err(error) => {
                let error = io::Error::from(error);
                if error.kind() == io::ErrorKind::NotFound {
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

    async fn write_in_place(&self, relative: &Path, bytes: Vec<u8>) -> Result<()> {
        let path = self.absolute(relative);
        let context = format!("writing {}", relative.display());
        blocking(move || std::fs::write(&path, &bytes))
            .await
            .map_err(|e| EngineError::io(context, e))
    }

    async fn replace_with_copy(&self, relative: &Path, len: u64) -> Result<()> {
        let path = self.absolute(relative);
        let context = format!("copying {} to a file of its own", relative.display());
        blocking(move || -> io::Result<()> {
            use std::io::Read;
            let mut bytes = Vec::new();
            std::fs::File::open(&path)?
                .take(len)
                .read_to_end(&mut bytes)?;
            if bytes.len() as u64 != len {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
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

    async fn rename(&self, from: &Path, to: &Path) -> Result<bool> {
        let (from_path, to_path) = (self.absolute(from), self.absolute(to));
        let context = format!("renaming {} to {}", from.display(), to.display());
        blocking(move || source_existed(std::fs::rename(&from_path, &to_path)))
            .await
            .map_err(|e| EngineError::io(context, e))
    }

    async fn remove_dir_all(&self, relative: &Path) -> Result<()> {
        let path = self.absolute(relative);
        let context = format!("removing {}", relative.display());
        // A path that is already gone is not an error.
        blocking(move || match std::fs::remove_dir_all(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        })
        .await
        .map_err(|e| EngineError::io(context, e))
    }

    async fn sync_dir(&self, relative: &Path) -> Result<()> {
        let path = self.absolute(relative);
        let context = format!("syncing directory {}", relative.display());
        blocking(move || std::fs::File::open(&path)?.sync_all())
            .await
            .map_err(|e| EngineError::io(context, e))
    }

    async fn open_log_file(&self, relative: &Path, create: bool) -> Result<LogFile> {
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

    async fn open_index_file(&self, relative: &Path) -> Result<IndexFile> {
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
}

impl SegmentFile for Rc<DmaFile> {
    fn alloc_buffer(&self, capacity: usize) -> AlignedBuf {
        AlignedBuf::dma(self.alloc_dma_buffer(capacity))
    }

    async fn write_at(
        &self,
        parts: MemoryParts,
        write_len: usize,
        position: u64,
    ) -> io::Result<()> {
        let MemoryParts::Dma(dma) = parts else {
            return Err(io::Error::other(
                "write buffer does not belong to this kind of file",
            ));
        };
        let written = DmaFile::write_at(self, dma, position).await?;
        if written != write_len {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                format!("short direct write: {written} of {write_len} bytes"),
            ));
        }
        Ok(())
    }

    async fn read_buffer(&self, position: u64, len: usize) -> io::Result<FileBytes> {
        Ok(FileBytes::Dma(DmaFile::read_at(self, position, len).await?))
    }

    async fn fdatasync(&self) -> io::Result<()> {
        Ok(DmaFile::fdatasync(self).await?)
    }

    async fn truncate(&self, size: u64) -> io::Result<()> {
        Ok(DmaFile::truncate(self, size).await?)
    }

    async fn preallocate(&self, size: u64) -> io::Result<()> {
        Ok(self.pre_allocate(size, true).await?)
    }

    async fn size(&self) -> io::Result<u64> {
        Ok(self.file_size().await?)
    }

    async fn close(self) -> io::Result<()> {
        self.close_rc().await?;
        Ok(())
    }
}

impl SmallFile for Rc<BufferedFile> {
    async fn write_at(&self, bytes: Vec<u8>, position: u64) -> io::Result<()> {
        let len = bytes.len();
        let written = BufferedFile::write_at(self, bytes, position).await?;
        if written != len {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "short index write",
            ));
        }
        Ok(())
    }

    async fn truncate(&self, size: u64) -> io::Result<()> {
        Ok(BufferedFile::truncate(self, size).await?)
    }

    async fn fdatasync(&self) -> io::Result<()> {
        Ok(BufferedFile::fdatasync(self).await?)
    }
}

/// Creates a directory and its parents, fsyncing each parent that gained an entry.
pub(super) fn create_dir_all_durable(path: &Path) -> io::Result<()> {
    if path.is_dir() {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        create_dir_all_durable(parent)?;
    }
    match std::fs::create_dir(path) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// Writes a new file at `path`, never through an existing name (it may be a hard link to
/// a file that is not ours to change): a leftover under that name is removed first.
pub(super) fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?
        .write_all(bytes)
}

/// Temporary file, fsync, rename over `path`, directory fsync.
fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
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

/// The calls of a batch on files under the root ([`Files`]).
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
