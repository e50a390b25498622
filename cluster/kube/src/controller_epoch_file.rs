//! The highest controller epoch ever used on this volume: `<data>/__cluster/controller-epoch`.
//!
//! Format: the epoch in ASCII decimal followed by one `\n` (`7\n`), nothing else. Anything
//! else is refused as corrupt rather than read as 0, since reading it low would let a
//! controller lead at an epoch already used. A missing file means no controller has led on
//! this volume yet (highest epoch 0).
//!
//! Write order: take an exclusive `flock` on `controller-epoch.lock` beside it (so two
//! brokers recording at once cannot interleave their check and write), read the current
//! value, refuse unless the new epoch is above it, write `controller-epoch.tmp`, `fsync` it,
//! rename it over `controller-epoch`, `fsync` the directory, unlock. A crash leaves either the
//! old file or the new one (and maybe a stale `.tmp`, overwritten by the next write); the
//! value never goes down.
//!
//! A controller records its epoch before it writes its first assignment; the API server's
//! Lease is the election, this file is what makes a rewound Lease (a restored etcd, a Lease
//! deleted by hand) unable to hand out an epoch the volume has seen.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use kaas_cluster::ids::ControllerEpoch;

use crate::error::KubeAdapterError;

/// The file's name inside `<data>/__cluster`.
pub const FILE_NAME: &str = "controller-epoch";

/// The controller-epoch file of one data directory.
#[derive(Clone, Debug)]
pub struct ControllerEpochFile {
    dir: PathBuf,
}

impl ControllerEpochFile {
    /// The file of the volume mounted at `data_dir` (`<data_dir>/__cluster/controller-epoch`).
    pub fn in_data_dir(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join("__cluster"),
        }
    }

    /// The path of the file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// The highest epoch recorded; 0 when none was (no file).
    pub fn highest(&self) -> Result<ControllerEpoch, KubeAdapterError> {
        let path = self.path();
        match fs::read(&path) {
            Ok(bytes) => parse(&path, &bytes),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(ControllerEpoch(0)),
            Err(source) => Err(KubeAdapterError::EpochFile { path, source }),
        }
    }

    /// Records `epoch` as the highest used, durably, if it is above the recorded one;
    /// otherwise refuses with [`KubeAdapterError::EpochNotAbove`] and changes nothing.
    /// Blocking (a few `fsync`s): call it from a blocking context.
    pub fn record(&self, epoch: ControllerEpoch) -> Result<(), KubeAdapterError> {
        let io_error = |path: PathBuf| move |source| KubeAdapterError::EpochFile { path, source };
        fs::create_dir_all(&self.dir).map_err(io_error(self.dir.clone()))?;
        let lock_path = self.dir.join(format!("{FILE_NAME}.lock"));
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_error(lock_path.clone()))?;
        lock.lock().map_err(io_error(lock_path.clone()))?;
        let highest = self.highest()?;
        if epoch <= highest {
            return Err(KubeAdapterError::EpochNotAbove {
                epoch: epoch.0,
                highest: highest.0,
            });
        }
        let tmp = self.dir.join(format!("{FILE_NAME}.tmp"));
        let mut file = File::create(&tmp).map_err(io_error(tmp.clone()))?;
        file.write_all(format!("{}\n", epoch.0).as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(io_error(tmp.clone()))?;
        drop(file);
        let path = self.path();
        fs::rename(&tmp, &path).map_err(io_error(path.clone()))?;
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(io_error(self.dir.clone()))?;
        // The lock is released when `lock` is dropped, after the directory fsync.
        drop(lock);
        Ok(())
    }
}

fn parse(path: &Path, bytes: &[u8]) -> Result<ControllerEpoch, KubeAdapterError> {
    let corrupt = || KubeAdapterError::EpochFileCorrupt {
        path: path.to_owned(),
        content: String::from_utf8_lossy(&bytes[..bytes.len().min(64)]).into_owned(),
    };
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_volume_has_epoch_zero_and_records_go_up_only() {
        let data = tempfile::tempdir().unwrap();
        let file = ControllerEpochFile::in_data_dir(data.path());
        assert_eq!(file.highest().unwrap(), ControllerEpoch(0));
        file.record(ControllerEpoch(3)).unwrap();
        assert_eq!(fs::read(file.path()).unwrap(), b"3\n");
        for refused in [0, 2, 3] {
            let error = file.record(ControllerEpoch(refused)).unwrap_err();
            assert!(
                matches!(error, KubeAdapterError::EpochNotAbove { epoch, highest: 3 } if epoch == refused),
                "{error}"
            );
        }
        file.record(ControllerEpoch(4)).unwrap();
        assert_eq!(
            ControllerEpochFile::in_data_dir(data.path())
                .highest()
                .unwrap(),
            ControllerEpoch(4)
        );
    }

    #[test]
    fn anything_but_digits_and_a_newline_is_corrupt() {
        let data = tempfile::tempdir().unwrap();
        let file = ControllerEpochFile::in_data_dir(data.path());
        fs::create_dir_all(data.path().join("__cluster")).unwrap();
        for bad in [
            &b""[..],
            b"\n",
            b"7",
            b"-1\n",
            b"7 \n",
            b"x\n",
            b"99999999999999999999999\n",
        ] {
            fs::write(file.path(), bad).unwrap();
            assert!(
                matches!(
                    file.highest(),
                    Err(KubeAdapterError::EpochFileCorrupt { .. })
                ),
                "{bad:?}"
            );
            // A corrupt file is never overwritten as if it were low.
            assert!(file.record(ControllerEpoch(1)).is_err());
            assert_eq!(fs::read(file.path()).unwrap(), bad);
        }
    }
}
