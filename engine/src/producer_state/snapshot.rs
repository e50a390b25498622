//! The producer-state snapshot file: a [`super::ProducerStateTable`] as of one log offset.
//!
//! # File
//!
//! Named `<offset:020>.snapshot` (`<offset:020>-e<epoch>.snapshot` at a fenced epoch, see
//! [`crate::fence`]; [`snapshot_file_name`]), where `offset` is the log end offset
//! the snapshot reflects: replaying the batches from `offset` onwards
//! ([`super::ProducerStateTable::replay_stored_batch`]) rebuilds the current state, open
//! transactions included. All integers big-endian.
//!
//! | bytes | field                                                        |
//! |-------|--------------------------------------------------------------|
//! | 4     | magic `b"KPST"`                                              |
//! | 2     | version: 2 (1 is still read, see below)                      |
//! | 2     | reserved, 0                                                  |
//! | 8     | `covers_up_to_offset` u64                                    |
//! | 4     | entry count u32                                              |
//! |       | per entry, in ascending producer id:                         |
//! | 8     | producer id i64 (≥ 0)                                        |
//! | 2     | epoch i16                                                    |
//! | 4     | coordinator epoch i32 of its last transaction marker (-1: none) |
//! | 8     | first offset i64 of its open transaction (-1: none; else below `covers_up_to_offset`) |
//! | 8     | last timestamp i64: of its last batch or transaction marker (expiration) |
//! | 1     | batch count u8, 0..=5 (0: only a marker is known of it)      |
//! | 32 ×n | oldest first: first_seq i32, last_seq i32, first_offset i64, last_offset i64, max_timestamp i64 |
//! | 4     | segment count u32                                            |
//! | 8 ×n  | ascending: base offset u64 of every segment whose transaction index ([`crate::txn_index`]) holds entries below `covers_up_to_offset` |
//! | 4     | CRC-32 (IEEE, `crc32fast`) of every preceding byte           |
//!
//! The segment list is how recovery tells a transaction index that went missing from one
//! that never existed (the file exists only for a segment with aborted transactions): the
//! checkpoint writing the snapshot has written those indexes (and fdatasync'd them) first.
//!
//! Version 1 (written before transactions) has, per entry, only the producer id, the epoch,
//! a batch count of 1..=5 and the batches, and no segment list: it decodes as producers with
//! no open transaction, no coordinator epoch, and their last batch's max timestamp as last
//! timestamp, and no transaction index (none was written before transactions). Only version
//! 2 is written.
//!
//! The I/O layer writes a snapshot to a temporary name, fsyncs, and renames, so a crash leaves
//! either the old set of snapshots or the new one; a torn or bit-flipped file still fails the
//! CRC here and the caller falls back to an older snapshot (or an empty table) and replays more
//! of the log. Decoding checks the CRC first, then every count against the bytes left before
//! allocating, and rejects trailing bytes, so no input panics or over-allocates. After the log
//! is truncated, snapshots above the truncation point describe data that is gone and must be
//! deleted.

use std::collections::VecDeque;

use super::{
    BatchMetadata, ProducerEntry, ProducerStateError, BATCHES_KEPT_PER_PRODUCER,
    NO_COORDINATOR_EPOCH,
};

const SNAPSHOT_MAGIC: [u8; 4] = *b"KPST";
/// Before transactions: no open transaction, coordinator epoch or last timestamp.
const VERSION_IDEMPOTENT_ONLY: u16 = 1;
const VERSION_WITH_TRANSACTIONS: u16 = 2;
pub(super) const SNAPSHOT_HEADER_LEN: usize = 20;
/// Producer id, epoch, batch count.
const ENTRY_FIXED_LEN_V1: usize = 11;
/// Producer id, epoch, coordinator epoch, open transaction, last timestamp, batch count.
pub(super) const ENTRY_FIXED_LEN_V2: usize = 31;
const SNAPSHOT_BATCH_LEN: usize = 32;
pub(super) const SNAPSHOT_CRC_LEN: usize = 4;

/// `<offset:020>.snapshot`, the file name of a snapshot covering up to `offset`.
pub fn snapshot_file_name(covers_up_to_offset: u64, epoch: u32) -> String {
    let stem = crate::fence::with_epoch(&format!("{covers_up_to_offset:020}"), epoch);
    format!("{stem}.snapshot")
}

