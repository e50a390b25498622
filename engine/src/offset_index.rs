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

impl OffsetIndexEntry {
    /// Encodes the entry with its CRC.
    pub fn encode(&self) -> [u8; OFFSET_INDEX_ENTRY_LEN] {
        let mut out = [0u8; OFFSET_INDEX_ENTRY_LEN];
        out[0..4].copy_from_slice(&self.rel_offset.to_be_bytes());
        out[4..8].copy_from_slice(&self.position.to_be_bytes());
        let crc = crc32fast::hash(&out[0..8]);
        out[8..12].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes an entry; `None` if its CRC does not match.
    pub fn decode(bytes: &[u8; OFFSET_INDEX_ENTRY_LEN]) -> Option<Self> {
        let [a, b, c, d, e, f, g, h, c0, c1, c2, c3] = *bytes;
        if crc32fast::hash(&bytes[0..8]) != u32::from_be_bytes([c0, c1, c2, c3]) {
            return None;
        }
        Some(Self {
            rel_offset: u32::from_be_bytes([a, b, c, d]),
            position: u32::from_be_bytes([e, f, g, h]),
        })
    }

    /// Decodes without checking the CRC, for bytes a view has already validated.
    fn decode_trusted(bytes: &[u8]) -> Self {
        let word = |at: usize| {
            let mut w = [0u8; 4];
            w.copy_from_slice(&bytes[at..at + 4]);
            u32::from_be_bytes(w)
        };
        Self {
            rel_offset: word(0),
            position: word(4),
        }
    }

    fn follows(&self, previous: &Self) -> bool {
        self.rel_offset > previous.rel_offset && self.position > previous.position
    }
}

/// Number of leading entries of `bytes` that are intact and strictly increasing.
pub fn valid_prefix_len(bytes: &[u8]) -> usize {
    let mut previous: Option<OffsetIndexEntry> = None;
    let mut count = 0;
    for chunk in bytes.chunks_exact(OFFSET_INDEX_ENTRY_LEN) {
        let Some(raw) = chunk.first_chunk::<OFFSET_INDEX_ENTRY_LEN>() else {
            break;
        };
        let Some(entry) = OffsetIndexEntry::decode(raw) else {
            break;
        };
        if previous.is_some_and(|p| !entry.follows(&p)) {
            break;
        }
        previous = Some(entry);
        count += 1;
    }
    count
}

/// Decodes the valid prefix of an index file; see the module doc.
pub fn parse_valid_prefix(bytes: &[u8]) -> Vec<OffsetIndexEntry> {
    OffsetIndexView::new(bytes).iter().collect()
}

/// Index of the greatest entry whose `rel_offset` is ≤ `target`, given a way to read entry `i`.
fn floor_index(
    len: usize,
    target: u32,
    entry: impl Fn(usize) -> OffsetIndexEntry,
) -> Option<usize> {
    // partition_point over an index range, since a view has no slice of decoded entries.
    let (mut low, mut high) = (0, len);
    while low < high {
        let mid = low + (high - low) / 2;
        if entry(mid).rel_offset <= target {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low.checked_sub(1)
}

/// In-memory index of the active segment, appended to as batches are written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffsetIndex {
    entries: Vec<OffsetIndexEntry>,
}

impl OffsetIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads the valid prefix of an index file (the active segment's, on reopen).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self {
            entries: parse_valid_prefix(bytes),
        }
    }

    /// Adds an entry. Returns `false`, and adds nothing, unless both fields are greater than
    /// the last entry's: an entry out of order would break every later lookup.
    #[must_use]
    pub fn append(&mut self, rel_offset: u32, position: u32) -> bool {
        let entry = OffsetIndexEntry {
            rel_offset,
            position,
        };
        if self.entries.last().is_some_and(|last| !entry.follows(last)) {
            return false;
        }
        self.entries.push(entry);
        true
    }

