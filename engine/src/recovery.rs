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
//!    seen. The whole log is validated instead when the checkpoint is missing or corrupt,
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

use std::path::Path;

use crate::aligned_buffer::align_down;
use crate::batch::{self, ScanStop};
use crate::checkpoint::RecoveryPoint;
use crate::config::LogConfig;
use crate::error::{EngineError, Result};
use crate::leader_epoch::LeaderEpochCache;
use crate::log::{leader_epoch_file, recovery_point_file, DurablePoint, LogState};
use crate::offset_index::{OffsetIndex, OffsetIndexView};
use crate::producer_state::{parse_snapshot_file_name, ProducerStateTable};
use crate::segment::{self, ActiveIndex, Segment, SegmentIndex};
use crate::segment_appender::SegmentAppender;
use crate::storage::{LogFile, Storage};
use crate::tail_cache::TailCache;
use crate::time_index::{TimeIndex, TimeIndexView};

/// Bytes read per step while scanning a segment.
const SCAN_WINDOW: usize = 8 << 20;

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

struct Listing {
    segment_bases: Vec<u64>,
    snapshots: Vec<u64>,
}

async fn list(storage: &Storage, dir: &Path, epoch: u32) -> Result<Listing> {
    let mut listing = Listing {
        segment_bases: Vec::new(),
        snapshots: Vec::new(),
    };
    for name in storage.list_dir(dir).await? {
        if let Some(base) = segment::parse_file_name(&name, epoch, "log") {
            listing.segment_bases.push(base);
        } else if let Some(offset) = parse_snapshot_file_name(&name, epoch) {
            listing.snapshots.push(offset);
        } else if name.ends_with(".tmp") && crate::fence::file_epoch(&name) == epoch {
            // Another epoch's temporary file may be one its (stale) writer is writing.
            storage.remove(&dir.join(&name)).await?;
        }
    }
    listing.segment_bases.sort_unstable();
    listing.snapshots.sort_unstable();
    Ok(listing)
}

/// Removes all but the newest `keep` producer-state snapshots.
pub(crate) async fn remove_old_snapshots(
    storage: &Storage,
    dir: &Path,
    keep: usize,
    epoch: u32,
) -> Result<()> {
    let listing = list(storage, dir, epoch).await?;
    let excess = listing.snapshots.len().saturating_sub(keep);
    for offset in &listing.snapshots[..excess] {
        let name = crate::producer_state::snapshot_file_name(*offset, epoch);
        storage.remove(&dir.join(name)).await?;
    }
    Ok(())
}

/// Loads the newest valid snapshot at or below `limit`.
async fn load_snapshot(
    storage: &Storage,
    dir: &Path,
    snapshots: &[u64],
    limit: u64,
    epoch: u32,
) -> Result<Option<(u64, ProducerStateTable)>> {
    for offset in snapshots.iter().rev().filter(|o| **o <= limit) {
        let name = crate::producer_state::snapshot_file_name(*offset, epoch);
        if let Some(bytes) = storage.read_small(&dir.join(&name)).await? {
            match ProducerStateTable::decode_snapshot(&bytes) {
                Ok((covered, table)) if covered == *offset => return Ok(Some((covered, table))),
                Ok(_) | Err(_) => {
                    tracing::warn!(dir = %dir.display(), name, "ignoring unreadable producer snapshot");
                }
            }
        }
    }
    Ok(None)
}

