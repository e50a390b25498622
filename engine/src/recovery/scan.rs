//! Reading segments during recovery: the validating scan of batches (rebuilding index
//! entries, leader epochs and producer state), the cheap check that a segment trusted as
//! sealed ends the way sealing leaves it, and the index prefix kept when a scan starts
//! inside a segment.

use std::path::Path;

use crate::batch::{self, ScanStop};
use crate::config::LogConfig;
use crate::error::{EngineError, Result};
use crate::leader_epoch::LeaderEpochCache;
use crate::offset_index::OffsetIndex;
use crate::producer_state::ProducerStateTable;
use crate::segment::{self, ActiveIndex, Segment};
use crate::storage::{LogFile, Storage};
use crate::time_index::TimeIndex;

use super::FileScope;

/// Bytes read per step while scanning a segment.
const SCAN_WINDOW: usize = 8 << 20;

/// The size of segment `base`'s file as recovery counts it ([`open_sized`]).
pub(super) async fn segment_file_size(
    storage: &Storage,
    dir: &Path,
    base: u64,
    scope: &FileScope,
) -> Result<u64> {
    let (file, size) = open_sized(storage, dir, base, scope).await?;
    let _ = file.close().await;
    Ok(size)
}

/// The persisted index entries of a segment that describe batches below byte `position`,
/// which holds offset `offset`.
pub(super) async fn existing_index_prefix(
    storage: &Storage,
    dir: &Path,
    base: u64,
    epoch: u32,
    position: u64,
    offset: u64,
) -> Result<ActiveIndex> {
    let mut index = ActiveIndex::empty();
    if let Some(bytes) =
        segment::read_index_file(storage, &segment::index_path(dir, base, epoch)).await?
    {
        index.offsets = OffsetIndex::from_bytes(&bytes);
        index
            .offsets
            .truncate_to_position(position.min(u32::MAX as u64) as u32);
    }
    if let Some(bytes) =
        segment::read_index_file(storage, &segment::time_index_path(dir, base, epoch)).await?
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
    Ok(index)
}

/// Rebuilds the whole index of a segment by scanning it (used when a segment that was
/// sealed becomes active again after later segments were deleted).
pub(super) async fn rebuild_full_index(
    segment: &mut Segment,
    config: &LogConfig,
) -> Result<ActiveIndex> {
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
pub(super) async fn ends_sealed(
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
pub(super) async fn open_sized(
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
pub(super) async fn scan_segment_from(
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
                // Transactions a marker below `replay_from` aborted are in the index file
                // already (kept by the caller); from here on they are rebuilt.
                let at = (found.position - position) as usize;
                let records = &bytes[at + batch::BATCH_HEADER_LEN..at + found.total_len];
                let completed = producers.replay_stored_batch(&header, records);
                if let Some(aborted) = completed.and_then(|txn| txn.aborted_txn()) {
                    segment.txn_index.push(aborted);
                }
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
