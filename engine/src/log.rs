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

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use bytes::Bytes;
use futures_channel::oneshot;
use glommio::sync::Semaphore;

use crate::batch::{self, BatchHeader};
use crate::checkpoint::RecoveryPoint;
use crate::config::{LogConfig, TimestampType};
use crate::error::{EngineError, Result};
use crate::leader_epoch::LeaderEpochCache;
use crate::producer_state::{snapshot_file_name, ProducerEntry, ProducerStateTable, SequenceCheck};
use crate::read_ahead::{NextRead, ReadAhead};
use crate::record_timestamps;
use crate::recovery;
use crate::segment::{self, Segment};
use crate::segment_appender::SegmentAppender;
use crate::segment_reader::BatchRead;
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
/// Appends keep the newest batches in memory while a read happened this recently.
const READERS_ACTIVE_FOR: std::time::Duration = std::time::Duration::from_secs(5);
/// How far one batch may decompress when ListOffsets looks inside it.
const MAX_DECOMPRESSED_BATCH: usize = 64 << 20;
/// Producer-state snapshots kept on disk (the newest and the one before it).
const SNAPSHOTS_KEPT: usize = 2;

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
}

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

/// Whether a close checkpoints the log first ([`PartitionLog::close_for_takeover`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checkpoint {
    Write,
    Skip,
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
    flush_running: Cell<bool>,
    flush_waiters: RefCell<Vec<oneshot::Sender<()>>>,
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

    /// Removes the files that older fence epochs left in the directory once their removal is
    /// due (`takeover::SUPERSEDED_FILES_DELAY_MS`, a minute, after the open at this epoch): the
    /// takeover's clean-up, run by the shard's maintenance instead of on the takeover's
    /// critical path. Returns whether it ran. Nothing is due at epoch 0, after a close or
    /// once the log is fenced (the newer epoch cleans up).
    pub async fn remove_superseded_files(&self, now_ms: i64) -> Result<bool> {
        match self.shared.superseded_files_due_ms.get() {
            Some(due) if now_ms >= due => {}
            _ => return Ok(false),
        }
        if self.is_fenced() || self.shared.state.borrow().closed {
            return Ok(false);
        }
        let shared = &self.shared;
        crate::fence::remove_superseded(
            &shared.storage,
            &shared.dir,
            shared.epoch,
            takeover::is_partition_file,
        )
        .await?;
        shared.superseded_files_due_ms.set(None);
        Ok(true)
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
                flush_running: Cell::new(false),
                flush_waiters: RefCell::new(Vec::new()),
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

    /// ListOffsets MAX_TIMESTAMP: the offset and timestamp of the first record carrying the
    /// largest timestamp among readable records, read from inside its batch (decompressing
    /// it if needed; this is a cold path). `None` for an empty log.
    pub async fn max_timestamp_record(&self) -> Result<Option<(u64, i64)>> {
        let Some((timestamp, batch_offset)) = self.max_timestamp() else {
            return Ok(None);
        };
        let offsets = self.offsets();
        if batch_offset < offsets.log_start_offset || batch_offset >= offsets.high_watermark {
            return Ok(None);
        }
        let fetched = self.read(batch_offset, 1).await?;
        let Some(chunk) = fetched.chunks.first() else {
            return Ok(None);
        };
        let exact = batch::scan_batches(chunk, 0).next().and_then(|scanned| {
            let bytes = &chunk[scanned.position as usize..][..scanned.total_len];
            record_timestamps::max_timestamp_record(bytes, MAX_DECOMPRESSED_BATCH).ok()?
        });
        Ok(Some(match exact {
            Some(record) if record.timestamp == timestamp => {
                (record.offset as u64, record.timestamp)
            }
            _ => (batch_offset, timestamp),
        }))
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

    /// Validates and appends one or more concatenated record batches (as a producer sends
    /// them for one partition), assigning offsets and stamping `leader_epoch`. Returns once
    /// the bytes are in the write-behind buffer; use [`PartitionLog::flush_to`] to wait for
    /// durability. A batch failing validation or the producer check appends nothing.
    pub async fn append(
        &self,
        records: &[u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome> {
        let config = self.config();
        let checks = batch::record_rules::RecordChecks {
            rules: config.record_rules,
            timestamp_type: config.timestamp_type,
            now_ms,
        };
        let summaries = batch::validate_produced_batches(records, config.max_batch_bytes, &checks)?;
        let _permit = self.lock_appends().await?;
        self.shared.state.borrow().check_usable()?;

        if let Some(outcome) = self.check_producers(&summaries)? {
            return Ok(outcome);
        }
        let total: u64 = summaries.iter().map(|s| s.range.len() as u64).sum();
        if self.needs_roll(total, now_ms, &config)? {
            self.roll(now_ms).await?;
        }

        let mut state = self.shared.state.borrow_mut();
        state.check_usable()?;
        self.shared.last_append_ms.set(now_ms);
        let readers_active = self
            .shared
            .last_read
            .get()
            .is_some_and(|at| at.elapsed() < READERS_ACTIVE_FOR);
        let log_append_time =
            (config.timestamp_type == TimestampType::LogAppendTime).then_some(now_ms);
        let base_offset = state.next_offset;
        if state.epochs.latest_epoch() < Some(leader_epoch) {
            state.epochs.assign(leader_epoch, base_offset);
        }
        for summary in &summaries {
            let offset = state.next_offset;
            let next_offset = offset + summary.record_count as u64;
            let state = &mut *state;
            let batch = &records[summary.range.clone()];
            let (header, position) = if readers_active || log_append_time.is_some() {
                // Stamp a copy in the tail cache, which then serves the readers.
                let stamped =
                    state
                        .tail_cache
                        .push_stamped(batch, offset, next_offset, |bytes| {
                            batch::stamp_for_append(
                                bytes,
                                offset as i64,
                                leader_epoch,
                                log_append_time,
                            )
                        })?;
                (BatchHeader::parse(stamped)?, state.appender.append(stamped))
            } else {
                // Nobody is reading: copy once, straight into the write buffer, with the
                // header stamped on the side (offset and epoch lie outside the CRC).
                let mut head = [0u8; batch::BATCH_HEADER_LEN];
                head.copy_from_slice(&batch[..batch::BATCH_HEADER_LEN]);
                head[batch::BASE_OFFSET_POS..][..8].copy_from_slice(&(offset as i64).to_be_bytes());
                head[batch::PARTITION_LEADER_EPOCH_POS..][..4]
                    .copy_from_slice(&leader_epoch.to_be_bytes());
                let position = state.appender.append(&head);
                state.appender.append(&batch[batch::BATCH_HEADER_LEN..]);
                (BatchHeader::parse(&head)?, position)
            };
            state
                .active_mut()?
                .record_batch(&header, position, now_ms, &config);
            state.producers.record(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.last_sequence(),
                offset as i64,
                next_offset as i64 - 1,
                header.max_timestamp,
            );
            // Strictly greater: the first batch reaching the maximum keeps it, as in Kafka.
            if state
                .max_timestamp
                .is_none_or(|(ts, _)| header.max_timestamp > ts)
            {
                state.max_timestamp = Some((header.max_timestamp, next_offset - 1));
            }
            state.next_offset = next_offset;
        }
        Ok(AppendOutcome {
            base_offset,
            last_offset: state.next_offset - 1,
            log_append_time,
            duplicate: false,
            log_start_offset: state.log_start_offset,
        })
    }

    /// Appends and waits until the batches are durable.
    pub async fn append_durable(
        &self,
        records: &[u8],
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<AppendOutcome> {
        let outcome = self.append(records, leader_epoch, now_ms).await?;
        self.flush_to(outcome.last_offset + 1).await?;
        Ok(outcome)
    }

    /// Idempotence: `Some` with the original offsets when the batches are retries.
    fn check_producers(&self, summaries: &[batch::BatchSummary]) -> Result<Option<AppendOutcome>> {
        let state = self.shared.state.borrow();
        let mut duplicate = None;
        for summary in summaries {
            let header = &summary.header;
            match state.producers.check(
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                header.last_sequence(),
            )? {
                SequenceCheck::Append => {}
                SequenceCheck::Duplicate {
                    first_offset,
                    last_offset,
                } => {
                    duplicate = Some((first_offset as u64, last_offset as u64));
                }
            }
        }
        match duplicate {
            Some((base_offset, last_offset)) if summaries.len() == 1 => Ok(Some(AppendOutcome {
                base_offset,
                last_offset,
                log_append_time: None,
                duplicate: true,
                log_start_offset: state.log_start_offset,
            })),
            Some(_) => Err(EngineError::InvalidBatch(
                batch::BatchError::InvalidRecords(
                    "a retried batch cannot share a request with new batches",
                ),
            )),
            None => Ok(None),
        }
    }

    fn needs_roll(&self, incoming: u64, now_ms: i64, config: &LogConfig) -> Result<bool> {
        let state = self.shared.state.borrow();
        let active = state.active()?;
        if active.size == 0 {
            return Ok(false);
        }
        let too_big = active.size + incoming > config.segment_bytes;
        let too_old = active
            .first_append_ms
            .is_some_and(|first| now_ms - first >= config.segment_age.as_millis() as i64);
        // Relative offsets in the index are 32-bit.
        let offsets_exhausted = state.next_offset - active.base_offset >= u32::MAX as u64 / 2;
        Ok(too_big || too_old || offsets_exhausted)
    }

    /// Starts a new segment at the log end offset and seals the old one in the background
    /// (see "Rolling and sealing" above). The caller holds the append lock.
    async fn roll(&self, now_ms: i64) -> Result<()> {
        let sealing = self
            .shared
            .seal_lock
            .clone()
            .acquire_static_permit(1)
            .await
            .map_err(|_| EngineError::Closed)?;
        // The previous seal may have failed: then the log is poisoned.
        self.shared.state.borrow().check_usable()?;
        let end = self.shared.state.borrow().next_offset;
        self.flush_to(end).await?;
        let config = self.config();
        let created = async {
            let segment = Segment::create(
                &self.shared.storage,
                &self.shared.dir,
                end,
                self.shared.epoch,
            )
            .await?;
            self.shared.storage.sync_dir(&self.shared.dir).await?;
            Ok(segment)
        }
        .await;
        let new_segment = match created {
            Ok(segment) => segment,
            Err(error) => return Err(self.fenced_instead(error).await),
        };
        let new_appender = SegmentAppender::new(
            new_segment.file.clone(),
            0,
            Vec::new(),
            config.write_chunk_bytes,
            config.preallocate_step,
        );
        let (sealed_base, job) = {
            let mut state = self.shared.state.borrow_mut();
            state.appender = new_appender;
            let sealed = state.active_mut()?;
            let sealed_base = sealed.base_offset;
            let job = sealed.seal_job();
            state.segments.insert(end, new_segment);
            (sealed_base, job)
        };
        tracing::debug!(dir = %self.shared.dir.display(), sealed_base, new_base = end, now_ms, "rolled segment");
        let log = Rc::downgrade(&self.shared);
        let storage = self.shared.storage.clone();
        let dir = self.shared.dir.clone();
        let task = glommio::spawn_local(async move {
            let result = job.run(&storage, &dir).await;
            if let Some(shared) = log.upgrade() {
                PartitionLog { shared }.end_seal(sealed_base, result);
            }
            drop(sealing);
        });
        *self.shared.seal_task.borrow_mut() = Some(task);
        Ok(())
    }

    /// Records the outcome of a background seal: the segment's indexes are read from its
    /// files from now on, or the log is poisoned.
    fn end_seal(&self, sealed_base: u64, result: Result<()>) {
        match result {
            Ok(()) => {
                if let Some(segment) = self
                    .shared
                    .state
                    .borrow_mut()
                    .segments
                    .get_mut(&sealed_base)
                {
                    segment.mark_sealed();
                }
            }
            Err(error) => {
                self.poison(&error);
                // Long-polling readers see the failure now rather than at their timeout.
                for waiter in self.shared.data_waiters.take() {
                    let _ = waiter.send(());
                }
            }
        }
    }

    /// Waits until no seal is running (the one running now, if any, has ended).
    async fn wait_for_seal(&self) {
        let _ = self.shared.seal_lock.acquire_permit(1).await;
    }

    /// Rolls the active segment if it is older than `segment.ms` (called periodically, so an
    /// idle partition's segment still becomes eligible for time retention).
    pub async fn roll_if_aged(&self, now_ms: i64) -> Result<()> {
        let config = self.config();
        let _permit = self.lock_appends().await?;
        self.shared.state.borrow().check_usable()?;
        if self.needs_roll(0, now_ms, &config)? {
            self.roll(now_ms).await?;
        }
        Ok(())
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

    /// Waits until every offset below `end_offset` is durable. One fdatasync covers every
    /// append issued before it began. An I/O failure poisons the log; it is never retried.
    pub async fn flush_to(&self, end_offset: u64) -> Result<()> {
        let mut yielded = false;
        loop {
            {
                let state = self.shared.state.borrow();
                state.check_writable()?;
                if state.durable.offset >= end_offset {
                    return Ok(());
                }
                if state.closed {
                    return Err(EngineError::Closed);
                }
            }
            if self.shared.flush_running.get() {
                let (sender, receiver) = oneshot::channel();
                self.shared.flush_waiters.borrow_mut().push(sender);
                let _ = receiver.await;
                continue;
            }
            if !yielded {
                // Before starting a flush, let the tasks the previous flush just woke run:
                // they append their next batches and then join this flush. Otherwise the
                // caller's flush covers only its own batch while the others queue behind
                // it, and flushes alternate between one batch and all the rest.
                yielded = true;
                futures_lite::future::yield_now().await;
                continue;
            }
            self.flush_once().await;
        }
    }

    /// Flushes everything appended so far.
    pub async fn flush(&self) -> Result<()> {
        let end = self.shared.state.borrow().next_offset;
        self.flush_to(end).await
    }

    async fn flush_once(&self) {
        self.shared.flush_running.set(true);
        let (plan, offset, segment_base) = {
            let mut state = self.shared.state.borrow_mut();
            let segment_base = state.active().map(|s| s.base_offset).unwrap_or_default();
            (
                state.appender.begin_flush(),
                state.next_offset,
                segment_base,
            )
        };
        let position = plan.end;
        let mut result = plan
            .execute()
            .await
            .map_err(|e| EngineError::io("flushing the active segment", e));
        if result.is_ok() && self.shared.epoch > 0 {
            // After the fdatasync, before anyone is answered: a claim made later than this
            // check reads what this flush wrote (see `crate::fence`).
            result = crate::fence::check(&self.shared.storage, &self.shared.dir, self.shared.epoch)
                .await;
        }
        {
            let mut state = self.shared.state.borrow_mut();
            state.appender.end_flush();
            match result {
                Ok(()) => {
                    if offset > state.durable.offset {
                        state.durable = DurablePoint {
                            offset,
                            segment_base,
                            position,
                        };
                    }
                }
                Err(error) => match crate::fence::FencedBy::from_error(&error) {
                    Some(fenced) => {
                        tracing::warn!(dir = %self.shared.dir.display(), %error, "partition fenced");
                        state.fenced = Some(fenced);
                    }
                    None => {
                        tracing::error!(dir = %self.shared.dir.display(), %error, "partition poisoned");
                        state.poisoned = Some(error.to_string());
                    }
                },
            }
        }
        self.shared.flush_running.set(false);
        for waiter in self.shared.flush_waiters.take() {
            let _ = waiter.send(());
        }
        for waiter in self.shared.data_waiters.take() {
            let _ = waiter.send(());
        }
    }

    /// Resolves once the high watermark moves past `offset` (or the log closes or fails).
    /// Fetch long-polling races this against its `max_wait`.
    pub async fn wait_for_data_beyond(&self, offset: u64) {
        loop {
            {
                let state = self.shared.state.borrow();
                if state.durable.offset > offset
                    || state.closed
                    || state.poisoned.is_some()
                    || state.fenced.is_some()
                {
                    return;
                }
            }
            let (sender, receiver) = oneshot::channel();
            self.shared.data_waiters.borrow_mut().push(sender);
            if receiver.await.is_err() {
                return;
            }
        }
    }

    /// Reads whole batches starting with the one holding `offset`, up to `max_bytes` but at
    /// least one batch, never past the high watermark. Reading at the high watermark returns
    /// nothing; outside `[log_start_offset, log_end_offset]` is an error.
    pub async fn read(&self, offset: u64, max_bytes: usize) -> Result<FetchedRecords> {
        loop {
            if let Some(fetched) = self.read_unless_swapped(offset, max_bytes).await? {
                return Ok(fetched);
            }
        }
    }

    /// [`PartitionLog::read`], or `None` when compaction swapped a segment while the start
    /// position was being looked up (the position may then belong to the other file).
    async fn read_unless_swapped(
        &self,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Option<FetchedRecords>> {
        self.shared.last_read.set(Some(std::time::Instant::now()));
        let swaps = self.shared.state.borrow().segment_swaps;
        let (segment_base, file, readable_end, hint, high_watermark, log_start_offset) = {
            let mut state = self.shared.state.borrow_mut();
            state.check_usable()?;
            let high_watermark = state.durable.offset;
            let log_start_offset = state.log_start_offset;
            if offset < log_start_offset || offset > state.next_offset {
                return Err(EngineError::OffsetOutOfRange {
                    offset,
                    start: log_start_offset,
                    end: state.next_offset,
                });
            }
            let mut fetched = FetchedRecords {
                chunks: Vec::new(),
                high_watermark,
                log_start_offset,
            };
            if offset >= high_watermark {
                return Ok(Some(fetched));
            }
            if let Some(chunk) = state.tail_cache.read(offset, high_watermark, max_bytes) {
                fetched.chunks = vec![chunk];
                return Ok(Some(fetched));
            }
            let Some((_, segment)) = state.segments.range(..=offset).next_back() else {
                return Ok(Some(fetched));
            };
            let readable_end = if segment.base_offset == state.durable.segment_base {
                state.durable.position
            } else {
                segment.size
            };
            (
                segment.base_offset,
                segment.file.clone(),
                readable_end,
                segment.index_hint(offset),
                high_watermark,
                log_start_offset,
            )
        };
        let mut stream = self
            .shared
            .read_ahead
            .borrow_mut()
            .claim(segment_base, offset);
        let window = BatchRead::window_for(max_bytes);
        let ahead = match stream.as_mut() {
            Some(stream) => stream
                .window(window)
                .await
                .map(|bytes| (stream.position(), bytes)),
            None => None,
        };
        let (start, first_window) = match ahead {
            Some((position, bytes)) => (position, Some(bytes)),
            None => {
                // Nothing usable was read ahead: the stream (if any) is not continued.
                stream = None;
                (self.start_position(segment_base, hint, offset).await?, None)
            }
        };
        if self.shared.state.borrow().segment_swaps != swaps {
            return Ok(None);
        }
        let read = BatchRead {
            file: &file,
            start,
            readable_end,
            offset,
            upper: high_watermark,
            max_bytes,
        }
        .run(first_window)
        .await
        .map_err(|e| EngineError::io("reading a segment", e))?;
        let swapped = self.shared.state.borrow().segment_swaps != swaps;
        if let Some((position, next_offset)) =
            read.end.filter(|&(end, _)| end < readable_end && !swapped)
        {
            self.shared.read_ahead.borrow_mut().advance(
                stream,
                &file,
                NextRead {
                    segment_base,
                    next_offset,
                    position,
                    readable_end,
                    window,
                },
            );
        }
        Ok(Some(FetchedRecords {
            chunks: read.chunks,
            high_watermark,
            log_start_offset,
        }))
    }

    /// Where a read of `offset` in a segment starts: the active index's `hint`, or a lookup
    /// in the sealed segment's index.
    async fn start_position(
        &self,
        segment_base: u64,
        hint: Option<u64>,
        offset: u64,
    ) -> Result<u64> {
        match hint {
            Some(position) => Ok(position),
            None => self.lookup_sealed_position(segment_base, offset).await,
        }
    }

    /// Loads a sealed segment's index on first use and looks `offset` up in it.
    async fn lookup_sealed_position(&self, segment_base: u64, offset: u64) -> Result<u64> {
        let loaded = segment::SealedIndex::load(
            &self.shared.storage,
            &self.shared.dir,
            segment_base,
            self.shared.epoch,
        )
        .await?;
        let mut state = self.shared.state.borrow_mut();
        match state.segments.get_mut(&segment_base) {
            Some(segment) => {
                segment.install_sealed_index(loaded);
                Ok(segment.index_hint(offset).unwrap_or(0))
            }
            None => Ok(0),
        }
    }

    /// ListOffsets by timestamp: the first batch whose max timestamp is ≥ `timestamp`, as
    /// (offset of its first record at or after the timestamp, that record's batch max
    /// timestamp). `None` when no such batch exists below the high watermark.
    pub async fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(u64, i64)>> {
        let candidates: Vec<(u64, u64)> = {
            let state = self.shared.state.borrow();
            state.check_usable()?;
            state
                .segments
                .values()
                .filter(|s| s.max_timestamp >= timestamp)
                .map(|s| (s.base_offset, s.next_offset))
                .collect()
        };
        for (base, _) in candidates {
            let mut offset = base.max(self.offsets().log_start_offset);
            loop {
                let fetched = self.read(offset, 1 << 20).await?;
                if fetched.is_empty() {
                    break;
                }
                for chunk in &fetched.chunks {
                    for scanned in batch::scan_batches(chunk, 0) {
                        let header = scanned.header;
                        let next = header.next_offset() as u64;
                        if header.max_timestamp >= timestamp && next > offset {
                            let batch_bytes =
                                &chunk[scanned.position as usize..][..scanned.total_len];
                            let found = record_timestamps::first_record_at_or_after(
                                batch_bytes,
                                timestamp,
                                MAX_DECOMPRESSED_BATCH,
                            );
                            return Ok(Some(match found {
                                Ok(Some(record)) if record.offset >= offset as i64 => {
                                    (record.offset as u64, record.timestamp)
                                }
                                // Unreadable records: answer at batch granularity.
                                _ => (offset.max(header.base_offset as u64), header.max_timestamp),
                            }));
                        }
                        offset = offset.max(next);
                    }
                }
                if self.segment_of(offset) != Some(base) {
                    break;
                }
            }
        }
        Ok(None)
    }

    fn segment_of(&self, offset: u64) -> Option<u64> {
        let state = self.shared.state.borrow();
        state.segments.range(..=offset).next_back().map(|(b, _)| *b)
    }

    /// Moves the log start offset to `offset` (DeleteRecords) and deletes segments that fall
    /// wholly below it. Durable before it returns. Returns the new log start offset.
    pub async fn delete_records(&self, offset: u64) -> Result<u64> {
        {
            let mut state = self.shared.state.borrow_mut();
            state.check_usable()?;
            if offset > state.durable.offset {
                return Err(EngineError::OffsetOutOfRange {
                    offset,
                    start: state.log_start_offset,
                    end: state.durable.offset,
                });
            }
            state.log_start_offset = state.log_start_offset.max(offset);
        }
        self.delete_segments_below_start().await?;
        self.checkpoint().await?;
        Ok(self.offsets().log_start_offset)
    }

    /// Deletes whole sealed segments past `retention.ms` or beyond `retention.bytes`, moving
    /// the log start offset. Returns how many segments were deleted.
    pub async fn enforce_retention(&self, now_ms: i64) -> Result<usize> {
        let config = self.config();
        {
            let mut state = self.shared.state.borrow_mut();
            state.check_usable()?;
            let mut total: u64 = state.segments.values().map(|s| s.size).sum();
            let active_base = state.active()?.base_offset;
            let mut new_start = state.log_start_offset;
            for segment in state.segments.values() {
                if segment.base_offset == active_base || segment.next_offset > state.durable.offset
                {
                    break;
                }
                let expired = config
                    .retention_age
                    .is_some_and(|age| segment.max_timestamp < now_ms - age.as_millis() as i64);
                let oversized = config
                    .retention_bytes
                    .is_some_and(|limit| total.saturating_sub(segment.size) >= limit);
                if !(expired || oversized) {
                    break;
                }
                total -= segment.size;
                new_start = new_start.max(segment.next_offset);
            }
            if new_start == state.log_start_offset {
                return Ok(0);
            }
            state.log_start_offset = new_start;
        }
        let deleted = self.delete_segments_below_start().await?;
        self.checkpoint().await?;
        Ok(deleted)
    }

    async fn delete_segments_below_start(&self) -> Result<usize> {
        // A seal still writing a doomed segment's index files would recreate them.
        self.wait_for_seal().await;
        let doomed: Vec<Segment> = {
            let mut state = self.shared.state.borrow_mut();
            let start = state.log_start_offset;
            let active_base = state.active()?.base_offset;
            let bases: Vec<u64> = state
                .segments
                .values()
                .filter(|s| s.base_offset != active_base && s.next_offset <= start)
                .map(|s| s.base_offset)
                .collect();
            let doomed = bases
                .iter()
                .filter_map(|b| state.segments.remove(b))
                .collect();
            // Producer state outlives the batches (as in Kafka): a producer whose records
            // are deleted must still continue its sequence.
            doomed
        };
        let count = doomed.len();
        for segment in doomed {
            segment
                .delete(&self.shared.storage, &self.shared.dir)
                .await?;
        }
        Ok(count)
    }

    /// Makes everything appended so far durable and records a recovery point, so that a
    /// restart scans only what is appended after it. Writes the active segment's index
    /// entries, a producer-state snapshot and the leader epochs first.
    pub async fn checkpoint(&self) -> Result<()> {
        let _running = self
            .shared
            .checkpoint_lock
            .acquire_permit(1)
            .await
            .map_err(|_| EngineError::Closed)?;
        match self.checkpoint_inner().await {
            // A newer epoch's takeover removes this epoch's names once it has recorded its
            // claim, so a superseded leader's checkpoint (its close, say) can find a file it
            // just created gone: what to report then is the fence, not the I/O error.
            Err(error @ EngineError::Io { .. }) => Err(self.fenced_instead(error).await),
            other => other,
        }
    }

    /// Flushes what was appended, with no append running meanwhile.
    async fn flush_appended(&self) -> Result<()> {
        let _permit = self.lock_appends().await?;
        self.flush().await
    }

    async fn checkpoint_inner(&self) -> Result<()> {
        let (point, snapshot, epochs) = {
            let _permit = self.lock_appends().await?;
            self.flush().await?;
            let (point, snapshot, epochs, index_job) = {
                let mut state = self.shared.state.borrow_mut();
                state.check_usable()?;
                // Right after a roll the durable point is the end of the sealed segment, but
                // recovery looks the offset up in the new (empty) segment starting there.
                let holding = state
                    .segments
                    .range(..=state.durable.offset)
                    .next_back()
                    .map(|(base, _)| *base);
                let position = if holding == Some(state.durable.segment_base) {
                    state.durable.position
                } else {
                    0
                };
                let point = RecoveryPoint {
                    offset: state.durable.offset,
                    position,
                    log_start_offset: state.log_start_offset,
                };
                (
                    point,
                    state.producers.encode_snapshot(point.offset),
                    state.epochs.encode(),
                    state.active_mut()?.index_persist_job(),
                )
            };
            let persisted = index_job
                .run(&self.shared.storage, &self.shared.dir)
                .await?;
            if let Ok(active) = self.shared.state.borrow_mut().active_mut() {
                active.mark_index_persisted(persisted);
            }
            (point, snapshot, epochs)
        };
        // Recovery trusts every segment below the recovery point as sealed (exact size,
        // complete indexes), so a seal still running must end first; one that failed has
        // poisoned the log and no recovery point is written.
        self.wait_for_seal().await;
        self.shared.state.borrow().check_usable()?;
        let storage = &self.shared.storage;
        let dir = &self.shared.dir;
        let epoch = self.shared.epoch;
        // The snapshot and the epochs are durable before the recovery point that counts on
        // them names its new offset.
        let snapshot = (dir.join(snapshot_file_name(point.offset, epoch)), snapshot);
        let epochs = (dir.join(leader_epoch_file(epoch)), epochs);
        let recovery_point = (dir.join(recovery_point_file(epoch)), point.encode());
        if epoch == 0 {
            for (path, bytes) in [snapshot, epochs, recovery_point] {
                storage.write_small_durable(&path, bytes).await?;
            }
        } else {
            // A fenced log lives on the cluster's volume: volume barriers shared with the
            // other logs checkpointing (a whole shard's at its close) instead of six fsyncs.
            storage
                .replace_small_files(vec![vec![snapshot, epochs], vec![recovery_point]])
                .await?;
        }
        recovery::remove_old_snapshots(storage, dir, SNAPSHOTS_KEPT, epoch).await
    }

    /// Flushes, checkpoints and closes the log, after the running seal (if any) has ended.
    /// Further calls on any handle fail with [`EngineError::Closed`]. A seal that failed
    /// after the checkpoint is reported as [`EngineError::Poisoned`].
    ///
    /// A log a newer epoch has claimed is closed without a checkpoint: its files are names
    /// no newer epoch reads, and the newer leader has already inherited what it needs, so
    /// writing them would only cost the shared volume (three files and six fsyncs) while
    /// that leader takes the partition over. The close answers [`EngineError::Fenced`].
    pub async fn close(&self) -> Result<()> {
        self.close_after(Checkpoint::Write).await
    }

    /// Flushes and closes the log without a checkpoint: for a partition another broker is
    /// taking over at this moment. That broker claims the partition and inherits its files
    /// concurrently, so a checkpoint would mostly arrive after the inheritance, read by
    /// nobody, and would compete with the takeover for the shared volume (on the machine
    /// measured, a thousand of them made a planned move take 1.1 s instead of 0.7). The new
    /// leader's recovery starts at the last periodic checkpoint, as after a failover, which
    /// bounds it ([`crate::log_manager::CHECKPOINT_BYTES`], `CHECKPOINT_INTERVAL_MS`).
    /// Appends in flight are still flushed (and fence-checked) before they are answered.
    pub async fn close_for_takeover(&self) -> Result<()> {
        self.close_after(Checkpoint::Skip).await
    }

    pub(crate) async fn close_after(&self, checkpoint: Checkpoint) -> Result<()> {
        let poisoned_before = self.is_poisoned();
        let result = if poisoned_before {
            Ok(())
        } else if checkpoint == Checkpoint::Skip {
            self.flush_appended().await
        } else if let Err(fenced) = self.check_superseded().await {
            Err(fenced)
        } else {
            self.checkpoint().await
        };
        {
            // An append in the middle of a roll finishes it (and starts its seal) first.
            let _permit = self.lock_appends().await.ok();
            let mut state = self.shared.state.borrow_mut();
            state.closed = true;
            state.tail_cache.clear();
        }
        self.shared.append_lock.close();
        self.wait_for_seal().await;
        self.shared.seal_task.borrow_mut().take();
        let (files, poisoned) = {
            let mut state = self.shared.state.borrow_mut();
            (std::mem::take(&mut state.segments), state.poisoned.clone())
        };
        for waiter in self.shared.data_waiters.take() {
            let _ = waiter.send(());
        }
        for segment in files.into_values() {
            let _ = segment.file.close().await;
        }
        match poisoned {
            Some(reason) if !poisoned_before && result.is_ok() => {
                Err(EngineError::Poisoned(reason))
            }
            _ => result,
        }
    }
}

/// A sealed segment as the log cleaner sees it (see [`crate::compaction`]).
#[derive(Clone)]
pub(crate) struct SealedSegment {
    pub base_offset: u64,
    pub next_offset: u64,
    pub size: u64,
    pub max_timestamp: i64,
    /// A hard link to an older epoch's file, or a copy of one not yet adopted
    /// ([`crate::fence`]): its counted length bounds any replacement.
    pub inherited: bool,
    pub file: crate::storage::LogFile,
}

/// What a cleaning pass reads of a log, taken at one moment.
pub(crate) struct CleanerView {
    pub storage: Storage,
    pub dir: PathBuf,
    pub epoch: u32,
    /// Every segment but the active one whose seal has ended, in offset order.
    pub sealed: Vec<SealedSegment>,
    /// Producer id → last offset of its last batch.
    pub producer_last: std::collections::HashMap<i64, i64>,
}

/// The cleaner's side of the log: a view of its sealed segments and the swap of a cleaned
/// one (the files' protocol is in [`crate::compaction::swap`]).
impl PartitionLog {
    pub(crate) fn cleaner_view(&self) -> Result<CleanerView> {
        let state = self.shared.state.borrow();
        state.check_usable()?;
        let active_base = state.active()?.base_offset;
        let sealed = state
            .segments
            .values()
            .filter(|s| {
                s.base_offset != active_base && matches!(s.index, segment::SegmentIndex::Sealed(_))
            })
            .take_while(|s| s.next_offset <= state.durable.offset)
            .map(|s| SealedSegment {
                base_offset: s.base_offset,
                next_offset: s.next_offset,
                size: s.size,
                max_timestamp: s.max_timestamp,
                inherited: s.inherited,
                file: s.file.clone(),
            })
            .collect();
        let producer_last = state
            .producers
            .entries()
            .into_iter()
            .filter_map(|entry| Some((entry.producer_id(), entry.last_batch()?.last_offset)))
            .collect();
        Ok(CleanerView {
            storage: self.shared.storage.clone(),
            dir: self.shared.dir.clone(),
            epoch: self.shared.epoch,
            sealed,
            producer_last,
        })
    }

    /// Fails with [`EngineError::Fenced`] when a newer claim exists (at a fence epoch), and
    /// fences the log from then on: the cleaner's check before a swap, and before it writes
    /// its checkpoint.
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

    pub(crate) async fn check_fence_for_cleaner(&self) -> Result<()> {
        let epoch = self.shared.epoch;
        if epoch == 0 {
            return Ok(());
        }
        let result = crate::fence::check(&self.shared.storage, &self.shared.dir, epoch).await;
        if let Err(error) = &result {
            if let Some(fenced) = crate::fence::FencedBy::from_error(error) {
                tracing::warn!(dir = %self.shared.dir.display(), %error, "cleaner fenced; result given up");
                self.shared.state.borrow_mut().fenced = Some(fenced);
            }
        }
        result
    }

    /// Swaps a cleaned copy of the sealed segment `original` in, when that segment is still
    /// there unchanged and no newer claim exists (at a fence epoch), and returns the
    /// segment as it is now. An inherited segment is adopted right after its swap
    /// ([`crate::fence`], "Adopting a cleaned segment"). Returns `None`, removing the
    /// cleaned files, when the segment went or changed meanwhile. A newer claim fails with
    /// [`EngineError::Fenced`] (the log is fenced from then on); a failure in the middle of
    /// the swap poisons the log (recovery completes or rolls the swap back).
    pub(crate) async fn install_cleaned(
        &self,
        original: &SealedSegment,
        cleaned: &crate::compaction::CleanedSegment,
    ) -> Result<Option<SealedSegment>> {
        use crate::compaction::swap;
        let storage = &self.shared.storage;
        let dir = &self.shared.dir;
        let epoch = self.shared.epoch;
        let base = original.base_offset;
        // Held through the swap: retention, delete-records and close wait for it.
        let _sealing = self
            .shared
            .seal_lock
            .acquire_permit(1)
            .await
            .map_err(|_| EngineError::Closed)?;
        let unchanged = {
            let state = self.shared.state.borrow();
            state.check_usable().is_ok()
                && state
                    .active()
                    .is_ok_and(|active| active.base_offset != base)
                && state.segments.get(&base).is_some_and(|s| {
                    s.size == original.size && s.next_offset == original.next_offset
                })
        };
        if !unchanged {
            swap::discard(storage, dir, base, epoch).await?;
            return Ok(None);
        }
        if let Err(error) = self.check_fence_for_cleaner().await {
            swap::discard(storage, dir, base, epoch).await?;
            return Err(error);
        }
        let swapped = async {
            swap::commit(storage, dir, base, epoch).await?;
            storage
                .open_log_file(&segment::log_path(dir, base, epoch), false)
                .await
        }
        .await;
        let file = match swapped {
            Ok(file) => file,
            Err(error) => {
                self.poison(&error);
                return Err(error);
            }
        };
        let was_inherited = self
            .shared
            .state
            .borrow()
            .segments
            .get(&base)
            .is_some_and(|s| s.inherited);
        // The copy is no longer than the inherited length (the cleaner sees to it), so a
        // crash before the adoption is durable loses nothing; a failure to adopt only keeps
        // the bound.
        let inherited = was_inherited
            && match crate::fence::adopt_segment(storage, dir, epoch, base).await {
                Ok(adopted) => !adopted,
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), base, %error, "could not adopt a cleaned segment; it stays bounded");
                    true
                }
            };
        let mut state = self.shared.state.borrow_mut();
        state.segments.insert(
            base,
            Segment {
                base_offset: base,
                epoch,
                inherited,
                file,
                size: cleaned.size,
                next_offset: original.next_offset,
                max_timestamp: cleaned.max_timestamp,
                first_append_ms: None,
                index: segment::SegmentIndex::Sealed(None),
            },
        );
        state.segment_swaps += 1;
        // The newest batches may still be cached as they were before cleaning.
        state.tail_cache.clear();
        let installed = state.segments.get(&base).map(|s| SealedSegment {
            base_offset: s.base_offset,
            next_offset: s.next_offset,
            size: s.size,
            max_timestamp: s.max_timestamp,
            inherited: s.inherited,
            file: s.file.clone(),
        });
        drop(state);
        self.shared.read_ahead.borrow_mut().release();
        Ok(installed)
    }
}
