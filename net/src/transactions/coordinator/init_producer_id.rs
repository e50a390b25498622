//! InitProducerId for a transactional id (Kafka's `handleInitProducerId` and
//! `prepareInitProducerIdTransit`). A request without a transactional id (an idempotent
//! producer) never reaches the coordinator.

use crate::protocol::ErrorCode;
use crate::transactions::metadata::{is_epoch_exhausted, TransactionMetadata};
use crate::transactions::state::TransactionState;

use super::{
    Actions, Answer, EndOrigin, NeedsProducerId, ProducerIdAndEpoch, RequestId,
    TransactionCoordinator, TransactionResult, WritePurpose,
};

/// An InitProducerId request with a transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitProducerIdRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The transaction timeout the producer asks for (ms).
    pub transaction_timeout_ms: i32,
    /// KIP-360 (v3+): the id and epoch the producer has, when it re-initializes after an
    /// error; `None` for a new producer.
    pub expected: Option<ProducerIdAndEpoch>,
}

fn refuse(request: RequestId, error: ErrorCode, actions: &mut Actions) {
    actions.answer(
        request,
        Answer::InitProducerId {
            error,
            producer_id: -1,
            producer_epoch: -1,
        },
    );
}

impl TransactionCoordinator {
    /// InitProducerId: the producer's id and next epoch, written before it is answered. An
    /// ongoing transaction is first aborted with the epoch bumped, fencing the producer that
    /// ran it, and the client is answered CONCURRENT_TRANSACTIONS to retry once the abort is
    /// logged.
    pub fn init_producer_id(
        &mut self,
        request: RequestId,
        init: &InitProducerIdRequest,
        now_ms: i64,
    ) -> Result<Actions, NeedsProducerId> {
        let mut actions = Actions::default();
        let id = init.transactional_id.as_str();
        if id.is_empty() {
            // Kafka: an empty id is invalid (a null one is an idempotent producer).
            refuse(request, ErrorCode::InvalidRequest, &mut actions);
            return Ok(actions);
        }
        let timeout = init.transaction_timeout_ms;
        if timeout <= 0 || timeout > self.config.transaction_max_timeout_ms {
            refuse(request, ErrorCode::InvalidTransactionTimeout, &mut actions);
            return Ok(actions);
        }
        if !self.owns(id) {
            refuse(request, ErrorCode::NotCoordinator, &mut actions);
            return Ok(actions);
        }
        if self.needs_producer_id_for_init(init) && self.spare_producer_ids.is_empty() {
            return Err(NeedsProducerId);
        }
        if !self.transactions.contains_key(id) {
            // Kafka creates the id in memory first (Empty, no epoch); only the record of
            // its first epoch is written.
            let producer_id = self.take_spare_producer_id().ok_or(NeedsProducerId)?;
            self.transactions.insert(
                id.to_owned(),
                TransactionMetadata::new_unwritten(id.to_owned(), producer_id, timeout, now_ms),
            );
        }
        self.prepare_init(request, init, now_ms, &mut actions);
        Ok(actions)
    }

    /// Whether the request would need a new producer id: a new transactional id, a rotation
    /// of an exhausted epoch, or (V2 server) a fence whose abort exhausts it.
    fn needs_producer_id_for_init(&self, init: &InitProducerIdRequest) -> bool {
        let Some(metadata) = self.transactions.get(&init.transactional_id) else {
            return true;
        };
        if metadata.pending_transition_in_progress() {
            return false;
        }
        match metadata.state {
            TransactionState::Empty
            | TransactionState::CompleteCommit
            | TransactionState::CompleteAbort => {
                metadata.is_producer_epoch_exhausted()
                    && init.expected.is_none_or(|expected| {
                        expected.producer_epoch == metadata.producer_epoch
                            && valid_expected_producer(metadata, expected)
                    })
            }
            TransactionState::Ongoing => {
                self.config.transaction_version.supports_epoch_bump()
                    && metadata.is_producer_epoch_exhausted()
                    && init
                        .expected
                        .is_none_or(|expected| valid_expected_producer(metadata, expected))
            }
            _ => false,
        }
    }

