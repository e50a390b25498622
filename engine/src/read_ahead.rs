//! Reading ahead for sequential consumers.
//!
//! A consumer that reads a partition from disk asks, fetch after fetch, for the offset right
//! after the last batch it was given. After serving a read from a segment file, the log starts
//! reading the next window of that segment in the background, keyed by the segment and the
//! offset the consumer will ask for next; the next read of exactly that offset takes the
//! window (waiting for it if it is still being read) instead of reading itself. The disk read
//! then overlaps the response's trip to the client and the client's next request.
//!
//! Only bytes below the log's readable end at the time of the read are read ahead: they are
//! whole, validated batches that never change while the segment exists, so a window taken
//! later is still exact. A window that is not taken is dropped by the next read that misses,
//! or when the partition goes idle. All windows of one shard together hold at most
//! [`SHARD_BUDGET`] bytes; beyond that nothing is read ahead.

use std::cell::Cell;
use std::io;

use bytes::Bytes;
use glommio::task::JoinHandle;

use crate::storage::LogFile;

/// Most bytes one shard holds in read-ahead windows, read or being read.
pub const SHARD_BUDGET: usize = 64 << 20;

/// Largest window read ahead for one partition.
pub const MAX_WINDOW: usize = 2 << 20;

thread_local! {
    /// Bytes of read-ahead windows on this thread (shard).
    static IN_USE: Cell<usize> = const { Cell::new(0) };
}

/// A share of [`SHARD_BUDGET`], given back on drop.
struct Charge(usize);

impl Charge {
    fn take(bytes: usize) -> Option<Charge> {
        IN_USE.with(|in_use| {
            let used = in_use.get();
            (used + bytes <= SHARD_BUDGET).then(|| {
                in_use.set(used + bytes);
                Charge(bytes)
            })
        })
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        IN_USE.with(|in_use| in_use.set(in_use.get().saturating_sub(self.0)));
    }
}

/// A window being read (or read) ahead of a consumer.
pub struct Window {
    /// File position where the window starts.
    pub position: u64,
    read: JoinHandle<io::Result<Bytes>>,
    _charge: Charge,
}

impl Window {
    /// The window's bytes, `None` if reading them failed (the caller reads for itself).
    pub async fn bytes(self) -> Option<Bytes> {
        self.read.await.and_then(Result::ok)
    }
}

/// Where the next window starts and what it covers.
pub struct NextRead {
    pub segment_base: u64,
    /// The offset a sequential consumer asks for next: the end of what was just served.
    pub next_offset: u64,
    pub position: u64,
    pub len: usize,
}

/// One partition's read-ahead: at most one window.
#[derive(Default)]
pub struct ReadAhead {
    slot: Option<(u64, u64, Window)>,
}

impl ReadAhead {
    /// The window for a read of `offset` in the segment at `segment_base`, if one was read
    /// ahead for exactly that; any other window is dropped.
    pub fn claim(&mut self, segment_base: u64, offset: u64) -> Option<Window> {
        match self.slot.take() {
            Some((base, next_offset, window)) if base == segment_base && next_offset == offset => {
                Some(window)
            }
            _ => None,
        }
    }

    /// Starts reading `next` from `file` in the background, unless the shard's budget is spent.
    pub fn start(&mut self, file: &LogFile, next: NextRead) {
        self.slot = None;
        let len = next.len.min(MAX_WINDOW);
        if len == 0 {
            return;
        }
        let Some(charge) = Charge::take(len) else {
            return;
        };
        let file = file.clone();
        let position = next.position;
        let read = glommio::spawn_local(async move { file.read_at(position, len).await }).detach();
        self.slot = Some((
            next.segment_base,
            next.next_offset,
            Window {
                position,
                read,
                _charge: charge,
            },
        ));
    }

    /// Drops any window (an idle partition gives its memory back).
    pub fn release(&mut self) {
        self.slot = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_budget_bounds_the_charges_and_returns_on_drop() {
        let first = Charge::take(SHARD_BUDGET - 10).expect("within budget");
        assert!(Charge::take(11).is_none(), "over budget");
        let second = Charge::take(10).expect("exactly the rest");
        drop(first);
        assert!(Charge::take(SHARD_BUDGET - 10).is_some());
        drop(second);
        IN_USE.with(|in_use| assert_eq!(in_use.get(), 0));
    }
}
