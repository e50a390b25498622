//! Sparse offset index of one segment: relative offset → byte position of a batch in the
//! segment's `.log` file.
//!
//! # File format (`<base_offset:020>.index`)
//!
//! A flat array of 12-byte entries, no header. All integers big-endian.
//!
//! | bytes | field                                                              |
//! |-------|--------------------------------------------------------------------|
//! | 4     | `rel_offset` u32: an offset of the batch minus the segment's base  |
//! | 4     | `position` u32: byte position of the batch's first byte in the log |
//! | 4     | CRC-32 (IEEE, `crc32fast`) of the 8 bytes before it                |
//!
//! Entries are strictly increasing in both `rel_offset` and `position`, so a lookup is a
//! binary search. The index is sparse: the writer adds an entry every so many bytes of log,
//! and a reader scans batches forward from the entry it finds.
//!
//! # What a crash leaves behind, and how it is read
//!
//! The index is written after the log it points into and is never the source of truth:
//! recovery rebuilds the entries for the log tail it re-validates. A crash can leave a torn
//! last entry, zeros from preallocation, or (after a bit flip) any garbage. Every entry
//! carries its own CRC, so readers ([`parse_valid_prefix`], [`OffsetIndexView`]) accept
//! the longest prefix of entries that each pass their CRC *and* keep both fields strictly
//! increasing, and ignore everything from the first failure on; the I/O layer then truncates
//! the file to [`valid_prefix_len`] entries. An all-zero entry never passes (the CRC of
//! eight zero bytes is not zero). When the log is truncated, the I/O layer must truncate the
//! index file too, so that stale but well-formed entries cannot follow new ones.

use crate::sparse_index::{self, field, IndexEntry, Search, SparseIndex, SparseIndexView};

/// Size of one encoded entry.
pub const OFFSET_INDEX_ENTRY_LEN: usize = 12;

/// One index entry: the batch holding `segment base + rel_offset` starts at `position`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct OffsetIndexEntry {
    /// Offset relative to the segment's base offset.
    pub rel_offset: u32,
    /// Byte position within the segment's log file.
    pub position: u32,
}

impl IndexEntry for OffsetIndexEntry {
    type Encoded = [u8; OFFSET_INDEX_ENTRY_LEN];
    type Key = u32;

    fn key(&self) -> u32 {
        self.rel_offset
    }

    fn rel_offset(&self) -> u32 {
        self.rel_offset
    }

    /// Both fields strictly increase.
    fn follows(&self, previous: &Self) -> bool {
        self.rel_offset > previous.rel_offset && self.position > previous.position
    }

    fn write_fields(&self, fields: &mut [u8]) {
        fields[0..4].copy_from_slice(&self.rel_offset.to_be_bytes());
        fields[4..8].copy_from_slice(&self.position.to_be_bytes());
    }

    fn read_fields(fields: &[u8]) -> Self {
        Self {
            rel_offset: u32::from_be_bytes(field(fields, 0)),
            position: u32::from_be_bytes(field(fields, 4)),
        }
    }
}

/// In-memory index of the active segment, appended to as batches are written.
pub type OffsetIndex = SparseIndex<OffsetIndexEntry>;

/// Zero-copy reader over an index file's bytes (read into memory). Validates once on
/// construction and then reads only the valid prefix.
pub type OffsetIndexView<'a> = SparseIndexView<'a, OffsetIndexEntry>;

/// Number of leading entries of `bytes` that are intact and strictly increasing.
pub fn valid_prefix_len(bytes: &[u8]) -> usize {
    sparse_index::valid_prefix_len::<OffsetIndexEntry>(bytes)
}

/// Decodes the valid prefix of an index file; see the module doc.
pub fn parse_valid_prefix(bytes: &[u8]) -> Vec<OffsetIndexEntry> {
    sparse_index::parse_valid_prefix(bytes)
}

impl OffsetIndex {
    /// Adds an entry. Returns `false`, and adds nothing, unless both fields are greater than
    /// the last entry's: an entry out of order would break every later lookup.
    #[must_use]
    pub fn append(&mut self, rel_offset: u32, position: u32) -> bool {
        self.push(OffsetIndexEntry {
            rel_offset,
            position,
        })
    }

    /// The greatest entry with `rel_offset ≤ target`; `None` means scan from position 0.
    pub fn lookup(&self, target: u32) -> Option<OffsetIndexEntry> {
        self.search(target, Search::LastAtOrBelow)
    }

    /// Drops entries at or beyond `position`, after the log was truncated to `position` bytes.
    pub fn truncate_to_position(&mut self, position: u32) {
        self.retain_prefix(|e| e.position < position);
    }
}

