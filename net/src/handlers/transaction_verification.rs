//! A partition leader's check of a transactional write with the transaction's coordinator,
//! before the write (Kafka's `AddPartitionsToTxnManager`, KIP-890):
//!
//! - **Transactions V1** (Produce up to v11, TxnOffsetCommit up to v4): the producer added
//!   the partitions itself (AddPartitionsToTxn / AddOffsetsToTxn); the leader only verifies
//!   that they are in the producer's open transaction at its epoch, so a late write from a
//!   transaction that has ended cannot open a new one nobody will end.
//! - **Transactions V2** (Produce v12+, TxnOffsetCommit v5+): the producer adds nothing; the
//!   leader adds the partitions to the transaction itself.
//!
//! The coordinator is asked on its shard when this broker runs it, else on the broker leading
//! the id's `__transaction_state` partition, as Kafka's leaders ask: AddPartitionsToTxn v5 over
//! the inter-broker client (`verify_only` unless the partitions are to be added).
//!
//! A leader checks a producer's first batch of a transaction on a partition only (its later
//! batches find the transaction open in the partition), in the partition's turn, so batches
//! reach the log in their order; while the coordinator is busy with another change of the
//! same transaction (CONCURRENT_TRANSACTIONS) it asks again for up to
//! [`BUSY_WAIT`](crate::handlers::transaction_hop::BUSY_WAIT).
//!
//! The codes a write gets, as Kafka's `AddPartitionsToTxnManager` and `ReplicaManager`
//! translate the coordinator's: TRANSACTION_ABORTABLE (not in the open transaction; to clients
//! too old to know it, Produce up to v10 and TxnOffsetCommit up to v3, INVALID_TXN_STATE),
//! INVALID_PRODUCER_EPOCH (for PRODUCER_FENCED, which producers expect at this point), and
//! NOT_ENOUGH_REPLICAS for a coordinator that is moving, loading or busy (a retriable code
//! every client retries without refreshing its metadata).

use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

use crate::handlers::transaction_hop::{coordinator_broker, on_coordinator, while_busy};
use crate::model::cluster_view::Leadership;
use crate::peers::{Endpoint, PeerError};
use crate::protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::transactions::coordinator::{AddPartitionsRequest, VerifyPartitionsRequest};
use crate::transactions::metadata::TopicPartition;
use crate::transactions::state::TransactionVersion;
use crate::transactions::{partition_for, TRANSACTION_STATE_TOPIC};

/// The AddPartitionsToTxn version a leader sends a coordinator on another broker (Kafka
/// 4.4's inter-broker version).
const VERIFICATION_VERSION: i16 = 5;

/// How long a leader waits for a coordinator on another broker.
const VERIFICATION_TIMEOUT: Duration = Duration::from_secs(10);

/// What the request's version lets the check do and answer (Kafka's
/// `TransactionSupportedOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SupportedOperation {
    /// Verify only; the client does not know TRANSACTION_ABORTABLE, which becomes
    /// INVALID_TXN_STATE (Produce up to v10, TxnOffsetCommit up to v3).
    DefaultError,
    /// Verify only; TRANSACTION_ABORTABLE is answered as it is (Produce v11, TxnOffsetCommit
    /// v4).
    GenericErrorSupported,
    /// Add the partitions to the transaction (Transactions V2: Produce v12+, TxnOffsetCommit
    /// v5+).
    AddPartition,
}

impl SupportedOperation {
    /// Kafka's `produceRequestVersionToTransactionSupportedOperation`.
    pub fn for_produce(version: i16) -> Self {
        match version {
            12.. => SupportedOperation::AddPartition,
            11 => SupportedOperation::GenericErrorSupported,
            _ => SupportedOperation::DefaultError,
        }
    }

    /// Kafka's `txnOffsetCommitRequestVersionToTransactionSupportedOperation`.
    pub fn for_txn_offset_commit(version: i16) -> Self {
        match version {
            5.. => SupportedOperation::AddPartition,
            4 => SupportedOperation::GenericErrorSupported,
            _ => SupportedOperation::DefaultError,
        }
    }
}

/// A transactional write to check.
#[derive(Debug, Clone)]
pub struct TransactionalWrite {
    /// The producer's transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its producer epoch.
    pub producer_epoch: i16,
    /// What the request's version allows.
    pub operation: SupportedOperation,
}

