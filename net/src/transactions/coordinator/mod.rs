//! The transaction coordinator of one `__transaction_state` partition, as a state machine
//! without I/O (in the manner of raft-rs's `RawNode`): the caller feeds it client requests,
//! the results of the record appends it asked for, marker completions and timer ticks, and
//! gets back [`Actions`]: records to append to the partition, transaction markers to write
//! to partition leaders, and answers to the requests. Time is an argument, so the same
//! inputs always give the same outputs.
//!
//! Every decision is Kafka 4.4's `TransactionCoordinator` / `TransactionStateManager` one,
//! error codes included (the unit tests name each rule): a change is prepared (the id is
//! then pending and other requests for it answer CONCURRENT_TRANSACTIONS), its record
//! appended, and only once [`TransactionCoordinator::append_completed`] reports the append
//! durable does the change take effect and the request get its answer. An end of
//! transaction then goes Prepare → markers → Complete: the answer goes out once the
//! PrepareCommit / PrepareAbort record is durable, markers are handed out, and
//! [`TransactionCoordinator::markers_written`] lets the Complete record be appended.
//!
//! New producer ids come from the caller (shard 0 allocates them): a request that needs one
//! when none is spare returns [`NeedsProducerId`] having changed nothing; the caller hands
//! one over with [`TransactionCoordinator::supply_producer_id`] and repeats the request.
//! A timed-out transaction that needs one waits for the next tick
//! ([`Actions::producer_ids_wanted`]).
//!
//! The caller's duties: append [`Actions::appends`] in order and report each; report an
//! append failed only when its record is known not to be in the log (a record that may have
//! been written calls for a reload: [`TransactionCoordinator::load`] rebuilds the state from
//! the records, whichever way that append went); write every partition of each
//! [`TxnMarkers`] (a partition whose topic was deleted counts as written; a leader answering
//! that a newer coordinator wrote means this coordinator is stale and should be unloaded);
//! answer COORDINATOR_LOAD_IN_PROGRESS while loading and NOT_COORDINATOR once unloaded.

mod add_partitions;
mod end_txn;
mod init_producer_id;
mod load;
mod timers;
mod views;

#[cfg(test)]
mod simulation;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};

use crate::protocol::ErrorCode;

use super::log_format::{
    encode_key, encode_value, TransactionLogError, TransactionLogKey, TransactionLogValue,
};
use super::metadata::{TopicPartition, TransactionMetadata, TxnTransitMetadata};
use super::state::{TransactionState, TransactionVersion};

pub use add_partitions::{AddOffsetsRequest, AddPartitionsRequest, VerifyPartitionsRequest};
pub use end_txn::EndTxnRequest;
pub use init_producer_id::InitProducerIdRequest;
pub use load::LoadError;
pub use views::{DescribedTransaction, ListFilter, ListedTransaction, TransactionList};

