//! Opening a partition log after a clean shut-down or a crash.
//!
//! 1. List the directory: segments (`<base:020>.log`), snapshots, the recovery point, the
//!    leader-epoch checkpoint; leftover `*.tmp` files from interrupted checkpoints go.
//! 2. Segments wholly below the recovery point are trusted as sealed: their size is the file
//!    size (sealing truncated it exactly) and their newest timestamp comes from the time
//!    index (sealing and checkpoints write an entry for it). A checkpoint waits for a
//!    running seal before it writes the recovery point, so this holds for what the log
//!    writes; recovery still verifies it cheaply. Their index files must exist and hold
//!    only valid entries, and the file must end the way sealing leaves it (whole intact
//!    batches from the last offset-index entry to the end of the file, the last one ending
//!    at the next segment's base). Otherwise the scan start moves back to the start of that
//!    segment, which rebuilds and seals it.
//! 3. From the recovery point every batch is validated (framing, magic, CRC-32C, offsets
//!    dense); index entries, leader epochs and producer state are rebuilt from the batches
//!    seen. Producer state starts from the snapshot taken at the point (open transactions
//!    included) and replays what follows, transaction markers too; the transaction index
//!    entries of markers below the point come from the `.txnindex` files, those after it from
//!    the replay ([`crate::txn_index`]). A missing `.txnindex` the snapshot counts on, or a
//!    damaged one, makes the scan start at the first segment with no snapshot, which
//!    rebuilds them all. The whole log is validated instead when the checkpoint is missing or corrupt,
//!    when the leader-epoch checkpoint is, or when the segment holding the recovery point
//!    is shorter than the point (it was cut behind our back). The first torn or corrupt
//!    batch of the last segment ends the log there. In an earlier segment, what the scan
//!    stops at depends on where its valid batches end:
//!    - exactly at the next segment's base offset (last offset + 1 == next base): the
//!      segment is whole, and what follows its batches is the zero padding of the last
//!      page or the preallocated space that a seal cut short by a crash had not removed
//!      yet (a roll seals the old segment in the background). No offset of this segment
//!      can lie past that point, since every later offset was appended to a later segment,
//!      so nothing acknowledged is there: the file is truncated after its last batch, its
//!      indexes are rewritten and synced (it is sealed) and the later segments are kept;
//!    - anywhere else: batches that later segments follow are missing, so the segment is
//!      truncated after its last intact batch and all later segments are deleted.
//!
//!    Every earlier segment recovery scans is sealed before the log opens. Recovery time
//!    therefore depends on the bytes written after the last checkpoint (plus one batch or
//!    index interval read per trusted segment), not on the size of the log.
//! 4. The active (last) segment is fdatasync'd so everything recovery kept is durable, and
//!    the partial last page is read back for the write-behind buffer.
//!
//! At a fence epoch ([`FileScope`], see [`crate::fence`]) only files named for that epoch
//! are read, leftovers of other epochs are left alone, and inherited segments (hard links
//! to an older epoch's files) are sized by the length their claim recorded and never
//! written: a torn tail in one ends the segment logically, sealing one writes only its
//! index files, and when the last segment is inherited, recovery seals it that way and
//! starts a segment of the epoch's own at the recovered end.
//!
//! # Plan and executor
//! Every decision above is a plain function of what was read, in [`plan`] (unit-tested
//! without files): where the scan starts, which segments are trusted, what happens to a
//! scanned segment, how an inherited tail ends. [`recover`] is the executor: it reads the
//! files (`listing`: the directory and snapshots; `scan`: batches and indexes), asks the
//! plan at each step and does the I/O it decides.

mod listing;
mod plan;
mod scan;

use std::collections::BTreeMap;
use std::path::Path;

use crate::aligned_buffer::align_down;
use crate::checkpoint::RecoveryPoint;
use crate::config::LogConfig;
use crate::error::{EngineError, Result};
use crate::leader_epoch::LeaderEpochCache;
use crate::log::{leader_epoch_file, recovery_point_file, DurablePoint, LogState};
use crate::producer_state::{ProducerStateTable, Snapshot};
use crate::segment::{self, ActiveIndex, Segment, SegmentIndex};
use crate::segment_appender::SegmentAppender;
use crate::storage::{LogFile, Storage};
use crate::tail_cache::TailCache;
use crate::txn_index::SegmentTxnIndex;
use plan::{ScanStart, Scanned, TailAction};

pub(crate) use listing::remove_old_snapshots;
pub(crate) use plan::ADOPT_TAIL_MAX_BYTES;

