//! The highest controller epoch ever used on the volume: `<data>/__cluster/controller-epoch`.
//!
//! Format: the epoch in ASCII decimal followed by one `\n` (`7\n`), nothing else. Anything
//! else is refused as corrupt rather than read as 0, since reading it low would let a
//! controller lead at an epoch already used. A missing file means no controller has led on
//! this volume yet.
//!
//! Write order: take an exclusive `flock` on `controller-epoch.lock` beside it (so two
//! brokers recording at once cannot interleave their check and their write), read the
//! current value, keep it if it is not below the new one, else write `controller-epoch.tmp`,
//! `fsync` it, rename it over `controller-epoch`, `fsync` the directory, unlock. A crash
//! leaves the old file or the new one (and perhaps a stale `.tmp`, overwritten by the next
//! write); the value never goes down.
//!
//! A controller records its epoch here before it writes its first assignment at it: the
//! Lease is the election, this file is what keeps a rewound Lease (a restored etcd, a Lease
//! deleted by hand) from handing out an epoch the volume has seen.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use kaas_cluster::ids::ControllerEpoch;

/// The file's name inside `<data>/__cluster`.
pub use kaas_volume::CONTROLLER_EPOCH_FILE;

/// Longest content accepted (20 digits of a `u64` and the newline).
const MAX_LEN: usize = 21;

/// Why the file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum EpochFileError {
    /// An I/O error on `path`.
    #[error("controller epoch file {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The file holds something other than `<decimal>\n`.
    #[error("controller epoch file {path} is corrupt: {content:?}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Its first bytes.
        content: String,
    },
}

/// The highest epoch recorded in `<cluster_dir>/controller-epoch`; `None` without the file.
pub fn read_recorded_epoch(cluster_dir: &Path) -> Result<Option<ControllerEpoch>, EpochFileError> {
    let path = cluster_dir.join(CONTROLLER_EPOCH_FILE);
    match fs::read(&path) {
        Ok(bytes) => parse(&path, &bytes).map(Some),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(EpochFileError::Io { path, source }),
    }
}

/// Raises the recorded epoch to `epoch` durably (never lowers it); returns the highest
/// epoch recorded afterwards, which is above `epoch` when another controller recorded a
/// higher one first. Blocking (a few `fsync`s).
pub fn record_epoch(
    cluster_dir: &Path,
    epoch: ControllerEpoch,
) -> Result<ControllerEpoch, EpochFileError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EpochFileError::Io { path, source }
    };
    fs::create_dir_all(cluster_dir).map_err(io_error(cluster_dir))?;
    let lock_path = cluster_dir.join(format!("{CONTROLLER_EPOCH_FILE}.lock"));
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io_error(&lock_path))?;
    lock.lock().map_err(io_error(&lock_path))?;
    if let Some(highest) = read_recorded_epoch(cluster_dir)? {
        if highest >= epoch {
            return Ok(highest);
        }
    }
    let tmp = cluster_dir.join(format!("{CONTROLLER_EPOCH_FILE}.tmp"));
    let mut file = File::create(&tmp).map_err(io_error(&tmp))?;
    file.write_all(format!("{}\n", epoch.0).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(io_error(&tmp))?;
    drop(file);
    let path = cluster_dir.join(CONTROLLER_EPOCH_FILE);
    fs::rename(&tmp, &path).map_err(io_error(&path))?;
    File::open(cluster_dir)
        .and_then(|dir| dir.sync_all())
        .map_err(io_error(cluster_dir))?;
    // The lock is released when `lock` drops, after the directory's fsync.
    drop(lock);
    Ok(epoch)
}

fn parse(path: &Path, bytes: &[u8]) -> Result<ControllerEpoch, EpochFileError> {
    let corrupt = || EpochFileError::Corrupt {
        path: path.to_path_buf(),
        content: String::from_utf8_lossy(&bytes[..bytes.len().min(64)]).into_owned(),
    };
    if bytes.len() > MAX_LEN {
        return Err(corrupt());
    }
    let digits = bytes.strip_suffix(b"\n").ok_or_else(corrupt)?;
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(corrupt());
    }
    std::str::from_utf8(digits)
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
        .map(ControllerEpoch)
        .ok_or_else(corrupt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_only_goes_up() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = kaas_volume::cluster_dir(dir.path());
        assert_eq!(read_recorded_epoch(&cluster).expect("read"), None);
        assert_eq!(
            record_epoch(&cluster, ControllerEpoch(3)).expect("record"),
            ControllerEpoch(3)
        );
        assert_eq!(
            fs::read(cluster.join(CONTROLLER_EPOCH_FILE)).expect("file"),
            b"3\n"
        );
        assert_eq!(
            record_epoch(&cluster, ControllerEpoch(2)).expect("record"),
            ControllerEpoch(3),
            "a lower epoch leaves the higher one"
        );
        assert_eq!(
            read_recorded_epoch(&cluster).expect("read"),
            Some(ControllerEpoch(3))
        );
        assert_eq!(
            record_epoch(&cluster, ControllerEpoch(9)).expect("record"),
            ControllerEpoch(9)
        );
        assert_eq!(
            read_recorded_epoch(&cluster).expect("read"),
            Some(ControllerEpoch(9))
        );
    }

    #[test]
    fn anything_but_digits_and_a_newline_is_corrupt() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(CONTROLLER_EPOCH_FILE);
        for bad in [
            &b""[..],
            b"\n",
            b"7",
            b"-1\n",
            b"7 \n",
            b"0x7\n",
            b"99999999999999999999\n",
            b"000000000000000000000007\n",
        ] {
            fs::write(&path, bad).expect("write");
            assert!(
                matches!(
                    read_recorded_epoch(dir.path()),
                    Err(EpochFileError::Corrupt { .. })
                ),
                "{bad:?}"
            );
            assert!(record_epoch(dir.path(), ControllerEpoch(1)).is_err());
        }
    }
}