    /// The greatest entry with `rel_offset ≤ target`; `None` means scan from position 0.
    pub fn lookup(&self, target: u32) -> Option<OffsetIndexEntry> {
        let i = self.entries.partition_point(|e| e.rel_offset <= target);
        i.checked_sub(1).map(|i| self.entries[i])
    }

    /// Drops entries at or beyond `position`, after the log was truncated to `position` bytes.
    pub fn truncate_to_position(&mut self, position: u32) {
        let keep = self.entries.partition_point(|e| e.position < position);
        self.entries.truncate(keep);
    }

    /// Drops entries at or beyond `rel_offset`, after the log was truncated to that offset.
    pub fn truncate_to_offset(&mut self, rel_offset: u32) {
        let keep = self.entries.partition_point(|e| e.rel_offset < rel_offset);
        self.entries.truncate(keep);
    }

    /// All entries, in order.
    pub fn entries(&self) -> &[OffsetIndexEntry] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The last entry.
    pub fn last(&self) -> Option<OffsetIndexEntry> {
        self.entries.last().copied()
    }

    /// Encodes every entry, for writing the whole file.
    pub fn encode_all(&self) -> Vec<u8> {
        self.encode_from(0)
    }

    /// Encodes entries from index `first` on (the ones not yet written), for appending to
    /// the file at byte `first * OFFSET_INDEX_ENTRY_LEN`.
    pub fn encode_from(&self, first: usize) -> Vec<u8> {
        let tail = self.entries.get(first..).unwrap_or(&[]);
        let mut out = Vec::with_capacity(tail.len() * OFFSET_INDEX_ENTRY_LEN);
        for entry in tail {
            out.extend_from_slice(&entry.encode());
        }
        out
    }
}

/// Zero-copy reader over an index file's bytes (typically an mmap of a sealed segment's
/// index). Validates once on construction and then reads only the valid prefix.
#[derive(Debug, Clone, Copy)]
pub struct OffsetIndexView<'a> {
    valid: &'a [u8],
}

impl<'a> OffsetIndexView<'a> {
    /// Validates `bytes` (one CRC per entry) and keeps the valid prefix.
    pub fn new(bytes: &'a [u8]) -> Self {
        let len = valid_prefix_len(bytes);
        Self {
            valid: &bytes[..len * OFFSET_INDEX_ENTRY_LEN],
        }
    }

    /// Number of valid entries.
    pub fn len(&self) -> usize {
        self.valid.len() / OFFSET_INDEX_ENTRY_LEN
    }

    /// Whether there are no valid entries.
    pub fn is_empty(&self) -> bool {
        self.valid.is_empty()
    }

    /// Byte length of the valid prefix: where the I/O layer truncates the file.
    pub fn valid_bytes(&self) -> usize {
        self.valid.len()
    }

    /// Entry `i`, if it is within the valid prefix.
    pub fn get(&self, i: usize) -> Option<OffsetIndexEntry> {
        let start = i.checked_mul(OFFSET_INDEX_ENTRY_LEN)?;
        let bytes = self.valid.get(start..start + OFFSET_INDEX_ENTRY_LEN)?;
        Some(OffsetIndexEntry::decode_trusted(bytes))
    }

    /// The last valid entry.
    pub fn last(&self) -> Option<OffsetIndexEntry> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// The greatest entry with `rel_offset ≤ target`; `None` means scan from position 0.
    pub fn lookup(&self, target: u32) -> Option<OffsetIndexEntry> {
        let at =
            |i: usize| OffsetIndexEntry::decode_trusted(&self.valid[i * OFFSET_INDEX_ENTRY_LEN..]);
        floor_index(self.len(), target, at).map(at)
    }

    /// The valid entries in order.
    pub fn iter(&self) -> impl Iterator<Item = OffsetIndexEntry> + 'a {
        self.valid
            .chunks_exact(OFFSET_INDEX_ENTRY_LEN)
            .map(OffsetIndexEntry::decode_trusted)
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
            let mut bytes = OffsetIndex { entries: entries.clone() }.encode_all();
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
