//! The controller's view of the shared volume: reading `assignment.json` and the
//! controller-epoch file into [`Input::VolumeRead`], noticing when the assignment file
//! changed since (another controller wrote it), writing the assignment with
//! `kaas-cluster-file`'s writer, and listing the consumer groups stored on the volume.
//!
//! Every call that touches the file system (`stat`, reads, writes, `fsync`, the epoch file's
//! `flock`) runs on tokio's blocking pool, never on the core's thread: a volume that stalls
//! for seconds (an NFS server failing over) must not stop the heartbeat server, the Lease
//! renewals and the broker's own heartbeat client, which share that thread.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeSet;

use kaas_cluster::assignment::Assignment;
use kaas_cluster::controller::Input;
use kaas_cluster::ids::{ControllerEpoch, GroupId};
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

    /// Whether `assignment.json` changed since this volume last read or wrote it (or it was
    /// never read).
    pub(crate) async fn changed(&self) -> bool {
        let dir = self.dir.clone();
        let now = blocking(move || identity(&dir)).await.ok().flatten();
        self.seen != Some(now)
    }

    /// Reads the recorded epoch and the assignment: [`Input::VolumeRead`]. A corrupt or
    /// unreadable epoch file is an error (the controller must not lead on a guess); a
    /// missing, unreadable or refused assignment file is `None`, after one more try for a
    /// refused one.
    pub(crate) async fn read(&mut self) -> Result<Input, EpochFileError> {
        let dir = self.dir.clone();
        let (recorded_epoch, mut seen, mut read) = blocking(move || {
            let recorded = controller_epoch_file::read_recorded_epoch(&dir)?;
            Ok::<_, EpochFileError>((recorded, identity(&dir), read_file(&dir)))
        })
        .await
        .map_err(|e| self.io_error(e))??;
        if matches!(read, Err(ReadError::Refused(_))) {
            tokio::time::sleep(REREAD_AFTER).await;
            let dir = self.dir.clone();
            (seen, read) = blocking(move || (identity(&dir), read_file(&dir)))
                .await
                .map_err(|e| self.io_error(e))?;
        }
        self.seen = Some(seen);
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
    pub(crate) async fn record_epoch(
        &self,
        epoch: ControllerEpoch,
    ) -> Result<ControllerEpoch, EpochFileError> {
        let dir = self.dir.clone();
        blocking(move || controller_epoch_file::record_epoch(&dir, epoch))
            .await
            .map_err(|e| self.io_error(e))?
    }

    /// Writes `assignment` unless `still_allowed` says no just before the rename; whether it
    /// was renamed into place.
    pub(crate) async fn write(
        &mut self,
        assignment: Arc<Assignment>,
        still_allowed: impl FnOnce() -> bool + Send + 'static,
    ) -> std::io::Result<bool> {
        let dir = self.dir.clone();
        let (written, identity) = blocking(move || {
            std::fs::create_dir_all(&dir)?;
            let written = write_assignment_if(&dir, &assignment, still_allowed)?;
            Ok::<_, std::io::Error>((written, identity(&dir)))
        })
        .await
        .map_err(std::io::Error::other)??;
        if written {
            // Our own file is not news for the controller.
            self.seen = Some(identity);
        }
        Ok(written)
    }

    /// Whether a broker asked for `__transaction_state`
    /// (`__cluster/transaction-state-requested` exists).
    pub(crate) async fn transaction_state_requested(&self) -> std::io::Result<bool> {
        let path = self.dir.join(kaas_volume::TRANSACTION_STATE_REQUESTED_FILE);
        blocking(move || match std::fs::metadata(&path) {
            Ok(_) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        })
        .await
        .map_err(std::io::Error::other)?
    }

    /// The consumer groups with a store on the volume (`<data>/groups/`), by the names of
    /// their directories; a group whose id is too long to be spelled in its directory's name
    /// (over 200 encoded bytes) is left out.
    pub(crate) async fn groups(&self) -> std::io::Result<BTreeSet<GroupId>> {
        let Some(data_dir) = self.dir.parent().map(Path::to_path_buf) else {
            return Ok(BTreeSet::new());
        };
        blocking(move || {
            let dir = data_dir.join(kaas_volume::GROUPS_DIR);
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(BTreeSet::new())
                }
                Err(error) => return Err(error),
            };
            let mut groups = BTreeSet::new();
            for entry in entries {
                let name = entry?.file_name();
                if let Some(id) = name.to_str().and_then(kaas_volume::group_dir::group_id_of) {
                    groups.insert(GroupId::new(&id));
                }
            }
            Ok(groups)
        })
        .await
        .map_err(std::io::Error::other)?
    }

    fn io_error(&self, error: tokio::task::JoinError) -> EpochFileError {
        EpochFileError::Io {
            path: self.dir.clone(),
            source: std::io::Error::other(error),
        }
    }
}

