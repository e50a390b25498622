//! One transactional id's state and its legal transitions (Kafka's `TransactionMetadata`,
//! `TxnTransitMetadata`): a `prepare_*` call checks a transition and returns the new state
//! as a [`TxnTransitMetadata`] while marking it pending; the coordinator writes that state to
//! `__transaction_state` and only then calls [`TransactionMetadata::complete_transition`].

use std::collections::{BTreeMap, BTreeSet};

use crate::protocol::ErrorCode;

use super::log_format::{TransactionLogError, TransactionLogPartitions, TransactionLogValue};
use super::state::{TransactionState, TransactionVersion};

/// "No producer id" in requests, responses and records.
pub const NO_PRODUCER_ID: i64 = -1;
/// "No producer epoch".
pub const NO_PRODUCER_EPOCH: i16 = -1;

/// A partition of a topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
}

impl TopicPartition {
    /// `topic`-`partition`.
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }
}

/// Whether no more epochs can be handed out for a producer id: the last one, `i16::MAX`, is
/// kept so that the coordinator can always fence a producer by bumping once more.
pub fn is_epoch_exhausted(producer_epoch: i16) -> bool {
    producer_epoch >= i16::MAX - 1
}

/// Why a transition was refused. Apart from [`TransitionError::ProducerFenced`], Kafka
/// treats each as a broken invariant (`IllegalStateException`), which its request path
/// answers as UNKNOWN_SERVER_ERROR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The producer's expected epoch is neither the current nor the last one.
    #[error("producer fenced: expected epoch {expected}, current {current}, last {last}")]
    ProducerFenced {
        /// The epoch the producer expected.
        expected: i16,
        /// The current epoch.
        current: i16,
        /// The last epoch.
        last: i16,
    },
    /// Another transition is already pending.
    #[error("a transition to {pending:?} is already pending")]
    AlreadyPending {
        /// The pending state.
        pending: TransactionState,
    },
    /// The target state cannot follow the current one.
    #[error("{to:?} cannot follow {from:?}")]
    IllegalTransition {
        /// Current state.
        from: TransactionState,
        /// Target state.
        to: TransactionState,
    },
    /// The new producer id or epoch would be negative.
    #[error("illegal producer id {producer_id} / epoch {producer_epoch}")]
    IllegalProducer {
        /// The new producer id.
        producer_id: i64,
        /// The new producer epoch.
        producer_epoch: i16,
    },
    /// No epoch is left for this producer id.
    #[error("producer id {0} has no epoch left")]
    EpochExhausted(i64),
    /// Producer ids cannot rotate while a transaction is in flight.
    #[error("producer id cannot rotate while a transaction is pending")]
    TransactionPending,
    /// The written state does not follow from the current one (completing a transition
    /// that was never prepared, or with changed fields).
    #[error("completing a transition to {to:?}: {reason}")]
    UnexpectedCompletion {
        /// The state being completed.
        to: TransactionState,
        /// What did not hold.
        reason: &'static str,
    },
}

impl TransitionError {
    /// The code Kafka answers a client with for this refusal.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            TransitionError::ProducerFenced { .. } => ErrorCode::ProducerFenced,
            _ => ErrorCode::UnknownServerError,
        }
    }
}

/// The state a transition leads to: what is written to `__transaction_state` and, once
/// written, becomes the id's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnTransitMetadata {
    /// Producer id.
    pub producer_id: i64,
    /// The producer id before this transition.
    pub previous_producer_id: i64,
    /// Producer id to switch to when a V2 end overflows the epoch, else -1.
    pub next_producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// The epoch before the last bump, -1 if unknown (kept in memory only).
    pub last_producer_epoch: i16,
    /// Transaction timeout (ms).
    pub timeout_ms: i32,
    /// The state.
    pub state: TransactionState,
    /// Partitions of the transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// Start of the transaction (ms), -1 if none.
    pub start_time_ms: i64,
    /// Last update (ms).
    pub last_update_time_ms: i64,
    /// Transaction version of the client (or of the server, for its own aborts).
    pub client_version: TransactionVersion,
}

