//! The newest batches of a partition kept in memory, so tailing readers are served without
//! a disk read (direct I/O bypasses the page cache, so nothing else would hold them).
//!
//! Appended batches are copied into an arena and stamped there (offsets, epoch), so the
//! stamped bytes exist once in memory before they go to the write-behind buffer. When a
//! reader arrives, the arena's batches become one frozen block, and a read returns one
//! contiguous slice of a block: consecutive batches go to the socket as a single buffer.
//! Arenas start small and grow, so a partition that saw one small batch costs little.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// Smallest and largest arena allocations.
const MIN_ARENA: usize = 4 << 10;
const MAX_ARENA: usize = 1 << 20;

/// A batch's offsets and where its bytes lie (relative to its arena or block).
#[derive(Clone, Copy, Debug)]
struct Span {
    base_offset: u64,
    next_offset: u64,
    start: usize,
    len: usize,
}

#[derive(Debug)]
struct Block {
    bytes: Bytes,
    spans: Vec<Span>,
}

/// A bounded window over the most recently appended batches, in offset order.
#[derive(Debug, Default)]
pub(crate) struct TailCache {
    capacity: usize,
    blocks: VecDeque<Block>,
    block_bytes: usize,
    arena: BytesMut,
    arena_spans: Vec<Span>,
    next_arena_capacity: usize,
}

impl TailCache {
    /// A cache holding about `capacity` bytes (0 disables it).
    pub fn new(capacity: usize) -> Self {
        TailCache {
            capacity,
            next_arena_capacity: MIN_ARENA,
            ..TailCache::default()
        }
    }

