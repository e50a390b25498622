//! Producer state of one partition: the idempotent producers' fence and dedup table
//! consulted before an append, their open transactions (which hold the last stable offset
//! back), and the transaction markers that end them. Pure data: the log persists it as a
//! snapshot file ([`snapshot`], whose `//!` doc has the format).
//!
//! # Rules for data batches
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
//! - same epoch: the first sequence must follow the last one (`i32::MAX` wraps to 0; 0 when
//!   only a transaction marker is known of the producer at this epoch), else
//!   [`ProducerStateError::OutOfOrderSequence`].
//! - newer epoch: the sequence must restart at 0, else `OutOfOrderSequence`; the cache is reset
//!   by the following [`ProducerStateTable::record`].
//! - a non-transactional batch while the producer's transaction is open:
//!   [`ProducerStateError::InvalidTxnState`] (Kafka's `ProducerAppendInfo.appendDataBatch`).
//!
//! # Transactions
//!
//! A transactional batch (attribute bit 4) from a producer with no open transaction opens
//! one at the batch's first offset; later transactional batches join it, also at a newer
//! epoch. A transaction marker ([`crate::batch::txn_marker`], appended through
//! [`ProducerStateTable::check_marker`] and [`ProducerStateTable::apply_marker`]) ends it,
//! as Kafka's `ProducerAppendInfo.appendEndTxnMarker`:
//!
//! - a marker whose producer epoch is stale is refused with `ProducerFenced`: below the
//!   current epoch for markers of transaction versions 0 and 1
//!   ([`MarkerEpochCheck::AtLeastCurrent`]); at or below it for transaction version 2, whose
//!   coordinator bumps the epoch before writing markers ([`MarkerEpochCheck::AboveCurrent`]),
//!   except a marker at the current epoch when no transaction is open, a retry of a marker
//!   already written (KAFKA-19999), which is written again and changes nothing;
//! - a marker from a coordinator epoch older than the producer's last marker's is refused
//!   with [`ProducerStateError::CoordinatorFenced`];
//! - otherwise it is written. It sets the producer's epoch (a new epoch clears the batch
//!   cache, so the next batch starts at sequence 0), coordinator epoch and last timestamp,
//!   and ends the open transaction if there is one ([`CompletedTransaction`]); a marker for
//!   a producer with no open transaction ends nothing (Kafka writes it all the same).
//!
//! # Last stable offset
//!
//! The first unstable offset ([`ProducerStateTable::first_unstable_offset`]) is the
//! smallest first offset of a transaction that is open, or whose marker is written but not
//! durable yet (Kafka's `ongoingTxns` and `unreplicatedTxns`): a crash could take that marker
//! back and the transaction would be open again. [`ProducerStateTable::on_durable`] lets go
//! of the transactions whose markers the durable end has passed. The log's last stable
//! offset is the smaller of this and its high watermark.
//!
//! An aborted transaction is recorded in the transaction index ([`crate::txn_index`]) with
//! the last stable offset at its marker as Kafka computes it
//! (`ProducerStateManager.lastStableOffset(completedTxn)`): the first offset of the earliest
//! other open transaction, or the marker's offset + 1.
//!
//! # Forgetting producers
//!
//! The table can be capped ([`ProducerStateTable::with_max_producers`]); beyond the cap the least
//! recently appended-to producer without an open transaction is forgotten, which only makes
//! a later check more lenient (a producer with an open transaction holds the last stable
//! offset and is never forgotten, so the table may then exceed its cap).
//!
//! A producer idle for `producer.id.expiration.ms` is forgotten
//! ([`ProducerStateTable::remove_expired`], which the broker runs every
//! `producer.id.expiration.check.interval.ms`), as Kafka's
//! `ProducerStateManager.removeExpiredProducers` forgets it: expired when it has no open
//! transaction and `now - last timestamp >= expiration`, the last timestamp being the max
//! timestamp of its last batch or the timestamp of its last marker, whichever came last.
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

pub mod snapshot;

use std::collections::{BTreeMap, HashMap, VecDeque};

use thiserror::Error;

use crate::batch::txn_marker::{self, MarkerRecord, TxnResult};
use crate::batch::{increment_sequence, BatchHeader, BATCH_HEADER_LEN};
use crate::txn_index::AbortedTxn;

pub use snapshot::{parse_snapshot_file_name, snapshot_file_name};

