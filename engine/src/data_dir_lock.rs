//! The exclusive lock a standalone broker holds on its data directory, so that a second
//! broker started on the same directory refuses to start instead of writing the same files.
//!
//! On-disk format: `<data>/kaas.lock`, a text file whose content is the holder's process id
//! and command line (`pid 1234: kaas --listen ...`), rewritten by each new holder. The lock
//! itself is an `flock(LOCK_EX)` on that file, not its content: the kernel drops it when the
//! holder exits in any way (including `kill -9`), so a stale file never blocks a restart, and
//! the content only serves to name the holder in the refusal. Nothing is fsynced: the file
//! carries no data that recovery needs.
//!
//! In cluster mode brokers share the directory by design and fence each partition with their
//! own claims; this lock is for standalone mode only.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The lock file's name inside the data directory.
pub use kaas_volume::LOCK_FILE;

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum DataDirLockError {
    /// Another process holds the lock.
    #[error("data directory {dir} is in use by another broker ({holder}); refusing to start")]
    InUse {
        /// The data directory.
        dir: PathBuf,
        /// Who holds it, as the lock file names it.
        holder: String,
    },
    /// The directory or the lock file could not be created or locked.
    #[error("locking data directory {dir}: {source}")]
    Io {
        /// The data directory.
        dir: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A held lock on a data directory; released when dropped (or when the process exits).
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Creates `dir` if needed and locks it, or says which process already holds it.
    pub fn acquire(dir: &Path) -> Result<DataDirLock, DataDirLockError> {
        let io = |source| DataDirLockError::Io {
            dir: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOCK_FILE))
            .map_err(io)?;
        // SAFETY: flock(2) on a descriptor this function owns.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if locked != 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() != std::io::ErrorKind::WouldBlock {
                return Err(io(error));
            }
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(DataDirLockError::InUse {
                dir: dir.to_path_buf(),
                holder: if holder.is_empty() {
                    "a process that has not written its name yet".into()
                } else {
                    holder.to_string()
                },
            });
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "pid {}: {}", std::process::id(), command_line()).map_err(io)?;
        Ok(DataDirLock { _file: file })
    }
}

/// This process's command line, for the lock file.
fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_names_the_holder_and_a_released_lock_can_be_taken_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        let first = DataDirLock::acquire(&data).expect("first lock");
        match DataDirLock::acquire(&data) {
            Err(DataDirLockError::InUse { holder, .. }) => {
                assert!(
                    holder.starts_with(&format!("pid {}:", std::process::id())),
                    "{holder}"
                );
            }
            other => panic!("a second lock must be refused: {other:?}"),
        }
        drop(first);
        DataDirLock::acquire(&data).expect("the lock is free again once released");
    }
}
