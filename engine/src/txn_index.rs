//! The aborted-transaction index of one segment, Kafka's `.txnindex`: for every transaction
//! an ABORT marker in the segment ended, where the transaction began, so that a
//! read-committed fetch can tell its consumer which records to drop (Kafka's
//! `TransactionIndex`, `AbortedTxn`).
//!
//! # File format (`<base_offset:020>.txnindex`)
//!
//! `<base_offset:020>-e<epoch>.txnindex` at a fence epoch (see [`crate::fence`]), beside the
//! segment's `.log`, `.index` and `.timeindex`. A flat array of 34-byte entries, no header,
//! big-endian, in the order the markers were written (strictly increasing `last_offset`):
//!
//! | bytes | field                                                                     |
//! |-------|---------------------------------------------------------------------------|
//! | 2     | `version` i16, 0                                                          |
//! | 8     | `producer_id` i64: the producer whose transaction was aborted             |
//! | 8     | `first_offset` i64: its first batch (may lie in an earlier segment)       |
//! | 8     | `last_offset` i64: the ABORT marker, in this segment                      |
//! | 8     | `last_stable_offset` i64: the first offset of the earliest other open transaction when the marker was written, or `last_offset + 1` |
//!
//! That is Kafka's file byte for byte (the `AbortedTxn` schema, version-prefixed), and like
//! Kafka's it carries no checksum. The file exists only for a segment that has at least one
//! entry, so a log without aborted transactions has the same files as before transactions.
//!
//! # Writes and fsyncs
//!
//! The index is derived data, written like the offset index
//! ([`crate::segment::IndexPersistJob`]): the active segment's entries live in memory and are
//! written out at each checkpoint (entries past the persisted ones appended after truncating
//! the file to them, then `fdatasync`) and when the segment is sealed, in both cases before
//! the recovery point that relies on them. That recovery point is written with a directory
//! fsync (or a volume barrier at a fence epoch) after the index file was created or removed
//! in the same directory, and so is the producer snapshot taken with it, which lists the
//! segments whose index holds entries below it ([`crate::producer_state::snapshot`]): a file
//! missing below the recovery point is one that never had an entry unless the snapshot
//! lists its segment. A segment whose entries all went (recovery dropped entries past the
//! recovery point) has its file removed by the same writes.
//!
//! # What a crash leaves, and how recovery reads it
//!
//! Entries below the recovery point were fdatasync'd before it was written. A crash can
//! leave entries after it, torn or whole, in the file of the segment holding the recovery
//! point: recovery keeps that file's entries whose marker lies below the point
//! ([`parse_below`]) and rebuilds the rest by replaying the log from the producer snapshot,
//! which has the transactions open at the point. The files of segments wholly below the
//! recovery point are read whole ([`parse_sealed`]), and of segments wholly after it
//! ignored (rebuilt). Without a checksum, recovery can only tell an implausible entry (a
//! version other than 0, a negative producer id, offsets out of order or outside the
//! segment, a last stable offset past the marker) and a file the snapshot counts on that
//! is missing or holds no entry below the point; then it replays the whole log instead,
//! which rebuilds every segment's index, as it does when the recovery point itself is
//! lost. A wrong but plausible entry, as in Kafka, goes unnoticed.
//!
//! The entries of every segment are kept in memory (32 bytes each) for reads: a fetch
//! collects them from the segment holding its offset onwards, stopping at the first entry
//! whose last stable offset reaches its upper bound ([`collect`], Kafka's
//! `collectAbortedTxns`).

/// Size of one encoded entry.
pub const TXN_INDEX_ENTRY_LEN: usize = 34;
/// The only entry version.
const ENTRY_VERSION: i16 = 0;