impl OffsetIndexView<'_> {
    /// The greatest entry with `rel_offset ≤ target`; `None` means scan from position 0.
    pub fn lookup(&self, target: u32) -> Option<OffsetIndexEntry> {
        self.search(target, Search::LastAtOrBelow)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn sample() -> OffsetIndex {
        let mut index = OffsetIndex::new();
        for (rel, pos) in [(0, 0), (10, 4096), (25, 8192), (40, 12288)] {
            assert!(index.append(rel, pos));
        }
        index
    }

    #[test]
    fn test_entry_bytes_are_golden() {
        let entry = OffsetIndexEntry {
            rel_offset: 7,
            position: 4096,
        };
        let golden = [0, 0, 0, 7, 0, 0, 0x10, 0, 0x9d, 0xc0, 0x11, 0x28];
        assert_eq!(entry.encode(), golden);
        assert_eq!(OffsetIndexEntry::decode(&golden), Some(entry));
    }

    #[test]
    fn test_append_rejects_non_increasing() {
        let mut index = sample();
        assert!(!index.append(40, 20000));
        assert!(!index.append(50, 12288));
        assert!(!index.append(5, 5));
        assert_eq!(index.len(), 4);
        assert!(index.append(41, 12289));
    }

    #[test]
    fn test_lookup_finds_floor_entry() {
        let index = sample();
        let view_bytes = index.encode_all();
        let view = OffsetIndexView::new(&view_bytes);
        for (target, expected) in [
            (0, Some(0)),
            (9, Some(0)),
            (10, Some(10)),
            (39, Some(25)),
            (99, Some(40)),
        ] {
            assert_eq!(index.lookup(target).map(|e| e.rel_offset), expected);
            assert_eq!(view.lookup(target).map(|e| e.rel_offset), expected);
        }
        let mut later = OffsetIndex::new();
        assert!(later.append(5, 100));
        assert_eq!(later.lookup(4), None);
        assert_eq!(OffsetIndexView::new(&later.encode_all()).lookup(4), None);
        assert_eq!(OffsetIndexView::new(&[]).lookup(4), None);
    }

    #[test]
    fn test_truncation() {
        let mut index = sample();
        index.truncate_to_position(8192);
        assert_eq!(index.last().unwrap().rel_offset, 10);
        let mut index = sample();
        index.truncate_to_offset(26);
        assert_eq!(index.last().unwrap().rel_offset, 25);
        index.truncate_to_offset(0);
        assert!(index.is_empty());
    }

    #[test]
    fn test_encode_from_appends_the_rest() {
        let index = sample();
        let mut bytes = index.encode_from(0)[..2 * OFFSET_INDEX_ENTRY_LEN].to_vec();
        bytes.extend_from_slice(&index.encode_from(2));
        assert_eq!(bytes, index.encode_all());
        assert!(index.encode_from(99).is_empty());
        assert_eq!(OffsetIndex::from_bytes(&bytes), index);
    }

    #[test]
    fn test_torn_and_zero_filled_tails_are_ignored() {
        let index = sample();
        let mut bytes = index.encode_all();
        bytes.truncate(bytes.len() - 3);
        assert_eq!(parse_valid_prefix(&bytes), index.entries()[..3]);
        let mut bytes = index.encode_all();
        bytes.resize(bytes.len() + 4096, 0);
        let view = OffsetIndexView::new(&bytes);
        assert_eq!(view.len(), 4);
        assert_eq!(view.valid_bytes(), 4 * OFFSET_INDEX_ENTRY_LEN);
        assert_eq!(view.last(), index.last());
        assert_eq!(view.get(4), None);
    }

    #[test]
    fn test_stale_entry_after_valid_ones_is_ignored() {
        let index = sample();
        let mut bytes = index.encode_all();
        bytes.extend_from_slice(
            &OffsetIndexEntry {
                rel_offset: 5,
                position: 99_999,
            }
            .encode(),
        );
        assert_eq!(valid_prefix_len(&bytes), 4);
    }

    fn index_of(entries: &[OffsetIndexEntry]) -> OffsetIndex {
        let mut index = OffsetIndex::new();
        for e in entries {
            assert!(index.append(e.rel_offset, e.position));
        }
        index
    }

    fn arb_entries() -> impl Strategy<Value = Vec<OffsetIndexEntry>> {
        proptest::collection::vec((1..1000u32, 1..100_000u32), 0..64).prop_map(|steps| {
            let (mut rel, mut pos) = (0u32, 0u32);
            steps
                .into_iter()
                .map(|(dr, dp)| {
                    rel += dr;
                    pos += dp;
                    OffsetIndexEntry {
                        rel_offset: rel,
                        position: pos,
                    }
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn prop_entry_round_trips(rel in any::<u32>(), pos in any::<u32>()) {
            let entry = OffsetIndexEntry { rel_offset: rel, position: pos };
            prop_assert_eq!(OffsetIndexEntry::decode(&entry.encode()), Some(entry));
        }

        #[test]
        fn prop_index_round_trips_and_looks_up(entries in arb_entries(), target in any::<u32>()) {
            let mut index = OffsetIndex::new();
            for e in &entries {
                prop_assert!(index.append(e.rel_offset, e.position));
            }
            let bytes = index.encode_all();
            prop_assert_eq!(&parse_valid_prefix(&bytes), &entries);
            let view = OffsetIndexView::new(&bytes);
            let expected = entries.iter().rev().find(|e| e.rel_offset <= target).copied();
            prop_assert_eq!(index.lookup(target), expected);
            prop_assert_eq!(view.lookup(target), expected);
        }

        #[test]
        fn prop_bit_flip_yields_the_prefix_before_it(entries in arb_entries(), bit in any::<usize>()) {
            let mut bytes = index_of(&entries).encode_all();
            prop_assume!(!bytes.is_empty());
            let bit = bit % (bytes.len() * 8);
            bytes[bit / 8] ^= 1 << (bit % 8);
            let damaged = bit / 8 / OFFSET_INDEX_ENTRY_LEN;
            prop_assert_eq!(parse_valid_prefix(&bytes), entries[..damaged].to_vec());
        }

        #[test]
        fn prop_garbage_gives_a_valid_prefix(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let parsed = parse_valid_prefix(&bytes);
            prop_assert!(parsed.windows(2).all(|w| w[1].follows(&w[0])));
            let view = OffsetIndexView::new(&bytes);
            prop_assert_eq!(view.len(), parsed.len());
            let _ = view.lookup(u32::MAX / 2);
        }
    }
}
