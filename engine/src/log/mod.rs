//! A partition log: segments, offsets, durability, reads, retention.
//!
//! # Concurrency
//! A [`PartitionLog`] lives on one glommio shard (`!Send`). Appends are serialised by an
//! async lock (a roll awaits file creation in the middle of one); the copy into the
//! write-behind buffer and the offset assignment happen in one synchronous step, so offsets
//! are dense and batches are never interleaved. Flushes are group commits: one flush runs at
//! a time and makes durable everything appended before it began; callers that need a later
//! offset wait for the next one.
//!
//! # Visibility
//! The high watermark is the durable end: readers only see batches that a crash cannot take
//! back, so a consumer can never observe an offset that is later reused for other data.
//!
//! # Rooms
//! The shared state ([`Shared`], [`LogState`]) and opening live here; each concern adds its
//! own `impl PartitionLog` in a sibling module: `append` (validate, dedup, assign offsets),
//! `roll` (new segments and background seals), `flush` (group commit, the high watermark),
//! `read` (fetches, timestamp lookups), `retention` (retention and delete-records),
//! `checkpoint` (the recovery point), `close` (the two closes, superseded files),
//! `cleaner` (what the log cleaner sees and its swap) and `transactions` (markers, the last
//! stable offset, read-committed reads).

mod append;
mod checkpoint;
mod cleaner;
mod close;
mod flush;
mod read;
mod retention;
mod roll;
mod transactions;

pub(crate) use cleaner::{CleanerView, SealedSegment};
pub(crate) use close::Checkpoint;
pub use transactions::{AbortedTransaction, CommittedRead, TxnMarker};

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use futures_channel::oneshot;
use glommio::sync::Semaphore;

use crate::config::LogConfig;
use crate::error::{EngineError, Result};
use crate::group_commit::GroupCommit;
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::{ProducerEntry, ProducerStateTable};
use crate::read_ahead::ReadAhead;
use crate::recovery;
use crate::segment::Segment;
use crate::segment_appender::SegmentAppender;
use crate::storage::Storage;
use crate::tail_cache::TailCache;
use crate::takeover;

/// File holding the recovery point and log start offset, at a fence epoch.
pub(crate) fn recovery_point_file(epoch: u32) -> String {
    crate::fence::with_epoch("recovery-point", epoch)
}

/// File holding the leader epoch cache, at a fence epoch.
pub(crate) fn leader_epoch_file(epoch: u32) -> String {
    crate::fence::with_epoch("leader-epoch-checkpoint", epoch)
}

/// The outcome of an append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Offset given to the first record.
    pub base_offset: u64,
    /// Offset of the last record.
    pub last_offset: u64,
    /// The broker timestamp stamped into the batches, for `LogAppendTime` logs.
    pub log_append_time: Option<i64>,
    /// True when the batch was a producer retry already in the log; nothing was written and
    /// the offsets are those of the original.
    pub duplicate: bool,
    /// The log start offset after the append.
    pub log_start_offset: u64,
}

/// Whole batches read from a log.
#[derive(Clone, Debug, Default)]
pub struct FetchedRecords {
    /// The batches, verbatim, as one or more buffers to send without copying.
    pub chunks: Vec<Bytes>,
    /// The high watermark (durable end) when the read happened.
    pub high_watermark: u64,
    /// The log start offset when the read happened.
    pub log_start_offset: u64,
}

impl FetchedRecords {
    /// Total bytes read.
    pub fn len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }

    /// True when no batch was read.
    pub fn is_empty(&self) -> bool {
        self.chunks.iter().all(Bytes::is_empty)
    }
}

/// The log's offsets at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogOffsets {
    /// First readable offset.
    pub log_start_offset: u64,
    /// Durable end: everything below it survives a crash and is readable.
    pub high_watermark: u64,
    /// Offset the next appended record gets.
    pub log_end_offset: u64,
    /// Read-committed readers read below it: the first offset of the earliest open
    /// transaction, capped by the high watermark.
    pub last_stable_offset: u64,
}

/// Where durability has reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct DurablePoint {
    /// Every batch below this offset is on the disk.
    pub offset: u64,
    /// Base offset of the segment holding `offset`.
    pub segment_base: u64,
    /// Byte position of `offset` in that segment.
    pub position: u64,
}