/// The partitions of `partitions` that may not be written, each with the code its write gets
/// (empty when every one may).
pub async fn check(
    shard: &Rc<Shard>,
    write: &TransactionalWrite,
    partitions: BTreeSet<TopicPartition>,
) -> Vec<(TopicPartition, ErrorCode)> {
    if partitions.is_empty() {
        return Vec::new();
    }
    let codes = while_busy(
        || ask(shard, write, partitions.clone()),
        |codes: &Vec<(TopicPartition, ErrorCode)>| {
            codes
                .iter()
                .any(|(_, code)| *code == ErrorCode::ConcurrentTransactions)
        },
    )
    .await;
    codes
        .into_iter()
        .filter(|(_, code)| *code != ErrorCode::None)
        .map(|(partition, code)| (partition, write_code(code, write.operation)))
        .collect()
}

/// The coordinator's codes, from this broker or the one running it.
async fn ask(
    shard: &Rc<Shard>,
    write: &TransactionalWrite,
    partitions: BTreeSet<TopicPartition>,
) -> Vec<(TopicPartition, ErrorCode)> {
    match local(shard, write, partitions.clone()).await {
        Err(ErrorCode::NotCoordinator) if coordinated_elsewhere(shard, write) => {
            remote(shard, write, partitions).await
        }
        Ok(codes) => codes,
        Err(error) => partitions.into_iter().map(|p| (p, error)).collect(),
    }
}

/// The coordinator's codes when it runs on this broker; NOT_COORDINATOR (among others) when
/// it does not.
async fn local(
    shard: &Rc<Shard>,
    write: &TransactionalWrite,
    partitions: BTreeSet<TopicPartition>,
) -> Result<Vec<(TopicPartition, ErrorCode)>, ErrorCode> {
    let id = write.transactional_id.clone();
    if write.operation == SupportedOperation::AddPartition {
        let add = AddPartitionsRequest {
            transactional_id: id.clone(),
            producer_id: write.producer_id,
            producer_epoch: write.producer_epoch,
            partitions: partitions.clone(),
            client_version: TransactionVersion::V2,
        };
        let error = on_coordinator(shard, &id, move |driver| async move {
            driver.add_partitions(add).await
        })
        .await?
        .error();
        Ok(partitions.into_iter().map(|p| (p, error)).collect())
    } else {
        let verify = VerifyPartitionsRequest {
            transactional_id: id.clone(),
            producer_id: write.producer_id,
            producer_epoch: write.producer_epoch,
            partitions: partitions.clone(),
        };
        on_coordinator(shard, &id, move |driver| async move {
            driver.machine().verify_partitions(&verify)
        })
        .await
    }
}

/// Whether the view has another broker lead the transactional id's `__transaction_state`
/// partition.
fn coordinated_elsewhere(shard: &Shard, write: &TransactionalWrite) -> bool {
    let partition = partition_for(&write.transactional_id);
    matches!(
        shard
            .view
            .load()
            .leadership(TRANSACTION_STATE_TOPIC, partition),
        Leadership::Elsewhere
    )
}

/// The endpoint of the broker leading the transactional id's `__transaction_state`
/// partition.
fn coordinator_endpoint(shard: &Shard, transactional_id: &str) -> Option<Endpoint> {
    let view = shard.view.load();
    let leader = coordinator_broker(&view, transactional_id)?;
    let broker = view
        .cluster
        .as_ref()?
        .brokers()
        .get(&kaas_cluster::ids::BrokerId(leader))?;
    Some(Endpoint::new(broker.host.clone(), broker.port))
}

