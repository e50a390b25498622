//! The bytes one Fetch response may still take, shared by its partitions' reads on every
//! owner shard: each read takes its share before it reads and gives back what it did not use,
//! so a wide fetch reads about what it sends.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A response's byte budget (`max_bytes`). `Sync`: owner shards draw on it concurrently.
pub struct ResponseBudget {
    left: AtomicUsize,
    total: usize,
}

/// What one partition's read may take from a [`ResponseBudget`].
pub struct Share {
    /// Bytes taken.
    pub bytes: usize,
    /// Nothing was taken before: this read may return one batch larger than its share, as
    /// the first partition of a Kafka response does.
    pub first: bool,
}

impl ResponseBudget {
    /// A budget of `bytes`.
    pub fn new(bytes: usize) -> Self {
        ResponseBudget {
            left: AtomicUsize::new(bytes),
            total: bytes,
        }
    }

    /// Takes up to `wanted` bytes; none when the budget is spent.
    pub fn reserve(&self, wanted: usize) -> Share {
        let left = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                Some(left - left.min(wanted))
            })
            .unwrap_or(0);
        Share {
            bytes: left.min(wanted),
            first: left == self.total,
        }
    }

    /// Gives back bytes taken and not (or no longer) used; never above the total.
    pub fn give_back(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let _ = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                Some(left.saturating_add(bytes).min(self.total))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_come_out_of_one_budget_and_go_back_into_it() {
        let budget = ResponseBudget::new(100);
        let first = budget.reserve(60);
        assert_eq!((first.bytes, first.first), (60, true));
        let second = budget.reserve(60);
        assert_eq!((second.bytes, second.first), (40, false));
        assert_eq!(budget.reserve(1).bytes, 0);
        budget.give_back(60);
        let again = budget.reserve(100);
        assert_eq!((again.bytes, again.first), (60, false));
        budget.give_back(1_000);
        let whole = budget.reserve(1_000);
        assert_eq!(
            (whole.bytes, whole.first),
            (100, true),
            "never above the total"
        );
    }
}
