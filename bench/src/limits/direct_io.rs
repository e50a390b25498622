//! Direct I/O on a scratch file: sequential writes and reads that bypass the page cache.

use std::alloc::{alloc, dealloc, Layout};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};

use super::DiskRun;

/// A 4 KiB-aligned buffer for O_DIRECT, filled with one byte value.
struct AlignedBuffer {
    ptr: *mut u8,
    layout: Layout,
}

// The buffer is plain memory owned by one thread at a time.
unsafe impl Send for AlignedBuffer {}

impl AlignedBuffer {
    fn new(len: usize, fill: u8) -> anyhow::Result<Self> {
        let layout = Layout::from_size_align(len, 4096).context("buffer layout")?;
        // SAFETY: the layout has a non-zero size (callers pass block sizes ≥ 4 KiB).
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            bail!("allocating {len} bytes");
        }
        // SAFETY: `ptr` points to `len` writable bytes just allocated.
        unsafe { std::ptr::write_bytes(ptr, fill, len) };
        Ok(AlignedBuffer { ptr, layout })
    }
}

impl Drop for AlignedBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Read,
    Write,
}

struct DirectFile {
    fd: libc::c_int,
}

impl DirectFile {
    fn create(path: &Path, size: u64) -> anyhow::Result<Self> {
        let name = CString::new(path.as_os_str().as_bytes())?;
        // SAFETY: `name` is a valid C string; the flags and mode are plain integers.
        let fd = unsafe {
            libc::open(
                name.as_ptr(),
                libc::O_CREAT | libc::O_TRUNC | libc::O_RDWR | libc::O_DIRECT | libc::O_CLOEXEC,
                0o644,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("opening {} with O_DIRECT", path.display()));
        }
        let file = DirectFile { fd };
        // SAFETY: `fd` is open for writing.
        if unsafe { libc::fallocate(fd, 0, 0, size as libc::off_t) } != 0 {
            return Err(std::io::Error::last_os_error()).context("fallocate");
        }
        Ok(file)
    }

    fn write_all_at(&self, buffer: &AlignedBuffer, len: usize, offset: u64) -> anyhow::Result<()> {
        self.transfer_at(Direction::Write, buffer, len, offset)
    }

    fn read_exact_at(&self, buffer: &AlignedBuffer, len: usize, offset: u64) -> anyhow::Result<()> {
        self.transfer_at(Direction::Read, buffer, len, offset)
    }

    /// `pwrite`s or `pread`s exactly `len` bytes of `buffer` at `offset`.
    fn transfer_at(
        &self,
        direction: Direction,
        buffer: &AlignedBuffer,
        len: usize,
        offset: u64,
    ) -> anyhow::Result<()> {
        let name = match direction {
            Direction::Read => "pread",
            Direction::Write => "pwrite",
        };
        let mut done = 0usize;
        while done < len {
            let position = (offset + done as u64) as libc::off_t;
            // SAFETY: the buffer holds `len` bytes, writable for reads; `done` < `len`.
            let moved = unsafe {
                let at = buffer.ptr.add(done);
                match direction {
                    Direction::Read => libc::pread(self.fd, at.cast(), len - done, position),
                    Direction::Write => libc::pwrite(self.fd, at.cast(), len - done, position),
                }
            };
            if moved < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(error).context(name);
            }
            if moved == 0 {
                bail!("{name} moved nothing at {position}");
            }
            done += moved as usize;
        }
        Ok(())
    }

    fn datasync(&self) -> anyhow::Result<()> {
        // SAFETY: `fd` is open.
        if unsafe { libc::fdatasync(self.fd) } != 0 {
            return Err(std::io::Error::last_os_error()).context("fdatasync");
        }
        Ok(())
    }
}

impl Drop for DirectFile {
    fn drop(&mut self) {
        // SAFETY: `fd` is open and owned by this value.
        unsafe { libc::close(self.fd) };
    }
}

/// A scratch file for one measurement: `blocks` whole blocks, `total` bytes, preallocated;
/// removed when dropped.
struct ScratchFile {
    file: DirectFile,
    path: PathBuf,
    blocks: u64,
    total: u64,
}