/// The coordinator's settings, with Kafka's names and defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoordinatorConfig {
    /// `transaction.max.timeout.ms`: the longest transaction timeout a producer may ask for.
    pub transaction_max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an id idle this long (and settled) is forgotten.
    pub transactional_id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often timed-out
    /// transactions are looked for.
    pub abort_timed_out_transactions_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`: how often expired ids
    /// are looked for.
    pub remove_expired_transactional_ids_interval_ms: i64,
    /// The broker's `transaction.version` level: the record version it writes and the rules
    /// of the aborts it starts itself (timeouts, fencing).
    pub transaction_version: TransactionVersion,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            abort_timed_out_transactions_interval_ms: 10_000,
            remove_expired_transactional_ids_interval_ms: 3_600_000,
            transaction_version: TransactionVersion::V2,
        }
    }
}

/// The caller's handle on a request whose answer may come later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Identifies one record append the coordinator asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteId(u64);

impl WriteId {
    /// The number, for logs.
    pub fn value(self) -> u64 {
        self.0
    }
}

/// Commit or abort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionResult {
    /// Commit.
    Commit,
    /// Abort.
    Abort,
}

/// A producer's id and epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProducerIdAndEpoch {
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
}

/// The request needs a new producer id and none is spare: nothing was changed. Supply one
/// with [`TransactionCoordinator::supply_producer_id`] and repeat the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a new producer id is needed")]
pub struct NeedsProducerId;

/// A record to append to the coordinator's `__transaction_state` partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogAppend {
    /// Reported back through [`TransactionCoordinator::append_completed`].
    pub write_id: WriteId,
    /// The key.
    pub key: TransactionLogKey,
    /// The value; `None` is a tombstone.
    pub value: Option<TransactionLogValue>,
}

impl LogAppend {
    /// The key's bytes.
    pub fn key_bytes(&self) -> Result<Vec<u8>, TransactionLogError> {
        encode_key(&self.key)
    }

    /// The value's bytes; `None` for a tombstone.
    pub fn value_bytes(&self) -> Result<Option<Vec<u8>>, TransactionLogError> {
        self.value.as_ref().map(encode_value).transpose()
    }
}

/// Transaction markers to write, one per partition of the transaction (WriteTxnMarkers to
/// each partition's leader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMarkers {
    /// The transactional id; with `producer_id` and `producer_epoch`, what
    /// [`TransactionCoordinator::markers_written`] takes.
    pub transactional_id: String,
    /// Producer id of the transaction.
    pub producer_id: i64,
    /// Producer epoch the markers carry.
    pub producer_epoch: i16,
    /// The coordinator epoch (the leader epoch this partition was loaded at).
    pub coordinator_epoch: i32,
    /// Commit or abort.
    pub result: TransactionResult,
    /// The partitions, sorted.
    pub partitions: Vec<TopicPartition>,
    /// The transaction version the markers are written with.
    pub transaction_version: TransactionVersion,
}

/// An answer to a client request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// InitProducerId: the producer's id and epoch, or an error with -1 / -1.
    InitProducerId {
        /// Error code.
        error: ErrorCode,
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
    },
    /// AddPartitionsToTxn (one code for every partition of the transaction) or
    /// AddOffsetsToTxn.
    AddPartitions {
        /// Error code.
        error: ErrorCode,
    },
    /// EndTxn; V2 (v5) carries the producer id and epoch to use next, V1 -1 / -1.
    EndTxn {
        /// Error code.
        error: ErrorCode,
        /// Producer id.
        producer_id: i64,
        /// Producer epoch.
        producer_epoch: i16,
    },
}

impl Answer {
    /// The answer's error code.
    pub fn error(&self) -> ErrorCode {
        match *self {
            Answer::InitProducerId { error, .. }
            | Answer::AddPartitions { error }
            | Answer::EndTxn { error, .. } => error,
        }
    }
}

/// What the caller has to do after a step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Actions {
    /// Answers to send, each to the request it names.
    pub answers: Vec<(RequestId, Answer)>,
    /// Records to append, in this order.
    pub appends: Vec<LogAppend>,
    /// Markers to write.
    pub markers: Vec<TxnMarkers>,
    /// Producer ids a tick could not start an abort without; supply them before the next
    /// tick.
    pub producer_ids_wanted: usize,
}

impl Actions {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
            && self.appends.is_empty()
            && self.markers.is_empty()
            && self.producer_ids_wanted == 0
    }

    /// Adds `other`'s actions after these.
    pub fn merge(&mut self, other: Actions) {
        self.answers.extend(other.answers);
        self.appends.extend(other.appends);
        self.markers.extend(other.markers);
        self.producer_ids_wanted += other.producer_ids_wanted;
    }

    fn answer(&mut self, request: RequestId, answer: Answer) {
        self.answers.push((request, answer));
    }
}

/// Where an end of transaction comes from, which decides who gets an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EndOrigin {
    /// A client's EndTxn.
    Client(RequestId),
    /// An InitProducerId that found an ongoing transaction: it is aborted with the epoch
    /// bumped and the client is told to retry (CONCURRENT_TRANSACTIONS).
    InitProducerIdFence(RequestId),
    /// The transaction ran past its timeout.
    Timeout,
}

/// An end of transaction whose Prepare record is being appended.
#[derive(Debug, Clone, Copy)]
struct EndWrite {
    origin: EndOrigin,
    result: TransactionResult,
    /// The producer id and epoch the end was asked with.
    producer_id: i64,
    producer_epoch: i16,
    /// V1 and V2 check a written end differently.
    client_version: TransactionVersion,
    /// The end aborts a fenced producer.
    is_epoch_fence: bool,
}

/// Why a record is being appended.
#[derive(Debug, Clone, Copy)]
enum WritePurpose {
    InitProducerId(RequestId),
    AddPartitions(RequestId),
    End(EndWrite),
    /// The Complete record after every marker was written.
    Complete,
    /// The tombstone of an expired id.
    Expire,
}

#[derive(Debug, Clone)]
struct PendingWrite {
    transactional_id: String,
    /// The state being written; `None` for a tombstone.
    transit: Option<TxnTransitMetadata>,
    purpose: WritePurpose,
}

/// Markers handed out and the Complete state to write once they are all written.
#[derive(Debug, Clone)]
struct PendingMarkers {
    markers: TxnMarkers,
    complete: TxnTransitMetadata,
}

/// The coordinator of every transactional id of one `__transaction_state` partition, at
/// the coordinator epoch it was loaded at.
#[derive(Debug, Clone)]
pub struct TransactionCoordinator {
    partition: i32,
    coordinator_epoch: i32,
    config: CoordinatorConfig,
    transactions: BTreeMap<String, TransactionMetadata>,
    writes: BTreeMap<WriteId, PendingWrite>,
    pending_markers: BTreeMap<String, PendingMarkers>,
    spare_producer_ids: VecDeque<i64>,
    next_write_id: u64,
    next_abort_check_ms: i64,
    next_expiration_check_ms: i64,
}

/// The code a client gets when the coordinator's record append failed with `append_error`
/// (Kafka's mapping in `TransactionStateManager.appendTransactionToLog`).
pub fn coordinator_error_for_append(append_error: ErrorCode) -> ErrorCode {
    match append_error {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend
        | ErrorCode::RequestTimedOut => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        ErrorCode::MessageTooLarge | ErrorCode::RecordListTooLarge => ErrorCode::UnknownServerError,
        other => other,
    }
}

impl TransactionCoordinator {
    /// A coordinator for a partition with no records (a new one).
    pub fn new(
        partition: i32,
        coordinator_epoch: i32,
        config: CoordinatorConfig,
        now_ms: i64,
    ) -> TransactionCoordinator {
        TransactionCoordinator {
            partition,
            coordinator_epoch,
            next_abort_check_ms: now_ms
                .saturating_add(config.abort_timed_out_transactions_interval_ms),
            next_expiration_check_ms: now_ms
                .saturating_add(config.remove_expired_transactional_ids_interval_ms),
            config,
            transactions: BTreeMap::new(),
            writes: BTreeMap::new(),
            pending_markers: BTreeMap::new(),
            spare_producer_ids: VecDeque::new(),
            next_write_id: 0,
        }
    }

    /// The `__transaction_state` partition this coordinator serves.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// The epoch it was loaded at.
    pub fn coordinator_epoch(&self) -> i32 {
        self.coordinator_epoch
    }

    /// The state of `transactional_id`, if known.
    pub fn transaction(&self, transactional_id: &str) -> Option<&TransactionMetadata> {
        self.transactions.get(transactional_id)
    }

    /// Every known transactional id's state, by id.
    pub fn transactions(&self) -> impl Iterator<Item = &TransactionMetadata> {
        self.transactions.values()
    }

    /// Appends not reported yet.
    pub fn appends_in_flight(&self) -> usize {
        self.writes.len()
    }

    /// Transactions whose markers are out.
    pub fn markers_in_flight(&self) -> impl Iterator<Item = &TxnMarkers> {
        self.pending_markers
            .values()
            .map(|pending| &pending.markers)
    }

    /// Hands over a newly allocated producer id for the next request or abort that needs one.
    pub fn supply_producer_id(&mut self, producer_id: i64) {
        self.spare_producer_ids.push_back(producer_id);
    }

    /// Producer ids supplied and not used yet.
    pub fn spare_producer_ids(&self) -> usize {
        self.spare_producer_ids.len()
    }

    /// Whether `transactional_id` belongs to this partition; requests for any other id
    /// answer NOT_COORDINATOR, as a Kafka broker not leading the id's partition does.
    fn owns(&self, transactional_id: &str) -> bool {
        super::partition_for(transactional_id) == self.partition
    }

    fn append(
        &mut self,
        transactional_id: &str,
        transit: Option<TxnTransitMetadata>,
        purpose: WritePurpose,
        actions: &mut Actions,
    ) {
        let write_id = WriteId(self.next_write_id);
        self.next_write_id += 1;
        let value = transit
            .as_ref()
            .map(|transit| transit.to_log_value(self.config.transaction_version));
        actions.appends.push(LogAppend {
            write_id,
            key: TransactionLogKey {
                transactional_id: transactional_id.to_owned(),
            },
            value,
        });
        self.writes.insert(
            write_id,
            PendingWrite {
                transactional_id: transactional_id.to_owned(),
                transit,
                purpose,
            },
        );
    }

    /// The append `write_id` finished: `Ok` once the record is durable, `Err` with the
    /// append's error code when it is known not to be in the log. An unknown or already
    /// reported id changes nothing.
    pub fn append_completed(
        &mut self,
        write_id: WriteId,
        result: Result<(), ErrorCode>,
        now_ms: i64,
    ) -> Actions {
        let mut actions = Actions::default();
        let Some(write) = self.writes.remove(&write_id) else {
            return actions;
        };
        match result {
            Ok(()) => self.append_succeeded(write, now_ms, &mut actions),
            Err(append_error) => self.append_failed(
                write,
                coordinator_error_for_append(append_error),
                &mut actions,
            ),
        }
        actions
    }

    fn append_succeeded(&mut self, write: PendingWrite, now_ms: i64, actions: &mut Actions) {
        let id = write.transactional_id;
        let Some(transit) = write.transit else {
            // A tombstone: the id is forgotten if it is still the one being expired.
            if self
                .transactions
                .get(&id)
                .is_some_and(|metadata| metadata.pending_state == Some(TransactionState::Dead))
            {
                self.transactions.remove(&id);
            }
            return;
        };
        let completed = match self.transactions.get_mut(&id) {
            Some(metadata) => metadata.complete_transition(&transit),
            None => Err(super::metadata::TransitionError::UnexpectedCompletion {
                to: transit.state,
                reason: "the transactional id is gone",
            }),
        };
        if let Err(refused) = completed {
            // Cannot happen while only this machine changes the state; answer as Kafka's
            // IllegalStateException would reach the client.
            if let Some(metadata) = self.transactions.get_mut(&id) {
                metadata.pending_state = None;
            }
            self.answer_write(write.purpose, refused.error_code(), actions);
            return;
        }
        match write.purpose {
            WritePurpose::InitProducerId(request) => actions.answer(
                request,
                Answer::InitProducerId {
                    error: ErrorCode::None,
                    producer_id: transit.producer_id,
                    producer_epoch: transit.producer_epoch,
                },
            ),
            WritePurpose::AddPartitions(request) => actions.answer(
                request,
                Answer::AddPartitions {
                    error: ErrorCode::None,
                },
            ),
            WritePurpose::End(end) => self.end_written(&id, end, now_ms, actions),
            WritePurpose::Complete | WritePurpose::Expire => {}
        }
    }

    fn append_failed(&mut self, write: PendingWrite, error: ErrorCode, actions: &mut Actions) {
        let id = write.transactional_id.clone();
        if let WritePurpose::Complete = write.purpose {
            if error != ErrorCode::NotCoordinator {
                // Kafka retries a Complete record until it is written or the partition
                // moves; the markers are out and only this record finishes the
                // transaction.
                self.append(&id, write.transit, WritePurpose::Complete, actions);
                return;
            }
        }
        if let Some(metadata) = self.transactions.get_mut(&id) {
            metadata.pending_state = None;
            if let WritePurpose::End(end) = write.purpose {
                if end.is_epoch_fence {
                    metadata.has_failed_epoch_fence = true;
                }
            }
        }
        self.answer_write(write.purpose, error, actions);
    }

    /// Answers the request behind a write with `error` (and no producer id or epoch).
    fn answer_write(&self, purpose: WritePurpose, error: ErrorCode, actions: &mut Actions) {
        let (producer_id, producer_epoch) = (-1, -1);
        match purpose {
            WritePurpose::InitProducerId(request) => actions.answer(
                request,
                Answer::InitProducerId {
                    error,
                    producer_id,
                    producer_epoch,
                },
            ),
            WritePurpose::AddPartitions(request) => {
                actions.answer(request, Answer::AddPartitions { error })
            }
            WritePurpose::End(end) => {
                end_txn::answer_end(end.origin, error, producer_id, producer_epoch, actions)
            }
            WritePurpose::Complete | WritePurpose::Expire => {}
        }
    }

    /// Every marker of the transaction `(transactional_id, producer_id, producer_epoch)`
    /// handed out in [`Actions::markers`] is written: the Complete record is appended.
    /// Markers of a transaction no longer waiting for them change nothing.
    pub fn markers_written(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Actions {
        let mut actions = Actions::default();
        let matches = self
            .pending_markers
            .get(transactional_id)
            .is_some_and(|pending| {
                pending.markers.producer_id == producer_id
                    && pending.markers.producer_epoch == producer_epoch
            });
        if !matches {
            return actions;
        }
        let Some(pending) = self.pending_markers.remove(transactional_id) else {
            return actions;
        };
        self.append_completion(transactional_id, pending.complete, &mut actions);
        actions
    }

    /// Appends the Complete record if the id still waits for it.
    fn append_completion(
        &mut self,
        transactional_id: &str,
        complete: TxnTransitMetadata,
        actions: &mut Actions,
    ) {
        let waiting = self
            .transactions
            .get(transactional_id)
            .is_some_and(|metadata| metadata.pending_state == Some(complete.state));
        if waiting {
            self.append(
                transactional_id,
                Some(complete),
                WritePurpose::Complete,
                actions,
            );
        }
    }

    /// The id is in PrepareCommit / PrepareAbort with its Complete transition prepared:
    /// hand out its markers, or, with no partition to mark, append the Complete record now.
    fn send_markers(
        &mut self,
        transactional_id: &str,
        result: TransactionResult,
        complete: TxnTransitMetadata,
        actions: &mut Actions,
    ) {
        let Some(metadata) = self.transactions.get(transactional_id) else {
            return;
        };
        if metadata.partitions.is_empty() {
            self.append_completion(transactional_id, complete, actions);
            return;
        }
        let markers = TxnMarkers {
            transactional_id: transactional_id.to_owned(),
            producer_id: metadata.producer_id,
            producer_epoch: metadata.producer_epoch,
            coordinator_epoch: self.coordinator_epoch,
            result,
            partitions: metadata.partitions.iter().cloned().collect(),
            transaction_version: metadata.client_version,
        };
        actions.markers.push(markers.clone());
        self.pending_markers.insert(
            transactional_id.to_owned(),
            PendingMarkers { markers, complete },
        );
    }

    fn take_spare_producer_id(&mut self) -> Option<i64> {
        self.spare_producer_ids.pop_front()
    }
}