impl TxnTransitMetadata {
    /// The record value Kafka's `TransactionLog.valueToBytes` writes for this state on a
    /// server at `server_version`: v0 below level 1, else v1 with the producer ids tagged;
    /// no partition list for Empty. Partitions are grouped by topic, topics and ids sorted.
    pub fn to_log_value(&self, server_version: TransactionVersion) -> TransactionLogValue {
        let version = server_version.log_value_version();
        let transaction_partitions = (self.state != TransactionState::Empty).then(|| {
            let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
            for partition in &self.partitions {
                by_topic
                    .entry(partition.topic.as_str())
                    .or_default()
                    .push(partition.partition);
            }
            by_topic
                .into_iter()
                .map(|(topic, partition_ids)| TransactionLogPartitions {
                    topic: topic.to_owned(),
                    partition_ids,
                    unknown_tagged_fields: Vec::new(),
                })
                .collect()
        });
        let flexible = version >= 1;
        TransactionLogValue {
            version,
            producer_id: self.producer_id,
            previous_producer_id: if flexible {
                self.previous_producer_id
            } else {
                NO_PRODUCER_ID
            },
            next_producer_id: if flexible {
                self.next_producer_id
            } else {
                NO_PRODUCER_ID
            },
            producer_epoch: self.producer_epoch,
            next_producer_epoch: NO_PRODUCER_EPOCH,
            transaction_timeout_ms: self.timeout_ms,
            transaction_status: self.state.id(),
            transaction_partitions,
            transaction_last_update_timestamp_ms: self.last_update_time_ms,
            transaction_start_timestamp_ms: self.start_time_ms,
            // v0 has no such field; a server at level 0 only serves V1 clients (level 0).
            client_transaction_version: if flexible {
                self.client_version.feature_level()
            } else {
                0
            },
            unknown_tagged_fields: Vec::new(),
        }
    }
}

/// One transactional id's state, as the coordinator holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionMetadata {
    /// The transactional id.
    pub transactional_id: String,
    /// Producer id in use.
    pub producer_id: i64,
    /// The producer id before the last rotation (or the last V2 overflow), -1 if none.
    pub previous_producer_id: i64,
    /// The producer id a pending V2 end switches to, -1 if none.
    pub next_producer_id: i64,
    /// Current producer epoch (-1 for an id created but never initialized).
    pub producer_epoch: i16,
    /// The epoch before the last bump, so a producer retrying a request that bumped can be
    /// recognised; -1 when unknown. Not written to the log: a loaded id has -1.
    pub last_producer_epoch: i16,
    /// Transaction timeout (ms).
    pub timeout_ms: i32,
    /// Current state.
    pub state: TransactionState,
    /// Partitions of the current transaction.
    pub partitions: BTreeSet<TopicPartition>,
    /// Start of the current transaction (ms), -1 if none.
    pub start_time_ms: i64,
    /// Last update (ms); idle ids expire from it.
    pub last_update_time_ms: i64,
    /// Transaction version the last transition was made with.
    pub client_version: TransactionVersion,
    /// The state a prepared, not yet completed, transition leads to.
    pub pending_state: Option<TransactionState>,
    /// A fence's record could not be written: the next fence does not bump the epoch again
    /// (the bumped epoch was never handed to anyone).
    pub has_failed_epoch_fence: bool,
}

/// The fields a transition changes, starting from the current ones (Kafka's
/// `TransitionData`).
struct TransitionData {
    state: TransactionState,
    producer_id: i64,
    next_producer_id: i64,
    producer_epoch: i16,
    last_producer_epoch: i16,
    timeout_ms: i32,
    partitions: BTreeSet<TopicPartition>,
    start_time_ms: i64,
    last_update_time_ms: i64,
    client_version: TransactionVersion,
}

impl TransactionMetadata {
    /// A transactional id seen for the first time: Empty, no epoch yet, no record written.
    pub fn new_unwritten(
        transactional_id: String,
        producer_id: i64,
        timeout_ms: i32,
        now_ms: i64,
    ) -> TransactionMetadata {
        TransactionMetadata {
            transactional_id,
            producer_id,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms,
            state: TransactionState::Empty,
            partitions: BTreeSet::new(),
            start_time_ms: -1,
            last_update_time_ms: now_ms,
            client_version: TransactionVersion::V0,
            pending_state: None,
            has_failed_epoch_fence: false,
        }
    }