/// Recovers the log in `dir`; see the module documentation.
pub(crate) async fn recover(
    storage: &Storage,
    dir: &Path,
    config: &LogConfig,
    scope: &FileScope,
) -> Result<LogState> {
    let epoch = scope.epoch;
    crate::compaction::swap::finish_interrupted(storage, dir, epoch).await?;
    let listing = list(storage, dir, epoch).await?;
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
    // Every checkpoint writes the epochs before the recovery point, and they cover the log
    // up to it: when they are missing or corrupt, only a scan of the whole log rebuilds the
    // epochs below the point.
    let epochs_lost = checkpoint.is_some() && epochs.is_none();
    if epochs_lost {
        tracing::warn!(dir = %dir.display(), "leader epochs missing or corrupt; recovering the whole log");
    }
    let mut epochs = epochs.unwrap_or_default();

    let mut bases = listing.segment_bases.clone();
    if bases.is_empty() {
        let base = checkpoint.map_or(0, |c| c.log_start_offset.max(c.offset));
        Segment::create(storage, dir, base, epoch).await?;
        storage.sync_dir(dir).await?;
        bases.push(base);
    }
    let first_base = bases[0];
    let log_start_offset = checkpoint.map_or(first_base, |c| c.log_start_offset.max(first_base));

    // Where the validating scan starts: the recovery point, unless the producer snapshot is
    // older (then from the start of the segment holding the snapshot's offset).
    let point = checkpoint.filter(|c| c.offset >= first_base && !epochs_lost);
    let snapshot = match point {
        Some(p) => load_snapshot(storage, dir, &listing.snapshots, p.offset, epoch).await?,
        None => None,
    };
    let located = match (point, &snapshot) {
        (Some(p), Some((snapshot_offset, _))) if *snapshot_offset == p.offset => {
            let (segment, position) = locate_recovery_point(&bases, &p);
            Some((segment, position, p.offset))
        }
        (Some(_), Some((snapshot_offset, _))) => Some((
            segment_holding(&bases, *snapshot_offset),
            0,
            *snapshot_offset,
        )),
        _ => None,
    };
    // A recovery point past the end of its segment's file names bytes that are no longer
    // there (the file was cut short behind our back), so nothing it vouches for can be
    // trusted: validate the whole log instead.
    let located = match located {
        Some((segment, position, _))
            if position > segment_file_size(storage, dir, segment, scope).await? =>
        {
            tracing::warn!(dir = %dir.display(), segment, position, "segment shorter than its recovery point; recovering the whole log");
            None
        }
        other => other,
    };
    let (mut scan_segment, mut scan_position, replay_from, snapshot) = match located {
        Some((segment, position, replay_from)) => (segment, position, replay_from, snapshot),
        None => (first_base, 0, first_base, None),
    };
    // Indexes are derived data. Those of the segments recovery does not scan are trusted,
    // so when one of them is missing or damaged the scan starts at that segment instead,
    // which rebuilds it.
    // The same goes for a segment whose file does not end the way sealing leaves it. The
    // files opened to check that are kept for the segments below.
    let mut trusted = std::collections::BTreeMap::new();
    for (i, &base) in bases.iter().enumerate() {
        if base > scan_segment || (base == scan_segment && scan_position == 0) {
            break;
        }
        let loaded = segment::SealedIndex::load(storage, dir, base, epoch).await?;
        if !loaded.is_intact() {
            // A takeover leaves the indexes of a small tail it adopts behind on purpose
            // (`crate::takeover`): the scan it is given anyway rebuilds them.
            if !(base == scan_segment && loaded.is_absent()) {
                tracing::warn!(dir = %dir.display(), base, "missing or damaged segment index; rebuilding it");
            }
            scan_segment = base;
            scan_position = 0;
            break;
        }
        if base == scan_segment {
            break;
        }
        let (file, size) = open_sized(storage, dir, base, scope).await?;
        if !ends_sealed(&file, size, bases[i + 1], &loaded).await? {
            tracing::warn!(dir = %dir.display(), base, "segment below the recovery point is not sealed; scanning it");
            let _ = file.close().await;
            scan_segment = base;
            scan_position = 0;
            break;
        }
        trusted.insert(base, (loaded, file, size));
    }
    let mut producers = snapshot.map(|(_, table)| table).unwrap_or_default();
    let scan_start_offset = if scan_position == 0 {
        scan_segment
    } else {
        replay_from
    };
    epochs.truncate_from(scan_start_offset);

    let mut state_segments = std::collections::BTreeMap::new();
    let mut max_timestamp: Option<(i64, u64)> = None;
    let mut next_offset = first_base;
    let mut truncated_at: Option<usize> = None;

    for (i, &base) in bases.iter().enumerate() {
        let (file, file_size, trusted_index) = match trusted.remove(&base) {
            Some((loaded, file, size)) => (file, size, Some(loaded)),
            None => {
                let (file, size) = open_sized(storage, dir, base, scope).await?;
                (file, size, None)
            }
        };
        if base < scan_segment {
            let next = bases.get(i + 1).copied().unwrap_or(base);
            let loaded = match trusted_index {
                Some(loaded) => loaded,
                None => segment::SealedIndex::load(storage, dir, base, epoch).await?,
            };
            let (max_ts, max_ts_offset) = match loaded.last_time_entry() {
                Some((ts, rel)) => (ts, base + u64::from(rel)),
                None => (-1, next.saturating_sub(1)),
            };
            if max_timestamp.is_none_or(|(ts, _)| max_ts > ts) && max_ts >= 0 {
                max_timestamp = Some((max_ts, max_ts_offset));
            }
            let mut sealed = Segment {
                base_offset: base,
                epoch,
                inherited: scope.inherited.contains_key(&base),
                file,
                size: file_size,
                next_offset: next,
                max_timestamp: max_ts,
                first_append_ms: None,
                index: SegmentIndex::Sealed(None),
            };
            sealed.install_sealed_index(loaded);
            state_segments.insert(base, sealed);
            next_offset = next;
            continue;
        }
        if base != next_offset && base != scan_segment {
            // A gap between segments cannot come from our own writes: stop here.
            tracing::warn!(dir = %dir.display(), base, next_offset, "segment gap; truncating");
            truncated_at = Some(i);
            break;
        }
        let start = if base == scan_segment {
            scan_position.min(file_size)
        } else {
            0
        };
        let mut index = if start > 0 {
            existing_index_prefix(storage, dir, base, epoch, start, replay_from).await?
        } else {
            ActiveIndex::empty()
        };
        let mut segment = Segment {
            base_offset: base,
            epoch,
            inherited: scope.inherited.contains_key(&base),
            file,
            size: start,
            next_offset: if start > 0 { replay_from } else { base },
            max_timestamp: index.times.last().map_or(-1, |e| e.timestamp),
            first_append_ms: None,
            index: SegmentIndex::Sealed(None),
        };
        if let Some(entry) = index.times.last() {
            if max_timestamp.is_none_or(|(ts, _)| entry.timestamp > ts) {
                max_timestamp = Some((entry.timestamp, base + u64::from(entry.rel_offset)));
            }
        }
        let stop = scan_segment_from(
            &mut segment,
            &mut index,
            file_size,
            bases.get(i + 1).copied(),
            config,
            &mut epochs,
            &mut producers,
            replay_from,
            &mut max_timestamp,
        )
        .await?;
        segment.index = SegmentIndex::Active(index);
        let clean_end = segment.size == file_size;
        if !clean_end && segment.inherited {
            // Never cut a file a stale leader may still write: what counts is recorded in
            // the claim instead (see `crate::fence`).
            tracing::info!(dir = %dir.display(), base, size = segment.size, ?stop, "inherited segment ends early");
        } else if !clean_end {
            segment
                .file
                .truncate(segment.size)
                .await
                .map_err(|e| EngineError::io("truncating a torn segment tail", e))?;
            tracing::info!(dir = %dir.display(), base, size = segment.size, ?stop, "truncated segment tail");
        }
        next_offset = segment.next_offset;
        let next_base = bases.get(i + 1).copied();
        if next_base.is_some() {
            // Rewrite this segment's indexes completely and seal it.
            let job = segment.seal_job();
            job.run(storage, dir).await?;
            segment.mark_sealed();
        }
        state_segments.insert(base, segment);
        // An earlier segment whose batches end exactly at the next segment's base holds
        // everything it ever held; what followed them was padding a seal had not cut yet.
        // Ending anywhere else, it lost acknowledged-or-not batches the later segments
        // would have to follow, so the log ends here.
        if next_base.is_some_and(|next_base| next_offset != next_base) {
            truncated_at = Some(i + 1);
            break;
        }
    }
    if let Some(first_doomed) = truncated_at {
        for &base in &bases[first_doomed..] {
            tracing::warn!(dir = %dir.display(), base, "deleting segment after a torn log");
            segment::remove_files(storage, dir, base, epoch).await?;
        }
        storage.sync_dir(dir).await?;
        // The last kept segment becomes the active one again.
        if let Some(last) = state_segments.values_mut().next_back() {
            if matches!(last.index, SegmentIndex::Sealed(_)) {
                last.index = SegmentIndex::Active(rebuild_full_index(last, config).await?);
            }
        }
    }

    producers.truncate_to(next_offset as i64);
    epochs.truncate_from(next_offset);
    if state_segments
        .values()
        .next_back()
        .is_some_and(|last| last.inherited)
    {
        start_own_segment(storage, dir, &mut state_segments, next_offset, epoch).await?;
    }
    let Some(active) = state_segments.values().next_back() else {
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
        config.write_chunk_bytes,
        config.preallocate_step,
    );
    let durable = DurablePoint {
        offset: next_offset,
        segment_base: active.base_offset,
        position: active.size,
    };
    Ok(LogState {
        segments: state_segments,
        appender,
        next_offset,
        log_start_offset: log_start_offset.min(next_offset),
        durable,
        producers,
        epochs,
        tail_cache: TailCache::new(config.tail_cache_bytes),
        poisoned: None,
        fenced: None,
        closed: false,
        max_timestamp,
        segment_swaps: 0,
    })
}

