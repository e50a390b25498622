//! The controller's view of the shared volume: reading `assignment.json` and the
//! controller-epoch file into [`Input::VolumeRead`], noticing when the assignment file
//! changed since (another controller wrote it), and writing the assignment with
//! `kaas-cluster-file`'s writer.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kaas_cluster::assignment::Assignment;
use kaas_cluster::controller::Input;
use kaas_cluster::ids::ControllerEpoch;
use kaas_cluster_file::{read_assignment, write_assignment_if, ReadError, ASSIGNMENT_FILE};

use kaas_cluster_file::controller_epoch_file::{self, EpochFileError};

/// How long to wait before reading a refused file once more: a file that does not parse may
/// be a copy caught mid-way by a reader on a file system without atomic rename, and giving
/// up on it makes the first assignment start from nothing.
const REREAD_AFTER: Duration = Duration::from_millis(200);

/// What identifies one version of a file on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FileIdentity {
    device: u64,
    inode: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

/// `<data>/__cluster` as the controller uses it.
pub(crate) struct Volume {
    dir: PathBuf,
    /// The identity of `assignment.json` when last read or written here.
    seen: Option<Option<FileIdentity>>,
}

impl Volume {
    pub(crate) fn new(cluster_dir: &Path) -> Self {
        Volume {
            dir: cluster_dir.to_path_buf(),
            seen: None,
        }
    }

    fn assignment_path(&self) -> PathBuf {
        self.dir.join(ASSIGNMENT_FILE)
    }

    fn identity(&self) -> Option<FileIdentity> {
        let meta = std::fs::metadata(self.assignment_path()).ok()?;
        Some(FileIdentity {
            device: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
    }

    /// Whether `assignment.json` changed since this volume last read or wrote it (or it was
    /// never read).
    pub(crate) fn changed(&self) -> bool {
        self.seen != Some(self.identity())
    }

    /// Reads the recorded epoch and the assignment: [`Input::VolumeRead`]. A corrupt or
    /// unreadable epoch file is an error (the controller must not lead on a guess); a
    /// missing, unreadable or refused assignment file is `None`, after one more try for a
    /// refused one.
    pub(crate) async fn read(&mut self) -> Result<Input, EpochFileError> {
        let recorded_epoch = controller_epoch_file::read_recorded_epoch(&self.dir)?;
        let mut identity = self.identity();
        let mut read = read_assignment(&self.assignment_path());
        if matches!(read, Err(ReadError::Refused(_))) {
            tokio::time::sleep(REREAD_AFTER).await;
            identity = self.identity();
            read = read_assignment(&self.assignment_path());
        }
        self.seen = Some(identity);
        let assignment = match read {
            Ok(assignment) => Some(Arc::new(assignment)),
            Err(ReadError::Missing) => None,
            Err(error) => {
                tracing::warn!(%error, "the assignment file on the volume is not usable; starting without it");
                None
            }
        };
        Ok(Input::VolumeRead {
            recorded_epoch,
            assignment,
        })
    }

    /// Raises the recorded epoch to `epoch`; the highest recorded afterwards.
    pub(crate) fn record_epoch(
        &self,
        epoch: ControllerEpoch,
    ) -> Result<ControllerEpoch, EpochFileError> {
        controller_epoch_file::record_epoch(&self.dir, epoch)
    }

    /// Writes `assignment` unless `still_allowed` says no just before the rename; whether it
    /// was renamed into place.
    pub(crate) fn write(
        &mut self,
        assignment: &Assignment,
        still_allowed: impl FnOnce() -> bool,
    ) -> std::io::Result<bool> {
        std::fs::create_dir_all(&self.dir)?;
        let written = write_assignment_if(&self.dir, assignment, still_allowed)?;
        if written {
            // Our own file is not news for the controller.
            self.seen = Some(self.identity());
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{"format": 1, "controller_epoch": 2, "assignment_version": 5,
        "brokers": [{"id": 0, "host": "127.0.0.1", "port": 9092}],
        "topics": {"orders": {"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 1}},
        "partitions": {"orders": [{"leader": 0, "leader_epoch": 131072}]}}"#;

    #[test]
    fn a_write_refused_before_the_rename_leaves_nothing_and_an_allowed_one_is_read_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = kaas_volume::cluster_dir(dir.path());
        let assignment = Assignment::from_json(FILE.as_bytes()).expect("good file");
        let mut volume = Volume::new(&cluster);
        assert!(!volume.write(&assignment, || false).expect("no error"));
        let left: Vec<_> = std::fs::read_dir(&cluster).expect("dir").collect();
        assert!(left.is_empty(), "no file and no temporary file: {left:?}");
        assert!(volume.changed(), "never read");

        assert!(volume.write(&assignment, || true).expect("written"));
        assert!(!volume.changed(), "its own write is not a change");
        let read = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(volume.read())
            .expect("read");
        assert_eq!(
            read,
            Input::VolumeRead {
                recorded_epoch: None,
                assignment: Some(Arc::new(assignment)),
            }
        );
        std::fs::write(cluster.join(ASSIGNMENT_FILE), b"{}").expect("overwrite");
        assert!(volume.changed(), "another writer's file is a change");
    }
}