    /// The state a record describes, as Kafka's `TransactionLog.read` rebuilds it: the last
    /// epoch unknown, partitions ignored for Empty.
    pub fn from_log_value(
        transactional_id: String,
        value: &TransactionLogValue,
    ) -> Result<TransactionMetadata, TransactionLogError> {
        let state = TransactionState::from_id(value.transaction_status)
            .ok_or(TransactionLogError::UnknownState(value.transaction_status))?;
        let client_version =
            TransactionVersion::from_feature_level(value.client_transaction_version).ok_or(
                TransactionLogError::UnknownTransactionVersion(value.client_transaction_version),
            )?;
        let mut partitions = BTreeSet::new();
        if state != TransactionState::Empty {
            for entry in value.transaction_partitions.iter().flatten() {
                for id in &entry.partition_ids {
                    partitions.insert(TopicPartition::new(entry.topic.clone(), *id));
                }
            }
        }
        Ok(TransactionMetadata {
            transactional_id,
            producer_id: value.producer_id,
            previous_producer_id: value.previous_producer_id,
            next_producer_id: value.next_producer_id,
            producer_epoch: value.producer_epoch,
            last_producer_epoch: NO_PRODUCER_EPOCH,
            timeout_ms: value.transaction_timeout_ms,
            state,
            partitions,
            start_time_ms: value.transaction_start_timestamp_ms,
            last_update_time_ms: value.transaction_last_update_timestamp_ms,
            client_version,
            pending_state: None,
            has_failed_epoch_fence: false,
        })
    }

    /// Whether a transition is prepared and not yet completed.
    pub fn pending_transition_in_progress(&self) -> bool {
        self.pending_state.is_some()
    }

    /// Whether no epoch is left for the current producer id.
    pub fn is_producer_epoch_exhausted(&self) -> bool {
        is_epoch_exhausted(self.producer_epoch)
    }

    fn data(&self, state: TransactionState) -> TransitionData {
        TransitionData {
            state,
            producer_id: self.producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            last_producer_epoch: self.last_producer_epoch,
            timeout_ms: self.timeout_ms,
            partitions: self.partitions.clone(),
            start_time_ms: self.start_time_ms,
            last_update_time_ms: self.last_update_time_ms,
            client_version: self.client_version,
        }
    }

    /// Fences the producer before aborting its transaction: the epoch goes up by one (not
    /// again after a fence whose record failed, and never past `i16::MAX`).
    pub fn prepare_fence_producer_epoch(&mut self) -> Result<TxnTransitMetadata, TransitionError> {
        let bumped = if self.has_failed_epoch_fence || self.producer_epoch == i16::MAX {
            self.producer_epoch
        } else {
            self.producer_epoch + 1
        };
        let mut data = self.data(TransactionState::PrepareEpochFence);
        data.producer_epoch = bumped;
        self.prepare_transition_to(data)
    }

    /// InitProducerId on a settled transaction: the next epoch (KIP-360: a producer naming
    /// its current epoch bumps it, one naming the epoch before the last bump is a retry and
    /// gets the current one, any other is fenced).
    pub fn prepare_increment_producer_epoch(
        &mut self,
        new_timeout_ms: i32,
        expected_producer_epoch: Option<i16>,
        now_ms: i64,
    ) -> Result<TxnTransitMetadata, TransitionError> {
        if self.is_producer_epoch_exhausted() {
            return Err(TransitionError::EpochExhausted(self.producer_id));
        }
        let mut data = self.data(TransactionState::Empty);
        let bumped = self.producer_epoch + 1;
        match expected_producer_epoch {
            None => {
                data.producer_epoch = bumped;
                data.last_producer_epoch = NO_PRODUCER_EPOCH;
            }
            Some(expected)
                if self.producer_epoch == NO_PRODUCER_EPOCH || expected == self.producer_epoch =>
            {
                data.producer_epoch = bumped;
                data.last_producer_epoch = self.producer_epoch;
            }
            Some(expected) if expected == self.last_producer_epoch => {
                // A retry of a bump whose answer was lost: no other producer initialized
                // since (that would have reset the last epoch to -1).
            }
            Some(expected) => {
                return Err(TransitionError::ProducerFenced {
                    expected,
                    current: self.producer_epoch,
                    last: self.last_producer_epoch,
                });
            }
        }
        data.timeout_ms = new_timeout_ms;
        data.partitions = BTreeSet::new();
        data.start_time_ms = -1;
        data.last_update_time_ms = now_ms;
        self.prepare_transition_to(data)
    }

    /// InitProducerId once the epoch is exhausted: a new producer id at epoch 0.
    pub fn prepare_producer_id_rotation(
        &mut self,
        new_producer_id: i64,
        new_timeout_ms: i32,
        now_ms: i64,
        record_last_epoch: bool,
    ) -> Result<TxnTransitMetadata, TransitionError> {
        if matches!(
            self.state,
            TransactionState::Ongoing
                | TransactionState::PrepareAbort
                | TransactionState::PrepareCommit
        ) {
            return Err(TransitionError::TransactionPending);
        }
        let mut data = self.data(TransactionState::Empty);
        data.producer_id = new_producer_id;
        data.producer_epoch = 0;
        data.last_producer_epoch = if record_last_epoch {
            self.producer_epoch
        } else {
            NO_PRODUCER_EPOCH
        };
        data.timeout_ms = new_timeout_ms;
        data.partitions = BTreeSet::new();
        data.start_time_ms = -1;
        data.last_update_time_ms = now_ms;
        self.prepare_transition_to(data)
    }