/// How many recent batches are remembered per producer, as in Kafka (the producer keeps at most
/// five requests in flight, so a retry always matches one of them).
pub const BATCHES_KEPT_PER_PRODUCER: usize = 5;
/// Default cap on the number of producers tracked per partition.
pub const DEFAULT_MAX_PRODUCERS: usize = 100_000;
/// The coordinator epoch of a producer no marker was written for yet.
pub const NO_COORDINATOR_EPOCH: i32 = -1;

/// Why a producer's batch, or a snapshot, was refused.
#[derive(Error, Debug, Clone, PartialEq, Eq)]
pub enum ProducerStateError {
    /// The batch carries an epoch older than the producer's current one.
    /// Also a transaction marker whose epoch the producer's current one makes stale.
    #[error(
        "producer {producer_id} fenced: epoch {epoch} is stale, the current one is {current_epoch}"
    )]
    ProducerFenced {
        /// Producer id of the batch.
        producer_id: i64,
        /// Epoch of the batch (or marker).
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
    /// A producer whose transaction is open sent a batch outside it (Kafka's
    /// `InvalidTxnStateException`): its data must be transactional until a marker ends it.
    #[error("producer {producer_id} has a transaction open since offset {first_offset}; a non-transactional batch is refused")]
    InvalidTxnState {
        /// Producer id of the batch.
        producer_id: i64,
        /// First offset of the open transaction.
        first_offset: i64,
    },
    /// A transaction marker comes from a coordinator older than the one that wrote the
    /// producer's last marker (Kafka's `TransactionCoordinatorFencedException`).
    #[error(
        "producer {producer_id}: coordinator epoch {coordinator_epoch} is older than {current}"
    )]
    CoordinatorFenced {
        /// Producer id of the marker.
        producer_id: i64,
        /// Coordinator epoch of the marker.
        coordinator_epoch: i32,
        /// Coordinator epoch of the producer's last marker.
        current: i32,
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

/// Which producer epochs a transaction marker may carry (see the module doc): what the
/// coordinator's transaction version means for the partition, without its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerEpochCheck {
    /// Transaction versions 0 and 1: the marker carries the transaction's epoch, at least
    /// the producer's current one.
    AtLeastCurrent,
    /// Transaction version 2: the coordinator bumped the epoch, so the marker's is above
    /// the current one (equal only as a retry once no transaction is open).
    AboveCurrent,
}

/// A transaction a marker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTransaction {
    /// The producer whose transaction it was.
    pub producer_id: i64,
    /// Offset of its first batch.
    pub first_offset: i64,
    /// Offset of the marker that ended it.
    pub last_offset: i64,
    /// Whether it was aborted (else committed).
    pub aborted: bool,
    /// The last stable offset once it ended: the first offset of the earliest other open
    /// transaction, or `last_offset + 1` (Kafka's `lastStableOffset(completedTxn)`).
    pub last_stable_offset: i64,
}

impl CompletedTransaction {
    /// Its entry in the transaction index ([`crate::txn_index`]) when it was aborted.
    pub fn aborted_txn(&self) -> Option<AbortedTxn> {
        self.aborted.then_some(AbortedTxn {
            producer_id: self.producer_id,
            first_offset: self.first_offset,
            last_offset: self.last_offset,
            last_stable_offset: self.last_stable_offset,
        })
    }
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

/// A data batch once it is in the log, as [`ProducerStateTable::record`] remembers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendedBatch {
    /// The batch's producer id (below 0: not idempotent, nothing is remembered).
    pub producer_id: i64,
    /// The batch's producer epoch.
    pub epoch: i16,
    /// Sequence of its first record.
    pub first_seq: i32,
    /// Sequence of its last record.
    pub last_seq: i32,
    /// Offset of its first record.
    pub first_offset: i64,
    /// Offset of its last record.
    pub last_offset: i64,
    /// Its largest timestamp.
    pub max_timestamp: i64,
    /// Attribute bit 4: it belongs to a transaction.
    pub transactional: bool,
}

impl AppendedBatch {
    /// What a stored (stamped) batch's header says.
    pub fn from_header(header: &BatchHeader) -> Self {
        AppendedBatch {
            producer_id: header.producer_id,
            epoch: header.producer_epoch,
            first_seq: header.base_sequence,
            last_seq: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
            max_timestamp: header.max_timestamp,
            transactional: header.is_transactional(),
        }
    }
}