/// An inherited last segment whose counted bytes are at most this many is copied into a
/// file of the epoch's own ([`start_own_segment`]) rather than kept beside a new segment:
/// the copy costs about a page-cache read and write of this much, and saves the partition a
/// second open segment file (one descriptor per idle partition instead of two) and the
/// seal's four fsyncs.
pub(crate) const ADOPT_TAIL_MAX_BYTES: u64 = 1 << 20;

/// Ends an inherited last segment, which a stale leader may still append to, so that the
/// appends go to a file of `epoch`'s own (see [`crate::fence`]):
/// - one of at most [`ADOPT_TAIL_MAX_BYTES`] counted bytes is adopted: those bytes are
///   copied to a new file and renamed over the segment's epoch-`epoch` name; the caller
///   makes both durable (a volume barrier) before the claim record lists the segment as
///   adopted. It stays the active segment; the file the older epochs name is left as it was;
/// - a longer one is fdatasync'd (what recovery read from it may have been written but not
///   yet synced by its writer), gets index files of its own (it is sealed, without
///   truncating it), and a new segment starts at `next_offset`;
/// - an empty one is dropped, so that no two segments share a base, and a new one starts.
async fn start_own_segment(
    storage: &Storage,
    dir: &Path,
    segments: &mut std::collections::BTreeMap<u64, Segment>,
    next_offset: u64,
    epoch: u32,
) -> Result<()> {
    let Some((base, mut last)) = segments.pop_last() else {
        return Ok(());
    };
    if last.size > 0 && last.size <= ADOPT_TAIL_MAX_BYTES {
        let path = segment::log_path(dir, base, epoch);
        let _ = last.file.close().await;
        // Only the counted bytes, which the scan validated: what a stale leader appended
        // after them is left out (its bytes inside them are the same bytes again).
        storage.replace_with_copy(&path, last.size).await?;
        last.file = storage.open_log_file(&path, false).await?;
        last.inherited = false;
        segments.insert(base, last);
        return Ok(());
    }
    last.file
        .fdatasync()
        .await
        .map_err(|e| EngineError::io("syncing an inherited segment", e))?;
    if last.size == 0 {
        let _ = last.file.close().await;
        segment::remove_files(storage, dir, base, epoch).await?;
    } else {
        last.seal_job().run(storage, dir).await?;
        last.mark_sealed();
        segments.insert(base, last);
    }
    let own = Segment::create(storage, dir, next_offset, epoch).await?;
    storage.sync_dir(dir).await?;
    segments.insert(next_offset, own);
    Ok(())
}