/// Runs `work` on tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    tokio::task::spawn_blocking(work).await
}

fn read_file(dir: &Path) -> Result<Assignment, ReadError> {
    read_assignment(&dir.join(ASSIGNMENT_FILE))
}

fn identity(dir: &Path) -> Option<FileIdentity> {
    let meta = std::fs::metadata(dir.join(ASSIGNMENT_FILE)).ok()?;
    Some(FileIdentity {
        device: meta.dev(),
        inode: meta.ino(),
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec()),
        ctime: (meta.ctime(), meta.ctime_nsec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"{"format": 1, "controller_epoch": 2, "assignment_version": 5,
        "brokers": [{"id": 0, "host": "127.0.0.1", "port": 9092}],
        "topics": {"orders": {"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 1}},
        "partitions": {"orders": [{"leader": 0, "leader_epoch": 131072}]}}"#;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_write_refused_before_the_rename_leaves_nothing_and_an_allowed_one_is_read_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = kaas_volume::cluster_dir(dir.path());
        let assignment = Arc::new(Assignment::from_json(FILE.as_bytes()).expect("good file"));
        let mut volume = Volume::new(&cluster);
        runtime().block_on(async {
            assert!(!volume
                .write(assignment.clone(), || false)
                .await
                .expect("no error"));
            let left: Vec<_> = std::fs::read_dir(&cluster).expect("dir").collect();
            assert!(left.is_empty(), "no file and no temporary file: {left:?}");
            assert!(volume.changed().await, "never read");

            assert!(volume
                .write(assignment.clone(), || true)
                .await
                .expect("written"));
            assert!(!volume.changed().await, "its own write is not a change");
            let read = volume.read().await.expect("read");
            assert_eq!(
                read,
                Input::VolumeRead {
                    recorded_epoch: None,
                    assignment: Some(assignment),
                }
            );
            std::fs::write(cluster.join(ASSIGNMENT_FILE), b"{}").expect("overwrite");
            assert!(volume.changed().await, "another writer's file is a change");
        });
    }

    #[test]
    fn groups_are_listed_by_their_directory_names() {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = kaas_volume::cluster_dir(dir.path());
        let volume = Volume::new(&cluster);
        let runtime = runtime();
        assert!(runtime
            .block_on(volume.groups())
            .expect("no groups yet")
            .is_empty());
        let groups = dir.path().join(kaas_volume::GROUPS_DIR);
        let long = "g".repeat(300);
        for id in ["billing", "a.b", "", long.as_str()] {
            let name = kaas_volume::group_dir::dir_name(id);
            std::fs::create_dir_all(groups.join(name)).expect("group dir");
        }
        let listed = runtime.block_on(volume.groups()).expect("listed");
        let expected: BTreeSet<GroupId> = ["billing", "a.b", ""]
            .into_iter()
            .map(GroupId::new)
            .collect();
        assert_eq!(listed, expected, "the long id's name does not spell it");
    }
}