/// State of one producer: its epochs, its most recent batches (empty when only a marker is
/// known of it at its epoch) and its open transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    producer_id: i64,
    epoch: i16,
    coordinator_epoch: i32,
    open_transaction: Option<i64>,
    last_timestamp: i64,
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

    /// The coordinator epoch of the producer's last transaction marker
    /// ([`NO_COORDINATOR_EPOCH`] before its first).
    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    /// First offset of the producer's open transaction, if one is open.
    pub fn open_transaction(&self) -> Option<i64> {
        self.open_transaction
    }

    /// Timestamp of the producer's last activity: its last batch's max timestamp, or its
    /// last marker's timestamp when that came later.
    pub fn last_timestamp(&self) -> i64 {
        self.last_timestamp
    }

    /// Recent batches, oldest first.
    pub fn batches(&self) -> &VecDeque<BatchMetadata> {
        &self.batches
    }

    /// The most recent batch.
    pub fn last_batch(&self) -> Option<&BatchMetadata> {
        self.batches.back()
    }

    fn new(producer_id: i64, epoch: i16) -> Self {
        ProducerEntry {
            producer_id,
            epoch,
            coordinator_epoch: NO_COORDINATOR_EPOCH,
            open_transaction: None,
            last_timestamp: i64::MIN,
            batches: VecDeque::new(),
        }
    }

    /// A new epoch starts a fresh batch cache (the open transaction, if any, goes on, as in
    /// Kafka's `ProducerStateEntry.maybeUpdateProducerEpoch`).
    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.epoch = epoch;
            self.batches.clear();
        }
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
    /// First offset → producer id of every open transaction (Kafka's `ongoingTxns`).
    open_transactions: BTreeMap<i64, i64>,
    /// First offset → marker offset of the transactions whose marker is not durable yet
    /// (Kafka's `unreplicatedTxns`).
    ending_transactions: BTreeMap<i64, i64>,
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
            open_transactions: BTreeMap::new(),
            ending_transactions: BTreeMap::new(),
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
    /// `last_sequence` is the batch's last sequence (`BatchHeader::last_sequence`),
    /// `transactional` its attribute bit 4.
    pub fn check(
        &self,
        producer_id: i64,
        epoch: i16,
        base_sequence: i32,
        last_sequence: i32,
        transactional: bool,
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
                // Only a marker is known at this epoch (it may have bumped the epoch).
                None => 0,
            }
        };
        if base_sequence != expected {
            return Err(ProducerStateError::OutOfOrderSequence {
                producer_id,
                expected,
                received: base_sequence,
            });
        }
        if let (Some(first_offset), false) = (entry.open_transaction, transactional) {
            return Err(ProducerStateError::InvalidTxnState {
                producer_id,
                first_offset,
            });
        }
        Ok(SequenceCheck::Append)
    }

    /// Remembers a data batch once it is in the log (after an append, or while replaying the
    /// log during recovery): its sequence range for dedup, and the transaction it opens.
    /// The log is the authority here, so nothing is checked: an epoch different from the
    /// known one starts a fresh cache.
    pub fn record(&mut self, batch: AppendedBatch) {
        if batch.producer_id < 0 {
            return;
        }
        let metadata = BatchMetadata {
            first_seq: batch.first_seq,
            last_seq: batch.last_seq,
            first_offset: batch.first_offset,
            last_offset: batch.last_offset,
            max_timestamp: batch.max_timestamp,
        };
        let entry = self.touch(batch.producer_id, batch.epoch);
        entry.set_epoch(batch.epoch);
        if entry.batches.len() == BATCHES_KEPT_PER_PRODUCER {
            entry.batches.pop_front();
        }
        entry.batches.push_back(metadata);
        entry.last_timestamp = batch.max_timestamp;
        if batch.transactional && entry.open_transaction.is_none() {
            entry.open_transaction = Some(batch.first_offset);
            self.open_transactions
                .insert(batch.first_offset, batch.producer_id);
        }
    }

    /// Whether a transaction marker for `producer_id` may be written; see the module doc.
    pub fn check_marker(
        &self,
        producer_id: i64,
        epoch: i16,
        coordinator_epoch: i32,
        epoch_check: MarkerEpochCheck,
    ) -> Result<(), ProducerStateError> {
        let Some(entry) = self.get(producer_id) else {
            return Ok(());
        };
        let stale = match epoch_check {
            MarkerEpochCheck::AtLeastCurrent => epoch < entry.epoch,
            MarkerEpochCheck::AboveCurrent => {
                epoch < entry.epoch || (epoch == entry.epoch && entry.open_transaction.is_some())
            }
        };
        if stale {
            return Err(ProducerStateError::ProducerFenced {
                producer_id,
                epoch,
                current_epoch: entry.epoch,
            });
        }
        if coordinator_epoch < entry.coordinator_epoch {
            return Err(ProducerStateError::CoordinatorFenced {
                producer_id,
                coordinator_epoch,
                current: entry.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Applies a transaction marker written at `offset` (after an append, or while
    /// replaying the log): ends the producer's open transaction, if any, and returns it.
    /// Nothing is checked (the log is the authority; [`Self::check_marker`] came first).
    /// The transaction stays unstable until [`Self::on_durable`] passes `offset`.
    pub fn apply_marker(
        &mut self,
        producer_id: i64,
        epoch: i16,
        marker: MarkerRecord,
        offset: i64,
        timestamp: i64,
    ) -> Option<CompletedTransaction> {
        if producer_id < 0 {
            return None;
        }
        let first_offset = self.get(producer_id).and_then(|e| e.open_transaction);
        let completed = first_offset.map(|first_offset| CompletedTransaction {
            producer_id,
            first_offset,
            last_offset: offset,
            aborted: marker.result == TxnResult::Abort,
            last_stable_offset: self
                .open_transactions
                .iter()
                .find(|&(_, &owner)| owner != producer_id)
                .map_or(offset + 1, |(&first, _)| first),
        });
        if let Some(first) = first_offset {
            self.open_transactions.remove(&first);
            self.ending_transactions.insert(first, offset);
        }
        let entry = self.touch(producer_id, epoch);
        entry.set_epoch(epoch);
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp = timestamp;
        entry.open_transaction = None;
        completed
    }

    /// Applies a batch the log holds, as recovery replays it: a data batch through
    /// [`Self::record`], a transaction marker through [`Self::apply_marker`] (another control
    /// batch changes nothing). `records` is the batch's records section (the bytes after
    /// its header). Returns the transaction a marker ended.
    pub fn replay_stored_batch(
        &mut self,
        header: &BatchHeader,
        records: &[u8],
    ) -> Option<CompletedTransaction> {
        if !header.is_control() {
            self.record(AppendedBatch::from_header(header));
            return None;
        }
        let marker = txn_marker::parse_marker(header, records)?;
        self.apply_marker(
            header.producer_id,
            header.producer_epoch,
            marker,
            header.base_offset,
            header.max_timestamp,
        )
    }

    /// [`Self::replay_stored_batch`] for a whole stored batch (header included).
    pub fn replay_stored_bytes(&mut self, batch: &[u8]) -> Option<CompletedTransaction> {
        let header = BatchHeader::parse(batch).ok()?;
        let records = batch.get(BATCH_HEADER_LEN..header.total_len())?;
        self.replay_stored_batch(&header, records)
    }

    /// The smallest first offset of a transaction that is open or whose marker is not
    /// durable yet; `None` when there is none.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        let open = self.open_transactions.keys().next().copied();
        let ending = self.ending_transactions.keys().next().copied();
        match (open, ending) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The log is durable below `durable_end`: transactions whose marker lies below it are
    /// stable from now on.
    pub fn on_durable(&mut self, durable_end: u64) {
        self.ending_transactions
            .retain(|_, marker_offset| (*marker_offset as u64) >= durable_end);
    }

    /// Whether any transaction is open.
    pub fn has_open_transactions(&self) -> bool {
        !self.open_transactions.is_empty()
    }

    /// The entry of `producer_id` (created at `epoch` when new, forgetting the least
    /// recently used producer beyond the cap), marked as used now.
    fn touch(&mut self, producer_id: i64, epoch: i16) -> &mut ProducerEntry {
        let tick = self.next_tick;
        self.next_tick += 1;
        if !self.producers.contains_key(&producer_id) {
            while self.producers.len() >= self.max_producers {
                if !self.evict_least_recent() {
                    break;
                }
            }
        }
        let slot = self.producers.entry(producer_id).or_insert_with(|| Slot {
            entry: ProducerEntry::new(producer_id, epoch),
            last_used: tick,
        });
        self.recency.remove(&slot.last_used);
        slot.last_used = tick;
        self.recency.insert(tick, producer_id);
        &mut slot.entry
    }

    /// Forgets the least recently used producer without an open transaction; false when
    /// there is none.
    fn evict_least_recent(&mut self) -> bool {
        let victim = self.recency.iter().find(|(_, producer_id)| {
            self.producers
                .get(producer_id)
                .is_none_or(|slot| slot.entry.open_transaction.is_none())
        });
        let Some((&tick, &producer_id)) = victim else {
            return false;
        };
        self.recency.remove(&tick);
        self.producers.remove(&producer_id);
        true
    }

    /// Forgets batches at or above `log_end_offset`, after the log was truncated there, and
    /// transactions that opened there; a transaction whose marker was cut is open again.
    ///
    /// A producer left with no batch (it had some) and no open transaction is forgotten,
    /// so its next batch is accepted at any sequence. For exact state (epochs a cut marker
    /// set, for one), reload the newest snapshot at or below `log_end_offset` and replay
    /// the log from it instead, as recovery does.
    pub fn truncate_to(&mut self, log_end_offset: i64) {
        let reopened: Vec<i64> = self
            .ending_transactions
            .iter()
            .filter(|&(&first, &marker)| marker >= log_end_offset && first < log_end_offset)
            .map(|(&first, _)| first)
            .collect();
        self.ending_transactions
            .retain(|_, marker| *marker < log_end_offset);
        self.open_transactions
            .retain(|first, _| *first < log_end_offset);
        let recency = &mut self.recency;
        self.producers.retain(|_, slot| {
            let entry = &mut slot.entry;
            let had_batches = !entry.batches.is_empty();
            entry.batches.retain(|b| b.last_offset < log_end_offset);
            if entry
                .open_transaction
                .is_some_and(|first| first >= log_end_offset)
            {
                entry.open_transaction = None;
            }
            let alive =
                !(had_batches && entry.batches.is_empty() && entry.open_transaction.is_none());
            if !alive {
                recency.remove(&slot.last_used);
            }
            alive
        });
        // A transaction whose marker was cut: the producer is the one whose batch opened it.
        for first in reopened {
            let owner = self.producers.values_mut().find(|slot| {
                slot.entry
                    .batches
                    .iter()
                    .any(|b| b.first_offset <= first && first <= b.last_offset)
            });
            if let Some(slot) = owner {
                slot.entry.open_transaction = Some(first);
                self.open_transactions.insert(first, slot.entry.producer_id);
            }
        }
    }

    /// Forgets producers idle for `expiration_ms` or longer (Kafka's
    /// `producer.id.expiration.ms`): those with no open transaction whose last timestamp is
    /// at or before `now_ms - expiration_ms`, Kafka's `currentTimeMs - lastTimestamp >=
    /// expiration`. Returns how many were forgotten.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        let recency = &mut self.recency;
        self.producers.retain(|_, slot| {
            let entry = &slot.entry;
            let alive = entry.open_transaction.is_some()
                || now_ms.saturating_sub(entry.last_timestamp) < expiration_ms;
            if !alive {
                recency.remove(&slot.last_used);
            }
            alive
        });
        before - self.producers.len()
    }

    /// Encodes the table as a snapshot file ([`snapshot`] has the layout), with the bases of
    /// the segments whose transaction index holds entries below `covers_up_to_offset`.
    /// Transactions whose marker is not durable yet are written as ended: the log below the
    /// snapshot's offset holds their markers.
    pub fn encode_snapshot(&self, covers_up_to_offset: u64, txn_index_segments: &[u64]) -> Vec<u8> {
        snapshot::encode(&self.entries(), covers_up_to_offset, txn_index_segments)
    }

    /// Decodes a snapshot file (the table with the default cap; see
    /// [`Self::with_max_producers`]).
    pub fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, ProducerStateError> {
        let decoded = snapshot::decode(bytes)?;
        let mut entries = decoded.entries;
        // Recency is not persisted; the producer that appended last is the most recent.
        entries.sort_by_key(|e| {
            e.last_batch()
                .map(|b| b.last_offset)
                .max(e.open_transaction)
                .unwrap_or(i64::MIN)
        });
        let mut table = Self::new();
        for entry in entries {
            let tick = table.next_tick;
            table.next_tick += 1;
            table.recency.insert(tick, entry.producer_id);
            if let Some(first) = entry.open_transaction {
                if table
                    .open_transactions
                    .insert(first, entry.producer_id)
                    .is_some()
                {
                    return Err(ProducerStateError::SnapshotCorrupt(
                        "two transactions open at one offset",
                    ));
                }
            }
            table.producers.insert(
                entry.producer_id,
                Slot {
                    entry,
                    last_used: tick,
                },
            );
        }
        Ok(Snapshot {
            covers_up_to_offset: decoded.covers_up_to_offset,
            table,
            txn_index_segments: decoded.txn_index_segments,
        })
    }
}

/// A decoded snapshot file.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The log offset the state is as of: replaying from it rebuilds the current state.
    pub covers_up_to_offset: u64,
    /// The producer state.
    pub table: ProducerStateTable,
    /// Bases of the segments whose transaction index held entries below
    /// `covers_up_to_offset` when the snapshot was taken, ascending.
    pub txn_index_segments: Vec<u64>,
}

#[cfg(test)]
mod tests;
