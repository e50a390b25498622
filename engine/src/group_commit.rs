//! Group commit: one flush at a time, shared by every caller waiting for durability.
//!
//! A caller that needs its writes durable first checks whether they are already
//! ([`GroupCommit::wait_until`]'s `reached`); if a flush is running, it waits for that
//! flush to end and checks again (the running flush may have begun before the caller's
//! writes); otherwise it yields once, so that the tasks the previous flush woke can queue
//! their next writes and join this flush, and then runs the flush itself. So one fdatasync
//! covers every write issued before it began, and flushes do not alternate between one
//! caller's write and everybody else's.
//!
//! The running flush holds a [`FlushSlot`]. Dropping the slot gives it back and wakes every
//! waiter; dropped before [`FlushSlot::finish`] (its holder's future was cancelled in the
//! middle of a write, so what reached the file is unknown), it first runs the owner's
//! `on_cancel`, which poisons the owner. Used by the partition log and the group store.

use std::cell::{Cell, RefCell};
use std::future::Future;

use futures_channel::oneshot;

use crate::error::Result;

/// The flush slot of one file (or log) and the callers waiting for it.
#[derive(Default)]
pub(crate) struct GroupCommit {
    /// True while a flush (or another holder of the slot) runs.
    running: Cell<bool>,
    /// Woken when the running flush gives the slot back.
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
}

impl GroupCommit {
    /// True while a flush holds the slot.
    pub(crate) fn is_running(&self) -> bool {
        self.running.get()
    }

    /// Waits until the running flush (if any) gives the slot back. Does not take it.
    pub(crate) async fn wait_for_running(&self) {
        if !self.running.get() {
            return;
        }
        let (sender, receiver) = oneshot::channel();
        self.waiters.borrow_mut().push(sender);
        let _ = receiver.await;
    }

    /// Runs `flush` until `reached` says what the caller waits for is durable (`Ok(true)`)
    /// or fails; see the module doc for the order of the checks.
    pub(crate) async fn wait_until<Flush, Done>(
        &self,
        mut reached: impl FnMut() -> Result<bool>,
        mut flush: Flush,
    ) -> Result<()>
    where
        Flush: FnMut() -> Done,
        Done: Future<Output = ()>,
    {
        let mut yielded = false;
        loop {
            if reached()? {
                return Ok(());
            }
            if self.running.get() {
                self.wait_for_running().await;
                continue;
            }
            if !yielded {
                // Before starting a flush, let the tasks the previous flush just woke run:
                // they queue their next writes and then join this flush. Otherwise the
                // caller's flush covers only its own write while the others queue behind
                // it, and flushes alternate between one write and all the rest.
                yielded = true;
                futures_lite::future::yield_now().await;
                continue;
            }
            flush().await;
        }
    }

    /// Takes the slot (the caller has checked that it is free). `on_cancel` runs if the
    /// returned slot is dropped before [`FlushSlot::finish`].
    pub(crate) fn take<'a>(&'a self, on_cancel: impl FnOnce() + 'a) -> FlushSlot<'a> {
        debug_assert!(!self.running.get(), "the flush slot is taken twice");
        self.running.set(true);
        FlushSlot {
            commit: self,
            on_cancel: Some(Box::new(on_cancel)),
        }
    }
}

/// The slot held by the running flush; see the module doc.
pub(crate) struct FlushSlot<'a> {
    commit: &'a GroupCommit,
    /// Taken by [`FlushSlot::finish`].
    on_cancel: Option<Box<dyn FnOnce() + 'a>>,
}

impl FlushSlot<'_> {
    /// Marks the flush as ended (whatever its outcome) and gives the slot back.
    pub(crate) fn finish(mut self) {
        self.on_cancel = None;
    }
}

impl Drop for FlushSlot<'_> {
    fn drop(&mut self) {
        if let Some(on_cancel) = self.on_cancel.take() {
            on_cancel();
        }
        self.commit.running.set(false);
        for waiter in self.commit.waiters.take() {
            let _ = waiter.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::GroupCommit;

    fn run<T>(future: impl std::future::Future<Output = T>) -> T {
        glommio::LocalExecutorBuilder::default()
            .make()
            .expect("executor")
            .run(future)
    }

    #[test]
    fn concurrent_callers_share_one_flush() {
        run(async {
            let commit = Rc::new(GroupCommit::default());
            let durable = Rc::new(Cell::new(0u64));
            let queued = Rc::new(Cell::new(0u64));
            let flushes = Rc::new(Cell::new(0u32));
            let mut tasks = Vec::new();
            for _ in 0..8 {
                let (commit, durable, queued, flushes) = (
                    commit.clone(),
                    durable.clone(),
                    queued.clone(),
                    flushes.clone(),
                );
                tasks.push(glommio::spawn_local(async move {
                    queued.set(queued.get() + 1);
                    let ticket = queued.get();
                    commit
                        .wait_until(
                            || Ok(durable.get() >= ticket),
                            || async {
                                let slot = commit.take(|| {});
                                let upto = queued.get();
                                glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
                                durable.set(upto);
                                flushes.set(flushes.get() + 1);
                                slot.finish();
                            },
                        )
                        .await
                }));
            }
            for task in tasks {
                task.await.expect("durable");
            }
            assert_eq!(durable.get(), 8);
            assert_eq!(
                flushes.get(),
                1,
                "one flush covers every caller queued before it"
            );
        });
    }

    #[test]
    fn a_dropped_slot_runs_on_cancel_and_wakes_waiters() {
        run(async {
            let commit = GroupCommit::default();
            let cancelled = Cell::new(false);
            let slot = commit.take(|| cancelled.set(true));
            assert!(commit.is_running());
            drop(slot);
            assert!(cancelled.get());
            assert!(!commit.is_running());
            let slot = commit.take(|| panic!("finished slots do not cancel"));
            slot.finish();
            assert!(!commit.is_running());
            commit.wait_for_running().await;
        });
    }
}
