//! The durable store of one consumer group: committed offsets, pending transactional
//! offsets and the coordinator's opaque group metadata.
//!
//! # Layout
//! `<data>/groups/<dir>/offsets.log` (`offsets-e<epoch>.log` for a store opened at a fence
//! epoch, next to `claims/`; see [`crate::fence`] and `takeover`), where `<dir>` encodes
//! the group id (see
//! [`dir_name`](kaas_volume::group_dir::dir_name): percent-encoding, and a prefix plus a hash for
//! long ids). The file starts with a header record naming the full group id, which is what
//! [`GroupStore::list`] reports and [`GroupStore::open`] checks, so two ids whose long
//! names collide are never mixed. Record layout, checksums and versioning are in
//! [`record`](self::record).
//!
//! # Writes and durability
//! The file is append-only between compactions. Each [`GroupStore::apply`] encodes its
//! changes as one record and queues it; one flush at a time writes every queued record
//! with one buffered write (io_uring) at the end of the file and then `fdatasync`s it, so
//! concurrent callers share the fsync (group commit). Only then are the changes applied to
//! the in-memory view, in the order they were queued, and the callers answered. A failed
//! write or fsync poisons the store: nothing is retried and every later call fails until
//! the store is opened again.
//! So does a flush whose future is dropped midway (what reached the file is then unknown).
//!
//! The file is created by writing its header to a temporary file, fsyncing it, renaming it
//! into place and fsyncing the directory, so it never exists without a complete header.
//!
//! # Transactional offsets
//! A transactional producer's offset commits ([`GroupChange::PendingCommit`], Kafka's
//! TxnOffsetCommit) are kept per producer, apart from the committed offsets, until a
//! [`GroupChange::CompleteTransaction`] of that producer (the transaction marker Kafka
//! writes to the group's `__consumer_offsets` partition) commits them into the committed
//! offsets or drops them. Both are ordinary changes: durable before they are acknowledged,
//! replayed at open, kept by compaction and by a takeover, fenced like every apply. The
//! rules (which commit wins, stale producer epochs, deleted offsets) are in `view`.
//!
//! # Compaction
//! After a flush, when the file is over 1 MiB and more than 4 times what the live state
//! needs, the live state (metadata, then every committed and pending offset in the order
//! they were written) is written as a new file the same way (temporary file, fsync,
//! rename, directory fsync) and appends continue in it. It runs inside the flush slot, so
//! no record is written while it runs; applies arriving meanwhile queue and go into the
//! new file. A crash before the rename leaves the old file (a stale `offsets.log.tmp` is
//! removed at open), after it the new one; both hold every acknowledged change. The same
//! rewrite upgrades a version-1 file before its first transactional record (see
//! [`record`], "Versions").
//!
//! # Recovery
//! Open reads the file, replays every valid record and cuts the file after the last one
//! (then fsyncs it): a torn or corrupt tail was never acknowledged. An unreadable header,
//! a header of a newer version or a header naming another group fails the open instead.
//!
//! # Threads
//! A [`GroupStore`] is `!Send` and lives on one glommio executor; clones share it. A group
//! must be open at most once at a time.

pub mod record;
mod takeover;
mod view;

#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;

use crate::error::{EngineError, Result};
use crate::group_commit::{FlushSlot, GroupCommit};
use crate::storage::{IndexFile, Storage};
use record::Change;
use view::View;

pub use kaas_volume::group_dir::dir_name;

/// Directory under the storage root holding one directory per group.
pub use kaas_volume::GROUPS_DIR;
/// The file of a group inside its directory (at fence epoch 0).
pub const LOG_FILE: &str = "offsets.log";

/// The file of a group inside its directory at a fence epoch: `offsets.log` at epoch 0,
/// `offsets-e<epoch>.log` after (see [`crate::fence`]).
pub fn log_file_name(epoch: u32) -> String {
    format!("{}.log", crate::fence::with_epoch("offsets", epoch))
}
/// The file is compacted only once it is larger than this…
const COMPACT_MIN_BYTES: u64 = 1 << 20;
/// …and larger than this many times what the live state needs.
const COMPACT_RATIO: u64 = 4;
/// How much of a file `list` reads to find the header.
const HEADER_READ: usize = 64 << 10;

