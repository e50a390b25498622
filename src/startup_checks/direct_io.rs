//! Does the data directory take direct I/O? Every partition is written with `O_DIRECT`:
//! ramfs, tmpfs before Linux 6.6, some FUSE and network file systems refuse it (EINVAL at
//! open or at the first aligned write). The probe is a temporary file
//! `<data>/.kaas-direct-io-probe-<pid>`: opened with `O_DIRECT`, one aligned 4 KiB block
//! written and read back, then removed.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::{ExitCode, Refusal};

const BLOCK: usize = 4096;

pub fn check(data_dir: &Path) -> Result<(), Refusal> {
    // A directory that cannot be created is reported by the broker's own start-up.
    if std::fs::create_dir_all(data_dir).is_err() {
        return Ok(());
    }
    let probe = data_dir.join(format!(".kaas-direct-io-probe-{}", std::process::id()));
    let result = probe_file(&probe);
    let _ = std::fs::remove_file(&probe);
    result.map_err(|error| {
        Refusal::new(
            ExitCode::NoDirectIo,
            format!(
                "kaas cannot start: the data directory {} does not support direct I/O \
                 ({error}). kaas writes every partition with O_DIRECT. Cause: the directory is \
                 on a file system without O_DIRECT (ramfs, tmpfs before Linux 6.6, some FUSE or \
                 network file systems, e.g. an emptyDir with medium: Memory on older nodes). \
                 Fix: point --data-dir at a block-device file system (ext4, xfs) or a shared \
                 file system that supports O_DIRECT.",
                data_dir.display()
            ),
        )
    })
}

fn probe_file(path: &Path) -> std::io::Result<()> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a valid NUL-terminated path; the fd is closed below.
    let fd = unsafe {
        libc::open(
            c_path.as_ptr(),
            libc::O_CREAT | libc::O_RDWR | libc::O_DIRECT | libc::O_CLOEXEC,
            0o600,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let result = write_and_read_block(fd);
    // SAFETY: fd was opened above and is not used after this.
    unsafe { libc::close(fd) };
    result
}

fn write_and_read_block(fd: libc::c_int) -> std::io::Result<()> {
    let layout = std::alloc::Layout::from_size_align(BLOCK, BLOCK)
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: layout has a non-zero size; the block is freed below.
    let buffer = unsafe { std::alloc::alloc_zeroed(layout) };
    if buffer.is_null() {
        return Err(std::io::Error::from(std::io::ErrorKind::OutOfMemory));
    }
    // SAFETY: buffer holds BLOCK bytes, aligned to BLOCK, as O_DIRECT wants.
    let written = unsafe { libc::pwrite(fd, buffer as *const libc::c_void, BLOCK, 0) };
    let written = if written < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        // SAFETY: as for the write.
        let read = unsafe { libc::pread(fd, buffer as *mut libc::c_void, BLOCK, 0) };
        if read < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // SAFETY: allocated above with this layout.
    unsafe { std::alloc::dealloc(buffer, layout) };
    written
}
