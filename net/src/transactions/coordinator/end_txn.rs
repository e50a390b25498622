//! EndTxn, and the aborts the coordinator starts itself (Kafka's `endTransaction` and
//! `endTransactionWithTV1`): the Prepare record, then the answer and the markers.

use crate::protocol::ErrorCode;
use crate::transactions::metadata::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use crate::transactions::state::{TransactionState, TransactionVersion};

use super::{
    Actions, Answer, EndOrigin, EndWrite, NeedsProducerId, RequestId, TransactionCoordinator,
    TransactionResult, WritePurpose,
};

/// An EndTxn request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndTxnRequest {
    /// The transactional id.
    pub transactional_id: String,
    /// The producer id.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// Commit or abort.
    pub result: TransactionResult,
    /// V1 (EndTxn up to v4) or V2 (v5+: [`TransactionVersion::for_end_txn`]).
    pub client_version: TransactionVersion,
}

/// Answers whoever asked for an end: the EndTxn's client, or the InitProducerId that
/// fenced (told to retry, unless the abort failed).
pub(super) fn answer_end(
    origin: EndOrigin,
    error: ErrorCode,
    producer_id: i64,
    producer_epoch: i16,
    actions: &mut Actions,
) {
    match origin {
        EndOrigin::Client(request) => actions.answer(
            request,
            Answer::EndTxn {
                error,
                producer_id,
                producer_epoch,
            },
        ),
        EndOrigin::InitProducerIdFence(request) => {
            let error = if error == ErrorCode::None {
                ErrorCode::ConcurrentTransactions
            } else {
                error
            };
            actions.answer(
                request,
                Answer::InitProducerId {
                    error,
                    producer_id: NO_PRODUCER_ID,
                    producer_epoch: NO_PRODUCER_EPOCH,
                },
            );
        }
        EndOrigin::Timeout => {}
    }
}

fn refuse(origin: EndOrigin, error: ErrorCode, actions: &mut Actions) {
    answer_end(origin, error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, actions);
}

/// What an end decides before anything is written.
enum EndDecision {
    /// Answer now (a refusal, or a retry of an end already done: NONE).
    Answer(ErrorCode),
    /// Prepare `next` (PrepareCommit or PrepareAbort); `no_partition_added` for a V2 abort
    /// of a transaction that has none.
    Prepare {
        next: TransactionState,
        no_partition_added: bool,
    },
}