/// One aborted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// Offset of the transaction's first batch.
    pub first_offset: i64,
    /// Offset of the ABORT marker.
    pub last_offset: i64,
    /// The last stable offset once the marker was written.
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// The entry's 34 bytes.
    pub fn encode(&self) -> [u8; TXN_INDEX_ENTRY_LEN] {
        let mut out = [0u8; TXN_INDEX_ENTRY_LEN];
        out[0..2].copy_from_slice(&ENTRY_VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// Decodes an entry; `None` when its version is not 0.
    pub fn decode(bytes: &[u8; TXN_INDEX_ENTRY_LEN]) -> Option<Self> {
        let field = |at: usize| {
            let mut value = [0u8; 8];
            value.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(value)
        };
        if i16::from_be_bytes([bytes[0], bytes[1]]) != ENTRY_VERSION {
            return None;
        }
        Some(AbortedTxn {
            producer_id: field(2),
            first_offset: field(10),
            last_offset: field(18),
            last_stable_offset: field(26),
        })
    }

    /// Whether the entry could have been written for a marker in `[base, bound)` after one
    /// at `previous_last` (see the module doc).
    fn plausible(&self, base: u64, bound: u64, previous_last: Option<i64>) -> bool {
        self.producer_id >= 0
            && 0 <= self.first_offset
            && self.first_offset <= self.last_offset
            && (self.last_offset as u64) >= base
            && (self.last_offset as u64) < bound
            && previous_last.is_none_or(|previous| previous < self.last_offset)
            && 0 <= self.last_stable_offset
            && self.last_stable_offset <= self.last_offset.saturating_add(1)
    }
}

/// Encodes entries back to back.
pub fn encode_entries(entries: &[AbortedTxn]) -> Vec<u8> {
    entries.iter().flat_map(|entry| entry.encode()).collect()
}

/// Why recovery does not trust a transaction index file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damaged(pub &'static str);

/// The entries of the index file of a segment wholly below the recovery point, holding
/// offsets `[base, next_base)`: every entry must be whole and plausible.
pub fn parse_sealed(bytes: &[u8], base: u64, next_base: u64) -> Result<Vec<AbortedTxn>, Damaged> {
    if !bytes.len().is_multiple_of(TXN_INDEX_ENTRY_LEN) {
        return Err(Damaged("a partial entry"));
    }
    let mut entries: Vec<AbortedTxn> = Vec::with_capacity(bytes.len() / TXN_INDEX_ENTRY_LEN);
    for chunk in bytes.chunks_exact(TXN_INDEX_ENTRY_LEN) {
        let entry = decode_chunk(chunk).ok_or(Damaged("an entry of an unknown version"))?;
        let previous = entries.last().map(|e| e.last_offset);
        if !entry.plausible(base, next_base, previous) {
            return Err(Damaged("an implausible entry"));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// The entries of the index file of the segment starting at `base` whose markers lie below
/// `bound` (the recovery point inside the segment): the entries up to the first at or past
/// it, or up to a partial last entry, which a crash after the recovery point may have
/// left. An implausible whole entry before that is damage.
pub fn parse_below(bytes: &[u8], base: u64, bound: u64) -> Result<Vec<AbortedTxn>, Damaged> {
    let mut entries: Vec<AbortedTxn> = Vec::new();
    for chunk in bytes.chunks_exact(TXN_INDEX_ENTRY_LEN) {
        let Some(entry) = decode_chunk(chunk) else {
            return Err(Damaged("an entry of an unknown version"));
        };
        if entry.last_offset >= 0 && entry.last_offset as u64 >= bound {
            break;
        }
        let previous = entries.last().map(|e| e.last_offset);
        if !entry.plausible(base, bound, previous) {
            return Err(Damaged("an implausible entry"));
        }
        entries.push(entry);
    }
    Ok(entries)
}

fn decode_chunk(chunk: &[u8]) -> Option<AbortedTxn> {
    let bytes: &[u8; TXN_INDEX_ENTRY_LEN] = chunk.try_into().ok()?;
    AbortedTxn::decode(bytes)
}

/// Kafka's `collectAbortedTxns` over one segment's entries: adds to `out` every entry with
/// `last_offset >= fetch_offset` and `first_offset < upper_bound`, and returns true once an
/// entry's last stable offset reaches `upper_bound` (no later segment can hold an aborted
/// transaction that began below it: every transaction open then began at or past it).
pub fn collect(
    entries: &[AbortedTxn],
    fetch_offset: u64,
    upper_bound: u64,
    out: &mut Vec<AbortedTxn>,
) -> bool {
    for entry in entries {
        if entry.last_offset as u64 >= fetch_offset && (entry.first_offset as u64) < upper_bound {
            out.push(*entry);
        }
        if entry.last_stable_offset as u64 >= upper_bound {
            return true;
        }
    }
    false
}

/// The aborted transactions of one segment, in memory, and how much of them its file holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct SegmentTxnIndex {
    entries: Vec<AbortedTxn>,
    /// Leading entries the file holds (written and fdatasync'd).
    persisted: usize,
    file: FileState,
}

/// What the segment's index file holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum FileState {
    /// There is none.
    #[default]
    Absent,
    /// Exactly the persisted entries (this log wrote it).
    Exact,
    /// The persisted entries, possibly followed by entries recovery dropped (past the
    /// recovery point): the next write cuts it, or removes it when nothing is left.
    MayHoldMore,
}

/// What must be written so the file holds every in-memory entry and nothing else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TxnIndexWrite {
    /// The file is up to date.
    Nothing,
    /// No entry: the file must go.
    Remove,
    /// Truncate the file to `position`, append `bytes` there, fdatasync.
    Append { bytes: Vec<u8>, position: u64 },
}

impl SegmentTxnIndex {
    /// The entries recovery kept of a segment's file (`file_exists`: there is one, which may
    /// hold more).
    pub fn loaded(entries: Vec<AbortedTxn>, file_exists: bool) -> Self {
        SegmentTxnIndex {
            persisted: entries.len(),
            entries,
            file: if file_exists {
                FileState::MayHoldMore
            } else {
                FileState::Absent
            },
        }
    }

    /// The entries, in marker order.
    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    /// Adds the entry for an ABORT marker written in this segment.
    pub fn push(&mut self, entry: AbortedTxn) {
        self.entries.push(entry);
    }

    /// What a write of the file must do; [`Self::mark_written`] takes `self.entries().len()`
    /// once it is done.
    pub fn write_job(&self) -> TxnIndexWrite {
        let count = self.entries.len();
        if count == 0 {
            return match self.file {
                FileState::Absent => TxnIndexWrite::Nothing,
                FileState::Exact | FileState::MayHoldMore => TxnIndexWrite::Remove,
            };
        }
        if self.file == FileState::Exact && self.persisted == count {
            return TxnIndexWrite::Nothing;
        }
        TxnIndexWrite::Append {
            bytes: encode_entries(&self.entries[self.persisted..]),
            position: (self.persisted * TXN_INDEX_ENTRY_LEN) as u64,
        }
    }

    /// A write of [`Self::write_job`] covering the first `count` entries is durable.
    pub fn mark_written(&mut self, count: usize) {
        if count < self.persisted {
            return;
        }
        self.persisted = count;
        self.file = if count == 0 {
            FileState::Absent
        } else {
            FileState::Exact
        };
    }
}

#[cfg(test)]
mod tests;
