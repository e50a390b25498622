//! One segment of a partition log: `<base_offset:020>.log` with its `.index` and
//! `.timeindex`, and a `.txnindex` when transactions ended in it were aborted
//! ([`crate::txn_index`]) (`<base_offset:020>-e<epoch>.log` and so on in a log opened at a
//! fence epoch, see [`crate::fence`]).
//!
//! A segment inherited from an older epoch is a hard link to that epoch's file, which a
//! stale leader may still append to: it is never written or truncated (sealing it writes
//! only its own epoch's index files), and only its first `size` bytes — the length its
//! claim recorded — count.
//!
//! The log file holds Kafka RecordBatch v2 batches verbatim, back to back, starting at the
//! segment's base offset. While the segment is active its indexes live in memory and are
//! written out (appended, then fdatasync'd) at each checkpoint, before the recovery point
//! that relies on them; recovery drops index entries at or past the recovery position and
//! rebuilds them from the log. When a segment is sealed, its log file is truncated to its
//! exact size (the write-behind buffer pads the last page with zeros, and preallocation
//! reserves space past it), both indexes are completed and everything is fdatasync'd; a
//! sealed segment's offset index is read into memory on first lookup (a few per log are kept,
//! see [`SealedOffsets`]), so idle partitions cost no index memory. Index files are read,
//! never memory-mapped: on a shared volume another broker may delete or truncate them, and a
//! mapped page that is gone kills the process with SIGBUS where a read only fails.
//!
//! Sealing runs in the background after a roll, once the segment's batches are durable and
//! the next segment exists. Until it ends the segment keeps its in-memory indexes. A crash
//! before it ends leaves a segment whose batches end at the next segment's base offset,
//! followed by padding, with index files missing, partial or stale; recovery recognises
//! that, cuts the padding and seals it (see [`crate::recovery`]).

use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::batch::BatchHeader;
use crate::config::LogConfig;
use crate::error::{EngineError, Result};
use crate::offset_index::{OffsetIndex, OffsetIndexEntry, OffsetIndexView, OFFSET_INDEX_ENTRY_LEN};
use crate::storage::{LogFile, Storage};
use crate::time_index::{TimeIndex, TimeIndexView, TIME_INDEX_ENTRY_LEN};
use crate::txn_index::{SegmentTxnIndex, TxnIndexWrite};

/// The file name of a segment's log, index or time index at `epoch` (see
/// [`crate::fence`]: `<base:020>.<ext>` at epoch 0, `<base:020>-e<epoch>.<ext>` after).
pub(crate) fn file_name(base_offset: u64, epoch: u32, extension: &str) -> String {
    let stem = crate::fence::with_epoch(&format!("{base_offset:020}"), epoch);
    format!("{stem}.{extension}")
}

