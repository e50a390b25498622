//! Durability: group-commit flushes of the active segment, the high watermark (the durable
//! end) and the readers waiting for it to move.

use futures_channel::oneshot;

use crate::error::{EngineError, Result};

use super::{DurablePoint, PartitionLog};

impl PartitionLog {
    /// Waits until every offset below `end_offset` is durable. One fdatasync covers every
    /// append issued before it began. An I/O failure poisons the log; it is never retried.
    pub async fn flush_to(&self, end_offset: u64) -> Result<()> {
        let reached = || {
            let state = self.shared.state.borrow();
            state.check_writable()?;
            if state.durable.offset >= end_offset {
                return Ok(true);
            }
            if state.closed {
                return Err(EngineError::Closed);
            }
            Ok(false)
        };
        self.shared
            .flushes
            .wait_until(reached, || self.flush_once())
            .await
    }

    /// Flushes everything appended so far.
    pub async fn flush(&self) -> Result<()> {
        let end = self.shared.state.borrow().next_offset;
        self.flush_to(end).await
    }

    async fn flush_once(&self) {
        // Cancelled in the middle, the flush leaves the write-behind buffer's chunks in an
        // unknown state on the file: nothing after them may become durable.
        let slot = self.shared.flushes.take(|| {
            self.poison(&EngineError::io(
                "flushing the active segment",
                std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "a flush was cancelled before it finished",
                ),
            ))
        });
        let (plan, offset, segment_base) = {
            let mut state = self.shared.state.borrow_mut();
            let segment_base = state.active().map(|s| s.base_offset).unwrap_or_default();
            (
                state.appender.begin_flush(),
                state.next_offset,
                segment_base,
            )
        };
        let position = plan.end;
        let mut result = plan
            .execute()
            .await
            .map_err(|e| EngineError::io("flushing the active segment", e));
        if result.is_ok() && self.shared.epoch > 0 {
            // After the fdatasync, before anyone is answered: a claim made later than this
            // check reads what this flush wrote (see `crate::fence`).
            result = crate::fence::check(&self.shared.storage, &self.shared.dir, self.shared.epoch)
                .await;
        }
        {
            let mut state = self.shared.state.borrow_mut();
            state.appender.end_flush();
            match result {
                Ok(()) => {
                    if offset > state.durable.offset {
                        state.durable = DurablePoint {
                            offset,
                            segment_base,
                            position,
                        };
                        // Transactions whose markers are durable now are stable.
                        state.producers.on_durable(offset);
                    }
                }
                Err(error) => match crate::fence::FencedBy::from_error(&error) {
                    Some(fenced) => {
                        tracing::warn!(dir = %self.shared.dir.display(), %error, "partition fenced");
                        state.fenced = Some(fenced);
                    }
                    None => {
                        tracing::error!(dir = %self.shared.dir.display(), %error, "partition poisoned");
                        state.poisoned = Some(error.to_string());
                    }
                },
            }
        }
        slot.finish();
        for waiter in self.shared.data_waiters.take() {
            let _ = waiter.send(());
        }
    }

    /// Resolves once the high watermark moves past `offset` (or the log closes or fails).
    /// Fetch long-polling races this against its `max_wait`.
    pub async fn wait_for_data_beyond(&self, offset: u64) {
        loop {
            {
                let state = self.shared.state.borrow();
                if state.durable.offset > offset
                    || state.closed
                    || state.poisoned.is_some()
                    || state.fenced.is_some()
                {
                    return;
                }
            }
            let (sender, receiver) = oneshot::channel();
            self.shared.data_waiters.borrow_mut().push(sender);
            if receiver.await.is_err() {
                return;
            }
        }
    }
}
