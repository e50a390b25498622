//! Time index of one segment: the largest timestamp seen so far → the relative offset where
//! it was reached, for ListOffsets by timestamp.
//!
//! # File format (`<base_offset:020>.timeindex`)
//!
//! A flat array of 16-byte entries, no header. All integers big-endian.
//!
//! | bytes | field                                                              |
//! |-------|--------------------------------------------------------------------|
//! | 8     | `timestamp` i64: the segment's max timestamp up to this batch      |
//! | 4     | `rel_offset` u32: offset of that batch minus the segment's base    |
//! | 4     | CRC-32 (IEEE, `crc32fast`) of the 12 bytes before it               |
//!
//! An entry is appended only when a batch raises the segment's max timestamp, so timestamps
//! are strictly increasing and relative offsets never decrease. When the writer appends an
//! entry for *every* batch that raises the maximum, the first entry with `timestamp ≥ T` names
//! the batch holding the first record with a timestamp ≥ T ([`TimeIndex::lookup`]): every
//! earlier batch's max is below T. If entries are skipped, only the floor is safe: scan from
//! the last entry with `timestamp < T` ([`TimeIndex::lookup_floor`]).
//!
//! # What a crash leaves behind, and how it is read
//!
//! As for the offset index: the file is derived data, rebuilt by recovery for the tail it
//! re-validates. Each entry carries its own CRC, and readers ([`parse_valid_prefix`],
//! [`TimeIndexView`]) accept only the longest prefix of entries that pass their CRC with
//! strictly increasing timestamps and non-decreasing offsets, stopping at a torn entry,
//! preallocated zeros (the CRC of twelve zero bytes is not zero), or garbage. The I/O layer
//! truncates the file to the valid prefix, and truncates it whenever the log is truncated.

use crate::sparse_index::{self, field, IndexEntry, Search, SparseIndex, SparseIndexView};

/// Size of one encoded entry.
pub const TIME_INDEX_ENTRY_LEN: usize = 16;

/// One time index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeIndexEntry {
    /// Max timestamp of the segment up to and including the batch at `rel_offset`.
    pub timestamp: i64,
    /// Offset relative to the segment's base offset.
    pub rel_offset: u32,
}

impl IndexEntry for TimeIndexEntry {
    type Encoded = [u8; TIME_INDEX_ENTRY_LEN];
    type Key = i64;

    fn key(&self) -> i64 {
        self.timestamp
    }

    fn rel_offset(&self) -> u32 {
        self.rel_offset
    }

    /// Timestamps strictly increase; offsets never decrease.
    fn follows(&self, previous: &Self) -> bool {
        self.timestamp > previous.timestamp && self.rel_offset >= previous.rel_offset
    }

    fn write_fields(&self, fields: &mut [u8]) {
        fields[0..8].copy_from_slice(&self.timestamp.to_be_bytes());
        fields[8..12].copy_from_slice(&self.rel_offset.to_be_bytes());
    }

    fn read_fields(fields: &[u8]) -> Self {
        Self {
            timestamp: i64::from_be_bytes(field(fields, 0)),
            rel_offset: u32::from_be_bytes(field(fields, 8)),
        }
    }
}

/// In-memory time index of the active segment.
pub type TimeIndex = SparseIndex<TimeIndexEntry>;

/// Zero-copy reader over a time index file's bytes (typically an mmap of a sealed segment's
/// file). Validates once on construction and then reads only the valid prefix.
pub type TimeIndexView<'a> = SparseIndexView<'a, TimeIndexEntry>;

/// Number of leading entries of `bytes` that are intact and in order.
pub fn valid_prefix_len(bytes: &[u8]) -> usize {
    sparse_index::valid_prefix_len::<TimeIndexEntry>(bytes)
}

/// Decodes the valid prefix of a time index file; see the module doc.
pub fn parse_valid_prefix(bytes: &[u8]) -> Vec<TimeIndexEntry> {
    sparse_index::parse_valid_prefix(bytes)
}

