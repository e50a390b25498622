//! What the owner shards of one Fetch share while it long-polls: the response budget, the
//! bytes their latest reads found, and the signal that ends every shard's wait.
//!
//! Each owner shard reads its partitions, adds what it found to the fetch's count, and while
//! the whole fetch has less than `min_bytes` (and no partition failed, and the deadline has
//! not passed) waits on its own partitions and reads again, all inside its one hop. The shard
//! whose read brings the count to `min_bytes` (or finds an error) finishes the fetch: every
//! other shard's wait ends at once and it answers with its latest reads. So a fetch whose
//! partitions live on one shard is one hop, and one spread over several shards one hop per
//! shard, never longer than `max_wait_ms` (each shard's own timer).
//!
//! The signal crosses threads: a shard wakes the others' tasks through their
//! [`AtomicWaker`]s. The owner tasks run detached (router jobs, or the connection's detached
//! handler task when the owner is the shard the request arrived on), as glommio needs of any
//! task woken from another thread (net README, "A glommio 0.9 bug to stay clear of").

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Instant;

use futures_util::task::AtomicWaker;

use super::response_budget::ResponseBudget;

/// The shared state of one long-polling fetch.
pub struct LongPoll {
    /// The response's `max_bytes`, shared by every read (at least 1 byte, so a request with
    /// `max_bytes` 0 still gets its first batch).
    pub budget: ResponseBudget,
    /// When every shard stops waiting.
    pub deadline: Instant,
    /// `min_bytes`, at least 1: an empty read never completes a fetch before its deadline.
    min_bytes: usize,
    /// Bytes the owner shards' latest reads found, all together.
    available: AtomicUsize,
    finished: AtomicBool,
    /// One per shard of the broker, indexed by shard.
    wakers: Vec<AtomicWaker>,
}

impl LongPoll {
    /// The state of a fetch on a broker of `shards` shards.
    pub fn new(shards: usize, max_bytes: usize, min_bytes: usize, deadline: Instant) -> Self {
        LongPoll {
            budget: ResponseBudget::new(max_bytes.max(1)),
            deadline,
            min_bytes: min_bytes.max(1),
            available: AtomicUsize::new(0),
            finished: AtomicBool::new(false),
            wakers: (0..shards.max(1)).map(|_| AtomicWaker::new()).collect(),
        }
    }

    /// A shard's read found `now` bytes where its previous read had found `before`.
    pub fn count(&self, before: usize, now: usize) {
        self.available.fetch_add(now, Ordering::AcqRel);
        self.available.fetch_sub(before, Ordering::AcqRel);
    }

    /// Whether the reads counted so far hold `min_bytes`.
    pub fn has_enough(&self) -> bool {
        self.available.load(Ordering::Acquire) >= self.min_bytes
    }

    /// Ends every shard's wait.
    pub fn finish(&self) {
        if !self.finished.swap(true, Ordering::AcqRel) {
            for waker in &self.wakers {
                waker.wake();
            }
        }
    }

    /// Whether some shard finished the fetch.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// Resolves once some shard finished the fetch; `shard` is the waiting shard's index.
    pub fn finished(&self, shard: usize) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(move |cx| {
            if let Some(waker) = self.wakers.get(shard) {
                waker.register(cx.waker());
            }
            if self.is_finished() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
    }

    /// Shard `shard` is done with the fetch: its waker, if still registered, is dropped here,
    /// on the shard's own thread.
    pub fn leave(&self, shard: usize) {
        if let Some(waker) = self.wakers.get(shard) {
            drop(waker.take());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_count_follows_each_shards_latest_read() {
        let poll = LongPoll::new(2, 100, 10, Instant::now() + Duration::from_secs(1));
        poll.count(0, 4);
        poll.count(0, 5);
        assert!(!poll.has_enough());
        poll.count(4, 2);
        assert!(
            !poll.has_enough(),
            "a read again replaces the shard's count"
        );
        poll.count(2, 6);
        assert!(poll.has_enough());
    }

    #[test]
    fn an_empty_read_never_has_enough() {
        let poll = LongPoll::new(1, 100, 0, Instant::now());
        poll.count(0, 0);
        assert!(!poll.has_enough());
    }

    #[test]
    fn finishing_wakes_a_waiting_shard_on_another_thread() {
        let poll = std::sync::Arc::new(LongPoll::new(2, 1, 1, Instant::now()));
        let waiting = poll.clone();
        let (woken, wakes) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            futures_lite::future::block_on(waiting.finished(1));
            let _ = woken.send(());
        });
        std::thread::sleep(Duration::from_millis(20));
        poll.finish();
        assert!(wakes.recv_timeout(Duration::from_secs(10)).is_ok());
        assert!(poll.is_finished());
    }
}