/// Which files of a partition directory a log reads (see [`crate::fence`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct FileScope {
    /// The epoch in the names of the files read and written.
    pub epoch: u32,
    /// Segments whose files are hard links to an older epoch's, by base offset, with the
    /// bytes that count when an older claim recorded them (`None`: scan to the valid end).
    /// They are never written.
    pub inherited: std::collections::BTreeMap<u64, Option<u64>>,
}
/// Segments trusted as sealed without a scan: their loaded index, open file and size.
type Trusted = BTreeMap<u64, (segment::SealedIndex, LogFile, u64)>;

/// The segments recovery kept and where the log ends.
struct ScannedLog {
    segments: BTreeMap<u64, Segment>,
    next_offset: u64,
    max_timestamp: Option<(i64, u64)>,
    /// Index in the segment bases of the first segment deleted (the log ended before it).
    first_doomed: Option<usize>,
}

/// Recovers the log in `dir`; see the module documentation. The decisions are
/// [`plan`]'s; this reads the files, asks it, and does what it says.
pub(crate) async fn recover(
    storage: &Storage,
    dir: &Path,
    config: &LogConfig,
    scope: &FileScope,
) -> Result<LogState> {
    Recovery {
        storage,
        dir,
        config,
        scope,
    }
    .run()
    .await
}

/// The executor: one recovery of one directory.
struct Recovery<'a> {
    storage: &'a Storage,
    dir: &'a Path,
    config: &'a LogConfig,
    scope: &'a FileScope,
}