impl TransactionCoordinator {
    /// EndTxn from a client.
    pub fn end_txn(
        &mut self,
        request: RequestId,
        end: &EndTxnRequest,
        now_ms: i64,
    ) -> Result<Actions, NeedsProducerId> {
        let mut actions = Actions::default();
        self.end_transaction(
            &end.transactional_id,
            end.producer_id,
            end.producer_epoch,
            end.result,
            EndOrigin::Client(request),
            end.client_version,
            now_ms,
            &mut actions,
        )?;
        Ok(actions)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn end_transaction(
        &mut self,
        id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TransactionResult,
        origin: EndOrigin,
        client_version: TransactionVersion,
        now_ms: i64,
        actions: &mut Actions,
    ) -> Result<(), NeedsProducerId> {
        if id.is_empty() {
            refuse(origin, ErrorCode::InvalidRequest, actions);
            return Ok(());
        }
        if !self.owns(id) {
            refuse(origin, ErrorCode::NotCoordinator, actions);
            return Ok(());
        }
        let is_from_client = matches!(origin, EndOrigin::Client(_));
        let Some(metadata) = self.transactions.get(id) else {
            refuse(origin, ErrorCode::InvalidProducerIdMapping, actions);
            return Ok(());
        };
        let is_epoch_fence = metadata.pending_state == Some(TransactionState::PrepareEpochFence);
        let decision = if client_version.supports_epoch_bump() {
            decide_v2(
                metadata,
                producer_id,
                producer_epoch,
                result,
                is_from_client,
                is_epoch_fence,
            )
        } else {
            decide_v1(
                metadata,
                producer_id,
                producer_epoch,
                result,
                is_from_client,
            )
        };
        let (next, no_partition_added) = match decision {
            EndDecision::Answer(ErrorCode::None) => {
                // A retry of an end already done: V2 hands out the current id and epoch.
                let (id_out, epoch_out) = if client_version.supports_epoch_bump() {
                    (metadata.producer_id, metadata.producer_epoch)
                } else {
                    (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
                };
                answer_end(origin, ErrorCode::None, id_out, epoch_out, actions);
                return Ok(());
            }
            EndDecision::Answer(error) => {
                refuse(origin, error, actions);
                return Ok(());
            }
            EndDecision::Prepare {
                next,
                no_partition_added,
            } => (next, no_partition_added),
        };
        // A V2 end bumps the epoch; once no epoch is left the producer moves to a new id.
        let needs_new_id =
            client_version.supports_epoch_bump() && metadata.is_producer_epoch_exhausted();
        let next_producer_id = if needs_new_id {
            self.spare_producer_ids.pop_front().ok_or(NeedsProducerId)?
        } else {
            NO_PRODUCER_ID
        };
        let Some(metadata) = self.transactions.get_mut(id) else {
            refuse(origin, ErrorCode::InvalidProducerIdMapping, actions);
            return Ok(());
        };
        let aborting_fenced = next == TransactionState::PrepareAbort && is_epoch_fence;
        if aborting_fenced {
            // The fence was only a step towards this abort.
            metadata.pending_state = None;
            if !client_version.supports_epoch_bump() {
                // V1 takes the fence's epoch for the abort in memory before writing it, and
                // forgets the last epoch (so no retry can pass for the fenced producer).
                metadata.producer_epoch = producer_epoch;
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH;
            }
        }
        // V1 ends are always written with transaction version 0 (Kafka's TV_0).
        let write_version = if client_version.supports_epoch_bump() {
            client_version
        } else {
            TransactionVersion::V0
        };
        let transit = metadata.prepare_abort_or_commit(
            next,
            write_version,
            next_producer_id,
            now_ms,
            no_partition_added,
        );
        match transit {
            Ok(transit) => {
                let end = EndWrite {
                    origin,
                    result,
                    producer_id,
                    producer_epoch,
                    client_version,
                    is_epoch_fence: aborting_fenced,
                };
                self.append(id, Some(transit), WritePurpose::End(end), actions);
            }
            Err(refused) => refuse(origin, refused.error_code(), actions),
        }
        Ok(())
    }

    /// The Prepare record is durable: check the id still matches (Kafka re-reads it), then
    /// answer and hand out the markers.
    pub(super) fn end_written(
        &mut self,
        id: &str,
        end: EndWrite,
        now_ms: i64,
        actions: &mut Actions,
    ) {
        let Some(metadata) = self.transactions.get_mut(id) else {
            refuse(end.origin, ErrorCode::NotCoordinator, actions);
            return;
        };
        let v2 = end.client_version.supports_epoch_bump();
        let epoch_matches = metadata.producer_epoch == end.producer_epoch
            || (v2 && i32::from(metadata.producer_epoch) == i32::from(end.producer_epoch) + 1);
        let expected_state = match end.result {
            TransactionResult::Commit => TransactionState::PrepareCommit,
            TransactionResult::Abort => TransactionState::PrepareAbort,
        };
        let error = if metadata.producer_id != end.producer_id {
            Some(ErrorCode::InvalidProducerIdMapping)
        } else if !epoch_matches {
            Some(ErrorCode::ProducerFenced)
        } else if metadata.pending_transition_in_progress() {
            Some(ErrorCode::ConcurrentTransactions)
        } else if metadata.state != expected_state {
            Some(ErrorCode::InvalidTxnState)
        } else {
            None
        };
        if let Some(error) = error {
            refuse(end.origin, error, actions);
            return;
        }
        let complete = match metadata.prepare_complete(now_ms) {
            Ok(complete) => complete,
            Err(refused) => {
                refuse(end.origin, refused.error_code(), actions);
                return;
            }
        };
        // V2 tells the client the id and epoch it continues with; V1 answers -1 / -1.
        let (producer_id, producer_epoch) = if v2 {
            (complete.producer_id, complete.producer_epoch)
        } else {
            (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        };
        answer_end(
            end.origin,
            ErrorCode::None,
            producer_id,
            producer_epoch,
            actions,
        );
        self.send_markers(id, end.result, complete, actions);
    }
}

/// Transactions V1 (Kafka's `endTransactionWithTV1`): the client's epoch must be the current
/// one; an end already done is answered NONE again.
fn decide_v1(
    metadata: &crate::transactions::metadata::TransactionMetadata,
    producer_id: i64,
    producer_epoch: i16,
    result: TransactionResult,
    is_from_client: bool,
) -> EndDecision {
    use TransactionState::*;
    if metadata.producer_id != producer_id {
        return EndDecision::Answer(ErrorCode::InvalidProducerIdMapping);
    }
    // Clients may not bump; the coordinator's own aborts come with the fence's epoch.
    if (is_from_client && producer_epoch != metadata.producer_epoch)
        || producer_epoch < metadata.producer_epoch
    {
        return EndDecision::Answer(ErrorCode::ProducerFenced);
    }
    if metadata
        .pending_state
        .is_some_and(|pending| pending != PrepareEpochFence)
    {
        return EndDecision::Answer(ErrorCode::ConcurrentTransactions);
    }
    let commit = result == TransactionResult::Commit;
    match metadata.state {
        Ongoing => EndDecision::Prepare {
            next: if commit { PrepareCommit } else { PrepareAbort },
            no_partition_added: false,
        },
        CompleteCommit if commit => EndDecision::Answer(ErrorCode::None),
        CompleteAbort if !commit => EndDecision::Answer(ErrorCode::None),
        PrepareCommit if commit => EndDecision::Answer(ErrorCode::ConcurrentTransactions),
        PrepareAbort if !commit => EndDecision::Answer(ErrorCode::ConcurrentTransactions),
        CompleteCommit | CompleteAbort | PrepareCommit | PrepareAbort | Empty => {
            EndDecision::Answer(ErrorCode::InvalidTxnState)
        }
        Dead | PrepareEpochFence => EndDecision::Answer(ErrorCode::UnknownServerError),
    }
}

/// Transactions V2 (Kafka 4.4's `endTransaction`): every end bumps the epoch, so a retry of
/// an end already done comes with the epoch before the bump (or, after an overflow, the
/// previous producer id at the last epoch) and is answered NONE with the current id and
/// epoch; the same epoch as the current one is the next end.
///
/// | state | abort, retry | abort, current | commit, retry | commit, current |
/// |---|---|---|---|---|
/// | Empty | PRODUCER_FENCED | bump | PRODUCER_FENCED | INVALID_TXN_STATE |
/// | CompleteAbort | NONE | bump | INVALID_TXN_STATE | INVALID_TXN_STATE |
/// | CompleteCommit | INVALID_TXN_STATE | bump | NONE | INVALID_TXN_STATE |
fn decide_v2(
    metadata: &crate::transactions::metadata::TransactionMetadata,
    producer_id: i64,
    producer_epoch: i16,
    result: TransactionResult,
    is_from_client: bool,
    is_epoch_fence: bool,
) -> EndDecision {
    use TransactionState::*;
    let current_epoch = metadata.producer_epoch;
    let retry_on_overflow = !is_epoch_fence
        && metadata.previous_producer_id == producer_id
        && producer_epoch == i16::MAX - 1
        && current_epoch == 0;
    let retry_on_epoch_bump =
        !is_epoch_fence && i32::from(current_epoch) == i32::from(producer_epoch) + 1;
    let valid_epoch = if is_epoch_fence {
        (!is_from_client || producer_epoch == current_epoch) && producer_epoch >= current_epoch
    } else {
        match metadata.state {
            Ongoing | Empty | Dead | PrepareEpochFence => producer_epoch == current_epoch,
            PrepareCommit | PrepareAbort => retry_on_epoch_bump,
            CompleteCommit | CompleteAbort => {
                retry_on_epoch_bump || retry_on_overflow || producer_epoch == current_epoch
            }
        }
    };
    let is_retry = retry_on_epoch_bump || retry_on_overflow;
    // Kafka 4.4 looks at a pending transition first.
    if metadata
        .pending_state
        .is_some_and(|pending| pending != PrepareEpochFence)
    {
        return EndDecision::Answer(ErrorCode::ConcurrentTransactions);
    }
    if metadata.producer_id != producer_id && !retry_on_overflow {
        return EndDecision::Answer(ErrorCode::InvalidProducerIdMapping);
    }
    if !valid_epoch {
        return EndDecision::Answer(ErrorCode::ProducerFenced);
    }
    let commit = result == TransactionResult::Commit;
    let abort_without_partitions = EndDecision::Prepare {
        next: PrepareAbort,
        no_partition_added: true,
    };
    match metadata.state {
        Ongoing => EndDecision::Prepare {
            next: if commit { PrepareCommit } else { PrepareAbort },
            no_partition_added: false,
        },
        CompleteCommit if commit && is_retry => EndDecision::Answer(ErrorCode::None),
        CompleteCommit if !commit && !is_retry => abort_without_partitions,
        CompleteAbort if !commit && is_retry => EndDecision::Answer(ErrorCode::None),
        CompleteAbort if !commit => abort_without_partitions,
        Empty if !commit => abort_without_partitions,
        CompleteCommit | CompleteAbort | Empty => EndDecision::Answer(ErrorCode::InvalidTxnState),
        PrepareCommit if commit => EndDecision::Answer(ErrorCode::ConcurrentTransactions),
        PrepareAbort if !commit => EndDecision::Answer(ErrorCode::ConcurrentTransactions),
        PrepareCommit | PrepareAbort => EndDecision::Answer(ErrorCode::InvalidTxnState),
        Dead | PrepareEpochFence => EndDecision::Answer(ErrorCode::UnknownServerError),
    }
}