/// The offset in a snapshot file name of `epoch`, or `None` if the name is not one.
pub fn parse_snapshot_file_name(name: &str, epoch: u32) -> Option<u64> {
    let (digits, name_epoch) = crate::fence::split_epoch(name.strip_suffix(".snapshot")?);
    if name_epoch != epoch || digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// A decoded snapshot file.
pub(super) struct Decoded {
    pub covers_up_to_offset: u64,
    /// In file order (ascending producer id).
    pub entries: Vec<ProducerEntry>,
    pub txn_index_segments: Vec<u64>,
}

/// Encodes `entries` (ascending producer id) and the segments with transaction index
/// entries as a version-2 snapshot file.
pub(super) fn encode(
    entries: &[&ProducerEntry],
    covers_up_to_offset: u64,
    txn_index_segments: &[u64],
) -> Vec<u8> {
    let batches: usize = entries.iter().map(|e| e.batches.len()).sum();
    let mut out = Vec::with_capacity(
        SNAPSHOT_HEADER_LEN
            + entries.len() * ENTRY_FIXED_LEN_V2
            + batches * SNAPSHOT_BATCH_LEN
            + SNAPSHOT_CRC_LEN,
    );
    out.extend_from_slice(&SNAPSHOT_MAGIC);
    out.extend_from_slice(&VERSION_WITH_TRANSACTIONS.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&covers_up_to_offset.to_be_bytes());
    // The table never holds 2^32 producers (the cap is a usize but memory is not).
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for entry in entries {
        out.extend_from_slice(&entry.producer_id.to_be_bytes());
        out.extend_from_slice(&entry.epoch.to_be_bytes());
        out.extend_from_slice(&entry.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&entry.open_transaction.unwrap_or(-1).to_be_bytes());
        out.extend_from_slice(&entry.last_timestamp.to_be_bytes());
        out.push(entry.batches.len() as u8);
        for b in &entry.batches {
            out.extend_from_slice(&b.first_seq.to_be_bytes());
            out.extend_from_slice(&b.last_seq.to_be_bytes());
            out.extend_from_slice(&b.first_offset.to_be_bytes());
            out.extend_from_slice(&b.last_offset.to_be_bytes());
            out.extend_from_slice(&b.max_timestamp.to_be_bytes());
        }
    }
    let mut segments = txn_index_segments.to_vec();
    segments.sort_unstable();
    segments.dedup();
    out.extend_from_slice(&(segments.len() as u32).to_be_bytes());
    for base in segments {
        out.extend_from_slice(&base.to_be_bytes());
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// Decodes a snapshot file (version 1 or 2).
pub(super) fn decode(bytes: &[u8]) -> Result<Decoded, ProducerStateError> {
    if bytes.len() < SNAPSHOT_HEADER_LEN + SNAPSHOT_CRC_LEN {
        return Err(ProducerStateError::SnapshotTruncated);
    }
    let (body, trailer) = bytes.split_at(bytes.len() - SNAPSHOT_CRC_LEN);
    let mut reader = Reader { buf: trailer };
    let stored = u32::from_be_bytes(reader.array()?);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(ProducerStateError::SnapshotCrcMismatch { stored, computed });
    }
    let mut reader = Reader { buf: body };
    if reader.array::<4>()? != SNAPSHOT_MAGIC {
        return Err(ProducerStateError::SnapshotBadMagic);
    }
    let version = u16::from_be_bytes(reader.array()?);
    let entry_fixed_len = match version {
        VERSION_IDEMPOTENT_ONLY => ENTRY_FIXED_LEN_V1,
        VERSION_WITH_TRANSACTIONS => ENTRY_FIXED_LEN_V2,
        other => return Err(ProducerStateError::SnapshotUnsupportedVersion(other)),
    };
    reader.array::<2>()?;
    let covers_up_to = u64::from_be_bytes(reader.array()?);
    let count = u32::from_be_bytes(reader.array()?) as usize;
    if count > reader.buf.len() / entry_fixed_len {
        return Err(ProducerStateError::SnapshotTruncated);
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let entry = if version == VERSION_IDEMPOTENT_ONLY {
            reader.entry_v1()?
        } else {
            reader.entry_v2(covers_up_to)?
        };
        entries.push(entry);
    }
    let txn_index_segments = if version == VERSION_IDEMPOTENT_ONLY {
        Vec::new()
    } else {
        reader.segments()?
    };
    if !reader.buf.is_empty() {
        return Err(ProducerStateError::SnapshotCorrupt(
            "bytes after the last entry",
        ));
    }
    if entries
        .windows(2)
        .any(|w| w[0].producer_id >= w[1].producer_id)
    {
        return Err(ProducerStateError::SnapshotCorrupt(
            "producer ids not strictly ascending",
        ));
    }
    Ok(Decoded {
        covers_up_to_offset: covers_up_to,
        entries,
        txn_index_segments,
    })
}

/// Bounds-checked big-endian reader over a snapshot body.
struct Reader<'a> {
    buf: &'a [u8],
}

impl Reader<'_> {
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProducerStateError> {
        let (head, rest) = self
            .buf
            .split_first_chunk::<N>()
            .ok_or(ProducerStateError::SnapshotTruncated)?;
        self.buf = rest;
        Ok(*head)
    }

    fn entry_v1(&mut self) -> Result<ProducerEntry, ProducerStateError> {
        let producer_id = i64::from_be_bytes(self.array()?);
        let epoch = i16::from_be_bytes(self.array()?);
        let [batch_count] = self.array::<1>()?;
        if batch_count == 0 {
            return Err(ProducerStateError::SnapshotCorrupt(
                "batch count out of range",
            ));
        }
        let batches = self.batches(batch_count)?;
        let last_timestamp = batches.back().map_or(i64::MIN, |b| b.max_timestamp);
        check_producer_id(producer_id)?;
        Ok(ProducerEntry {
            producer_id,
            epoch,
            coordinator_epoch: NO_COORDINATOR_EPOCH,
            open_transaction: None,
            last_timestamp,
            batches,
        })
    }

    fn entry_v2(&mut self, covers_up_to: u64) -> Result<ProducerEntry, ProducerStateError> {
        let producer_id = i64::from_be_bytes(self.array()?);
        let epoch = i16::from_be_bytes(self.array()?);
        let coordinator_epoch = i32::from_be_bytes(self.array()?);
        let open_transaction = i64::from_be_bytes(self.array()?);
        let last_timestamp = i64::from_be_bytes(self.array()?);
        let [batch_count] = self.array::<1>()?;
        check_producer_id(producer_id)?;
        let open_transaction = match open_transaction {
            -1 => None,
            first if first >= 0 && (first as u64) < covers_up_to => Some(first),
            _ => {
                return Err(ProducerStateError::SnapshotCorrupt(
                    "open transaction outside the snapshot",
                ))
            }
        };
        Ok(ProducerEntry {
            producer_id,
            epoch,
            coordinator_epoch,
            open_transaction,
            last_timestamp,
            batches: self.batches(batch_count)?,
        })
    }

    fn segments(&mut self) -> Result<Vec<u64>, ProducerStateError> {
        let count = u32::from_be_bytes(self.array()?) as usize;
        if count > self.buf.len() / 8 {
            return Err(ProducerStateError::SnapshotTruncated);
        }
        let mut segments: Vec<u64> = Vec::with_capacity(count);
        for _ in 0..count {
            let base = u64::from_be_bytes(self.array()?);
            if segments.last().is_some_and(|&previous| previous >= base) {
                return Err(ProducerStateError::SnapshotCorrupt(
                    "segments not strictly ascending",
                ));
            }
            segments.push(base);
        }
        Ok(segments)
    }

    fn batches(&mut self, batch_count: u8) -> Result<VecDeque<BatchMetadata>, ProducerStateError> {
        let batch_count = usize::from(batch_count);
        if batch_count > BATCHES_KEPT_PER_PRODUCER {
            return Err(ProducerStateError::SnapshotCorrupt(
                "batch count out of range",
            ));
        }
        if self.buf.len() < batch_count * SNAPSHOT_BATCH_LEN {
            return Err(ProducerStateError::SnapshotTruncated);
        }
        let mut batches = VecDeque::with_capacity(batch_count);
        for _ in 0..batch_count {
            let batch = BatchMetadata {
                first_seq: i32::from_be_bytes(self.array()?),
                last_seq: i32::from_be_bytes(self.array()?),
                first_offset: i64::from_be_bytes(self.array()?),
                last_offset: i64::from_be_bytes(self.array()?),
                max_timestamp: i64::from_be_bytes(self.array()?),
            };
            let ordered = batches
                .back()
                .is_none_or(|prev: &BatchMetadata| prev.last_offset < batch.first_offset);
            if batch.first_offset > batch.last_offset || !ordered {
                return Err(ProducerStateError::SnapshotCorrupt(
                    "batch offsets out of order",
                ));
            }
            batches.push_back(batch);
        }
        Ok(batches)
    }
}

fn check_producer_id(producer_id: i64) -> Result<(), ProducerStateError> {
    if producer_id < 0 {
        return Err(ProducerStateError::SnapshotCorrupt("negative producer id"));
    }
    Ok(())
}