/// The segment and byte position a recovery point names. The position is in the segment
/// that held the durable end when the checkpoint was taken. When that end was also the end
/// of the segment and a roll followed, the point's offset is now the next segment's base
/// while its position is still in the earlier segment (a segment is never rolled while
/// empty, so position 0 at a base offset means the start of that segment).
fn locate_recovery_point(bases: &[u64], point: &RecoveryPoint) -> (u64, u64) {
    let holding = bases
        .iter()
        .copied()
        .rfind(|b| *b < point.offset || (*b == point.offset && point.position == 0));
    match holding {
        Some(base) => (base, point.position),
        // The segment the point ended was deleted since: the log now starts at the point.
        None => (bases[0], 0),
    }
}

async fn segment_file_size(
    storage: &Storage,
    dir: &Path,
    base: u64,
    scope: &FileScope,
) -> Result<u64> {
    let (file, size) = open_sized(storage, dir, base, scope).await?;
    let _ = file.close().await;
    Ok(size)
}

fn segment_holding(bases: &[u64], offset: u64) -> u64 {
    bases
        .iter()
        .copied()
        .rfind(|b| *b <= offset)
        .unwrap_or(bases[0])
}

/// The persisted index entries of a segment that describe batches below byte `position`,
/// which holds offset `offset`.
async fn existing_index_prefix(
    storage: &Storage,
    dir: &Path,
    base: u64,
    epoch: u32,
    position: u64,
    offset: u64,
) -> Result<ActiveIndex> {
    let mut index = ActiveIndex::empty();
    if let Some(bytes) = storage
        .map_file(&segment::index_path(dir, base, epoch))
        .await?
    {
        index.offsets = OffsetIndex::from_bytes(&bytes);
        index
            .offsets
            .truncate_to_position(position.min(u32::MAX as u64) as u32);
    }
    if let Some(bytes) = storage
        .map_file(&segment::time_index_path(dir, base, epoch))
        .await?
    {
        index.times = TimeIndex::from_bytes(&bytes);
        // Kept: entries for batches wholly below `offset`, which include the checkpoint's
        // entry for the largest timestamp so far.
        let rel_offset = offset.saturating_sub(base).min(u32::MAX as u64) as u32;
        index.times.truncate_to_offset(rel_offset);
    }
    index.persisted_offsets = index.offsets.len();
    index.persisted_times = index.times.len();
    // The batch after the last kept entry starts a new interval count.
    index.bytes_since_entry = 0;
    if index.offsets.is_empty() {
        index.bytes_since_entry = u64::MAX;
    }
    let _ = (OffsetIndexView::new(&[]), TimeIndexView::new(&[]));
    Ok(index)
}