/// Parses `<20 digits>[-e<epoch>].<extension>` of the given epoch.
pub(crate) fn parse_file_name(name: &str, epoch: u32, extension: &str) -> Option<u64> {
    let stem = name.strip_suffix(extension)?.strip_suffix('.')?;
    let (stem, name_epoch) = crate::fence::split_epoch(stem);
    if name_epoch != epoch || stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

pub(crate) fn log_path(dir: &Path, base_offset: u64, epoch: u32) -> PathBuf {
    dir.join(file_name(base_offset, epoch, "log"))
}

pub(crate) fn index_path(dir: &Path, base_offset: u64, epoch: u32) -> PathBuf {
    dir.join(file_name(base_offset, epoch, "index"))
}

pub(crate) fn time_index_path(dir: &Path, base_offset: u64, epoch: u32) -> PathBuf {
    dir.join(file_name(base_offset, epoch, "timeindex"))
}

pub(crate) fn txn_index_path(dir: &Path, base_offset: u64, epoch: u32) -> PathBuf {
    dir.join(file_name(base_offset, epoch, TXN_INDEX_EXTENSION))
}

/// The extension of a segment's aborted-transaction index ([`crate::txn_index`]).
pub(crate) const TXN_INDEX_EXTENSION: &str = "txnindex";

/// A segment's metadata and file handle.
pub(crate) struct Segment {
    pub base_offset: u64,
    /// The epoch in the segment's file names (the log's epoch).
    pub epoch: u32,
    /// The file is a hard link to an older epoch's segment, which a stale leader may still
    /// append to: it is never written, and only its first `size` bytes count.
    pub inherited: bool,
    pub file: LogFile,
    /// Logical size: bytes of whole batches.
    pub size: u64,
    /// Offset after the last batch (the base offset when empty).
    pub next_offset: u64,
    /// Largest batch max timestamp (-1 when empty).
    pub max_timestamp: i64,
    /// Broker time of the first append to this segment, for `segment.ms` rolls.
    pub first_append_ms: Option<i64>,
    pub index: SegmentIndex,
    /// The transactions aborted by markers in this segment, in memory whether the segment
    /// is active or sealed.
    pub txn_index: SegmentTxnIndex,
}

/// The indexes of a segment: in memory while it is active; once sealed, the offset index
/// read back from its file when a lookup needs it.
pub(crate) enum SegmentIndex {
    Active(ActiveIndex),
    Sealed(Option<Rc<SealedOffsets>>),
}

/// In-memory indexes of the active segment.
pub(crate) struct ActiveIndex {
    pub offsets: OffsetIndex,
    pub times: TimeIndex,
    /// Entries already written to the index files.
    pub persisted_offsets: usize,
    pub persisted_times: usize,
    /// Log bytes appended since the last offset-index entry.
    pub bytes_since_entry: u64,
    /// The segment's largest timestamp and the relative offset of the batch that reached
    /// it, while no time-index entry holds it yet (entries are added only per interval).
    pub unindexed_max_timestamp: Option<(i64, u32)>,
}

impl ActiveIndex {
    pub fn empty() -> Self {
        ActiveIndex {
            offsets: OffsetIndex::new(),
            times: TimeIndex::new(),
            persisted_offsets: 0,
            persisted_times: 0,
            bytes_since_entry: u64::MAX,
            unindexed_max_timestamp: None,
        }
    }

    /// Adds entries for a batch at `position` per the index interval.
    pub fn record(
        &mut self,
        segment_base: u64,
        header: &BatchHeader,
        position: u64,
        max_timestamp_so_far: i64,
        interval: u64,
    ) {
        let batch_len = header.total_len() as u64;
        let last_rel = (header.last_offset() as u64 - segment_base) as u32;
        let max_unindexed = self
            .times
            .last()
            .is_none_or(|e| max_timestamp_so_far > e.timestamp);
        if self.bytes_since_entry >= interval {
            let rel_offset = (header.base_offset as u64 - segment_base) as u32;
            let _ = self.offsets.append(rel_offset, position as u32);
            if max_unindexed {
                // The entry names the batch that reached the maximum: an earlier one when it
                // is the pending unindexed maximum, else this one.
                let rel = match self.unindexed_max_timestamp {
                    Some((timestamp, rel)) if timestamp == max_timestamp_so_far => rel,
                    _ => last_rel,
                };
                let _ = self.times.maybe_append(max_timestamp_so_far, rel);
            }
            self.unindexed_max_timestamp = None;
            self.bytes_since_entry = 0;
        } else if max_unindexed
            && self
                .unindexed_max_timestamp
                .is_none_or(|(timestamp, _)| max_timestamp_so_far > timestamp)
        {
            self.unindexed_max_timestamp = Some((max_timestamp_so_far, last_rel));
        }
        self.bytes_since_entry = self.bytes_since_entry.saturating_add(batch_len);
    }

    /// Adds the time-index entry for the segment's largest timestamp if the sparse entries
    /// stop short of it. The index files are where a restart learns a segment's largest
    /// timestamp (for time retention and lookups by time), so this runs before they are
    /// written: at each checkpoint and when the segment is sealed.
    pub fn index_max_timestamp(&mut self) {
        if let Some((timestamp, rel_offset)) = self.unindexed_max_timestamp.take() {
            let _ = self.times.maybe_append(timestamp, rel_offset);
        }
    }
}

/// The largest index file read into memory. An offset index holds one 12-byte entry per
/// `index.interval.bytes` (4 KiB by default) of a segment of at most 4 GiB, so a real one is
/// far smaller (12 MiB at most with the default interval); a larger file is damaged (recovery
/// rebuilds it) and a lookup uses its first entries, which still point at the right batches.
pub(crate) const MAX_INDEX_FILE_BYTES: usize = 32 << 20;

/// Reads an index file into memory, at most one byte past [`MAX_INDEX_FILE_BYTES`].
pub(crate) async fn read_index_file(storage: &Storage, path: &Path) -> Result<Option<Vec<u8>>> {
    storage.read_prefix(path, MAX_INDEX_FILE_BYTES + 1).await
}

/// A sealed segment's offset index for lookups: the valid entries of its file, decoded once.
pub(crate) struct SealedOffsets(Vec<OffsetIndexEntry>);

impl SealedOffsets {
    pub async fn load(storage: &Storage, dir: &Path, base_offset: u64, epoch: u32) -> Result<Self> {
        let bytes = read_index_file(storage, &index_path(dir, base_offset, epoch)).await?;
        let mut bytes = bytes.unwrap_or_default();
        bytes.truncate(MAX_INDEX_FILE_BYTES);
        Ok(SealedOffsets(crate::offset_index::parse_valid_prefix(
            &bytes,
        )))
    }

    /// The byte position of the greatest entry at or below `rel_offset` (0 when none).
    fn lookup(&self, rel_offset: u32) -> u64 {
        let after = self.0.partition_point(|e| e.rel_offset <= rel_offset);
        after
            .checked_sub(1)
            .map_or(0, |i| u64::from(self.0[i].position))
    }
}

/// A sealed segment's index files as recovery checks them, read into memory for the check
/// and dropped after it.
pub(crate) struct SealedIndex {
    offsets: Option<Vec<u8>>,
    times: Option<Vec<u8>>,
}

impl SealedIndex {
    pub async fn load(storage: &Storage, dir: &Path, base_offset: u64, epoch: u32) -> Result<Self> {
        Ok(SealedIndex {
            offsets: read_index_file(storage, &index_path(dir, base_offset, epoch)).await?,
            times: read_index_file(storage, &time_index_path(dir, base_offset, epoch)).await?,
        })
    }

    /// Byte position of the batch the last valid offset-index entry names.
    pub fn last_entry_position(&self) -> Option<u64> {
        let bytes = self.offsets.as_deref()?;
        OffsetIndexView::new(bytes)
            .last()
            .map(|e| e.position as u64)
    }

    /// Whether both index files exist, are not empty and hold only valid entries. Recovery
    /// takes a sealed segment's newest timestamp from its time index and reads through its
    /// offset index without checking them against the log, so a missing or damaged one is
    /// rebuilt rather than believed. (An index cut at an entry boundary still passes: it
    /// looks like a valid, shorter index.)
    pub fn is_intact(&self) -> bool {
        fn whole(bytes: Option<&[u8]>, entry_len: usize, valid: fn(&[u8]) -> usize) -> bool {
            bytes.is_some_and(|b| {
                !b.is_empty() && b.len() <= MAX_INDEX_FILE_BYTES && valid(b) * entry_len == b.len()
            })
        }
        whole(
            self.offsets.as_deref(),
            OFFSET_INDEX_ENTRY_LEN,
            crate::offset_index::valid_prefix_len,
        ) && whole(
            self.times.as_deref(),
            TIME_INDEX_ENTRY_LEN,
            crate::time_index::valid_prefix_len,
        )
    }

    /// Whether neither index file exists.
    pub fn is_absent(&self) -> bool {
        self.offsets.is_none() && self.times.is_none()
    }

    /// The last valid time-index entry: the segment's largest timestamp and the relative
    /// offset of the batch holding it.
    pub fn last_time_entry(&self) -> Option<(i64, u32)> {
        let bytes = self.times.as_deref()?;
        TimeIndexView::new(bytes)
            .last()
            .map(|e| (e.timestamp, e.rel_offset))
    }
}

impl Segment {
    /// Creates a new, empty active segment file.
    pub async fn create(
        storage: &Storage,
        dir: &Path,
        base_offset: u64,
        epoch: u32,
    ) -> Result<Self> {
        let file = storage
            .open_log_file(&log_path(dir, base_offset, epoch), true)
            .await?;
        Ok(Segment {
            base_offset,
            epoch,
            inherited: false,
            file,
            size: 0,
            next_offset: base_offset,
            max_timestamp: -1,
            first_append_ms: None,
            index: SegmentIndex::Active(ActiveIndex::empty()),
            txn_index: SegmentTxnIndex::default(),
        })
    }

    /// Accounts for a batch appended at `position`.
    pub fn record_batch(
        &mut self,
        header: &BatchHeader,
        position: u64,
        now_ms: i64,
        config: &LogConfig,
    ) {
        self.size = position + header.total_len() as u64;
        self.next_offset = header.next_offset() as u64;
        self.max_timestamp = self.max_timestamp.max(header.max_timestamp);
        self.first_append_ms.get_or_insert(now_ms);
        if let SegmentIndex::Active(index) = &mut self.index {
            index.record(
                self.base_offset,
                header,
                position,
                self.max_timestamp,
                config.index_interval_bytes,
            );
        }
    }

    /// Where to start reading for `offset`: `Some(position)` from the index, or `None` when
    /// the sealed index must be loaded first.
    pub fn index_hint(&self, offset: u64) -> Option<u64> {
        let rel_offset = offset.saturating_sub(self.base_offset).min(u32::MAX as u64) as u32;
        match &self.index {
            SegmentIndex::Active(index) => Some(
                index
                    .offsets
                    .lookup(rel_offset)
                    .map_or(0, |e| e.position as u64),
            ),
            SegmentIndex::Sealed(Some(sealed)) => Some(sealed.lookup(rel_offset)),
            SegmentIndex::Sealed(None) => None,
        }
    }

    /// Keeps a sealed segment's offset index for later lookups; false when the segment is
    /// not sealed or already has one.
    pub fn install_sealed_offsets(&mut self, loaded: SealedOffsets) -> bool {
        if let SegmentIndex::Sealed(slot @ None) = &mut self.index {
            *slot = Some(Rc::new(loaded));
            return true;
        }
        false
    }

    /// Drops a sealed segment's offset index read for lookups (read again when needed).
    pub fn forget_sealed_offsets(&mut self) {
        if let SegmentIndex::Sealed(slot) = &mut self.index {
            *slot = None;
        }
    }

    /// What must be written so the index files hold every in-memory entry.
    pub fn index_persist_job(&mut self) -> IndexPersistJob {
        if let SegmentIndex::Active(index) = &mut self.index {
            index.index_max_timestamp();
        }
        let (offsets, times, persisted) = match &self.index {
            SegmentIndex::Active(index) => (
                index.offsets.encode_from(index.persisted_offsets),
                index.times.encode_from(index.persisted_times),
                (index.offsets.len(), index.times.len()),
            ),
            SegmentIndex::Sealed(_) => (Vec::new(), Vec::new(), (0, 0)),
        };
        let (start_offsets, start_times) = match &self.index {
            SegmentIndex::Active(index) => (index.persisted_offsets, index.persisted_times),
            SegmentIndex::Sealed(_) => (0, 0),
        };
        IndexPersistJob {
            base_offset: self.base_offset,
            epoch: self.epoch,
            offsets,
            offsets_position: (start_offsets * OFFSET_INDEX_ENTRY_LEN) as u64,
            times,
            times_position: (start_times * TIME_INDEX_ENTRY_LEN) as u64,
            txns: self.txn_index.write_job(),
            persisted: PersistedIndexes {
                offsets: persisted.0,
                times: persisted.1,
                aborted_txns: self.txn_index.entries().len(),
            },
        }
    }

    pub fn mark_index_persisted(&mut self, persisted: PersistedIndexes) {
        if let SegmentIndex::Active(index) = &mut self.index {
            index.persisted_offsets = index.persisted_offsets.max(persisted.offsets);
            index.persisted_times = index.persisted_times.max(persisted.times);
        }
        self.txn_index.mark_written(persisted.aborted_txns);
    }

    /// What sealing this segment takes: exact file size, complete indexes, all synced.
    pub fn seal_job(&mut self) -> SealJob {
        SealJob {
            // An inherited file is never written; its counted size is recorded instead.
            truncate: !self.inherited,
            file: self.file.clone(),
            size: self.size,
            index: self.index_persist_job(),
        }
    }

    /// The seal is done: its indexes are read from the files from now on.
    pub fn mark_sealed(&mut self, persisted: PersistedIndexes) {
        self.txn_index.mark_written(persisted.aborted_txns);
        self.index = SegmentIndex::Sealed(None);
    }

    /// Removes the segment's files.
    pub async fn delete(self, storage: &Storage, dir: &Path) -> Result<()> {
        let _ = self.file.close().await;
        remove_files(storage, dir, self.base_offset, self.epoch).await
    }
}

/// Removes a segment's log and index files at `epoch`.
pub(crate) async fn remove_files(
    storage: &Storage,
    dir: &Path,
    base_offset: u64,
    epoch: u32,
) -> Result<()> {
    storage.remove(&log_path(dir, base_offset, epoch)).await?;
    storage.remove(&index_path(dir, base_offset, epoch)).await?;
    storage
        .remove(&time_index_path(dir, base_offset, epoch))
        .await?;
    storage
        .remove(&txn_index_path(dir, base_offset, epoch))
        .await
}

/// Entry counts of a segment's index files once a write of them is durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PersistedIndexes {
    pub offsets: usize,
    pub times: usize,
    pub aborted_txns: usize,
}

