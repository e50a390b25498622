//! The newest batches of a partition kept in memory, so tailing readers are served without
//! a disk read (direct I/O bypasses the page cache, so nothing else would hold them).

use std::collections::VecDeque;

use bytes::Bytes;

/// A bounded FIFO of the most recently appended batches, in offset order.
#[derive(Debug, Default)]
pub(crate) struct TailCache {
    batches: VecDeque<CachedBatch>,
    bytes: usize,
    capacity: usize,
}

#[derive(Debug)]
struct CachedBatch {
    base_offset: u64,
    next_offset: u64,
    bytes: Bytes,
}

impl TailCache {
    pub fn new(capacity: usize) -> Self {
        TailCache {
            capacity,
            ..TailCache::default()
        }
    }

    /// Adds a batch appended at `base_offset`; evicts the oldest beyond the capacity.
    pub fn push(&mut self, base_offset: u64, next_offset: u64, bytes: Bytes) {
        if self.capacity == 0 {
            return;
        }
        if self
            .batches
            .back()
            .is_some_and(|last| last.next_offset != base_offset)
        {
            self.clear();
        }
        self.bytes += bytes.len();
        self.batches.push_back(CachedBatch {
            base_offset,
            next_offset,
            bytes,
        });
        while self.bytes > self.capacity && self.batches.len() > 1 {
            if let Some(evicted) = self.batches.pop_front() {
                self.bytes -= evicted.bytes.len();
            }
        }
    }

    /// Forgets everything (after a truncation).
    pub fn clear(&mut self) {
        self.batches.clear();
        self.bytes = 0;
    }

    /// Whole batches starting with the one holding `offset`, below `upper` (exclusive),
    /// up to `max_bytes` (but at least one). `None` when `offset` is not cached.
    pub fn read(&self, offset: u64, upper: u64, max_bytes: usize) -> Option<Vec<Bytes>> {
        let first = self.batches.front()?;
        if offset < first.base_offset {
            return None;
        }
        let start = self.batches.partition_point(|b| b.next_offset <= offset);
        let mut out = Vec::new();
        let mut total = 0usize;
        for batch in self.batches.range(start..) {
            if batch.base_offset >= upper {
                break;
            }
            if !out.is_empty() && total + batch.bytes.len() > max_bytes {
                break;
            }
            total += batch.bytes.len();
            out.push(batch.bytes.clone());
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_with(batches: &[(u64, u64, usize)], capacity: usize) -> TailCache {
        let mut cache = TailCache::new(capacity);
        for &(base, next, len) in batches {
            cache.push(base, next, Bytes::from(vec![base as u8; len]));
        }
        cache
    }

    #[test]
    fn serves_whole_batches_from_the_one_holding_the_offset() {
        let cache = cache_with(&[(0, 5, 10), (5, 9, 10), (9, 10, 10)], 1000);
        let out = cache.read(6, 10, 1000).unwrap_or_default();
        assert_eq!(out.len(), 2);
        assert_eq!(out[0][0], 5);
        assert_eq!(cache.read(6, 9, 1000).map(|v| v.len()), Some(1));
        assert_eq!(cache.read(0, 10, 15).map(|v| v.len()), Some(1));
        assert_eq!(cache.read(0, 10, 1).map(|v| v.len()), Some(1));
    }

    #[test]
    fn evicts_oldest_and_reports_misses() {
        let cache = cache_with(&[(0, 5, 10), (5, 9, 10), (9, 10, 10)], 20);
        assert!(cache.read(2, 10, 100).is_none());
        assert_eq!(cache.read(5, 10, 100).map(|v| v.len()), Some(2));
    }

    #[test]
    fn a_gap_resets_the_cache() {
        let cache = cache_with(&[(0, 5, 10), (7, 9, 10)], 100);
        assert!(cache.read(0, 10, 100).is_none());
        assert_eq!(cache.read(7, 10, 100).map(|v| v.len()), Some(1));
    }
}