    fn prepare_init(
        &mut self,
        request: RequestId,
        init: &InitProducerIdRequest,
        now_ms: i64,
        actions: &mut Actions,
    ) {
        let id = init.transactional_id.as_str();
        let Some(metadata) = self.transactions.get_mut(id) else {
            refuse(request, ErrorCode::UnknownServerError, actions);
            return;
        };
        if metadata.pending_transition_in_progress() {
            refuse(request, ErrorCode::ConcurrentTransactions, actions);
            return;
        }
        if let Some(expected) = init.expected {
            if !valid_expected_producer(metadata, expected) {
                refuse(request, ErrorCode::ProducerFenced, actions);
                return;
            }
        }
        let transit = match metadata.state {
            TransactionState::PrepareAbort | TransactionState::PrepareCommit => {
                refuse(request, ErrorCode::ConcurrentTransactions, actions);
                return;
            }
            TransactionState::Empty
            | TransactionState::CompleteAbort
            | TransactionState::CompleteCommit => {
                let rotate = metadata.is_producer_epoch_exhausted()
                    && init
                        .expected
                        .is_none_or(|expected| expected.producer_epoch == metadata.producer_epoch);
                if rotate {
                    // Checked to be there before anything changed.
                    match self.spare_producer_ids.pop_front() {
                        Some(producer_id) => metadata.prepare_producer_id_rotation(
                            producer_id,
                            init.transaction_timeout_ms,
                            now_ms,
                            init.expected.is_some(),
                        ),
                        None => {
                            refuse(request, ErrorCode::UnknownServerError, actions);
                            return;
                        }
                    }
                } else {
                    metadata.prepare_increment_producer_epoch(
                        init.transaction_timeout_ms,
                        init.expected.map(|expected| expected.producer_epoch),
                        now_ms,
                    )
                }
            }
            TransactionState::Ongoing => {
                // The epoch bumped here is never handed out: the client retries and the
                // retry bumps again (moving to a new producer id if this exhausted it).
                let fence = metadata.prepare_fence_producer_epoch();
                match fence {
                    Ok(fence) => {
                        self.end_transaction_for_coordinator(
                            id,
                            fence.producer_id,
                            fence.producer_epoch,
                            EndOrigin::InitProducerIdFence(request),
                            now_ms,
                            actions,
                        );
                    }
                    Err(refused) => refuse(request, refused.error_code(), actions),
                }
                return;
            }
            TransactionState::Dead | TransactionState::PrepareEpochFence => {
                // Never a current state; Kafka fails the request with an internal error.
                refuse(request, ErrorCode::UnknownServerError, actions);
                return;
            }
        };
        match transit {
            Ok(transit) => self.append(
                id,
                Some(transit),
                WritePurpose::InitProducerId(request),
                actions,
            ),
            Err(refused) => refuse(request, refused.error_code(), actions),
        }
    }

    /// An abort the coordinator starts itself (fencing, timeout) with the fence's id and
    /// epoch, under the broker's own transaction version.
    pub(super) fn end_transaction_for_coordinator(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        origin: EndOrigin,
        now_ms: i64,
        actions: &mut Actions,
    ) {
        let version = self.config.transaction_version;
        let ended = self.end_transaction(
            transactional_id,
            producer_id,
            producer_epoch,
            TransactionResult::Abort,
            origin,
            version,
            now_ms,
            actions,
        );
        if ended.is_err() {
            // Checked before the fence was prepared; should it still happen, the fence is
            // dropped so the id is not left pending.
            if let Some(metadata) = self.transactions.get_mut(transactional_id) {
                if metadata.pending_state == Some(TransactionState::PrepareEpochFence) {
                    metadata.pending_state = None;
                }
            }
            if let EndOrigin::InitProducerIdFence(request) = origin {
                refuse(request, ErrorCode::ConcurrentTransactions, actions);
            }
        }
    }
}

/// Kafka's `isValidProducerId`: a producer naming an id and epoch is fenced unless the id
/// was just created (no epoch yet: a producer recovering from UNKNOWN_PRODUCER_ID), names
/// the current producer id (its epoch is checked next), or names the previous id with an
/// exhausted epoch (a retry after a rotation whose answer was lost).
fn valid_expected_producer(metadata: &TransactionMetadata, expected: ProducerIdAndEpoch) -> bool {
    metadata.producer_epoch == super::super::metadata::NO_PRODUCER_EPOCH
        || expected.producer_id == metadata.producer_id
        || (expected.producer_id == metadata.previous_producer_id
            && is_epoch_exhausted(expected.producer_epoch))
}