/// Mutable state of a log, behind a `RefCell`; never borrowed across an `.await`.
pub(crate) struct LogState {
    /// All segments by base offset; the last one is the active segment.
    pub segments: BTreeMap<u64, Segment>,
    /// Writes the active segment.
    pub appender: SegmentAppender,
    pub next_offset: u64,
    pub log_start_offset: u64,
    pub durable: DurablePoint,
    pub producers: ProducerStateTable,
    pub epochs: LeaderEpochCache,
    pub tail_cache: TailCache,
    pub poisoned: Option<String>,
    /// A newer epoch's claim, found after a flush: nothing more is acknowledged.
    pub fenced: Option<crate::fence::FencedBy>,
    pub closed: bool,
    /// Offset and timestamp of the record with the largest timestamp (batch granularity).
    pub max_timestamp: Option<(i64, u64)>,
    /// Counts segments replaced by compaction: a read that began before a swap must not
    /// mix the old file with the new index or read-ahead (it starts again instead).
    pub segment_swaps: u64,
    /// Sealed segments whose offset index is in memory, oldest load first (at most
    /// [`SEALED_OFFSETS_KEPT`]).
    pub sealed_offsets_loaded: std::collections::VecDeque<u64>,
}

/// How many sealed segments of one log keep their offset index in memory between reads.
/// Sequential readers continue from where they stopped without a lookup, so this serves
/// readers that jump (a consumer joining, a seek, a ListOffsets by time) without holding the
/// index of every segment ever read.
pub(crate) const SEALED_OFFSETS_KEPT: usize = 2;

impl LogState {
    fn active(&self) -> Result<&Segment> {
        self.segments
            .values()
            .next_back()
            .ok_or_else(|| EngineError::Corrupt {
                what: "log".into(),
                detail: "no active segment".into(),
            })
    }

    fn active_mut(&mut self) -> Result<&mut Segment> {
        self.segments
            .values_mut()
            .next_back()
            .ok_or_else(|| EngineError::Corrupt {
                what: "log".into(),
                detail: "no active segment".into(),
            })
    }

    fn check_usable(&self) -> Result<()> {
        if self.closed {
            return Err(EngineError::Closed);
        }
        self.check_writable()
    }

    /// Fails when poisoned or fenced (also after close, for flushes in flight).
    fn check_writable(&self) -> Result<()> {
        if let Some(fenced) = &self.fenced {
            return Err(fenced.error());
        }
        if let Some(reason) = &self.poisoned {
            return Err(EngineError::Poisoned(reason.clone()));
        }
        Ok(())
    }
}

struct Shared {
    storage: Storage,
    dir: PathBuf,
    /// The fence epoch the log was opened at (0: unfenced, today's file names).
    epoch: u32,
    config: RefCell<LogConfig>,
    state: RefCell<LogState>,
    /// Serialises appends, rolls and the capture step of a checkpoint.
    append_lock: Semaphore,
    /// Held by the running seal; waiting for it is acquiring (and dropping) a permit.
    seal_lock: Rc<Semaphore>,
    /// The running (or last) seal. Dropping the log cancels it, as a crash would stop it.
    seal_task: RefCell<Option<glommio::Task<()>>>,
    /// One flush at a time; appenders waiting for durability share it.
    flushes: GroupCommit,
    /// Readers waiting for the high watermark to move.
    data_waiters: RefCell<Vec<oneshot::Sender<()>>>,
    /// One checkpoint at a time. A caller that finds one running waits and then takes its
    /// own: the running one may have captured its state before the caller's changes.
    checkpoint_lock: Semaphore,
    /// Broker time of the last append, to release the tail cache of idle partitions.
    last_append_ms: Cell<i64>,
    /// When a reader last read; appends fill the tail cache only while readers are active.
    last_read: Cell<Option<std::time::Instant>>,
    /// The next window of a sequential reader, read while the last one is on its way.
    read_ahead: RefCell<ReadAhead>,
    /// When the files older fence epochs left in the directory are to be removed (broker
    /// time, ms); `None` once they are, and at epoch 0 (`takeover::SUPERSEDED_FILES_DELAY_MS`).
    superseded_files_due_ms: Cell<Option<i64>>,
}

/// One partition's log. Cheap to clone (a shared handle on one shard).
#[derive(Clone)]
pub struct PartitionLog {
    shared: Rc<Shared>,
}

