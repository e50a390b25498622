//! Idempotent producer state of one partition: the fence and dedup table consulted before an
//! append, and its snapshot file format.
//!
//! # Rules
//!
//! For each producer id the table keeps the current epoch and the last
//! [`BATCHES_KEPT_PER_PRODUCER`] appended batches (sequence range, offset range, max timestamp).
//! [`ProducerStateTable::check`] decides, in this order:
//!
//! - `producer_id < 0`: the producer is not idempotent; always [`SequenceCheck::Append`].
//! - negative base sequence from an idempotent producer: [`ProducerStateError::InvalidSequence`].
//! - unknown producer id: accepted at any sequence. The state may have been expired or lost
//!   (Kafka ≥ 2.4 accepts in this case too rather than failing with `UNKNOWN_PRODUCER_ID`).
//! - epoch older than the known one: [`ProducerStateError::ProducerFenced`].
//! - same epoch, the batch equals a cached one (same first and last sequence): a retry,
//!   answered with [`SequenceCheck::Duplicate`] and the offsets it got the first time.
//! - same epoch: the first sequence must follow the last one (`i32::MAX` wraps to 0), else
//!   [`ProducerStateError::OutOfOrderSequence`].
//! - newer epoch: the sequence must restart at 0, else `OutOfOrderSequence`; the cache is reset
//!   by the following [`ProducerStateTable::record`].
//!
//! The table can be capped ([`ProducerStateTable::with_max_producers`]); beyond the cap the least
//! recently appended-to producer is forgotten, which only makes a later check more lenient.
//!
//! A producer idle for `producer.id.expiration.ms` is forgotten
//! ([`ProducerStateTable::remove_expired`], which the broker runs every
//! `producer.id.expiration.check.interval.ms`), as Kafka's
//! `ProducerStateManager.removeExpiredProducers` forgets it: expired when `now - last
//! timestamp >= expiration`, the last timestamp being the max timestamp of its last batch.
//! Its next batch is then that of a producer the partition does not know (accepted at any
//! sequence, as Kafka 4.4 accepts it), and a retry of one of its old batches is no longer
//! recognised.
//!
//! A producer is **not** forgotten when the log start offset passes its batches (retention,
//! DeleteRecords): Apache Kafka keeps the state then too (KIP-360), so the producer's next
//! batch must still follow its last sequence, and one starting at 0 again in the same epoch
//! is refused (OUT_OF_ORDER_SEQUENCE_NUMBER) rather than taken for a new producer. A retry of
//! a remembered batch whose records were deleted is answered with its original offsets, as
//! Kafka answers it. Only truncating the log's tail ([`ProducerStateTable::truncate_to`])
//! forgets batches.
//!
//! # Snapshot file
//!
//! Named `<offset:020>.snapshot` (`<offset:020>-e<epoch>.snapshot` at a fenced epoch, see
//! [`crate::fence`]; [`snapshot_file_name`]), where `offset` is the log end offset
//! the snapshot reflects: replaying batches from `offset` onwards through
//! [`ProducerStateTable::record`] rebuilds the current state. All integers big-endian.
//!
//! | bytes | field                                                        |
//! |-------|--------------------------------------------------------------|
//! | 4     | magic `b"KPST"`                                              |
//! | 2     | version, currently 1                                         |
//! | 2     | reserved, 0                                                  |
//! | 8     | `covers_up_to_offset` u64                                    |
//! | 4     | entry count u32                                              |
//! |       | per entry, in ascending producer id:                         |
//! | 8     | producer id i64 (≥ 0)                                        |
//! | 2     | epoch i16                                                    |
//! | 1     | batch count u8, 1..=5                                        |
//! | 32 ×n | oldest first: first_seq i32, last_seq i32, first_offset i64, last_offset i64, max_timestamp i64 |
//! | 4     | CRC-32 (IEEE, `crc32fast`) of every preceding byte           |
//!
//! The I/O layer writes a snapshot to a temporary name, fsyncs, and renames, so a crash leaves
//! either the old set of snapshots or the new one; a torn or bit-flipped file still fails the
//! CRC here and the caller falls back to an older snapshot (or an empty table) and replays more
//! of the log. Decoding checks the CRC first, then every count against the bytes left before
//! allocating, and rejects trailing bytes, so no input panics or over-allocates. After the log
//! is truncated, snapshots above the truncation point describe data that is gone and must be
//! deleted.

use std::collections::{BTreeMap, HashMap, VecDeque};

use thiserror::Error;

use crate::batch::increment_sequence;

