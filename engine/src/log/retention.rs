//! Moving the log start offset: retention by age and size, DeleteRecords, and the deletion
//! of whole segments below the start.

use crate::error::{EngineError, Result};
use crate::segment::Segment;

use super::PartitionLog;

impl PartitionLog {
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
}
