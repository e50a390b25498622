//! All partition logs open on one shard.
//!
//! The cluster moves partitions between shards and brokers at run time, so logs are opened,
//! closed and recovered on demand: [`LogManager::open`] recovers a partition from its files
//! (whoever wrote them last), [`LogManager::close`] flushes and checkpoints it so another
//! shard can open it quickly. A [`LogManager`] is `!Send` and lives on its shard; the
//! storage it wraps may be shared by every shard.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use futures_channel::oneshot;

use crate::config::LogConfig;
use crate::error::{EngineError, Result};
use crate::log::{Checkpoint, PartitionLog};
use crate::storage::Storage;

/// A topic partition, as the engine names it on disk: `topics/<topic>/<partition>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionId {
    /// Topic name; Kafka's legal characters only (`[A-Za-z0-9._-]`, not `.` or `..`).
    pub topic: Arc<str>,
    /// Partition number (≥ 0).
    pub partition: i32,
}

impl PartitionId {
    /// A partition id.
    pub fn new(topic: impl Into<Arc<str>>, partition: i32) -> Self {
        PartitionId {
            topic: topic.into(),
            partition,
        }
    }

    /// The partition's directory relative to the storage root, refusing names that could
    /// escape it.
    pub fn dir(&self) -> Result<PathBuf> {
        if !is_legal_topic_name(&self.topic) || self.partition < 0 {
            return Err(EngineError::Corrupt {
                what: "partition id".into(),
                detail: format!("illegal topic partition {self}"),
            });
        }
        Ok(topic_dir(&self.topic).join(self.partition.to_string()))
    }
}

impl fmt::Display for PartitionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Kafka's rule for topic names (`kaas_volume::topic_name`): a name that passes stays one
/// directory inside the data directory.
pub use kaas_volume::topic_name::is_legal as is_legal_topic_name;

/// The directory holding a topic's partitions, relative to the storage root.
pub fn topic_dir(topic: &str) -> PathBuf {
    PathBuf::from(kaas_volume::TOPICS_DIR).join(topic)
}

/// Checkpoint a log once this many bytes were appended since its last checkpoint...
pub const CHECKPOINT_BYTES: u64 = 64 << 20;
/// ...or once this much time passed with anything appended.
pub const CHECKPOINT_INTERVAL_MS: i64 = 30_000;

/// A partition with no append for this long gives back its tail cache.
pub const IDLE_RELEASE_MS: i64 = 30_000;

/// Size and time of a log's last checkpoint.
#[derive(Clone, Copy)]
struct CheckpointMark {
    size_bytes: u64,
    at_ms: i64,
}

enum Slot {
    /// Recovery or a close is running; these wait for it.
    Opening(Vec<oneshot::Sender<()>>),
    Open(PartitionLog),
    /// The partition's files are being removed; it cannot be opened meanwhile.
    Deleting,
}

/// The open logs of one shard.
pub struct LogManager {
    storage: Storage,
    slots: RefCell<HashMap<PartitionId, Slot>>,
    checkpointed_at: RefCell<HashMap<PartitionId, CheckpointMark>>,
}

impl LogManager {
    /// A manager over `storage` with nothing open.
    pub fn new(storage: Storage) -> Self {
        LogManager {
            storage,
            slots: RefCell::new(HashMap::new()),
            checkpointed_at: RefCell::new(HashMap::new()),
        }
    }

    /// The storage logs live in.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Size and free space of the volume holding the data directory (`statvfs`, run on the
    /// blocking pool); `None` for in-memory storage, which has no volume.
    pub async fn disk_space(&self) -> Result<Option<DiskSpace>> {
        let Storage::Disk(root) = &self.storage else {
            return Ok(None);
        };
        let root = root.clone();
        let context = format!("statvfs {}", root.display());
        glommio::executor()
            .spawn_blocking(move || disk_space_of(&root))
            .await
            .map(Some)
            .map_err(|e| EngineError::io(context, e))
    }

    /// The open log of a partition, if any.
    pub fn get(&self, id: &PartitionId) -> Option<PartitionLog> {
        match self.slots.borrow().get(id) {
            Some(Slot::Open(log)) => Some(log.clone()),
            _ => None,
        }
    }