/// A committed offset as the coordinator stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset the group will consume.
    pub offset: i64,
    /// Leader epoch of the committed record, -1 when unknown.
    pub leader_epoch: i32,
    /// Client-supplied metadata string.
    pub metadata: String,
    /// When the commit was made (broker time, ms).
    pub commit_timestamp_ms: i64,
}

/// One change to a group, applied atomically with the others of the same `apply`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupChange {
    /// Sets the committed offset of a partition.
    Commit {
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
        /// The new committed offset.
        committed: CommittedOffset,
    },
    /// Forgets the committed offset of a partition.
    DeleteOffset {
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
    },
    /// Opaque group metadata (members, generation, assignment) owned by the coordinator;
    /// replaces the previous blob. An empty blob means "no metadata".
    Metadata(Bytes),
    /// A transactional offset commit (Kafka's TxnOffsetCommit): the offset is pending for
    /// `producer_id` until that producer's transaction completes, and replaces the
    /// producer's earlier pending offset of the same partition. It is not a committed
    /// offset ([`GroupStore::offset`]) until then. Ignored when the producer's pending
    /// offsets were written at a newer epoch.
    PendingCommit {
        /// The transactional producer.
        producer_id: i64,
        /// Its epoch.
        producer_epoch: i16,
        /// Topic name.
        topic: String,
        /// Partition index.
        partition: i32,
        /// The offset to commit when the transaction commits.
        committed: CommittedOffset,
    },
    /// `producer_id`'s transaction ended (a transaction marker): on commit each of its
    /// pending offsets becomes the partition's committed offset, unless the committed one
    /// was written after it (Kafka keeps the latest write); on abort they are dropped.
    /// Ignored when the producer has no pending offset or they were written at a newer
    /// epoch than `producer_epoch`.
    CompleteTransaction {
        /// The transactional producer.
        producer_id: i64,
        /// The marker's producer epoch.
        producer_epoch: i16,
        /// Commit (true) or abort (false).
        commit: bool,
    },
}

/// One consumer group's committed offsets and metadata, durable on the data volume.
/// `!Send`, cheap to clone (`Rc` inside), used on one glommio executor.
#[derive(Clone)]
pub struct GroupStore {
    shared: Rc<Shared>,
}

struct Shared {
    storage: Storage,
    group_id: String,
    /// The fence epoch the store was opened at (0: unfenced, `offsets.log`).
    epoch: u32,
    /// The group's directory, relative to the storage root.
    dir: PathBuf,
    /// Its file.
    path: PathBuf,
    state: RefCell<State>,
    /// The flush slot, held by a flush, a compaction or the deletion: at most one at a
    /// time. Dropped before it finishes (its holder was cancelled in the middle of a
    /// write), it poisons the store, since what reached the file is unknown.
    commit: GroupCommit,
    /// Flushes run (each one write and one fdatasync).
    flushes: Cell<u64>,
    /// Compactions run.
    compactions: Cell<u64>,
}

/// Mutable state; never borrowed across an `.await`.
struct State {
    /// The open file; `None` once deleted.
    file: Option<IndexFile>,
    /// Bytes written to the file (durable, or being written by the running flush).
    file_len: u64,
    /// The format version of the file's header.
    file_version: u16,
    /// The durable state.
    view: View,
    /// Records queued for the next flush, back to back.
    pending: Vec<u8>,
    /// The newest format version a record queued since the last flush took them needs.
    pending_version: u16,
    /// Their changes, in order.
    pending_changes: Vec<Change>,
    /// Number of applies queued so far.
    queued: u64,
    /// Number of applies durable and visible in `view`.
    durable: u64,
    poisoned: Option<String>,
    /// A newer epoch's claim, found after a flush: nothing more is acknowledged.
    fenced: Option<crate::fence::FencedBy>,
    deleted: bool,
}

impl State {
    fn check_usable(&self) -> Result<()> {
        if self.deleted {
            return Err(EngineError::Closed);
        }
        if let Some(fenced) = &self.fenced {
            return Err(fenced.error());
        }
        if let Some(reason) = &self.poisoned {
            return Err(EngineError::Poisoned(reason.clone()));
        }
        Ok(())
    }

    fn needs_compaction(&self, header_len: usize) -> bool {
        // Framing of the snapshot's records: one per MiB or so, generously.
        let live = (header_len + self.view.live_bytes()) as u64;
        let snapshot = live + live / (64 << 10) * 13 + 13;
        self.file_len > COMPACT_MIN_BYTES && self.file_len > COMPACT_RATIO * snapshot
    }
}