    /// Partitions join the transaction (which starts now if none was running).
    pub fn prepare_add_partitions(
        &mut self,
        added: &BTreeSet<TopicPartition>,
        now_ms: i64,
        client_version: TransactionVersion,
    ) -> Result<TxnTransitMetadata, TransitionError> {
        let starts_now = matches!(
            self.state,
            TransactionState::Empty
                | TransactionState::CompleteAbort
                | TransactionState::CompleteCommit
        );
        let mut data = self.data(TransactionState::Ongoing);
        data.partitions.extend(added.iter().cloned());
        data.start_time_ms = if starts_now {
            now_ms
        } else {
            self.start_time_ms
        };
        data.last_update_time_ms = now_ms;
        data.client_version = client_version;
        self.prepare_transition_to(data)
    }

    /// The transaction ends (`new_state` PrepareCommit or PrepareAbort). V2 bumps the epoch
    /// (not past `i16::MAX`, which only an abort of a fenced producer can meet);
    /// `next_producer_id` is the id the producer moves to when the epoch is exhausted.
    pub fn prepare_abort_or_commit(
        &mut self,
        new_state: TransactionState,
        client_version: TransactionVersion,
        next_producer_id: i64,
        now_ms: i64,
        no_partition_added: bool,
    ) -> Result<TxnTransitMetadata, TransitionError> {
        let mut data = self.data(new_state);
        if client_version.supports_epoch_bump() {
            if !(self.producer_epoch == i16::MAX && new_state == TransactionState::PrepareAbort) {
                // Wraps as Kafka's short does, so the negative epoch is refused below.
                data.producer_epoch = self.producer_epoch.wrapping_add(1);
            }
            data.last_producer_epoch = self.producer_epoch;
        }
        // A V2 abort with nothing added has no start: the end stands in for it.
        data.start_time_ms = if no_partition_added {
            now_ms
        } else {
            self.start_time_ms
        };
        data.next_producer_id = next_producer_id;
        data.last_update_time_ms = now_ms;
        data.client_version = client_version;
        self.prepare_transition_to(data)
    }

    /// Every marker is written: CompleteCommit or CompleteAbort. A V2 end that overflowed
    /// moves to the next producer id at epoch 0 (the last epoch stays the one the client
    /// last saw).
    pub fn prepare_complete(&mut self, now_ms: i64) -> Result<TxnTransitMetadata, TransitionError> {
        self.has_failed_epoch_fence = false;
        let target = if self.state == TransactionState::PrepareCommit {
            TransactionState::CompleteCommit
        } else {
            TransactionState::CompleteAbort
        };
        let mut data = self.data(target);
        if self.client_version.supports_epoch_bump() && self.next_producer_id != NO_PRODUCER_ID {
            data.producer_id = self.next_producer_id;
            data.producer_epoch = 0;
        }
        data.next_producer_id = NO_PRODUCER_ID;
        data.partitions = BTreeSet::new();
        data.last_update_time_ms = now_ms;
        self.prepare_transition_to(data)
    }

    /// The id expires.
    pub fn prepare_dead(&mut self) -> Result<TxnTransitMetadata, TransitionError> {
        let mut data = self.data(TransactionState::Dead);
        data.partitions = BTreeSet::new();
        self.prepare_transition_to(data)
    }

    fn prepare_transition_to(
        &mut self,
        data: TransitionData,
    ) -> Result<TxnTransitMetadata, TransitionError> {
        if let Some(pending) = self.pending_state {
            return Err(TransitionError::AlreadyPending { pending });
        }
        if data.producer_id < 0 || (data.state != TransactionState::Dead && data.producer_epoch < 0)
        {
            return Err(TransitionError::IllegalProducer {
                producer_id: data.producer_id,
                producer_epoch: data.producer_epoch,
            });
        }
        if !data.state.valid_previous_states().contains(&self.state) {
            return Err(TransitionError::IllegalTransition {
                from: self.state,
                to: data.state,
            });
        }
        self.pending_state = Some(data.state);
        Ok(TxnTransitMetadata {
            producer_id: data.producer_id,
            previous_producer_id: self.producer_id,
            next_producer_id: data.next_producer_id,
            producer_epoch: data.producer_epoch,
            last_producer_epoch: data.last_producer_epoch,
            timeout_ms: data.timeout_ms,
            state: data.state,
            partitions: data.partitions,
            start_time_ms: data.start_time_ms,
            last_update_time_ms: data.last_update_time_ms,
            client_version: data.client_version,
        })
    }