    /// Ids of the open partitions.
    pub fn open_partitions(&self) -> Vec<PartitionId> {
        self.slots
            .borrow()
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Open(_)))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Opens (recovering it) or returns the already open log. Concurrent calls for the same
    /// partition share one recovery. Opens at fence epoch 0 (standalone).
    pub async fn open(&self, id: &PartitionId, config: LogConfig) -> Result<PartitionLog> {
        self.open_at_epoch(id, config, 0).await
    }

    /// Like [`LogManager::open`], opening the log as its leader at fence epoch `epoch`
    /// ([`PartitionLog::open_at_epoch`]). A log already open is returned as it is, whatever
    /// epoch it was opened at: close it first to take it over at another.
    pub async fn open_at_epoch(
        &self,
        id: &PartitionId,
        config: LogConfig,
        epoch: u32,
    ) -> Result<PartitionLog> {
        let dir = id.dir()?;
        self.open_in_dir(id, &dir, config, epoch).await
    }

    /// Like [`LogManager::open_at_epoch`], with the partition's files in `dir` (relative to
    /// the storage root) instead of [`PartitionId::dir`]: cluster mode names the directory
    /// after the topic's id as well ([`crate::topic_incarnation`]).
    pub async fn open_in_dir(
        &self,
        id: &PartitionId,
        dir: &std::path::Path,
        config: LogConfig,
        epoch: u32,
    ) -> Result<PartitionLog> {
        loop {
            let waiter = {
                let mut slots = self.slots.borrow_mut();
                match slots.get_mut(id) {
                    Some(Slot::Open(log)) => return Ok(log.clone()),
                    Some(Slot::Opening(waiters)) => {
                        let (sender, receiver) = oneshot::channel();
                        waiters.push(sender);
                        Some(receiver)
                    }
                    Some(Slot::Deleting) => return Err(EngineError::Closed),
                    None => {
                        slots.insert(id.clone(), Slot::Opening(Vec::new()));
                        None
                    }
                }
            };
            match waiter {
                Some(receiver) => {
                    let _ = receiver.await;
                }
                None => break,
            }
        }
        let result = PartitionLog::open_at_epoch(&self.storage, dir, config, epoch).await;
        let waiters = {
            let mut slots = self.slots.borrow_mut();
            let previous = match &result {
                Ok(log) => slots.insert(id.clone(), Slot::Open(log.clone())),
                Err(_) => slots.remove(id),
            };
            match previous {
                Some(Slot::Opening(waiters)) => waiters,
                _ => Vec::new(),
            }
        };
        for waiter in waiters {
            let _ = waiter.send(());
        }
        if let Ok(log) = &result {
            self.checkpointed_at.borrow_mut().insert(
                id.clone(),
                CheckpointMark {
                    size_bytes: log.size_bytes(),
                    at_ms: now_ms(),
                },
            );
        }
        result
    }

    /// Flushes, checkpoints and closes a partition (so another shard or broker can take it).
    pub async fn close(&self, id: &PartitionId) -> Result<()> {
        self.close_with(id, Checkpoint::Write).await
    }

    /// Flushes and closes a partition another broker is taking over now, without a
    /// checkpoint ([`PartitionLog::close_for_takeover`]).
    pub async fn close_for_takeover(&self, id: &PartitionId) -> Result<()> {
        self.close_with(id, Checkpoint::Skip).await
    }

    async fn close_with(&self, id: &PartitionId, checkpoint: Checkpoint) -> Result<()> {
        self.wait_for_open(id).await;
        // Opens of this partition wait until the close is done (no await before this insert,
        // so nothing can start in between).
        let log = match self.slots.borrow_mut().remove(id) {
            Some(Slot::Open(log)) => log,
            Some(other) => {
                self.slots.borrow_mut().insert(id.clone(), other);
                return Ok(());
            }
            None => return Ok(()),
        };
        self.slots
            .borrow_mut()
            .insert(id.clone(), Slot::Opening(Vec::new()));
        self.checkpointed_at.borrow_mut().remove(id);
        let closed = log.close_after(checkpoint).await;
        self.finish_busy(id);
        closed
    }

    /// Ends a close: the slot goes and whoever waited retries.
    fn finish_busy(&self, id: &PartitionId) {
        if let Some(Slot::Opening(waiters)) = self.slots.borrow_mut().remove(id) {
            for waiter in waiters {
                let _ = waiter.send(());
            }
        }
    }

    /// Waits until no recovery of `id` is running.
    async fn wait_for_open(&self, id: &PartitionId) {
        loop {
            let waiter = match self.slots.borrow_mut().get_mut(id) {
                Some(Slot::Opening(waiters)) => {
                    let (sender, receiver) = oneshot::channel();
                    waiters.push(sender);
                    receiver
                }
                _ => return,
            };
            let _ = waiter.await;
        }
    }

    /// Closes a partition and removes its files.
    pub async fn delete(&self, id: &PartitionId) -> Result<()> {
        let dir = id.dir()?;
        self.wait_for_open(id).await;
        // From here until the files are gone no open may start (no await before this insert).
        let previous = self.slots.borrow_mut().insert(id.clone(), Slot::Deleting);
        if let Some(Slot::Open(log)) = previous {
            self.checkpointed_at.borrow_mut().remove(id);
            // A poisoned log cannot checkpoint; its files go anyway.
            let _ = log.close().await;
        }
        let removed = self.remove_partition_dir(&dir).await;
        self.slots.borrow_mut().remove(id);
        removed
    }

    async fn remove_partition_dir(&self, dir: &std::path::Path) -> Result<()> {
        self.storage.remove_dir_all(dir).await?;
        if let Some(parent) = dir.parent() {
            self.storage.sync_dir(parent).await?;
        }
        Ok(())
    }

    /// Removes a topic's directory once all its partitions are deleted.
    pub async fn remove_topic_dir(&self, topic: &str) -> Result<()> {
        if !is_legal_topic_name(topic) {
            return Ok(());
        }
        self.storage.remove_dir_all(&topic_dir(topic)).await
    }

    /// Closes every open partition; returns the first error after trying them all.
    pub async fn close_all(&self) -> Result<()> {
        let mut first_error = None;
        for id in self.open_partitions() {
            if let Err(error) = self.close(&id).await {
                tracing::error!(partition = %id, %error, "closing partition");
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// One maintenance pass over every open log: roll segments past `segment.ms`, enforce
    /// retention, remove what older fence epochs left once that is due
    /// ([`PartitionLog::remove_superseded_files`]), and checkpoint logs that grew by [`CHECKPOINT_BYTES`] or changed at all
    /// [`CHECKPOINT_INTERVAL_MS`] ago — so recovery after a crash scans about that much.
    pub async fn maintain(&self, now_ms: i64) {
        for id in self.open_partitions() {
            let Some(log) = self.get(&id) else { continue };
            if log.is_poisoned() {
                continue;
            }
            log.release_memory_if_idle(now_ms, IDLE_RELEASE_MS);
            if let Err(error) = log.roll_if_aged(now_ms).await {
                tracing::warn!(partition = %id, %error, "age roll failed");
            }
            if let Err(error) = log.enforce_retention(now_ms).await {
                tracing::warn!(partition = %id, %error, "retention failed");
            }
            if let Err(error) = log.remove_superseded_files(now_ms).await {
                tracing::warn!(partition = %id, %error, "removing older epochs' files failed");
            }
            let size_bytes = log.size_bytes();
            let due = match self.checkpointed_at.borrow().get(&id) {
                None => true,
                Some(mark) => {
                    size_bytes.abs_diff(mark.size_bytes) >= CHECKPOINT_BYTES
                        || (size_bytes != mark.size_bytes
                            && now_ms - mark.at_ms >= CHECKPOINT_INTERVAL_MS)
                }
            };
            if due {
                match log.checkpoint().await {
                    Ok(()) => {
                        let mark = CheckpointMark {
                            size_bytes,
                            at_ms: now_ms,
                        };
                        self.checkpointed_at.borrow_mut().insert(id.clone(), mark);
                    }
                    Err(error) => tracing::warn!(partition = %id, %error, "checkpoint failed"),
                }
            }
        }
    }
}

/// Size and free space of a volume, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes of the whole volume.
    pub total_bytes: u64,
    /// Bytes an unprivileged writer may still use (`f_bavail`, as Java's `getUsableSpace`).
    pub usable_bytes: u64,
}

fn disk_space_of(path: &std::path::Path) -> std::io::Result<DiskSpace> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: `path` is a valid NUL-terminated string and `stats` is a plain C struct that
    // statvfs fills in; it is read only after statvfs reports success.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stats) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let block = stats.f_frsize as u64;
    Ok(DiskSpace {
        total_bytes: (stats.f_blocks as u64).saturating_mul(block),
        usable_bytes: (stats.f_bavail as u64).saturating_mul(block),
    })
}

/// Wall-clock milliseconds since the Unix epoch (Kafka timestamps).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disk_space_reports_the_volume_of_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let space = disk_space_of(dir.path()).expect("statvfs");
        assert!(space.total_bytes > 0);
        assert!(space.usable_bytes <= space.total_bytes);
        assert!(disk_space_of(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn topic_names_cannot_escape_the_data_directory() {
        assert!(PartitionId::new("orders", 0).dir().is_ok());
        assert!(PartitionId::new("..", 0).dir().is_err());
        assert!(PartitionId::new("a/b", 0).dir().is_err());
        assert!(PartitionId::new("", 0).dir().is_err());
        assert!(PartitionId::new("ok", -1).dir().is_err());
        assert!(PartitionId::new("x".repeat(250), 0).dir().is_err());
    }
}
