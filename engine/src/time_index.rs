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

impl TimeIndexEntry {
    /// Encodes the entry with its CRC.
    pub fn encode(&self) -> [u8; TIME_INDEX_ENTRY_LEN] {
        let mut out = [0u8; TIME_INDEX_ENTRY_LEN];
        out[0..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.rel_offset.to_be_bytes());
        let crc = crc32fast::hash(&out[0..12]);
        out[12..16].copy_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes an entry; `None` if its CRC does not match.
    pub fn decode(bytes: &[u8; TIME_INDEX_ENTRY_LEN]) -> Option<Self> {
        let (body, crc) = bytes.split_at(12);
        let mut stored = [0u8; 4];
        stored.copy_from_slice(crc);
        if crc32fast::hash(body) != u32::from_be_bytes(stored) {
            return None;
        }
        Some(Self::decode_trusted(bytes))
    }

    /// Decodes without checking the CRC, for bytes a view has already validated.
    fn decode_trusted(bytes: &[u8]) -> Self {
        let mut timestamp = [0u8; 8];
        timestamp.copy_from_slice(&bytes[0..8]);
        let mut rel_offset = [0u8; 4];
        rel_offset.copy_from_slice(&bytes[8..12]);
        Self {
            timestamp: i64::from_be_bytes(timestamp),
            rel_offset: u32::from_be_bytes(rel_offset),
        }
    }

    fn follows(&self, previous: &Self) -> bool {
        self.timestamp > previous.timestamp && self.rel_offset >= previous.rel_offset
    }
}

/// Number of leading entries of `bytes` that are intact and in order.
pub fn valid_prefix_len(bytes: &[u8]) -> usize {
    let mut previous: Option<TimeIndexEntry> = None;
    let mut count = 0;
    for chunk in bytes.chunks_exact(TIME_INDEX_ENTRY_LEN) {
        let Some(raw) = chunk.first_chunk::<TIME_INDEX_ENTRY_LEN>() else {
            break;
        };
        let Some(entry) = TimeIndexEntry::decode(raw) else {
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

/// Decodes the valid prefix of a time index file; see the module doc.
pub fn parse_valid_prefix(bytes: &[u8]) -> Vec<TimeIndexEntry> {
    TimeIndexView::new(bytes).iter().collect()
}

/// Number of entries among the first `len` whose timestamp is below `target`.
fn count_below(len: usize, target: i64, entry: impl Fn(usize) -> TimeIndexEntry) -> usize {
    let (mut low, mut high) = (0, len);
    while low < high {
        let mid = low + (high - low) / 2;
        if entry(mid).timestamp < target {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low
}

/// In-memory time index of the active segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeIndex {
    entries: Vec<TimeIndexEntry>,
}

impl TimeIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Loads the valid prefix of a time index file (the active segment's, on reopen).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self {
            entries: parse_valid_prefix(bytes),
        }
    }

    /// Adds an entry if `timestamp` is above the last one; returns whether it did. Also
    /// refuses an offset below the last entry's, which would make lookups wrong.
    #[must_use]
    pub fn maybe_append(&mut self, timestamp: i64, rel_offset: u32) -> bool {
        let entry = TimeIndexEntry {
            timestamp,
            rel_offset,
        };
        if self.entries.last().is_some_and(|last| !entry.follows(last)) {
            return false;
        }
        self.entries.push(entry);
        true
    }

    /// The first entry with `timestamp ≥ target`; `None` if the segment has no such
    /// timestamp. Exact only under the writer discipline in the module doc.
    pub fn lookup(&self, target: i64) -> Option<TimeIndexEntry> {
        let i = self.entries.partition_point(|e| e.timestamp < target);
        self.entries.get(i).copied()
    }

    /// The last entry with `timestamp < target`, a safe place to start scanning for the first
    /// record at or after `target`; `None` means scan from the start of the segment.
    pub fn lookup_floor(&self, target: i64) -> Option<TimeIndexEntry> {
        let i = self.entries.partition_point(|e| e.timestamp < target);
        i.checked_sub(1).map(|i| self.entries[i])
    }

    /// Drops entries at or beyond `rel_offset`, after the log was truncated to that offset.
    pub fn truncate_to_offset(&mut self, rel_offset: u32) {
        let keep = self.entries.partition_point(|e| e.rel_offset < rel_offset);
        self.entries.truncate(keep);
    }

    /// All entries, in order.
    pub fn entries(&self) -> &[TimeIndexEntry] {
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

    /// The last entry: its timestamp is the segment's max timestamp.
    pub fn last(&self) -> Option<TimeIndexEntry> {
        self.entries.last().copied()
    }

    /// Encodes every entry, for writing the whole file.
    pub fn encode_all(&self) -> Vec<u8> {
        self.encode_from(0)
    }

    /// Encodes entries from index `first` on, for appending to the file at byte
    /// `first * TIME_INDEX_ENTRY_LEN`.
    pub fn encode_from(&self, first: usize) -> Vec<u8> {
        let tail = self.entries.get(first..).unwrap_or(&[]);
        let mut out = Vec::with_capacity(tail.len() * TIME_INDEX_ENTRY_LEN);
        for entry in tail {
            out.extend_from_slice(&entry.encode());
        }
        out
    }
}

/// Zero-copy reader over a time index file's bytes (typically an mmap of a sealed segment's
/// file). Validates once on construction and then reads only the valid prefix.
#[derive(Debug, Clone, Copy)]
pub struct TimeIndexView<'a> {
    valid: &'a [u8],
}

impl<'a> TimeIndexView<'a> {
    /// Validates `bytes` (one CRC per entry) and keeps the valid prefix.
    pub fn new(bytes: &'a [u8]) -> Self {
        let len = valid_prefix_len(bytes);
        Self {
            valid: &bytes[..len * TIME_INDEX_ENTRY_LEN],
        }
    }

    /// Number of valid entries.
    pub fn len(&self) -> usize {
        self.valid.len() / TIME_INDEX_ENTRY_LEN
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
    pub fn get(&self, i: usize) -> Option<TimeIndexEntry> {
        let start = i.checked_mul(TIME_INDEX_ENTRY_LEN)?;
        let bytes = self.valid.get(start..start + TIME_INDEX_ENTRY_LEN)?;
        Some(TimeIndexEntry::decode_trusted(bytes))
    }

    /// The last valid entry.
    pub fn last(&self) -> Option<TimeIndexEntry> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// The first entry with `timestamp ≥ target`; see [`TimeIndex::lookup`].
    pub fn lookup(&self, target: i64) -> Option<TimeIndexEntry> {
        self.get(self.below(target))
    }

    /// The last entry with `timestamp < target`; see [`TimeIndex::lookup_floor`].
    pub fn lookup_floor(&self, target: i64) -> Option<TimeIndexEntry> {
        self.below(target).checked_sub(1).and_then(|i| self.get(i))
    }

    fn below(&self, target: i64) -> usize {
        let at = |i: usize| TimeIndexEntry::decode_trusted(&self.valid[i * TIME_INDEX_ENTRY_LEN..]);
        count_below(self.len(), target, at)
    }

    /// The valid entries in order.
    pub fn iter(&self) -> impl Iterator<Item = TimeIndexEntry> + 'a {
        self.valid
            .chunks_exact(TIME_INDEX_ENTRY_LEN)
            .map(TimeIndexEntry::decode_trusted)
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
            let mut bytes = TimeIndex { entries: entries.clone() }.encode_all();
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