/// How many recent batches are remembered per producer, as in Kafka (the producer keeps at most
/// five requests in flight, so a retry always matches one of them).
pub const BATCHES_KEPT_PER_PRODUCER: usize = 5;
/// Default cap on the number of producers tracked per partition.
pub const DEFAULT_MAX_PRODUCERS: usize = 100_000;

const SNAPSHOT_MAGIC: [u8; 4] = *b"KPST";
const SNAPSHOT_VERSION: u16 = 1;
const SNAPSHOT_HEADER_LEN: usize = 20;
const SNAPSHOT_ENTRY_FIXED_LEN: usize = 11;
const SNAPSHOT_BATCH_LEN: usize = 32;
const SNAPSHOT_CRC_LEN: usize = 4;

/// Why a producer's batch, or a snapshot, was refused.
#[derive(Error, Debug, Clone, PartialEq, Eq)]
pub enum ProducerStateError {
    /// The batch carries an epoch older than the producer's current one.
    #[error("producer {producer_id} fenced: epoch {epoch} is older than {current_epoch}")]
    ProducerFenced {
        /// Producer id of the batch.
        producer_id: i64,
        /// Epoch of the batch.
        epoch: i16,
        /// Epoch the partition knows.
        current_epoch: i16,
    },
    /// The batch's first sequence is not the one expected next.
    #[error("producer {producer_id}: expected sequence {expected}, got {received}")]
    OutOfOrderSequence {
        /// Producer id of the batch.
        producer_id: i64,
        /// Sequence the partition expected.
        expected: i32,
        /// First sequence of the batch.
        received: i32,
    },
    /// An idempotent producer sent a negative sequence number.
    #[error("producer {producer_id}: invalid sequence {sequence}")]
    InvalidSequence {
        /// Producer id of the batch.
        producer_id: i64,
        /// The offending sequence.
        sequence: i32,
    },
    /// The snapshot is shorter than its framing or its counts require.
    #[error("producer state snapshot truncated")]
    SnapshotTruncated,
    /// The snapshot's trailing CRC does not match its contents.
    #[error(
        "producer state snapshot crc mismatch: stored {stored:#010x}, computed {computed:#010x}"
    )]
    SnapshotCrcMismatch {
        /// CRC found at the end of the file.
        stored: u32,
        /// CRC computed over the contents.
        computed: u32,
    },
    /// The snapshot does not start with the expected magic bytes.
    #[error("not a producer state snapshot")]
    SnapshotBadMagic,
    /// The snapshot was written by an unknown format version.
    #[error("unsupported producer state snapshot version {0}")]
    SnapshotUnsupportedVersion(u16),
    /// The snapshot passed its CRC but holds impossible contents.
    #[error("corrupt producer state snapshot: {0}")]
    SnapshotCorrupt(&'static str),
}

/// What to do with a batch that passed [`ProducerStateTable::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// New data: append it.
    Append,
    /// A retry of a batch already in the log: answer with its offsets, append nothing.
    Duplicate {
        /// Offset of the first record the first time.
        first_offset: i64,
        /// Offset of the last record the first time.
        last_offset: i64,
    },
}

/// One appended batch as remembered for dedup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// Sequence of the first record.
    pub first_seq: i32,
    /// Sequence of the last record.
    pub last_seq: i32,
    /// Offset of the first record.
    pub first_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
    /// Largest timestamp in the batch.
    pub max_timestamp: i64,
}

/// State of one producer: its epoch and its most recent batches (never empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    producer_id: i64,
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
}

impl ProducerEntry {
    /// The producer's id.
    pub fn producer_id(&self) -> i64 {
        self.producer_id
    }

    /// The producer's current epoch.
    pub fn epoch(&self) -> i16 {
        self.epoch
    }

    /// Recent batches, oldest first.
    pub fn batches(&self) -> &VecDeque<BatchMetadata> {
        &self.batches
    }

    /// The most recent batch.
    pub fn last_batch(&self) -> Option<&BatchMetadata> {
        self.batches.back()
    }
}

#[derive(Debug, Clone)]
struct Slot {
    entry: ProducerEntry,
    last_used: u64,
}

/// Producer state of one partition. Pure data: the I/O layer persists it with
/// [`Self::encode_snapshot`].
#[derive(Debug, Clone)]
pub struct ProducerStateTable {
    producers: HashMap<i64, Slot>,
    /// `last_used` tick → producer id, to find the least recently used producer quickly.
    recency: BTreeMap<u64, i64>,
    next_tick: u64,
    max_producers: usize,
}