impl PartitionLog {
    /// Opens the log in `dir` (relative to the storage root), creating it when missing, and
    /// recovers it: everything after the recovery point is validated, a torn or corrupt tail
    /// is truncated and indexes, epochs and producer state are rebuilt.
    ///
    /// This is epoch 0 of the storage fence: today's file names, no claim, no check (see
    /// [`crate::fence`]); standalone mode and every existing data directory open this way.
    pub async fn open(storage: &Storage, dir: &Path, config: LogConfig) -> Result<Self> {
        storage.create_dir_all(dir).await?;
        let state = recovery::recover(storage, dir, &config, &Default::default()).await?;
        Ok(Self::from_state(storage, dir, config, 0, state))
    }

    /// Opens the log as its leader at fence epoch `epoch` (≥ 1; 0 is [`PartitionLog::open`]):
    /// claims the partition for `epoch` on the volume before reading it, inherits the files
    /// of the newest completed older claim (or of epoch 0), recovers and records where the
    /// log ends, and from then on writes only files named for `epoch`. Every flush checks
    /// for a newer claim after its fdatasync and fails with [`EngineError::Fenced`] once
    /// there is one. Fails with `Fenced` at once when a newer claim exists already. See
    /// [`crate::fence`] for the argument.
    pub async fn open_at_epoch(
        storage: &Storage,
        dir: &Path,
        config: LogConfig,
        epoch: u32,
    ) -> Result<Self> {
        if epoch == 0 {
            return Self::open(storage, dir, config).await;
        }
        storage.create_dir_all(dir).await?;
        // No checkpoint here: the takeover copied the base epoch's recovery point, epochs
        // and producer snapshots under this epoch's names, so a reopen scans no more than
        // this recovery did; the periodic checkpoint and `close` write this epoch's own.
        // Skipping it saves six fsyncs per partition on the takeover's critical path.
        let (state, _took_over) = takeover::recover_at_epoch(storage, dir, &config, epoch).await?;
        let log = Self::from_state(storage, dir, config, epoch, state);
        // A reopen too: an earlier run at this epoch may have stopped before its clean-up.
        let due = crate::log_manager::now_ms() + takeover::SUPERSEDED_FILES_DELAY_MS;
        log.shared.superseded_files_due_ms.set(Some(due));
        Ok(log)
    }

    /// The fence epoch the log was opened at (0 for [`PartitionLog::open`]).
    pub fn fence_epoch(&self) -> u32 {
        self.shared.epoch
    }

    /// True once a newer epoch's claim has fenced the log.
    pub fn is_fenced(&self) -> bool {
        self.shared.state.borrow().fenced.is_some()
    }

    fn from_state(
        storage: &Storage,
        dir: &Path,
        config: LogConfig,
        epoch: u32,
        state: LogState,
    ) -> Self {
        PartitionLog {
            shared: Rc::new(Shared {
                storage: storage.clone(),
                dir: dir.to_path_buf(),
                epoch,
                config: RefCell::new(config),
                state: RefCell::new(state),
                append_lock: Semaphore::new(1),
                seal_lock: Rc::new(Semaphore::new(1)),
                seal_task: RefCell::new(None),
                flushes: GroupCommit::default(),
                data_waiters: RefCell::new(Vec::new()),
                checkpoint_lock: Semaphore::new(1),
                last_append_ms: Cell::new(0),
                last_read: Cell::new(None),
                read_ahead: RefCell::new(ReadAhead::default()),
                superseded_files_due_ms: Cell::new(None),
            }),
        }
    }

    /// The directory of this log, relative to the storage root.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The current settings.
    pub fn config(&self) -> LogConfig {
        self.shared.config.borrow().clone()
    }

    /// Replaces the settings; they apply from the next append, roll or retention pass.
    pub fn set_config(&self, config: LogConfig) {
        *self.shared.config.borrow_mut() = config;
    }

    /// Start, high watermark and end offsets.
    pub fn offsets(&self) -> LogOffsets {
        let state = self.shared.state.borrow();
        LogOffsets {
            log_start_offset: state.log_start_offset,
            high_watermark: state.durable.offset,
            log_end_offset: state.next_offset,
            last_stable_offset: state.last_stable_offset(),
        }
    }