fn corrupt(path: &Path, detail: impl Into<String>) -> EngineError {
    EngineError::Corrupt {
        what: path.display().to_string(),
        detail: detail.into(),
    }
}

impl GroupStore {
    /// The file of `group_id`, relative to the storage root.
    pub fn log_path(group_id: &str) -> PathBuf {
        Path::new(GROUPS_DIR)
            .join(dir_name(group_id))
            .join(LOG_FILE)
    }

    /// Opens (creating if absent) and recovers the store of `group_id`.
    ///
    /// This is epoch 0 of the storage fence: `offsets.log`, no claim, no check (see
    /// [`crate::fence`]); standalone mode and every existing data directory open this way.
    pub async fn open(storage: &Storage, group_id: &str) -> Result<GroupStore> {
        Self::open_at_epoch(storage, group_id, 0).await
    }

    /// Opens the store as the group's coordinator at fence epoch `epoch` (0 is
    /// [`GroupStore::open`]): claims the group for `epoch` before reading, takes the state
    /// of the newest completed older claim (or of epoch 0) into a new file of its own
    /// (`offsets-e<epoch>.log`), records the claim, and from then on checks for a newer
    /// claim after every fdatasync: once there is one, applies fail with
    /// [`EngineError::Fenced`] and are not acknowledged. See [`crate::fence`].
    pub async fn open_at_epoch(
        storage: &Storage,
        group_id: &str,
        epoch: u32,
    ) -> Result<GroupStore> {
        let dir = Path::new(GROUPS_DIR).join(dir_name(group_id));
        let path = dir.join(log_file_name(epoch));
        storage.create_dir_all(&dir).await?;
        if epoch > 0 {
            takeover::claim_and_inherit(storage, group_id, &dir, epoch).await?;
        }
        storage
            .remove(&dir.join(format!("{}.tmp", log_file_name(epoch))))
            .await?;
        let existing = storage.read_small(&path).await?.filter(|b| !b.is_empty());
        let (view, file_len, file_version, cut) = match existing {
            Some(bytes) => {
                let replayed = replay_checked(&bytes, &path, group_id)?;
                if let Some(reason) = &replayed.stopped_by {
                    tracing::warn!(
                        group = group_id,
                        %reason,
                        kept = replayed.valid_len,
                        dropped = bytes.len() - replayed.valid_len,
                        "group store: cutting a torn or corrupt tail"
                    );
                }
                let cut = replayed.valid_len < bytes.len();
                let len = replayed.valid_len as u64;
                (replayed.view, len, replayed.version, cut)
            }
            None => {
                let header = record::encode_header(group_id, record::FIRST_VERSION);
                let len = header.len() as u64;
                storage.write_small_durable(&path, header).await?;
                (View::default(), len, record::FIRST_VERSION, false)
            }
        };
        let file = storage.open_index_file(&path).await?;
        if cut {
            file.truncate(file_len)
                .await
                .map_err(|e| EngineError::io(format!("truncating {}", path.display()), e))?;
            file.fdatasync()
                .await
                .map_err(|e| EngineError::io(format!("syncing {}", path.display()), e))?;
        }
        Ok(GroupStore {
            shared: Rc::new(Shared {
                storage: storage.clone(),
                group_id: group_id.to_owned(),
                epoch,
                dir,
                path,
                state: RefCell::new(State {
                    file: Some(file),
                    file_len,
                    file_version,
                    view,
                    pending: Vec::new(),
                    pending_version: record::FIRST_VERSION,
                    pending_changes: Vec::new(),
                    queued: 0,
                    durable: 0,
                    poisoned: None,
                    fenced: None,
                    deleted: false,
                }),
                commit: GroupCommit::default(),
                flushes: Cell::new(0),
                compactions: Cell::new(0),
            }),
        })
    }

