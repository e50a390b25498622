//! What the segment indexes ([`crate::offset_index`], [`crate::time_index`]) share: a flat
//! array of fixed-size entries with no header, each entry its big-endian fields followed by a
//! CRC-32 (IEEE, `crc32fast`) of those fields, kept in a strict order.
//!
//! The file formats themselves, and what a crash leaves in them, are documented in those two
//! modules; this one holds the code they have in common: encoding with the CRC, finding the
//! longest valid prefix of a file, the in-memory index of the active segment
//! ([`SparseIndex`]), the zero-copy reader over a mapped file ([`SparseIndexView`]), and
//! lookups by an entry's key.
//!
//! A reader accepts the longest prefix of entries that each pass their CRC and each
//! [follow](IndexEntry::follows) the one before, and ignores everything from the first failure
//! on. Because every accepted entry is ordered by its [key](IndexEntry::key) and by its
//! relative offset, lookups and truncation are binary searches.

use std::marker::PhantomData;

/// Bytes of the CRC at the end of every entry.
const CRC_LEN: usize = 4;

/// One entry type of a sparse index file.
pub trait IndexEntry: Copy {
    /// The encoded entry, CRC included: `[u8; N]` for an entry of `N` bytes.
    type Encoded: AsRef<[u8]> + AsMut<[u8]> + Default;

    /// What lookups search by; every valid index is strictly increasing in it.
    type Key: Ord + Copy;

    /// Size of one encoded entry, CRC included.
    const LEN: usize = size_of::<Self::Encoded>();

    /// The key lookups search by.
    fn key(&self) -> Self::Key;

    /// Offset relative to the segment's base offset, never decreasing along an index: what
    /// truncation after a log truncation goes by.
    fn rel_offset(&self) -> u32;

    /// Whether `self` may stand right after `previous` in an index. An entry out of order
    /// would break every later lookup, so appends and readers stop at one.
    fn follows(&self, previous: &Self) -> bool;

    /// Writes the fields (the `LEN - 4` bytes before the CRC), big-endian.
    fn write_fields(&self, fields: &mut [u8]);

    /// Reads the fields written by [`IndexEntry::write_fields`]; `fields` has exactly their
    /// length.
    fn read_fields(fields: &[u8]) -> Self;

    /// Encodes the entry with its CRC.
    fn encode(&self) -> Self::Encoded {
        let mut out = Self::Encoded::default();
        let (fields, crc) = out.as_mut().split_at_mut(Self::LEN - CRC_LEN);
        self.write_fields(fields);
        crc.copy_from_slice(&crc32fast::hash(fields).to_be_bytes());
        out
    }

    /// Decodes an entry; `None` if its CRC does not match.
    fn decode(bytes: &Self::Encoded) -> Option<Self> {
        decode_checked(bytes.as_ref())
    }
}

/// The `N` bytes of `fields` starting at `at`, for [`IndexEntry::read_fields`], whose layout
/// keeps them in bounds.
pub(crate) fn field<const N: usize>(fields: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&fields[at..at + N]);
    out
}

/// Decodes one entry of `E::LEN` bytes; `None` if it is short or its CRC does not match.
fn decode_checked<E: IndexEntry>(bytes: &[u8]) -> Option<E> {
    let (fields, crc) = bytes.split_at_checked(E::LEN - CRC_LEN)?;
    let stored = <[u8; CRC_LEN]>::try_from(crc).ok()?;
    (crc32fast::hash(fields) == u32::from_be_bytes(stored)).then(|| E::read_fields(fields))
}

/// Decodes an entry without checking the CRC, for bytes already validated.
fn decode_trusted<E: IndexEntry>(bytes: &[u8]) -> E {
    E::read_fields(&bytes[..E::LEN - CRC_LEN])
}