impl Recovery<'_> {
    async fn run(&self) -> Result<LogState> {
        let (storage, dir, epoch) = (self.storage, self.dir, self.scope.epoch);
        crate::compaction::swap::finish_interrupted(storage, dir, epoch).await?;
        let listing = listing::list(storage, dir, epoch).await?;
        let (checkpoint, epochs) = self.read_checkpoints().await?;
        let epochs_lost = plan::epochs_lost(checkpoint.is_some(), epochs.is_some());
        if epochs_lost {
            tracing::warn!(dir = %dir.display(), "leader epochs missing or corrupt; recovering the whole log");
        }
        let mut epochs = epochs.unwrap_or_default();

        let mut bases = listing.segment_bases.clone();
        if bases.is_empty() {
            let base = plan::empty_log_base(checkpoint);
            Segment::create(storage, dir, base, epoch).await?;
            storage.sync_dir(dir).await?;
            bases.push(base);
        }
        let first_base = bases[0];
        let log_start_offset = plan::log_start_offset(checkpoint, first_base);

        let point = plan::trusted_point(checkpoint, first_base, epochs_lost);
        let (start, snapshot) = self
            .choose_scan_start(&bases, &listing.snapshots, point)
            .await?;
        let (start, trusted) = self.verify_trusted(&bases, start).await?;
        let (mut producers, with_entries) = match snapshot {
            Some(snapshot) => (snapshot.table, snapshot.txn_index_segments),
            None => (ProducerStateTable::default(), Vec::new()),
        };
        let loaded = listing::load_txn_indexes(
            storage,
            dir,
            epoch,
            &listing,
            &bases,
            start.replay_from,
            &with_entries,
        )
        .await?;
        let (start, trusted, txn_indexes) = match loaded {
            Ok(txn_indexes) => (start, trusted, txn_indexes),
            Err((base, damaged)) => {
                // Only a replay from the first segment rebuilds what the file held: the
                // transactions its markers ended may have begun anywhere before.
                tracing::warn!(dir = %dir.display(), base, reason = damaged.0, "damaged transaction index; recovering the whole log");
                for (_, file, _) in trusted.into_values() {
                    let _ = file.close().await;
                }
                producers = ProducerStateTable::default();
                let none = listing::load_txn_indexes(storage, dir, epoch, &listing, &bases, 0, &[])
                    .await?
                    .unwrap_or_default();
                (ScanStart::whole_log(bases[0]), Trusted::new(), none)
            }
        };
        epochs.truncate_from(start.offset());

        let scanned = self
            .scan_segments(
                &bases,
                start,
                trusted,
                txn_indexes,
                &mut epochs,
                &mut producers,
            )
            .await?;
        let ScannedLog {
            mut segments,
            next_offset,
            max_timestamp,
            first_doomed,
        } = scanned;
        if let Some(first_doomed) = first_doomed {
            self.remove_doomed(&bases[first_doomed..], &mut segments)
                .await?;
        }
        producers.truncate_to(next_offset as i64);
        // Everything recovery kept is durable (the active segment is synced below).
        producers.on_durable(next_offset);
        epochs.truncate_from(next_offset);
        self.start_own_segment(&mut segments, next_offset).await?;
        let (appender, durable) = self.open_appender(&segments, next_offset).await?;
        Ok(LogState {
            segments,
            appender,
            next_offset,
            log_start_offset: log_start_offset.min(next_offset),
            durable,
            producers,
            epochs,
            tail_cache: TailCache::new(self.config.tail_cache_bytes),
            poisoned: None,
            fenced: None,
            closed: false,
            max_timestamp,
            segment_swaps: 0,
            sealed_offsets_loaded: std::collections::VecDeque::new(),
        })
    }

    /// The recovery point (`None` when missing or unreadable) and the leader epochs.
    async fn read_checkpoints(&self) -> Result<(Option<RecoveryPoint>, Option<LeaderEpochCache>)> {
        let (storage, dir, epoch) = (self.storage, self.dir, self.scope.epoch);
        let checkpoint = match storage
            .read_small(&dir.join(recovery_point_file(epoch)))
            .await?
        {
            Some(bytes) => match RecoveryPoint::decode(&bytes) {
                Ok(point) => Some(point),
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), %error, "recovering the whole log");
                    None
                }
            },
            None => None,
        };
        let epochs = match storage
            .read_small(&dir.join(leader_epoch_file(epoch)))
            .await?
        {
            Some(bytes) => LeaderEpochCache::decode(&bytes).ok(),
            None => None,
        };
        Ok((checkpoint, epochs))
    }

    /// Where the validating scan starts, and the producer snapshot it starts from.
    async fn choose_scan_start(
        &self,
        bases: &[u64],
        snapshots: &[u64],
        point: Option<RecoveryPoint>,
    ) -> Result<(ScanStart, Option<Snapshot>)> {
        let (storage, dir, epoch) = (self.storage, self.dir, self.scope.epoch);
        let snapshot = match point {
            Some(point) => {
                listing::load_snapshot(storage, dir, snapshots, point.offset, epoch).await?
            }
            None => None,
        };
        let located = ScanStart::from_checkpoint(
            bases,
            point,
            snapshot.as_ref().map(|s| s.covers_up_to_offset),
        );
        let located = match located {
            Some(start)
                if !start.fits(
                    scan::segment_file_size(storage, dir, start.segment, self.scope).await?,
                ) =>
            {
                tracing::warn!(dir = %dir.display(), segment = start.segment, position = start.position, "segment shorter than its recovery point; recovering the whole log");
                None
            }
            other => other,
        };
        Ok(match located {
            Some(start) => (start, snapshot),
            None => (ScanStart::whole_log(bases[0]), None),
        })
    }

    /// Checks the segments below the scan start before trusting them as sealed: their
    /// indexes must be intact and their files must end the way sealing leaves them.
    /// Indexes are derived data, so when one is missing or damaged, or a file does not end
    /// sealed, the scan starts at that segment instead, which rebuilds and seals it. The
    /// files opened for the check are kept for the segments trusted.
    async fn verify_trusted(
        &self,
        bases: &[u64],
        start: ScanStart,
    ) -> Result<(ScanStart, Trusted)> {
        let (storage, dir, epoch) = (self.storage, self.dir, self.scope.epoch);
        let mut trusted = Trusted::new();
        for (base, next_base) in start.segments_to_verify(bases) {
            let loaded = segment::SealedIndex::load(storage, dir, base, epoch).await?;
            if !loaded.is_intact() {
                // A takeover leaves the indexes of a small tail it adopts behind on purpose
                // (`crate::takeover`): the scan it is given anyway rebuilds them.
                if !(base == start.segment && loaded.is_absent()) {
                    tracing::warn!(dir = %dir.display(), base, "missing or damaged segment index; rebuilding it");
                }
                return Ok((start.restart_at(base), trusted));
            }
            let Some(next_base) = next_base else {
                break;
            };
            let (file, size) = scan::open_sized(storage, dir, base, self.scope).await?;
            if !scan::ends_sealed(&file, size, next_base, &loaded).await? {
                tracing::warn!(dir = %dir.display(), base, "segment below the recovery point is not sealed; scanning it");
                let _ = file.close().await;
                return Ok((start.restart_at(base), trusted));
            }
            trusted.insert(base, (loaded, file, size));
        }
        Ok((start, trusted))
    }

    /// Opens every segment: those below the scan start as sealed, the rest scanned from
    /// `start`, each cut, sealed or ending the log as [`plan::segment_end`] decides.
    async fn scan_segments(
        &self,
        bases: &[u64],
        start: ScanStart,
        mut trusted: Trusted,
        mut txn_indexes: BTreeMap<u64, SegmentTxnIndex>,
        epochs: &mut LeaderEpochCache,
        producers: &mut ProducerStateTable,
    ) -> Result<ScannedLog> {
        let (storage, dir, epoch, scope) = (self.storage, self.dir, self.scope.epoch, self.scope);
        let mut log = ScannedLog {
            segments: BTreeMap::new(),
            next_offset: bases[0],
            max_timestamp: None,
            first_doomed: None,
        };
        for (i, &base) in bases.iter().enumerate() {
            let txn_index = txn_indexes.remove(&base).unwrap_or_default();
            let (file, file_size, trusted_index) = match trusted.remove(&base) {
                Some((loaded, file, size)) => (file, size, Some(loaded)),
                None => {
                    let (file, size) = scan::open_sized(storage, dir, base, scope).await?;
                    (file, size, None)
                }
            };
            if base < start.segment {
                let next = bases.get(i + 1).copied().unwrap_or(base);
                let loaded = match trusted_index {
                    Some(loaded) => loaded,
                    None => segment::SealedIndex::load(storage, dir, base, epoch).await?,
                };
                let (max_ts, max_ts_offset) = match loaded.last_time_entry() {
                    Some((ts, rel)) => (ts, base + u64::from(rel)),
                    None => (-1, next.saturating_sub(1)),
                };
                if log.max_timestamp.is_none_or(|(ts, _)| max_ts > ts) && max_ts >= 0 {
                    log.max_timestamp = Some((max_ts, max_ts_offset));
                }
                let sealed = Segment {
                    base_offset: base,
                    epoch,
                    inherited: scope.inherited.contains_key(&base),
                    file,
                    size: file_size,
                    next_offset: next,
                    max_timestamp: max_ts,
                    first_append_ms: None,
                    index: SegmentIndex::Sealed(None),
                    txn_index,
                };
                log.segments.insert(base, sealed);
                log.next_offset = next;
                continue;
            }
            if plan::is_gap(base, log.next_offset, &start) {
                tracing::warn!(dir = %dir.display(), base, next_offset = log.next_offset, "segment gap; truncating");
                log.first_doomed = Some(i);
                break;
            }
            let begin = start.position_in(base, file_size);
            let mut index = if begin > 0 {
                scan::existing_index_prefix(storage, dir, base, epoch, begin, start.replay_from)
                    .await?
            } else {
                ActiveIndex::empty()
            };
            let mut segment = Segment {
                base_offset: base,
                epoch,
                inherited: scope.inherited.contains_key(&base),
                file,
                size: begin,
                next_offset: if begin > 0 { start.replay_from } else { base },
                max_timestamp: index.times.last().map_or(-1, |e| e.timestamp),
                first_append_ms: None,
                index: SegmentIndex::Sealed(None),
                txn_index,
            };
            if let Some(entry) = index.times.last() {
                if log.max_timestamp.is_none_or(|(ts, _)| entry.timestamp > ts) {
                    log.max_timestamp = Some((entry.timestamp, base + u64::from(entry.rel_offset)));
                }
            }
            let next_base = bases.get(i + 1).copied();
            let stop = scan::scan_segment_from(
                &mut segment,
                &mut index,
                file_size,
                next_base,
                self.config,
                epochs,
                producers,
                start.replay_from,
                &mut log.max_timestamp,
            )
            .await?;
            segment.index = SegmentIndex::Active(index);
            let end = plan::segment_end(&Scanned {
                valid_len: segment.size,
                file_size,
                inherited: segment.inherited,
                next_offset: segment.next_offset,
                next_base,
            });
            if end.cut_file {
                segment
                    .file
                    .truncate(segment.size)
                    .await
                    .map_err(|e| EngineError::io("truncating a torn segment tail", e))?;
                tracing::info!(dir = %dir.display(), base, size = segment.size, ?stop, "truncated segment tail");
            } else if segment.size != file_size {
                tracing::info!(dir = %dir.display(), base, size = segment.size, ?stop, "inherited segment ends early");
            }
            log.next_offset = segment.next_offset;
            if end.seal {
                let persisted = segment.seal_job().run(storage, dir).await?;
                segment.mark_sealed(persisted);
            }
            log.segments.insert(base, segment);
            if end.log_ends_here {
                log.first_doomed = Some(i + 1);
                break;
            }
        }
        Ok(log)
    }

    /// Deletes the segments after the end of a torn log; the last one kept becomes the
    /// active segment again.
    async fn remove_doomed(
        &self,
        doomed: &[u64],
        segments: &mut BTreeMap<u64, Segment>,
    ) -> Result<()> {
        let (storage, dir, epoch) = (self.storage, self.dir, self.scope.epoch);
        for &base in doomed {
            tracing::warn!(dir = %dir.display(), base, "deleting segment after a torn log");
            segment::remove_files(storage, dir, base, epoch).await?;
        }
        storage.sync_dir(dir).await?;
        if let Some(last) = segments.values_mut().next_back() {
            if matches!(last.index, SegmentIndex::Sealed(_)) {
                last.index =
                    SegmentIndex::Active(scan::rebuild_full_index(last, self.config).await?);
            }
        }
        Ok(())
    }

    /// Ends an inherited last segment, which a stale leader may still append to, so that
    /// the appends go to a file of the log's own epoch (see [`crate::fence`];
    /// [`plan::tail_action`] decides which way):
    /// - adopted: its counted bytes are copied to a new file renamed over the segment's
    ///   name at this epoch; the caller makes both durable (a volume barrier) before the
    ///   claim record lists the segment as adopted. It stays the active segment; the file
    ///   the older epochs name is left as it was;
    /// - sealed: it is fdatasync'd (what recovery read from it may have been written but
    ///   not yet synced by its writer), gets index files of its own (without truncating
    ///   it), and a new segment starts at `next_offset`;
    /// - dropped when empty, so that no two segments share a base, and a new one starts.
    async fn start_own_segment(
        &self,
        segments: &mut BTreeMap<u64, Segment>,
        next_offset: u64,
    ) -> Result<()> {
        let (storage, dir, epoch) = (self.storage, self.dir, self.scope.epoch);
        let action = match segments.values().next_back() {
            Some(last) => plan::tail_action(last.inherited, last.size),
            None => TailAction::Keep,
        };
        if action == TailAction::Keep {
            return Ok(());
        }
        let Some((base, mut last)) = segments.pop_last() else {
            return Ok(());
        };
        match action {
            TailAction::Keep => {}
            TailAction::Adopt => {
                let path = segment::log_path(dir, base, epoch);
                let _ = last.file.close().await;
                // Only the counted bytes, which the scan validated: what a stale leader
                // appended after them is left out (its bytes inside them are the same
                // bytes again).
                storage.replace_with_copy(&path, last.size).await?;
                last.file = storage.open_log_file(&path, false).await?;
                last.inherited = false;
                segments.insert(base, last);
                return Ok(());
            }
            TailAction::SealAndStartOwn | TailAction::DropAndStartOwn => {
                last.file
                    .fdatasync()
                    .await
                    .map_err(|e| EngineError::io("syncing an inherited segment", e))?;
                if action == TailAction::DropAndStartOwn {
                    let _ = last.file.close().await;
                    segment::remove_files(storage, dir, base, epoch).await?;
                } else {
                    let persisted = last.seal_job().run(storage, dir).await?;
                    last.mark_sealed(persisted);
                    segments.insert(base, last);
                }
            }
        }
        let own = Segment::create(storage, dir, next_offset, epoch).await?;
        storage.sync_dir(dir).await?;
        segments.insert(next_offset, own);
        Ok(())
    }

    /// Makes everything recovery kept durable (the active segment is fdatasync'd) and
    /// reads its partial last page back for the write-behind buffer. Returns the appender
    /// and the durable point: the log end, `next_offset`, at the end of the active segment.
    async fn open_appender(
        &self,
        segments: &BTreeMap<u64, Segment>,
        next_offset: u64,
    ) -> Result<(SegmentAppender, DurablePoint)> {
        let dir = self.dir;
        let Some(active) = segments.values().next_back() else {
            return Err(EngineError::Corrupt {
                what: dir.display().to_string(),
                detail: "no segment after recovery".into(),
            });
        };
        active
            .file
            .fdatasync()
            .await
            .map_err(|e| EngineError::io("syncing the recovered segment", e))?;
        let page_start = align_down(active.size);
        let partial_page = if active.size > page_start {
            let bytes = active
                .file
                .read_buffer(page_start, (active.size - page_start) as usize)
                .await
                .map_err(|e| EngineError::io("reading the last page", e))?;
            bytes.to_vec()
        } else {
            Vec::new()
        };
        if partial_page.len() as u64 != active.size - page_start {
            return Err(EngineError::Corrupt {
                what: dir.display().to_string(),
                detail: "last page shorter than the segment".into(),
            });
        }
        let appender = SegmentAppender::new(
            active.file.clone(),
            active.size,
            partial_page,
            self.config.write_chunk_bytes,
            self.config.preallocate_step,
        );
        let durable = DurablePoint {
            offset: next_offset,
            segment_base: active.base_offset,
            position: active.size,
        };
        Ok((appender, durable))
    }
}