    /// The prepared state was written: it becomes the current one, after the checks Kafka
    /// makes that it follows from the current one.
    pub fn complete_transition(
        &mut self,
        transit: &TxnTransitMetadata,
    ) -> Result<(), TransitionError> {
        let unexpected = |reason| TransitionError::UnexpectedCompletion {
            to: transit.state,
            reason,
        };
        let Some(to) = self.pending_state else {
            return Err(unexpected("no transition is pending"));
        };
        if to != transit.state {
            return Err(unexpected("another transition is pending"));
        }
        match to {
            TransactionState::Empty => {
                if (self.producer_epoch != transit.producer_epoch
                    && !self.valid_producer_epoch_bump(transit))
                    || !transit.partitions.is_empty()
                    || transit.start_time_ms != -1
                {
                    return Err(unexpected("not a valid initialization"));
                }
            }
            TransactionState::Ongoing => {
                if !self.valid_producer_epoch(transit)
                    || !transit.partitions.is_superset(&self.partitions)
                    || self.timeout_ms != transit.timeout_ms
                {
                    return Err(unexpected("not a valid addition of partitions"));
                }
            }
            TransactionState::PrepareAbort | TransactionState::PrepareCommit => {
                let empty_abort = to == TransactionState::PrepareAbort
                    && transit.client_version.supports_epoch_bump()
                    && matches!(
                        self.state,
                        TransactionState::Empty
                            | TransactionState::CompleteCommit
                            | TransactionState::CompleteAbort
                    );
                if !self.valid_producer_epoch(transit)
                    || self.partitions != transit.partitions
                    || self.timeout_ms != transit.timeout_ms
                    || !(self.start_time_ms == transit.start_time_ms || empty_abort)
                {
                    return Err(unexpected("not a valid end"));
                }
            }
            TransactionState::CompleteAbort | TransactionState::CompleteCommit => {
                if !self.valid_producer_epoch(transit)
                    || self.timeout_ms != transit.timeout_ms
                    || transit.start_time_ms == -1
                {
                    return Err(unexpected("not a valid completion"));
                }
            }
            TransactionState::PrepareEpochFence | TransactionState::Dead => {
                // A fence turns into an abort before anything is written, and an expired
                // id is removed, never completed.
                return Err(unexpected("never written"));
            }
        }
        self.producer_id = transit.producer_id;
        self.previous_producer_id = transit.previous_producer_id;
        self.next_producer_id = transit.next_producer_id;
        self.producer_epoch = transit.producer_epoch;
        self.last_producer_epoch = transit.last_producer_epoch;
        self.timeout_ms = transit.timeout_ms;
        self.partitions = transit.partitions.clone();
        self.start_time_ms = transit.start_time_ms;
        self.last_update_time_ms = transit.last_update_time_ms;
        self.client_version = transit.client_version;
        self.pending_state = None;
        self.state = to;
        Ok(())
    }

    /// Kafka's `validProducerEpoch`: V2 ends bump (the last epoch is the current one), a V2
    /// overflow completes at epoch 0 under a new id; otherwise id and epoch are unchanged.
    fn valid_producer_epoch(&self, transit: &TxnTransitMetadata) -> bool {
        let v2 = transit.client_version.supports_epoch_bump();
        let completes = matches!(
            transit.state,
            TransactionState::CompleteCommit | TransactionState::CompleteAbort
        );
        let prepares = matches!(
            transit.state,
            TransactionState::PrepareCommit | TransactionState::PrepareAbort
        );
        if v2 && completes && transit.producer_epoch == 0 {
            return transit.last_producer_epoch == self.last_producer_epoch
                && transit.previous_producer_id == self.producer_id;
        }
        if v2 && prepares {
            return transit.last_producer_epoch == self.producer_epoch
                && transit.producer_id == self.producer_id;
        }
        transit.producer_epoch == self.producer_epoch && transit.producer_id == self.producer_id
    }

    fn valid_producer_epoch_bump(&self, transit: &TxnTransitMetadata) -> bool {
        transit.producer_epoch == self.producer_epoch.wrapping_add(1)
            || (transit.producer_epoch == 0 && transit.producer_id != self.producer_id)
    }
}

#[cfg(test)]
mod tests;