impl ScratchFile {
    /// About `total` bytes in `block`-byte blocks, at least one block per thread.
    fn create(
        dir: &Path,
        label: &str,
        total: u64,
        block: usize,
        threads: usize,
    ) -> anyhow::Result<Self> {
        let blocks = (total / block as u64).max(threads as u64);
        let total = blocks * block as u64;
        let path = dir.join(format!("kaas-bench-{label}-{}.tmp", std::process::id()));
        let file = DirectFile::create(&path, total)?;
        Ok(ScratchFile {
            file,
            path,
            blocks,
            total,
        })
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn disk_run(block: usize, threads: usize, sync: &str, bytes: u64, seconds: f64) -> DiskRun {
    DiskRun {
        block_bytes: block,
        threads,
        sync: sync.into(),
        bytes,
        seconds,
        mb_per_s: bytes as f64 / seconds / 1e6,
    }
}

/// Writes `total` bytes in `block`-byte writes from `threads` threads, then fdatasyncs (or
/// after every write with `sync_each`).
pub(super) fn disk_write(
    dir: &Path,
    total: u64,
    block: usize,
    threads: usize,
    sync_each: bool,
) -> anyhow::Result<DiskRun> {
    let scratch = ScratchFile::create(dir, "odirect", total, block, threads)?;
    let file = &scratch.file;
    let started = Instant::now();
    on_threads(threads, scratch.blocks, |range| {
        let buffer = AlignedBuffer::new(block, 0x5a)?;
        for index in range {
            file.write_all_at(&buffer, block, index * block as u64)?;
            if sync_each {
                file.datasync()?;
            }
        }
        Ok(())
    })?;
    file.datasync()?;
    let seconds = started.elapsed().as_secs_f64();
    let sync = if sync_each { "every-write" } else { "end" };
    Ok(disk_run(block, threads, sync, scratch.total, seconds))
}

/// Writes `total` bytes (1 MiB writes, fdatasync'd), then times reading them back in
/// `block`-byte reads from `threads` threads, each owning a contiguous range.
pub(super) fn disk_read(
    dir: &Path,
    total: u64,
    block: usize,
    threads: usize,
) -> anyhow::Result<DiskRun> {
    let scratch = ScratchFile::create(dir, "odirect-read", total, block, threads)?;
    let seconds = fill_and_read(&scratch.file, scratch.total, block, scratch.blocks, threads)?;
    Ok(disk_run(block, threads, "none", scratch.total, seconds))
}

/// Fills `file` and returns the seconds the reads took.
fn fill_and_read(
    file: &DirectFile,
    total: u64,
    block: usize,
    blocks: u64,
    threads: usize,
) -> anyhow::Result<f64> {
    let fill = AlignedBuffer::new(1 << 20, 0xa5)?;
    let mut offset = 0u64;
    while offset < total {
        let len = (total - offset).min(1 << 20) as usize;
        file.write_all_at(&fill, len, offset)?;
        offset += len as u64;
    }
    file.datasync()?;
    let started = Instant::now();
    on_threads(threads, blocks, |range| {
        let buffer = AlignedBuffer::new(block, 0)?;
        for index in range {
            file.read_exact_at(&buffer, block, index * block as u64)?;
        }
        Ok(())
    })?;
    Ok(started.elapsed().as_secs_f64())
}

/// Runs `work` on `threads` threads, each given a contiguous share of the block indexes
/// `0..blocks`; the first error wins.
fn on_threads<F>(threads: usize, blocks: u64, work: F) -> anyhow::Result<()>
where
    F: Fn(std::ops::Range<u64>) -> anyhow::Result<()> + Sync,
{
    let per_thread = blocks.div_ceil(threads as u64);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads as u64)
            .map(|thread| {
                let work = &work;
                let range = thread * per_thread..((thread + 1) * per_thread).min(blocks);
                scope.spawn(move || work(range))
            })
            .collect();
        handles.into_iter().try_for_each(|handle| {
            handle
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("a disk thread panicked")))
        })
    })
}