    /// Copies `batch` (offsets `base_offset..next_offset`) into the cache, applies `stamp` to
    /// the copy and returns the stamped bytes. Nothing is kept when `stamp` fails.
    pub fn push_stamped<E>(
        &mut self,
        batch: &[u8],
        base_offset: u64,
        next_offset: u64,
        stamp: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<&[u8], E> {
        if self.capacity == 0
            || self
                .last_next_offset()
                .is_some_and(|next| next != base_offset)
        {
            self.clear();
        }
        if self.arena.capacity() - self.arena.len() < batch.len() {
            self.seal_arena();
            let capacity = self.next_arena_capacity.max(batch.len());
            self.next_arena_capacity = (self.next_arena_capacity * 2).min(MAX_ARENA);
            self.arena = BytesMut::with_capacity(capacity);
        }
        let start = self.arena.len();
        self.arena.extend_from_slice(batch);
        if let Err(error) = stamp(&mut self.arena[start..]) {
            self.arena.truncate(start);
            return Err(error);
        }
        self.arena_spans.push(Span {
            base_offset,
            next_offset,
            start,
            len: batch.len(),
        });
        self.evict();
        Ok(&self.arena[start..start + batch.len()])
    }

    /// Forgets everything and returns the arena's memory (an idle partition).
    pub fn release(&mut self) {
        self.clear();
        self.arena = BytesMut::new();
        self.next_arena_capacity = MIN_ARENA;
    }

    /// Forgets everything (after a truncation).
    pub fn clear(&mut self) {
        self.blocks.clear();
        self.block_bytes = 0;
        self.arena.clear();
        self.arena_spans.clear();
    }

    /// Whole batches starting with the one holding `offset`, below `upper` (exclusive), up to
    /// `max_bytes` (but at least one), as one contiguous buffer. `None` when `offset` is not
    /// cached.
    pub fn read(&mut self, offset: u64, upper: u64, max_bytes: usize) -> Option<Bytes> {
        self.seal_arena();
        let first = self.blocks.front()?.spans.first()?;
        if offset < first.base_offset {
            return None;
        }
        let block = self
            .blocks
            .iter()
            .find(|b| b.spans.last().is_some_and(|s| s.next_offset > offset))?;
        let from = block.spans.partition_point(|s| s.next_offset <= offset);
        let start = block.spans.get(from)?.start;
        let mut end = start;
        for span in &block.spans[from..] {
            if span.base_offset >= upper
                || (end > start && span.start + span.len - start > max_bytes)
            {
                break;
            }
            end = span.start + span.len;
        }
        Some(block.bytes.slice(start..end))
    }

    fn last_next_offset(&self) -> Option<u64> {
        self.arena_spans
            .last()
            .or_else(|| self.blocks.back().and_then(|b| b.spans.last()))
            .map(|s| s.next_offset)
    }

    /// Freezes the arena's batches into a block (the arena keeps its spare capacity).
    fn seal_arena(&mut self) {
        if self.arena_spans.is_empty() || self.capacity == 0 {
            return;
        }
        let bytes = self.arena.split().freeze();
        self.block_bytes += bytes.len();
        self.blocks.push_back(Block {
            bytes,
            spans: std::mem::take(&mut self.arena_spans),
        });
        self.evict();
    }

    fn evict(&mut self) {
        while self.block_bytes + self.arena.len() > self.capacity {
            match self.blocks.pop_front() {
                Some(block) => self.block_bytes -= block.bytes.len(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_with(batches: &[(u64, u64, usize)], capacity: usize) -> TailCache {
        let mut cache = TailCache::new(capacity);
        for &(base, next, len) in batches {
            let bytes = vec![0u8; len];
            cache
                .push_stamped(&bytes, base, next, |b: &mut [u8]| {
                    b.fill(base as u8);
                    Ok::<(), ()>(())
                })
                .expect("stamped");
        }
        cache
    }

    #[test]
    fn serves_whole_batches_from_the_one_holding_the_offset() {
        let mut cache = cache_with(&[(0, 5, 10), (5, 9, 10), (9, 10, 10)], 1000);
        let out = cache.read(6, 10, 1000).expect("cached");
        assert_eq!(out.len(), 20);
        assert_eq!(out[0], 5);
        assert_eq!(out[10], 9);
        assert_eq!(cache.read(6, 9, 1000).map(|b| b.len()), Some(10));
        assert_eq!(cache.read(0, 10, 15).map(|b| b.len()), Some(10));
        assert_eq!(cache.read(0, 10, 1).map(|b| b.len()), Some(10));
    }

    #[test]
    fn evicts_oldest_and_reports_misses() {
        let mut cache = TailCache::new(25);
        for (base, next) in [(0u64, 5u64), (5, 9), (9, 10)] {
            cache
                .push_stamped(&[1u8; 10], base, next, |_: &mut [u8]| Ok::<(), ()>(()))
                .expect("stamped");
            // A reader after each append seals each batch into its own block.
            let _ = cache.read(base, next, 100);
        }
        assert!(cache.read(2, 10, 100).is_none());
        assert_eq!(cache.read(5, 10, 100).map(|b| b.len()), Some(10));
    }

    #[test]
    fn a_gap_resets_the_cache_and_failed_stamps_are_dropped() {
        let mut cache = cache_with(&[(0, 5, 10), (7, 9, 10)], 100);
        assert!(cache.read(0, 10, 100).is_none());
        assert_eq!(cache.read(7, 10, 100).map(|b| b.len()), Some(10));
        let failed = cache.push_stamped(&[9u8; 4], 9, 10, |_: &mut [u8]| Err("bad"));
        assert_eq!(failed.err(), Some("bad"));
        assert_eq!(cache.read(7, 10, 100).map(|b| b.len()), Some(10));
    }

    #[test]
    fn release_gives_the_memory_back() {
        let mut cache = cache_with(&[(0, 5, 3000), (5, 9, 3000)], 1 << 20);
        assert!(cache.read(0, 9, 1 << 20).is_some());
        cache.release();
        assert!(cache.read(0, 9, 1 << 20).is_none());
        assert_eq!(cache.arena.capacity(), 0);
        assert!(cache.blocks.is_empty());
    }

    #[test]
    fn disabled_cache_still_stamps() {
        let mut cache = TailCache::new(0);
        let stamped = cache
            .push_stamped(&[0u8; 3], 0, 1, |b: &mut [u8]| {
                b[0] = 7;
                Ok::<(), ()>(())
            })
            .expect("stamped")
            .to_vec();
        assert_eq!(stamped, vec![7, 0, 0]);
        assert!(cache.read(0, 1, 10).is_none());
    }
}
