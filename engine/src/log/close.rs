//! Closing a log (with a checkpoint, or without one for a takeover) and removing the files
//! older fence epochs left once their removal is due.

use crate::error::{EngineError, Result};
use crate::takeover;

use super::PartitionLog;

/// Whether a close checkpoints the log first ([`PartitionLog::close_for_takeover`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checkpoint {
    Write,
    Skip,
}

impl PartitionLog {
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
}
