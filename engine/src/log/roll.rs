//! Rolling and sealing: a new active segment starts at the log end offset when the active
//! one is too big, too old or out of relative offsets; the old one is sealed (exact size,
//! index files written) by a background task, one at a time. A failed seal poisons the log.

use std::rc::Rc;

use crate::config::LogConfig;
use crate::error::{EngineError, Result};
use crate::segment::{PersistedIndexes, Segment};
use crate::segment_appender::SegmentAppender;

use super::PartitionLog;

impl PartitionLog {
    pub(super) fn needs_roll(
        &self,
        incoming: u64,
        now_ms: i64,
        config: &LogConfig,
    ) -> Result<bool> {
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
    /// (see the module doc). The caller holds the append lock.
    pub(super) async fn roll(&self, now_ms: i64) -> Result<()> {
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
    fn end_seal(&self, sealed_base: u64, result: Result<PersistedIndexes>) {
        match result {
            Ok(persisted) => {
                if let Some(segment) = self
                    .shared
                    .state
                    .borrow_mut()
                    .segments
                    .get_mut(&sealed_base)
                {
                    segment.mark_sealed(persisted);
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
    pub(super) async fn wait_for_seal(&self) {
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
}