/// Rebuilds the whole index of a segment by scanning it (used when a segment that was
/// sealed becomes active again after later segments were deleted).
async fn rebuild_full_index(segment: &mut Segment, config: &LogConfig) -> Result<ActiveIndex> {
    let mut index = ActiveIndex::empty();
    let mut epochs = LeaderEpochCache::default();
    let mut producers = ProducerStateTable::default();
    let mut max_timestamp = None;
    let size = segment.size;
    segment.size = 0;
    segment.next_offset = segment.base_offset;
    scan_segment_from(
        segment,
        &mut index,
        size,
        None,
        config,
        &mut epochs,
        &mut producers,
        u64::MAX,
        &mut max_timestamp,
    )
    .await?;
    Ok(index)
}

/// Whether segment `base`, which recovery is about to trust as sealed, ends the way sealing
/// leaves it: from its last offset-index entry to the end of the file there are only whole,
/// intact batches, and the last one ends at `next_base`. A segment whose seal never finished
/// (zero padding or preallocated space after its batches) fails this and is scanned
/// instead. Reads at most one index interval and a batch, so opening stays cheap.
async fn ends_sealed(
    file: &LogFile,
    size: u64,
    next_base: u64,
    index: &segment::SealedIndex,
) -> Result<bool> {
    let start = index.last_entry_position().unwrap_or(0).min(size);
    if size - start > SCAN_WINDOW as u64 {
        return Ok(false);
    }
    let bytes = file
        .read_buffer(start, (size - start) as usize)
        .await
        .map_err(|e| EngineError::io("reading a segment's last batches", e))?;
    let mut scan = batch::scan_batches(&bytes, start);
    let end = scan.by_ref().last().map(|found| found.header.next_offset());
    Ok(bytes.len() as u64 == size - start
        && scan.stop() == Some(&ScanStop::EndOfData)
        && end == Some(next_base as i64))
}