impl Default for ProducerStateTable {
    fn default() -> Self {
        Self::new()
    }
}

impl ProducerStateTable {
    /// An empty table capped at [`DEFAULT_MAX_PRODUCERS`].
    pub fn new() -> Self {
        Self {
            producers: HashMap::new(),
            recency: BTreeMap::new(),
            next_tick: 0,
            max_producers: DEFAULT_MAX_PRODUCERS,
        }
    }

    /// Sets the cap on tracked producers (at least 1); applied on the next new producer.
    pub fn with_max_producers(mut self, max_producers: usize) -> Self {
        self.max_producers = max_producers.max(1);
        self
    }

    /// Number of producers tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is tracked.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// State of one producer.
    pub fn get(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id).map(|slot| &slot.entry)
    }

    /// All producers in ascending id order.
    pub fn entries(&self) -> Vec<&ProducerEntry> {
        let mut entries: Vec<_> = self.producers.values().map(|slot| &slot.entry).collect();
        entries.sort_by_key(|entry| entry.producer_id);
        entries
    }

    /// Decides whether a batch is new, a retry, or refused; see the module doc for the rules.
    /// `last_sequence` is the batch's last sequence (`BatchHeader::last_sequence`).
    pub fn check(
        &self,
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
        last_sequence: i32,
    ) -> Result<SequenceCheck, ProducerStateError> {
        if producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        if base_sequence < 0 {
            return Err(ProducerStateError::InvalidSequence {
                producer_id,
                sequence: base_sequence,
            });
        }
        let Some(slot) = self.producers.get(&producer_id) else {
            return Ok(SequenceCheck::Append);
        };
        let entry = &slot.entry;
        if epoch < entry.epoch {
            return Err(ProducerStateError::ProducerFenced {
                producer_id,
                epoch,
                current_epoch: entry.epoch,
            });
        }
        let expected = if epoch > entry.epoch {
            0
        } else {
            let duplicate = entry
                .batches
                .iter()
                .find(|b| b.first_seq == base_sequence && b.last_seq == last_sequence);
            if let Some(batch) = duplicate {
                return Ok(SequenceCheck::Duplicate {
                    first_offset: batch.first_offset,
                    last_offset: batch.last_offset,
                });
            }
            match entry.last_batch() {
                Some(last) => increment_sequence(last.last_seq, 1),
                None => base_sequence,
            }
        };
        if base_sequence != expected {
            return Err(ProducerStateError::OutOfOrderSequence {
                producer_id,
                expected,
                received: base_sequence,
            });
        }
        Ok(SequenceCheck::Append)
    }

    /// Remembers a batch once it is in the log (after an append, or while replaying the log
    /// during recovery). The log is the authority here, so nothing is checked: an epoch
    /// different from the known one starts a fresh cache.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        producer_id: i64,
        epoch: i16,
        first_seq: i32,
        last_seq: i32,
        first_offset: i64,
        last_offset: i64,
        max_timestamp: i64,
    ) {
        if producer_id < 0 {
            return;
        }
        let batch = BatchMetadata {
            first_seq,
            last_seq,
            first_offset,
            last_offset,
            max_timestamp,
        };
        let tick = self.next_tick;
        self.next_tick += 1;
        match self.producers.get_mut(&producer_id) {
            Some(slot) => {
                if slot.entry.epoch != epoch {
                    slot.entry.epoch = epoch;
                    slot.entry.batches.clear();
                }
                if slot.entry.batches.len() == BATCHES_KEPT_PER_PRODUCER {
                    slot.entry.batches.pop_front();
                }
                slot.entry.batches.push_back(batch);
                self.recency.remove(&slot.last_used);
                slot.last_used = tick;
            }
            None => {
                while self.producers.len() >= self.max_producers {
                    self.evict_least_recent();
                }
                let entry = ProducerEntry {
                    producer_id,
                    epoch,
                    batches: VecDeque::from([batch]),
                };
                self.producers.insert(
                    producer_id,
                    Slot {
                        entry,
                        last_used: tick,
                    },
                );
            }
        }
        self.recency.insert(tick, producer_id);
    }

    fn evict_least_recent(&mut self) {
        match self.recency.pop_first() {
            Some((_, producer_id)) => {
                self.producers.remove(&producer_id);
            }
            // Unreachable while `recency` mirrors `producers`; clearing keeps the loop finite.
            None => self.producers.clear(),
        }
    }

    fn retain_batches(&mut self, mut keep: impl FnMut(&BatchMetadata) -> bool) {
        let recency = &mut self.recency;
        self.producers.retain(|_, slot| {
            slot.entry.batches.retain(|b| keep(b));
            let alive = !slot.entry.batches.is_empty();
            if !alive {
                recency.remove(&slot.last_used);
            }
            alive
        });
    }

    /// Forgets batches at or above `log_end_offset`, after the log was truncated there.
    ///
    /// A producer left with no batch is forgotten, so its next batch is accepted at any
    /// sequence. For exact state, reload the newest snapshot at or below `log_end_offset` and
    /// replay the log from it instead.
    pub fn truncate_to(&mut self, log_end_offset: i64) {
        self.retain_batches(|b| b.last_offset < log_end_offset);
    }

    /// Forgets producers idle for `expiration_ms` or longer (Kafka's
    /// `producer.id.expiration.ms`): those whose last batch's max timestamp is at or before
    /// `now_ms - expiration_ms`, Kafka's `currentTimeMs - lastTimestamp >= expiration`.
    /// Returns how many were forgotten.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        let recency = &mut self.recency;
        self.producers.retain(|_, slot| {
            let alive = slot
                .entry
                .last_batch()
                .is_some_and(|b| now_ms.saturating_sub(b.max_timestamp) < expiration_ms);
            if !alive {
                recency.remove(&slot.last_used);
            }
            alive
        });
        before - self.producers.len()
    }

    /// Encodes the table as a snapshot file; see the module doc for the layout.
    pub fn encode_snapshot(&self, covers_up_to_offset: u64) -> Vec<u8> {
        let entries = self.entries();
        let batches: usize = entries.iter().map(|e| e.batches.len()).sum();
        let mut out = Vec::with_capacity(
            SNAPSHOT_HEADER_LEN
                + entries.len() * SNAPSHOT_ENTRY_FIXED_LEN
                + batches * SNAPSHOT_BATCH_LEN
                + SNAPSHOT_CRC_LEN,
        );
        out.extend_from_slice(&SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&covers_up_to_offset.to_be_bytes());
        // The table never holds 2^32 producers (the cap is a usize but memory is not).
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        for entry in entries {
            out.extend_from_slice(&entry.producer_id.to_be_bytes());
            out.extend_from_slice(&entry.epoch.to_be_bytes());
            out.push(entry.batches.len() as u8);
            for b in &entry.batches {
                out.extend_from_slice(&b.first_seq.to_be_bytes());
                out.extend_from_slice(&b.last_seq.to_be_bytes());
                out.extend_from_slice(&b.first_offset.to_be_bytes());
                out.extend_from_slice(&b.last_offset.to_be_bytes());
                out.extend_from_slice(&b.max_timestamp.to_be_bytes());
            }
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes a snapshot file into the offset it covers up to and the table (with the default
    /// cap; see [`Self::with_max_producers`]).
    pub fn decode_snapshot(bytes: &[u8]) -> Result<(u64, Self), ProducerStateError> {
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
        if version != SNAPSHOT_VERSION {
            return Err(ProducerStateError::SnapshotUnsupportedVersion(version));
        }
        reader.array::<2>()?;
        let covers_up_to = u64::from_be_bytes(reader.array()?);
        let count = u32::from_be_bytes(reader.array()?) as usize;
        if count > reader.buf.len() / SNAPSHOT_ENTRY_FIXED_LEN {
            return Err(ProducerStateError::SnapshotTruncated);
        }
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            entries.push(reader.entry()?);
        }
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
        // Recency is not persisted; the producer that appended last is the most recent.
        entries.sort_by_key(|e| e.last_batch().map_or(i64::MIN, |b| b.last_offset));
        let mut table = Self::new();
        for entry in entries {
            let tick = table.next_tick;
            table.next_tick += 1;
            table.recency.insert(tick, entry.producer_id);
            table.producers.insert(
                entry.producer_id,
                Slot {
                    entry,
                    last_used: tick,
                },
            );
        }
        Ok((covers_up_to, table))
    }
}

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

    fn entry(&mut self) -> Result<ProducerEntry, ProducerStateError> {
        let producer_id = i64::from_be_bytes(self.array()?);
        let epoch = i16::from_be_bytes(self.array()?);
        let [batch_count] = self.array::<1>()?;
        if producer_id < 0 {
            return Err(ProducerStateError::SnapshotCorrupt("negative producer id"));
        }
        let batch_count = usize::from(batch_count);
        if batch_count == 0 || batch_count > BATCHES_KEPT_PER_PRODUCER {
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
        Ok(ProducerEntry {
            producer_id,
            epoch,
            batches,
        })
    }
}

#[cfg(test)]
mod tests;
