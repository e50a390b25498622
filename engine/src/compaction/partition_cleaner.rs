//! One cleaning pass over one partition log, as Kafka's `Cleaner.clean` does it: find the
//! cleanable dirty range, map its keys to their latest offsets, rewrite every sealed segment
//! up to the end of the mapped range, swap each in.
//!
//! - Cleanable: sealed segments (never the active one) whose batches are durable and below
//!   the last stable offset (no open transaction reaches into them), up to the first whose
//!   largest timestamp is younger than `min.compaction.lag.ms`.
//! - Dirty: what lies at or past the first dirty offset (where the previous pass stopped,
//!   kept across restarts and takeovers in the log's `cleaner-offset-checkpoint`,
//!   [`crate::compaction::cleaner_checkpoint`]; [`load_checkpoint`] reads it).
//! - The map covers the dirty range from its start for as many keys as fit in the dedupe
//!   buffer; it ends at a batch boundary. Records past its end are kept as they are. Records
//!   of aborted transactions are not mapped ([`crate::compaction::aborted_batches`]), and
//!   are dropped wherever the pass rewrites a segment.
//! - Segments are rewritten one for one, oldest first (each keeps its base offset and its
//!   next segment's base, so offsets never move and the log start never changes).
//! - A segment inherited from an older epoch is first rewritten without delete horizons,
//!   no longer than its counted length (and even when nothing else changes, if one of its
//!   tombstones lacks a horizon); the swap makes that copy the epoch's own file
//!   ([`crate::fence`], "Adopting a cleaned segment"), which is then cleaned again in the
//!   same pass with horizons, so its tombstones go `delete.retention.ms` after this pass
//!   like any other.
//! - When the pass ends, its end and the earliest horizon it kept are written to the
//!   checkpoint, after a fence check that follows its last swap.

use std::time::Duration;

use crate::compaction::batch_filter::FilterContext;
use crate::compaction::cleaner_checkpoint::{self, CleanerCheckpoint};
use crate::compaction::config::{CleanerConfig, CompactionConfig};
use crate::compaction::offset_map::OffsetMap;
use crate::compaction::records;
use crate::compaction::segment_batches::SegmentBatches;
use crate::compaction::segment_cleaner::{self, Target};
use crate::compaction::throttle::Throttle;
use crate::compression;
use crate::error::Result;
use crate::log::{CleanerView, SealedSegment};
use crate::PartitionLog;

/// How dirty a log is.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DirtyState {
    /// Bytes of cleanable segments wholly below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of cleanable segments at or past it.
    pub dirty_bytes: u64,
    /// The end of the cleanable range (the base of the first segment not cleanable).
    pub cleanable_end: u64,
    /// The largest timestamp of the first dirty segment (`max.compaction.lag.ms` is judged
    /// by it: once even it is older, the oldest dirty record is too).
    pub first_dirty_max_timestamp: Option<i64>,
}

impl DirtyState {
    /// Dirty bytes over cleanable bytes (0 when nothing is cleanable).
    pub fn ratio(&self) -> f64 {
        let total = self.clean_bytes + self.dirty_bytes;
        if total == 0 {
            0.0
        } else {
            self.dirty_bytes as f64 / total as f64
        }
    }

    /// Whether a pass is due: dirty enough, or dirty for too long.
    pub fn due(&self, config: &CompactionConfig, now_ms: i64) -> bool {
        if self.dirty_bytes == 0 {
            return false;
        }
        let overdue = match (config.max_compaction_lag, self.first_dirty_max_timestamp) {
            (Some(lag), Some(timestamp)) => timestamp <= now_ms - millis(lag),
            _ => false,
        };
        overdue || self.ratio() >= config.min_cleanable_dirty_ratio
    }
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

fn cleanable<'a>(
    view: &'a CleanerView,
    config: &CompactionConfig,
    now_ms: i64,
) -> &'a [SealedSegment] {
    let lag = millis(config.min_compaction_lag);
    let end = view
        .sealed
        .iter()
        .position(|s| lag > 0 && s.max_timestamp > now_ms.saturating_sub(lag))
        .unwrap_or(view.sealed.len());
    &view.sealed[..end]
}