/// The coordinator's codes from the broker running it: AddPartitionsToTxn v5 as Kafka's
/// leaders send it (`verify_only` unless the partitions are to be added). A coordinator that
/// cannot be reached answers NETWORK_EXCEPTION for every partition (a retriable code for the
/// client, [`write_code`]).
async fn remote(
    shard: &Rc<Shard>,
    write: &TransactionalWrite,
    partitions: BTreeSet<TopicPartition>,
) -> Vec<(TopicPartition, ErrorCode)> {
    let all = |partitions: &BTreeSet<TopicPartition>, code: ErrorCode| -> Vec<_> {
        partitions.iter().map(|p| (p.clone(), code)).collect()
    };
    let Some(endpoint) = coordinator_endpoint(shard, &write.transactional_id) else {
        return all(&partitions, ErrorCode::CoordinatorNotAvailable);
    };
    let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
    for partition in &partitions {
        match topics.last_mut() {
            Some(topic) if topic.name == partition.topic => {
                topic.partitions.push(partition.partition)
            }
            _ => topics.push(AddPartitionsToTxnTopic {
                name: partition.topic.clone(),
                partitions: vec![partition.partition],
            }),
        }
    }
    let request = AddPartitionsToTxnRequest {
        transactions: vec![AddPartitionsToTxnTransaction {
            transactional_id: write.transactional_id.clone(),
            producer_id: write.producer_id,
            producer_epoch: write.producer_epoch,
            verify_only: write.operation != SupportedOperation::AddPartition,
            topics,
        }],
        ..Default::default()
    };
    let call = || {
        shard.peers.call::<_, AddPartitionsToTxnResponse>(
            &endpoint,
            VERIFICATION_VERSION,
            &request,
            VERIFICATION_TIMEOUT,
        )
    };
    // A cached connection the coordinator's broker closed (it restarted) fails at once; the
    // check is asked again on a new one (asking twice changes nothing at the coordinator).
    let answered = match call().await {
        Err(PeerError::Io { .. }) => call().await,
        answered => answered,
    };
    let response = match answered {
        Ok(response) => response,
        Err(error) => {
            tracing::debug!(%error, "verifying a transactional write with its coordinator");
            return all(&partitions, ErrorCode::NetworkException);
        }
    };
    if response.error_code != ErrorCode::None.code() {
        // Kafka: a refused request means the verification did not complete.
        let code = match ErrorCode::from_code(response.error_code) {
            Some(ErrorCode::ClusterAuthorizationFailed) | None => ErrorCode::InvalidTxnState,
            Some(code) => code,
        };
        return all(&partitions, code);
    }
    let results = response.results_by_transaction.into_iter().next();
    partitions
        .into_iter()
        .map(|partition| {
            let code = results
                .as_ref()
                .and_then(|result| {
                    result
                        .topic_results
                        .iter()
                        .find(|topic| topic.name == partition.topic)
                })
                .and_then(|topic| {
                    topic
                        .results_by_partition
                        .iter()
                        .find(|p| p.partition_index == partition.partition)
                })
                .map_or(ErrorCode::NetworkException, |p| {
                    ErrorCode::from_code(p.partition_error_code)
                        .unwrap_or(ErrorCode::UnknownServerError)
                });
            (partition, code)
        })
        .collect()
}

/// The code a write gets for the coordinator's `code`.
fn write_code(code: ErrorCode, operation: SupportedOperation) -> ErrorCode {
    match code {
        ErrorCode::ProducerFenced => ErrorCode::InvalidProducerEpoch,
        ErrorCode::TransactionAbortable if operation == SupportedOperation::DefaultError => {
            ErrorCode::InvalidTxnState
        }
        ErrorCode::ConcurrentTransactions
        | ErrorCode::NetworkException
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::CoordinatorNotAvailable
        | ErrorCode::NotCoordinator => ErrorCode::NotEnoughReplicas,
        code => code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use SupportedOperation::*;

    #[test]
    fn coordinator_codes_become_the_codes_producers_retry_or_expect() {
        for operation in [DefaultError, GenericErrorSupported, AddPartition] {
            assert_eq!(
                write_code(ErrorCode::ProducerFenced, operation),
                ErrorCode::InvalidProducerEpoch
            );
            for moving in [
                ErrorCode::ConcurrentTransactions,
                ErrorCode::CoordinatorLoadInProgress,
                ErrorCode::CoordinatorNotAvailable,
                ErrorCode::NotCoordinator,
            ] {
                assert_eq!(write_code(moving, operation), ErrorCode::NotEnoughReplicas);
            }
        }
        // Clients older than KIP-890 do not know TRANSACTION_ABORTABLE.
        let abortable = ErrorCode::TransactionAbortable;
        assert_eq!(
            write_code(abortable, DefaultError),
            ErrorCode::InvalidTxnState
        );
        assert_eq!(write_code(abortable, GenericErrorSupported), abortable);
    }

    #[test]
    fn request_versions_choose_kafkas_operation() {
        let produce: Vec<_> = [3, 10, 11, 12, 13]
            .map(SupportedOperation::for_produce)
            .into();
        assert_eq!(
            produce,
            [
                DefaultError,
                DefaultError,
                GenericErrorSupported,
                AddPartition,
                AddPartition
            ]
        );
        let commit: Vec<_> = [0, 3, 4, 5, 6]
            .map(SupportedOperation::for_txn_offset_commit)
            .into();
        assert_eq!(
            commit,
            [
                DefaultError,
                DefaultError,
                GenericErrorSupported,
                AddPartition,
                AddPartition
            ]
        );
    }
}