/// Index bytes to append to a segment's index files.
pub(crate) struct IndexPersistJob {
    base_offset: u64,
    epoch: u32,
    offsets: Vec<u8>,
    offsets_position: u64,
    times: Vec<u8>,
    times_position: u64,
    txns: TxnIndexWrite,
    persisted: PersistedIndexes,
}

impl IndexPersistJob {
    /// Writes and fdatasyncs; returns the entry counts now persisted.
    pub async fn run(self, storage: &Storage, dir: &Path) -> Result<PersistedIndexes> {
        for (path, bytes, position) in [
            (
                index_path(dir, self.base_offset, self.epoch),
                self.offsets,
                self.offsets_position,
            ),
            (
                time_index_path(dir, self.base_offset, self.epoch),
                self.times,
                self.times_position,
            ),
        ] {
            let context = format!("writing {}", path.display());
            let file = storage.open_index_file(&path).await?;
            // Drop whatever a previous run left past the persisted entries (recovery may
            // have discarded entries that pointed into a truncated tail).
            file.truncate(position)
                .await
                .map_err(|e| EngineError::io(context.clone(), e))?;
            if !bytes.is_empty() {
                file.write_at(bytes, position)
                    .await
                    .map_err(|e| EngineError::io(context.clone(), e))?;
            }
            file.fdatasync()
                .await
                .map_err(|e| EngineError::io(context, e))?;
        }
        let path = txn_index_path(dir, self.base_offset, self.epoch);
        match self.txns {
            TxnIndexWrite::Nothing => {}
            // Made durable by the directory fsync (or volume barrier) of the recovery point
            // written after it ([`crate::txn_index`]).
            TxnIndexWrite::Remove => storage.remove(&path).await?,
            TxnIndexWrite::Append { bytes, position } => {
                let context = format!("writing {}", path.display());
                let file = storage.open_index_file(&path).await?;
                file.truncate(position)
                    .await
                    .map_err(|e| EngineError::io(context.clone(), e))?;
                if !bytes.is_empty() {
                    file.write_at(bytes, position)
                        .await
                        .map_err(|e| EngineError::io(context.clone(), e))?;
                }
                file.fdatasync()
                    .await
                    .map_err(|e| EngineError::io(context, e))?;
            }
        }
        Ok(self.persisted)
    }
}

/// The work of sealing a segment.
pub(crate) struct SealJob {
    truncate: bool,
    file: LogFile,
    size: u64,
    index: IndexPersistJob,
}

impl SealJob {
    /// Truncates, writes the indexes, fdatasyncs; returns the index entry counts persisted.
    pub async fn run(self, storage: &Storage, dir: &Path) -> Result<PersistedIndexes> {
        let context = "sealing a segment";
        if self.truncate {
            self.file
                .truncate(self.size)
                .await
                .map_err(|e| EngineError::io(context, e))?;
        }
        self.file
            .fdatasync()
            .await
            .map_err(|e| EngineError::io(context, e))?;
        self.index.run(storage, dir).await
    }
}