fn dirty_state_of(
    view: &CleanerView,
    first_dirty: u64,
    config: &CompactionConfig,
    now_ms: i64,
) -> DirtyState {
    let mut state = DirtyState::default();
    for segment in cleanable(view, config, now_ms) {
        if segment.next_offset <= first_dirty {
            state.clean_bytes += segment.size;
        } else {
            state.dirty_bytes += segment.size;
            state
                .first_dirty_max_timestamp
                .get_or_insert(segment.max_timestamp);
        }
        state.cleanable_end = segment.next_offset;
    }
    state
}

/// How dirty `log` is, with the previous pass ending at `first_dirty`.
pub fn dirty_state(
    log: &PartitionLog,
    first_dirty: u64,
    config: &CompactionConfig,
    now_ms: i64,
) -> Result<DirtyState> {
    Ok(dirty_state_of(
        &log.cleaner_view()?,
        first_dirty,
        config,
        now_ms,
    ))
}

/// What a pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassOutcome {
    /// Where the next pass starts: the end of this pass's mapped range.
    pub cleaned_up_to: u64,
    /// Bytes read (map building and rewriting).
    pub bytes_read: u64,
    /// Bytes written (cleaned logs and their indexes).
    pub bytes_written: u64,
    /// Segments replaced.
    pub segments_swapped: usize,
    /// The earliest delete horizon of a batch the pass kept (a later pass after it drops
    /// that batch's tombstones).
    pub earliest_delete_horizon: Option<i64>,
}

/// Where `log`'s previous pass ended, from its checkpoint (see
/// [`crate::compaction::cleaner_checkpoint`] for when a value is not trusted): the
/// `first_dirty` of the next [`clean_log`], and the earliest delete horizon it kept.
pub async fn load_checkpoint(log: &PartitionLog) -> Result<CleanerCheckpoint> {
    let view = log.cleaner_view()?;
    let offsets = log.offsets();
    let stored = cleaner_checkpoint::read(&view.storage, &view.dir, view.epoch).await?;
    let trusted = match stored {
        Some(stored) if stored.cleaned_up_to > offsets.log_end_offset => {
            tracing::warn!(dir = %view.dir.display(), cleaned_up_to = stored.cleaned_up_to, log_end = offsets.log_end_offset, "cleaner checkpoint past the log end; the log is dirty from its start");
            None
        }
        other => other,
    };
    Ok(CleanerCheckpoint {
        epoch: view.epoch,
        cleaned_up_to: trusted
            .map_or(0, |t| t.cleaned_up_to)
            .max(offsets.log_start_offset),
        earliest_delete_horizon: trusted.and_then(|t| t.earliest_delete_horizon),
    })
}

/// Cleans `log` once from `first_dirty` (whatever its dirty ratio) and writes where it
/// ended to the log's cleaner checkpoint. `None` when no sealed segment is cleanable.
/// Fails with `Fenced` when a newer claim appeared before a swap or before the checkpoint.
pub async fn clean_log(
    log: &PartitionLog,
    first_dirty: u64,
    config: &CompactionConfig,
    cleaner: &CleanerConfig,
    throttle: &Throttle,
    now_ms: i64,
) -> Result<Option<PassOutcome>> {
    let view = log.cleaner_view()?;
    let Some(outcome) =
        clean_view(log, &view, first_dirty, config, cleaner, throttle, now_ms).await?
    else {
        return Ok(None);
    };
    // The checkpoint counts on the swaps above: they must have been made while this leader
    // still led (see the checkpoint's doc for why a takeover may then copy it).
    log.check_fence_for_cleaner().await?;
    cleaner_checkpoint::write(
        &view.storage,
        &view.dir,
        &CleanerCheckpoint {
            epoch: view.epoch,
            cleaned_up_to: outcome.cleaned_up_to,
            earliest_delete_horizon: outcome.earliest_delete_horizon,
        },
    )
    .await?;
    Ok(Some(outcome))
}