/// Opens segment `base`'s log file and reads its size: for an inherited segment, at most
/// the length its claim recorded (an older leader may have appended after it).
async fn open_sized(
    storage: &Storage,
    dir: &Path,
    base: u64,
    scope: &FileScope,
) -> Result<(LogFile, u64)> {
    let file = storage
        .open_log_file(&segment::log_path(dir, base, scope.epoch), false)
        .await?;
    let size = file
        .size()
        .await
        .map_err(|e| EngineError::io("sizing a segment", e))?;
    let bound = scope.inherited.get(&base).copied().flatten();
    Ok((file, bound.map_or(size, |bound| bound.min(size))))
}

/// A batch claiming more than this is treated as corruption rather than read.
const MAX_SCANNED_BATCH: usize = 256 << 20;

/// Validates batches from `segment.size` to `file_size`, updating the segment, its index
/// and the log-wide state for each; stops at the first batch that is not intact.
///
/// Offsets must be dense in the last segment. In an earlier one (`next_base` known) they
/// may have gaps that compaction left (`crate::compaction`), but must increase and stay
/// below the next segment's base.
#[allow(clippy::too_many_arguments)]
async fn scan_segment_from(
    segment: &mut Segment,
    index: &mut ActiveIndex,
    file_size: u64,
    next_base: Option<u64>,
    config: &LogConfig,
    epochs: &mut LeaderEpochCache,
    producers: &mut ProducerStateTable,
    replay_from: u64,
    max_timestamp: &mut Option<(i64, u64)>,
) -> Result<ScanStop> {
    let mut window = SCAN_WINDOW;
    loop {
        let position = segment.size;
        if position >= file_size {
            return Ok(ScanStop::EndOfData);
        }
        let len = (window as u64).min(file_size - position) as usize;
        let bytes = segment
            .file
            .read_buffer(position, len)
            .await
            .map_err(|e| EngineError::io("scanning a segment", e))?;
        let at_file_end = position + bytes.len() as u64 >= file_size;
        let mut scan = batch::scan_batches(&bytes, position);
        for found in scan.by_ref() {
            let header = found.header;
            // `baseOffset` is outside the batch CRC: density is what vouches for it.
            let in_order = match next_base {
                None => header.base_offset as u64 == segment.next_offset,
                Some(next_base) => {
                    header.base_offset as u64 >= segment.next_offset
                        && (header.next_offset() as u64) <= next_base
                }
            };
            if header.base_offset < 0 || !in_order {
                return Ok(ScanStop::Corrupt(batch::BatchError::InvalidRecords(
                    "offsets are not dense",
                )));
            }
            index.record(
                segment.base_offset,
                &header,
                found.position,
                segment.max_timestamp.max(header.max_timestamp),
                config.index_interval_bytes,
            );
            segment.size = found.position + found.total_len as u64;
            segment.next_offset = header.next_offset() as u64;
            segment.max_timestamp = segment.max_timestamp.max(header.max_timestamp);
            epochs.assign(header.partition_leader_epoch, header.base_offset as u64);
            if header.base_offset as u64 >= replay_from {
                producers.record(
                    header.producer_id,
                    header.producer_epoch,
                    header.base_sequence,
                    header.last_sequence(),
                    header.base_offset,
                    header.last_offset(),
                    header.max_timestamp,
                );
            }
            if max_timestamp.is_none_or(|(ts, _)| header.max_timestamp > ts) {
                *max_timestamp = Some((header.max_timestamp, header.last_offset() as u64));
            }
        }
        let stop = scan.stop().cloned().unwrap_or(ScanStop::EndOfData);
        match stop {
            ScanStop::EndOfData if !at_file_end => {}
            ScanStop::TornTail { needed, .. } if !at_file_end => {
                // The window ended inside a batch. Read on from its start, widening the
                // window when one batch is larger than it.
                let batch_end = segment.size.saturating_add(needed as u64);
                if batch_end > file_size || needed > MAX_SCANNED_BATCH {
                    return Ok(stop);
                }
                window = window.max(needed);
            }
            other => return Ok(other),
        }
    }
}
