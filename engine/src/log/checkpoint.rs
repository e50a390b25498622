//! Checkpoints: the active index entries, a producer-state snapshot and the leader epochs,
//! then the recovery point that counts on them (formats in [`crate::checkpoint`]).

use crate::checkpoint::RecoveryPoint;
use crate::error::{EngineError, Result};
use crate::producer_state::snapshot_file_name;
use crate::recovery;

use super::{leader_epoch_file, recovery_point_file, PartitionLog};

/// Producer-state snapshots kept on disk (the newest and the one before it).
const SNAPSHOTS_KEPT: usize = 2;

impl PartitionLog {
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
    pub(super) async fn flush_appended(&self) -> Result<()> {
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
                // Every index entry is below the point (the flush above covered the
                // markers) and is written before it: the active segment's just below, the
                // sealed ones' by their seals, which end before the point is written.
                let with_entries: Vec<u64> = state
                    .segments
                    .values()
                    .filter(|s| !s.txn_index.entries().is_empty())
                    .map(|s| s.base_offset)
                    .collect();
                (
                    point,
                    state.producers.encode_snapshot(point.offset, &with_entries),
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
}