    /// Ids of every group with a store under `<data>/groups`, sorted (for start-up
    /// recovery). A directory without a file, or whose header is unreadable or names a
    /// group that does not belong in it, is skipped with an error in the log.
    pub async fn list(storage: &Storage) -> Result<Vec<String>> {
        let mut ids = Vec::new();
        for name in storage.list_dir(Path::new(GROUPS_DIR)).await? {
            let group_dir = Path::new(GROUPS_DIR).join(&name);
            let newest = match takeover::newest_log_file(storage, &group_dir).await {
                Ok(Some(file)) => file,
                Ok(None) => continue,
                Err(EngineError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotADirectory =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            let path = group_dir.join(newest);
            let prefix = match storage.read_prefix(&path, HEADER_READ).await {
                Ok(Some(prefix)) => prefix,
                Ok(None) => continue,
                Err(EngineError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotADirectory =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            if prefix.is_empty() {
                continue;
            }
            let header = match record::unframe(&prefix) {
                Err(record::RecordError::Torn) if prefix.len() == HEADER_READ => storage
                    .read_small(&path)
                    .await?
                    .ok_or_else(|| corrupt(&path, "vanished while listing"))?,
                _ => prefix,
            };
            let group_id = record::unframe(&header)
                .and_then(|(body, _)| record::decode_header(body))
                .map(|header| header.group_id);
            match group_id {
                Ok(id) if dir_name(&id) == name => ids.push(id),
                Ok(id) => {
                    tracing::error!(path = %path.display(), group = id, "group store in the wrong directory; skipped")
                }
                Err(error) => {
                    tracing::error!(path = %path.display(), %error, "unreadable group store header; skipped")
                }
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// The group's id.
    pub fn group_id(&self) -> &str {
        &self.shared.group_id
    }

    /// The durable committed offset of a partition.
    pub fn offset(&self, topic: &str, partition: i32) -> Option<CommittedOffset> {
        self.shared.state.borrow().view.offset(topic, partition)
    }

    /// Every committed offset: (topic, partition, offset), ordered by topic then partition.
    pub fn offsets(&self) -> Vec<(String, i32, CommittedOffset)> {
        self.shared.state.borrow().view.offsets()
    }

    /// The durable group metadata, if any.
    pub fn metadata(&self) -> Option<Bytes> {
        self.shared.state.borrow().view.metadata()
    }

    /// Whether any offset is committed.
    pub fn has_offsets(&self) -> bool {
        self.shared.state.borrow().view.has_offsets()
    }

    /// The durable pending transactional offsets of `producer_id` (see
    /// [`GroupChange::PendingCommit`]): (topic, partition, offset), ordered by topic then
    /// partition; empty when it has none.
    pub fn pending_offsets(&self, producer_id: i64) -> Vec<(String, i32, CommittedOffset)> {
        self.shared.state.borrow().view.pending_offsets(producer_id)
    }

    /// The producers with durable pending offsets, each with the producer epoch they were
    /// written at, ordered by producer id.
    pub fn pending_producers(&self) -> Vec<(i64, i16)> {
        self.shared.state.borrow().view.pending_producers()
    }

    /// The producer epoch `producer_id`'s pending offsets were written at, if it has any.
    pub fn pending_producer_epoch(&self, producer_id: i64) -> Option<i16> {
        self.shared.state.borrow().view.pending_epoch(producer_id)
    }

    /// Whether some producer has a durable pending offset for the partition.
    pub fn has_pending_offset(&self, topic: &str, partition: i32) -> bool {
        self.shared
            .state
            .borrow()
            .view
            .has_pending_offset(topic, partition)
    }

    /// Whether any producer has a durable pending offset.
    pub fn has_pending_offsets(&self) -> bool {
        self.shared.state.borrow().view.has_pending_offsets()
    }

    /// Whether there are no offsets (committed or pending) and no metadata.
    pub fn is_empty(&self) -> bool {
        self.shared.state.borrow().view.is_empty()
    }

    /// True once a newer epoch's claim has fenced the store.
    pub fn is_fenced(&self) -> bool {
        self.shared.state.borrow().fenced.is_some()
    }

    /// The fence epoch the store was opened at (0 for [`GroupStore::open`]).
    pub fn fence_epoch(&self) -> u32 {
        self.shared.epoch
    }

    /// True once an I/O failure has poisoned the store.
    pub fn is_poisoned(&self) -> bool {
        self.shared.state.borrow().poisoned.is_some()
    }

    /// Size of the group's file in bytes (written so far).
    pub fn file_len(&self) -> u64 {
        self.shared.state.borrow().file_len
    }

    /// Flushes run so far (each one write and one fdatasync), for metrics and tests.
    pub fn flush_count(&self) -> u64 {
        self.shared.flushes.get()
    }

    /// Compactions run so far, for metrics and tests.
    pub fn compaction_count(&self) -> u64 {
        self.shared.compactions.get()
    }

    /// Applies `changes` atomically (all or none after a crash) and durably: returns Ok
    /// only once they are written and fdatasync'd. Concurrent callers share flushes (one
    /// fdatasync covers every write issued before it began). The in-memory view reflects a
    /// change only once it is durable, in write order. An I/O error poisons the store
    /// (every later call fails). A batch encoding to more than
    /// [`MAX_RECORD_BODY`](record::MAX_RECORD_BODY) bytes is refused with an
    /// `InvalidInput` I/O error and nothing is written.
    pub async fn apply(&self, changes: Vec<GroupChange>) -> Result<()> {
        self.apply_changes(changes.into_iter().map(Change::Group).collect())
            .await
    }

    /// Removes every offset of `topic` (topic deleted); durable like apply.
    pub async fn remove_topic(&self, topic: &str) -> Result<()> {
        {
            let state = self.shared.state.borrow();
            state.check_usable()?;
            // With nothing queued or being written, the view is all there is.
            let quiet = state.pending_changes.is_empty() && !self.shared.commit.is_running();
            if quiet && !state.view.has_topic(topic) {
                return Ok(());
            }
        }
        self.apply_changes(vec![Change::RemoveTopic(topic.to_owned())])
            .await
    }

    async fn apply_changes(&self, changes: Vec<Change>) -> Result<()> {
        let ticket = {
            let mut state = self.shared.state.borrow_mut();
            state.check_usable()?;
            if changes.is_empty() {
                return Ok(());
            }
            let body_len = record::body_len(&changes);
            if body_len > record::MAX_RECORD_BODY {
                return Err(EngineError::io(
                    format!("group {:?}: encoding changes", self.shared.group_id),
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!(
                            "{body_len} bytes of changes exceed the {} byte record limit",
                            record::MAX_RECORD_BODY
                        ),
                    ),
                ));
            }
            let framed = record::frame(&record::encode_changes(&changes));
            let version = changes.iter().map(Change::min_version).max();
            state.pending_version = state.pending_version.max(version.unwrap_or_default());
            state.pending.extend_from_slice(&framed);
            state.pending_changes.extend(changes);
            state.queued += 1;
            state.queued
        };
        self.wait_durable(ticket).await
    }

    /// Waits until the first `ticket` applies are durable, running flushes as needed.
    async fn wait_durable(&self, ticket: u64) -> Result<()> {
        let reached = || {
            let state = self.shared.state.borrow();
            if state.durable >= ticket {
                return Ok(true);
            }
            state.check_usable()?;
            Ok(false)
        };
        self.shared
            .commit
            .wait_until(reached, || self.flush_once())
            .await
    }

    /// Takes the flush slot; it is given back when the returned slot goes.
    fn take_flush_slot(&self) -> FlushSlot<'_> {
        self.shared
            .commit
            .take(|| self.poison("a flush was cancelled before it finished".to_owned()))
    }

    fn poison(&self, reason: String) {
        let mut state = self.shared.state.borrow_mut();
        if state.poisoned.is_none() {
            tracing::error!(group = self.shared.group_id, %reason, "group store poisoned");
            state.poisoned = Some(reason);
        }
    }

    /// Writes and syncs every queued record, then applies their changes to the view.
    async fn flush_once(&self) {
        let slot = self.take_flush_slot();
        if let Err(error) = self.upgrade_if_needed().await {
            self.poison(error.to_string());
            slot.finish();
            return;
        }
        let (file, bytes, changes, position, upto) = {
            let mut state = self.shared.state.borrow_mut();
            state.pending_version = record::FIRST_VERSION;
            (
                state.file.clone(),
                std::mem::take(&mut state.pending),
                std::mem::take(&mut state.pending_changes),
                state.file_len,
                state.queued,
            )
        };
        let Some(file) = file else {
            slot.finish();
            return;
        };
        let len = bytes.len() as u64;
        self.shared.flushes.set(self.shared.flushes.get() + 1);
        let written = async {
            if !bytes.is_empty() {
                file.write_at(bytes, position).await?;
            }
            file.fdatasync().await
        }
        .await
        .map_err(|e| EngineError::io(format!("writing {}", self.shared.path.display()), e));
        let written = match written {
            // After the fdatasync, before anyone is answered (see `crate::fence`).
            Ok(()) if self.shared.epoch > 0 => {
                crate::fence::check(&self.shared.storage, &self.shared.dir, self.shared.epoch).await
            }
            other => other,
        };
        match written {
            Ok(()) => {
                let compact = {
                    let mut state = self.shared.state.borrow_mut();
                    state.file_len = position + len;
                    for change in &changes {
                        state.view.apply(change);
                    }
                    state.durable = upto;
                    let header_len = record::RECORD_OVERHEAD + 11 + self.shared.group_id.len();
                    state.needs_compaction(header_len)
                };
                if compact {
                    if let Err(error) = self.compact(record::FIRST_VERSION).await {
                        self.poison(error.to_string());
                    }
                }
            }
            Err(error) => match crate::fence::FencedBy::from_error(&error) {
                Some(fenced) => {
                    tracing::warn!(group = self.shared.group_id, %error, "group store fenced");
                    let mut state = self.shared.state.borrow_mut();
                    state.fenced.get_or_insert(fenced);
                }
                None => self.poison(error.to_string()),
            },
        }
        slot.finish();
    }

    /// Before records of a newer format version than the file's are written, rewrites the
    /// file with the durable state at the version they need (see [`record`], "Versions"),
    /// so that the file never holds records its header does not announce. Runs in the
    /// flush slot, before the flush takes the queued records.
    async fn upgrade_if_needed(&self) -> Result<()> {
        loop {
            let needed = {
                let state = self.shared.state.borrow();
                if state.file.is_none() || state.pending_version <= state.file_version {
                    return Ok(());
                }
                state.pending_version
            };
            tracing::info!(
                group = self.shared.group_id,
                version = needed,
                "group store: rewriting the file at a newer format version"
            );
            self.compact(needed).await?;
        }
    }

    /// Replaces the file with one holding only the live state, at the lowest format
    /// version that holds it and at least `min_version`. Runs in the flush slot.
    async fn compact(&self, min_version: u16) -> Result<()> {
        let (snapshot, version) = self
            .shared
            .state
            .borrow()
            .view
            .encode_snapshot(&self.shared.group_id, min_version);
        let len = snapshot.len() as u64;
        let storage = &self.shared.storage;
        storage
            .write_small_durable(&self.shared.path, snapshot)
            .await?;
        let file = storage.open_index_file(&self.shared.path).await?;
        let mut state = self.shared.state.borrow_mut();
        tracing::debug!(
            group = self.shared.group_id,
            from = state.file_len,
            to = len,
            "group store compacted"
        );
        state.file = Some(file);
        state.file_len = len;
        state.file_version = version;
        self.shared
            .compactions
            .set(self.shared.compactions.get() + 1);
        Ok(())
    }

    /// Deletes the group's files durably (directory fsync'd). The store is unusable
    /// afterwards: every call fails with [`EngineError::Closed`], including applies that
    /// were waiting for a flush.
    pub async fn delete(&self) -> Result<()> {
        while self.shared.commit.is_running() {
            self.shared.commit.wait_for_running().await;
        }
        let slot = self.take_flush_slot();
        {
            let mut state = self.shared.state.borrow_mut();
            state.deleted = true;
            state.file = None;
            state.pending.clear();
            state.pending_changes.clear();
            state.view = View::default();
        }
        let storage = &self.shared.storage;
        let removed = async {
            if self.shared.epoch == 0 {
                storage.remove_dir_all(&self.shared.dir).await?;
                return storage.sync_dir(Path::new(GROUPS_DIR)).await;
            }
            // A fenced coordinator deletes nothing of a newer epoch's, and the claims stay
            // so that stale coordinators remain fenced.
            crate::fence::check(storage, &self.shared.dir, self.shared.epoch).await?;
            takeover::remove_files_up_to(storage, &self.shared.dir, self.shared.epoch).await
        }
        .await;
        slot.finish();
        removed
    }
}

/// Replays a group file, checking it names `group_id`.
fn replay_checked(bytes: &[u8], path: &Path, group_id: &str) -> Result<view::Replayed> {
    let replayed =
        view::replay(bytes).map_err(|e| corrupt(path, format!("unreadable header: {e}")))?;
    if replayed.group_id != group_id {
        return Err(corrupt(
            path,
            format!(
                "holds group {:?}, not {group_id:?} (directory names collide)",
                replayed.group_id
            ),
        ));
    }
    Ok(replayed)
}