impl TimeIndex {
    /// Adds an entry if `timestamp` is above the last one; returns whether it did. Also
    /// refuses an offset below the last entry's, which would make lookups wrong.
    #[must_use]
    pub fn maybe_append(&mut self, timestamp: i64, rel_offset: u32) -> bool {
        self.push(TimeIndexEntry {
            timestamp,
            rel_offset,
        })
    }

    /// The first entry with `timestamp ≥ target`; `None` if the segment has no such
    /// timestamp. Exact only under the writer discipline in the module doc.
    pub fn lookup(&self, target: i64) -> Option<TimeIndexEntry> {
        self.search(target, Search::FirstAtOrAbove)
    }

    /// The last entry with `timestamp < target`, a safe place to start scanning for the first
    /// record at or after `target`; `None` means scan from the start of the segment.
    pub fn lookup_floor(&self, target: i64) -> Option<TimeIndexEntry> {
        self.search(target, Search::LastBelow)
    }
}

impl TimeIndexView<'_> {
    /// The first entry with `timestamp ≥ target`; see [`TimeIndex::lookup`].
    pub fn lookup(&self, target: i64) -> Option<TimeIndexEntry> {
        self.search(target, Search::FirstAtOrAbove)
    }

    /// The last entry with `timestamp < target`; see [`TimeIndex::lookup_floor`].
    pub fn lookup_floor(&self, target: i64) -> Option<TimeIndexEntry> {
        self.search(target, Search::LastBelow)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn sample() -> TimeIndex {
        let mut index = TimeIndex::new();
        for (ts, rel) in [(100, 0), (200, 10), (300, 10), (400, 30)] {
            assert!(index.maybe_append(ts, rel));
        }
        index
    }

    #[test]
    fn test_entry_bytes_are_golden() {
        let entry = TimeIndexEntry {
            timestamp: 1_700_000_000_000,
            rel_offset: 7,
        };
        let golden = [
            0, 0, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0, 0, 0, 0, 7, 0xf8, 0xca, 0xf7, 0x7c,
        ];
        assert_eq!(entry.encode(), golden);
        assert_eq!(TimeIndexEntry::decode(&golden), Some(entry));
        let before_epoch = TimeIndexEntry {
            timestamp: -1,
            rel_offset: 0,
        };
        let golden = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x65, 0x22, 0xdf, 0x69,
        ];
        assert_eq!(before_epoch.encode(), golden);
    }

    #[test]
    fn test_append_only_when_timestamp_grows() {
        let mut index = sample();
        assert!(!index.maybe_append(400, 40));
        assert!(!index.maybe_append(350, 40));
        assert!(!index.maybe_append(500, 29));
        assert_eq!(index.len(), 4);
        assert!(index.maybe_append(500, 30));
    }

    #[test]
    fn test_lookup_and_floor() {
        let index = sample();
        let bytes = index.encode_all();
        let view = TimeIndexView::new(&bytes);
        let cases = [
            (50, Some(0), None),
            (100, Some(0), None),
            (101, Some(10), Some(0)),
            (300, Some(10), Some(10)),
            (399, Some(30), Some(10)),
            (401, None, Some(30)),
        ];
        for (target, first, floor) in cases {
            let rel = |e: Option<TimeIndexEntry>| e.map(|e| e.rel_offset);
            assert_eq!(rel(index.lookup(target)), first, "lookup {target}");
            assert_eq!(rel(view.lookup(target)), first, "view lookup {target}");
            assert_eq!(rel(index.lookup_floor(target)), floor, "floor {target}");
            assert_eq!(rel(view.lookup_floor(target)), floor, "view floor {target}");
        }
        assert_eq!(TimeIndexView::new(&[]).lookup(0), None);
    }

    #[test]
    fn test_truncate_to_offset() {
        let mut index = sample();
        index.truncate_to_offset(30);
        assert_eq!(index.last().unwrap().timestamp, 300);
        index.truncate_to_offset(10);
        assert_eq!(
            index.entries(),
            &[TimeIndexEntry {
                timestamp: 100,
                rel_offset: 0
            }]
        );
    }

    #[test]
    fn test_torn_zero_and_stale_tails_are_ignored() {
        let index = sample();
        let mut bytes = index.encode_all();
        bytes.truncate(bytes.len() - 1);
        assert_eq!(parse_valid_prefix(&bytes), index.entries()[..3]);
        let mut bytes = index.encode_all();
        bytes.resize(bytes.len() + 4096, 0);
        let view = TimeIndexView::new(&bytes);
        assert_eq!(
            (view.len(), view.valid_bytes()),
            (4, 4 * TIME_INDEX_ENTRY_LEN)
        );
        assert_eq!(view.last(), index.last());
        let mut bytes = index.encode_all();
        bytes.extend_from_slice(
            &TimeIndexEntry {
                timestamp: 50,
                rel_offset: 99,
            }
            .encode(),
        );
        assert_eq!(valid_prefix_len(&bytes), 4);
        let mut encoded = index.encode_from(0)[..TIME_INDEX_ENTRY_LEN].to_vec();
        encoded.extend_from_slice(&index.encode_from(1));
        assert_eq!(TimeIndex::from_bytes(&encoded), index);
    }

    fn index_of(entries: &[TimeIndexEntry]) -> TimeIndex {
        let mut index = TimeIndex::new();
        for e in entries {
            assert!(index.maybe_append(e.timestamp, e.rel_offset));
        }
        index
    }

    fn arb_entries() -> impl Strategy<Value = Vec<TimeIndexEntry>> {
        let start = -1_000_000i64..1_000_000;
        let steps = proptest::collection::vec((1..10_000i64, 0..100u32), 0..64);
        (start, steps).prop_map(|(mut ts, steps)| {
            let mut rel = 0u32;
            steps
                .into_iter()
                .map(|(dt, dr)| {
                    ts += dt;
                    rel += dr;
                    TimeIndexEntry {
                        timestamp: ts,
                        rel_offset: rel,
                    }
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn prop_entry_round_trips(timestamp in any::<i64>(), rel_offset in any::<u32>()) {
            let entry = TimeIndexEntry { timestamp, rel_offset };
            prop_assert_eq!(TimeIndexEntry::decode(&entry.encode()), Some(entry));
        }

        #[test]
        fn prop_index_round_trips_and_looks_up(entries in arb_entries(), target in any::<i64>()) {
            let mut index = TimeIndex::new();
            for e in &entries {
                prop_assert!(index.maybe_append(e.timestamp, e.rel_offset));
            }
            let bytes = index.encode_all();
            prop_assert_eq!(&parse_valid_prefix(&bytes), &entries);
            let view = TimeIndexView::new(&bytes);
            let first = entries.iter().find(|e| e.timestamp >= target).copied();
            let floor = entries.iter().rev().find(|e| e.timestamp < target).copied();
            prop_assert_eq!(index.lookup(target), first);
            prop_assert_eq!(view.lookup(target), first);
            prop_assert_eq!(index.lookup_floor(target), floor);
            prop_assert_eq!(view.lookup_floor(target), floor);
        }

        #[test]
        fn prop_bit_flip_yields_the_prefix_before_it(entries in arb_entries(), bit in any::<usize>()) {
            let mut bytes = index_of(&entries).encode_all();
            prop_assume!(!bytes.is_empty());
            let bit = bit % (bytes.len() * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
            let damaged = bit / 8 / TIME_INDEX_ENTRY_LEN;
            prop_assert_eq!(parse_valid_prefix(&bytes), entries[..damaged].to_vec());
        }

        #[test]
        fn prop_garbage_gives_a_valid_prefix(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let parsed = parse_valid_prefix(&bytes);
            prop_assert!(parsed.windows(2).all(|w| w[1].follows(&w[0])));
            let view = TimeIndexView::new(&bytes);
            prop_assert_eq!(view.len(), parsed.len());
            let _ = (view.lookup(0), view.lookup_floor(0));
        }
    }
}
