//! Adding partitions to a transaction (Kafka's `handleAddPartitionsToTransaction` and
//! `handleVerifyPartitionsInTransaction`): AddPartitionsToTxn from a V1 client, the implicit
//! add a partition leader makes for a V2 producer's first transactional produce,
//! AddOffsetsToTxn, and the KIP-890 check a leader makes before a V1 transactional produce.

use std::collections::BTreeSet;

use crate::model::offsets_topic;
use crate::protocol::ErrorCode;
use crate::transactions::metadata::TopicPartition;
use crate::transactions::state::{TransactionState, TransactionVersion};

use super::{Actions, Answer, RequestId, TransactionCoordinator, WritePurpose};

/// AddPartitionsToTxn for one transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddPartitionsRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The partitions to add.
    pub partitions: BTreeSet<TopicPartition>,
    /// V1 (a client's AddPartitionsToTxn up to v3) or V2 (a partition leader's v4+ add,
    /// [`TransactionVersion::for_add_partitions`]).
    pub client_version: TransactionVersion,
}

/// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddOffsetsRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The consumer group whose offsets the transaction commits.
    pub group_id: String,
}

/// AddPartitionsToTxn v4+ with `VerifyOnly` (KIP-890 part 1): are these partitions in the
/// transaction? A partition leader asks before accepting a V1 transactional produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyPartitionsRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The partitions to check.
    pub partitions: BTreeSet<TopicPartition>,
}

impl TransactionCoordinator {
    /// Adds partitions to the transaction; answered once the Ongoing record is written (at
    /// once when they are all in already).
    pub fn add_partitions(
        &mut self,
        request: RequestId,
        add: &AddPartitionsRequest,
        now_ms: i64,
    ) -> Actions {
        let mut actions = Actions::default();
        let id = add.transactional_id.as_str();
        let refused = if id.is_empty() {
            Some(ErrorCode::InvalidRequest)
        } else if !self.owns(id) {
            Some(ErrorCode::NotCoordinator)
        } else {
            None
        };
        if let Some(error) = refused {
            actions.answer(request, Answer::AddPartitions { error });
            return actions;
        }
        let Some(metadata) = self.transactions.get_mut(id) else {
            actions.answer(
                request,
                Answer::AddPartitions {
                    error: ErrorCode::InvalidProducerIdMapping,
                },
            );
            return actions;
        };
        // Kafka 4.4's order: a pending transition first, then id, then epoch.
        let error = if metadata.pending_transition_in_progress() {
            Some(ErrorCode::ConcurrentTransactions)
        } else if metadata.producer_id != add.producer_id {
            Some(ErrorCode::InvalidProducerIdMapping)
        } else if metadata.producer_epoch != add.producer_epoch {
            Some(ErrorCode::ProducerFenced)
        } else if matches!(
            metadata.state,
            TransactionState::PrepareCommit | TransactionState::PrepareAbort
        ) {
            Some(ErrorCode::ConcurrentTransactions)
        } else if metadata.state == TransactionState::Ongoing
            && add.partitions.is_subset(&metadata.partitions)
        {
            // Nothing new: no record needed.
            Some(ErrorCode::None)
        } else {
            None
        };
        if let Some(error) = error {
            actions.answer(request, Answer::AddPartitions { error });
            return actions;
        }
        match metadata.prepare_add_partitions(&add.partitions, now_ms, add.client_version) {
            Ok(transit) => self.append(
                id,
                Some(transit),
                WritePurpose::AddPartitions(request),
                &mut actions,
            ),
            Err(refused) => actions.answer(
                request,
                Answer::AddPartitions {
                    error: refused.error_code(),
                },
            ),
        }
        actions
    }

    /// AddOffsetsToTxn: adds `__consumer_offsets`' partition of the group
    /// (`abs(groupId.hashCode()) % 50`), as a V1 add whatever the client speaks (Kafka passes
    /// TV_0 here).
    pub fn add_offsets(
        &mut self,
        request: RequestId,
        add: &AddOffsetsRequest,
        now_ms: i64,
    ) -> Actions {
        let partition = TopicPartition::new(
            offsets_topic::NAME,
            offsets_topic::partition_for(&add.group_id),
        );
        self.add_partitions(
            request,
            &AddPartitionsRequest {
                transactional_id: add.transactional_id.clone(),
                producer_id: add.producer_id,
                producer_epoch: add.producer_epoch,
                partitions: BTreeSet::from([partition]),
                client_version: TransactionVersion::V0,
            },
            now_ms,
        )
    }

    /// Whether each partition is in the transaction: NONE if so, TRANSACTION_ABORTABLE if
    /// not (the produce is refused and the client aborts); one code for all when the
    /// producer does not match or the transaction is ending. Changes nothing.
    pub fn verify_partitions(
        &self,
        verify: &VerifyPartitionsRequest,
    ) -> Vec<(TopicPartition, ErrorCode)> {
        let id = verify.transactional_id.as_str();
        let all = |error: ErrorCode| {
            verify
                .partitions
                .iter()
                .map(|partition| (partition.clone(), error))
                .collect()
        };
        if id.is_empty() {
            return all(ErrorCode::InvalidRequest);
        }
        if !self.owns(id) {
            return all(ErrorCode::NotCoordinator);
        }
        let Some(metadata) = self.transactions.get(id) else {
            return all(ErrorCode::InvalidProducerIdMapping);
        };
        // No pending check: the produce is checked again when it is appended.
        if metadata.producer_id != verify.producer_id {
            return all(ErrorCode::InvalidProducerIdMapping);
        }
        if metadata.producer_epoch != verify.producer_epoch {
            return all(ErrorCode::ProducerFenced);
        }
        if matches!(
            metadata.state,
            TransactionState::PrepareCommit | TransactionState::PrepareAbort
        ) {
            return all(ErrorCode::ConcurrentTransactions);
        }
        verify
            .partitions
            .iter()
            .map(|partition| {
                let error = if metadata.partitions.contains(partition) {
                    ErrorCode::None
                } else {
                    ErrorCode::TransactionAbortable
                };
                (partition.clone(), error)
            })
            .collect()
    }
}
