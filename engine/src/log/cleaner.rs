//! The log cleaner's side of a partition log: a view of its sealed segments, the fence
//! check before a swap, and the swap of a cleaned segment.

use std::path::PathBuf;

use crate::error::{EngineError, Result};
use crate::segment::{self, Segment};
use crate::storage::Storage;

use super::PartitionLog;

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
    /// The log's aborted transactions (their data is dropped, its keys not mapped).
    pub aborted: crate::compaction::aborted_batches::AbortedBatches,
}

/// The cleaner's side of the log: a view of its sealed segments and the swap of a cleaned
/// one (the files' protocol is in [`crate::compaction::swap`]).
impl PartitionLog {
    pub(crate) fn cleaner_view(&self) -> Result<CleanerView> {
        let state = self.shared.state.borrow();
        state.check_usable()?;
        let active_base = state.active()?.base_offset;
        // Kafka's cleaner stops at the first uncleanable offset, at most the last stable
        // offset: records of an open transaction may still be aborted, so no key may be
        // mapped to one nor any record dropped for one.
        let cleanable_end = state.last_stable_offset();
        let sealed = state
            .segments
            .values()
            .filter(|s| {
                s.base_offset != active_base && matches!(s.index, segment::SegmentIndex::Sealed(_))
            })
            .take_while(|s| s.next_offset <= cleanable_end)
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
        let aborted = crate::compaction::aborted_batches::AbortedBatches::from_entries(
            state.segments.values().flat_map(|s| s.txn_index.entries()),
        );
        Ok(CleanerView {
            storage: self.shared.storage.clone(),
            dir: self.shared.dir.clone(),
            epoch: self.shared.epoch,
            sealed,
            producer_last,
            aborted,
        })
    }

    /// Fails with [`EngineError::Fenced`] when a newer claim exists (at a fence epoch), and
    /// fences the log from then on: the cleaner's check before a swap, and before it writes
    /// its checkpoint.
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
        // The swap leaves the transaction index file alone: offsets do not move.
        let txn_index = state
            .segments
            .get(&base)
            .map(|s| s.txn_index.clone())
            .unwrap_or_default();
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
                txn_index,
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