    /// The newest leader epoch stamped into the log, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.shared.state.borrow().epochs.latest_epoch()
    }

    /// OffsetForLeaderEpoch: the largest epoch ≤ `epoch` and the offset where it ends.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, u64)> {
        let state = self.shared.state.borrow();
        state.epochs.end_offset_for(epoch, state.next_offset)
    }

    /// Timestamp and offset of the batch holding the largest timestamp, if any.
    pub fn max_timestamp(&self) -> Option<(i64, u64)> {
        self.shared.state.borrow().max_timestamp
    }

    /// Total bytes of all segments.
    pub fn size_bytes(&self) -> u64 {
        let state = self.shared.state.borrow();
        state.segments.values().map(|s| s.size).sum()
    }

    /// The idempotent producers this partition remembers, in ascending id order (a copy:
    /// DescribeProducers reports them without holding the state across an `.await`).
    pub fn producers(&self) -> Vec<ProducerEntry> {
        let state = self.shared.state.borrow();
        state.producers.entries().into_iter().cloned().collect()
    }

    /// Whether `producer_id` has a transaction open on this partition at `epoch` (a
    /// transactional batch of it was appended and no marker has ended it since).
    pub fn has_open_transaction(&self, producer_id: i64, epoch: i16) -> bool {
        let state = self.shared.state.borrow();
        state
            .producers
            .get(producer_id)
            .is_some_and(|entry| entry.epoch() == epoch && entry.open_transaction().is_some())
    }

    /// Forgets the idempotent producers idle for `expiration_ms` at `now_ms` (Kafka's
    /// `producer.id.expiration.ms`, [`ProducerStateTable::remove_expired`]); returns how many.
    /// Only memory changes: the next producer-state snapshot leaves them out.
    pub fn remove_expired_producers(&self, now_ms: i64, expiration_ms: i64) -> usize {
        let mut state = self.shared.state.borrow_mut();
        state.producers.remove_expired(now_ms, expiration_ms)
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.shared.state.borrow().segments.len()
    }

    /// Gives back the tail cache's memory when nothing was appended for `idle_ms`, and the
    /// read-ahead window when nothing was read for as long, so a partition that was busy once
    /// does not hold memory forever.
    pub fn release_memory_if_idle(&self, now_ms: i64, idle_ms: i64) {
        if now_ms - self.shared.last_append_ms.get() >= idle_ms {
            self.shared.state.borrow_mut().tail_cache.release();
        }
        let idle = std::time::Duration::from_millis(idle_ms.max(0) as u64);
        if self
            .shared
            .last_read
            .get()
            .is_none_or(|read| read.elapsed() >= idle)
        {
            self.shared.read_ahead.borrow_mut().release();
        }
    }

    /// True once an I/O failure has poisoned the log.
    pub fn is_poisoned(&self) -> bool {
        self.shared.state.borrow().poisoned.is_some()
    }

    /// Serialises appends, rolls and the capture step of a checkpoint.
    async fn lock_appends(&self) -> Result<glommio::sync::Permit<'_>> {
        self.shared
            .append_lock
            .acquire_permit(1)
            .await
            .map_err(|_| EngineError::Closed)
    }

    /// A stale leader's roll or checkpoint can race the takeover's removal of its epoch's
    /// files (a new segment or index file vanishes between its creation and its first use):
    /// when the fence says the log was superseded, that is the error to report (and keep),
    /// not the I/O failure.
    async fn fenced_instead(&self, error: EngineError) -> EngineError {
        if self.shared.epoch == 0 || matches!(error, EngineError::Fenced { .. }) {
            return error;
        }
        match self.check_superseded().await {
            Err(fenced) => fenced,
            Ok(()) => error,
        }
    }

    fn poison(&self, error: &EngineError) {
        let mut state = self.shared.state.borrow_mut();
        if state.poisoned.is_none() {
            tracing::error!(dir = %self.shared.dir.display(), %error, "partition poisoned");
            state.poisoned = Some(error.to_string());
        }
    }

    /// Fails with [`EngineError::Fenced`] (and remembers it) once a newer epoch has claimed
    /// the partition; an error reading the claims is not a fence and passes.
    async fn check_superseded(&self) -> Result<()> {
        let epoch = self.shared.epoch;
        if epoch == 0 {
            return Ok(());
        }
        match crate::fence::check(&self.shared.storage, &self.shared.dir, epoch).await {
            Err(fenced @ EngineError::Fenced { .. }) => {
                if let Some(by) = crate::fence::FencedBy::from_error(&fenced) {
                    self.shared.state.borrow_mut().fenced = Some(by);
                }
                Err(fenced)
            }
            _ => Ok(()),
        }
    }
}