/// Number of leading entries of `bytes` that are intact and in order.
pub fn valid_prefix_len<E: IndexEntry>(bytes: &[u8]) -> usize {
    let mut previous: Option<E> = None;
    let mut count = 0;
    for chunk in bytes.chunks_exact(E::LEN) {
        let Some(entry) = decode_checked::<E>(chunk) else {
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

/// Decodes the valid prefix of an index file.
pub fn parse_valid_prefix<E: IndexEntry>(bytes: &[u8]) -> Vec<E> {
    SparseIndexView::<E>::new(bytes).iter().collect()
}

/// Which entry a lookup by key returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// The last entry whose key is ≤ the target.
    LastAtOrBelow,
    /// The first entry whose key is ≥ the target.
    FirstAtOrAbove,
    /// The last entry whose key is < the target.
    LastBelow,
}

/// Looks `target` up among `len` entries ordered by key, entry `i` read by `at`. Shared by
/// the in-memory index and the view, which has no slice of decoded entries.
fn search<E: IndexEntry>(
    len: usize,
    at: impl Fn(usize) -> E,
    target: E::Key,
    which: Search,
) -> Option<E> {
    let before = |entry: &E| match which {
        Search::LastAtOrBelow => entry.key() <= target,
        Search::FirstAtOrAbove | Search::LastBelow => entry.key() < target,
    };
    // The number of entries before the target: a partition point over an index range.
    let (mut low, mut high) = (0, len);
    while low < high {
        let mid = low + (high - low) / 2;
        if before(&at(mid)) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    match which {
        Search::LastAtOrBelow | Search::LastBelow => low.checked_sub(1).map(at),
        Search::FirstAtOrAbove => (low < len).then(|| at(low)),
    }
}

/// In-memory index of the active segment, appended to as batches are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SparseIndex<E> {
    entries: Vec<E>,
}

impl<E> Default for SparseIndex<E> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
        }
    }
}

impl<E: IndexEntry> SparseIndex<E> {
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

    /// Adds `entry` if it [follows](IndexEntry::follows) the last one; returns whether it did.
    #[must_use]
    pub fn push(&mut self, entry: E) -> bool {
        if self.entries.last().is_some_and(|last| !entry.follows(last)) {
            return false;
        }
        self.entries.push(entry);
        true
    }

    /// Looks `target` up by key.
    pub fn search(&self, target: E::Key, which: Search) -> Option<E> {
        search(self.entries.len(), |i| self.entries[i], target, which)
    }

    /// Keeps the leading entries for which `keep` holds and drops the rest. `keep` must go
    /// by a field the entries are ordered by, so that it holds for a prefix.
    pub fn retain_prefix(&mut self, keep: impl FnMut(&E) -> bool) {
        let kept = self.entries.partition_point(keep);
        self.entries.truncate(kept);
    }

    /// Drops entries at or beyond `rel_offset`, after the log was truncated to that offset.
    pub fn truncate_to_offset(&mut self, rel_offset: u32) {
        self.retain_prefix(|e| e.rel_offset() < rel_offset);
    }

    /// All entries, in order.
    pub fn entries(&self) -> &[E] {
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
    pub fn last(&self) -> Option<E> {
        self.entries.last().copied()
    }

    /// Encodes every entry, for writing the whole file.
    pub fn encode_all(&self) -> Vec<u8> {
        self.encode_from(0)
    }

    /// Encodes entries from index `first` on (the ones not yet written), for appending to
    /// the file at byte `first * E::LEN`.
    pub fn encode_from(&self, first: usize) -> Vec<u8> {
        let tail = self.entries.get(first..).unwrap_or(&[]);
        let mut out = Vec::with_capacity(tail.len() * E::LEN);
        for entry in tail {
            out.extend_from_slice(entry.encode().as_ref());
        }
        out
    }
}

/// Zero-copy reader over an index file's bytes (typically an mmap of a sealed segment's
/// index). Validates once on construction and then reads only the valid prefix.
#[derive(Debug)]
pub struct SparseIndexView<'a, E> {
    valid: &'a [u8],
    entry: PhantomData<E>,
}

impl<E> Clone for SparseIndexView<'_, E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for SparseIndexView<'_, E> {}

impl<'a, E: IndexEntry + 'a> SparseIndexView<'a, E> {
    /// Validates `bytes` (one CRC per entry) and keeps the valid prefix.
    pub fn new(bytes: &'a [u8]) -> Self {
        let len = valid_prefix_len::<E>(bytes);
        Self {
            valid: &bytes[..len * E::LEN],
            entry: PhantomData,
        }
    }

    /// Number of valid entries.
    pub fn len(&self) -> usize {
        self.valid.len() / E::LEN
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
    pub fn get(&self, i: usize) -> Option<E> {
        let start = i.checked_mul(E::LEN)?;
        let bytes = self.valid.get(start..start.checked_add(E::LEN)?)?;
        Some(decode_trusted(bytes))
    }

    /// The last valid entry.
    pub fn last(&self) -> Option<E> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// Looks `target` up by key.
    pub fn search(&self, target: E::Key, which: Search) -> Option<E> {
        let at = |i: usize| decode_trusted(&self.valid[i * E::LEN..]);
        search(self.len(), at, target, which)
    }

    /// The valid entries in order.
    pub fn iter(&self) -> impl Iterator<Item = E> + 'a {
        self.valid.chunks_exact(E::LEN).map(decode_trusted)
    }
}