async fn clean_view(
    log: &PartitionLog,
    view: &CleanerView,
    first_dirty: u64,
    config: &CompactionConfig,
    cleaner: &CleanerConfig,
    throttle: &Throttle,
    now_ms: i64,
) -> Result<Option<PassOutcome>> {
    let segments = cleanable(view, config, now_ms);
    let dirty: Vec<&SealedSegment> = segments
        .iter()
        .filter(|s| s.next_offset > first_dirty)
        .collect();
    let Some(cleanable_end) = segments.last().map(|s| s.next_offset) else {
        return Ok(None);
    };
    // Nothing dirty: a pass with an empty map only drops tombstones whose delete horizon
    // has passed (Kafka cleans such a log too, whatever its dirty ratio).
    let mut outcome = PassOutcome::default();
    let mut map = OffsetMap::with_budget(cleaner.dedupe_buffer_bytes);
    let mut map_end = cleanable_end;
    'segments: for segment in &dirty {
        let mut reader = SegmentBatches::new(&segment.file, segment.size);
        outcome.bytes_read += segment.size;
        while let Some(stored) = reader.next(throttle).await? {
            let header = stored.header;
            // Markers have no keys; an aborted record never supersedes anything.
            if (header.next_offset() as u64) <= first_dirty
                || header.is_control()
                || view.aborted.contains(&header)
            {
                continue;
            }
            if !put_keys(
                &mut map,
                &stored.bytes,
                &header,
                first_dirty,
                cleaner.max_batch_bytes,
            ) {
                map_end = header.base_offset as u64;
                break 'segments;
            }
            glommio::yield_if_needed().await;
        }
    }
    if !dirty.is_empty() && map_end <= first_dirty {
        tracing::warn!(dir = %view.dir.display(), first_dirty, "dedupe buffer too small for one batch's keys; not cleaning");
        return Ok(None);
    }
    let context = FilterContext {
        map: &map,
        map_end,
        now_ms,
        delete_retention_ms: millis(config.delete_retention),
        max_batch_bytes: cleaner.max_batch_bytes,
        may_set_horizon: true,
        aborted: &view.aborted,
    };
    let target = Target {
        storage: &view.storage,
        dir: &view.dir,
        epoch: view.epoch,
        index_interval_bytes: log.config().index_interval_bytes,
    };
    for segment in segments.iter().take_while(|s| s.base_offset < map_end) {
        let mut current = segment.clone();
        loop {
            let context = FilterContext {
                may_set_horizon: !current.inherited,
                ..context
            };
            let cleaned = segment_cleaner::clean_segment(
                &target,
                &current,
                &context,
                &view.producer_last,
                throttle,
            )
            .await?;
            outcome.bytes_read += cleaned.bytes_read;
            outcome.bytes_written += cleaned.bytes_written;
            outcome.earliest_delete_horizon = match (
                outcome.earliest_delete_horizon,
                cleaned.earliest_delete_horizon,
            ) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if cleaned.gave_up {
                // See below: nothing later is cleaned in this pass.
                outcome.cleaned_up_to = first_dirty;
                return Ok(Some(outcome));
            }
            let Some(result) = cleaned.cleaned else {
                break;
            };
            let Some(installed) = log.install_cleaned(&current, &result).await? else {
                // The segment went or changed (retention). Later segments are not cleaned
                // in this pass: a tombstone there must not get its delete horizon while an
                // older value of its key may have stayed in this one.
                outcome.cleaned_up_to = first_dirty;
                return Ok(Some(outcome));
            };
            outcome.segments_swapped += 1;
            if !cleaned.horizon_withheld || installed.inherited {
                break;
            }
            // Adopted: the copy is this epoch's own file now, and may grow. Clean it again
            // so its tombstones get their horizons in this pass.
            current = installed;
        }
    }
    outcome.cleaned_up_to = map_end;
    Ok(Some(outcome))
}

/// Puts the keys of one batch's records at or past `first_dirty` into the map. False when
/// the map is full (the batch must then end the mapped range; what was put of it names
/// records that are kept anyway, being at or past the range's end). A batch whose records
/// cannot be read adds nothing: its keys stay unknown, so nothing older is dropped for them.
fn put_keys(
    map: &mut OffsetMap,
    stored: &[u8],
    header: &crate::batch::BatchHeader,
    first_dirty: u64,
    max_batch_bytes: usize,
) -> bool {
    let Some(codec) = header.codec() else {
        return true;
    };
    let section = &stored[crate::batch::BATCH_HEADER_LEN..header.total_len()];
    let mut decompressed = Vec::new();
    if compression::decompress(codec, section, &mut decompressed, max_batch_bytes).is_err() {
        return true;
    }
    let Ok(all) = records::walk(&decompressed, header.records_count) else {
        return true;
    };
    for record in all {
        let offset = header.base_offset as u64 + record.offset_delta.max(0) as u64;
        if offset < first_dirty {
            continue;
        }
        if let Some(key) = record.key {
            if !map.put(key, offset) {
                return false;
            }
        }
    }
    true
}
