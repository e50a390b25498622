//! AddPartitionsToTxn (key 24): partitions join a transaction.
//!
//! v0–3 come from a Transactions V1 producer, one transaction each. v4+ come from partition
//! leaders, several transactions each: a V2 producer's first transactional produce to a
//! partition adds it implicitly, and (`verify_only`, KIP-890 part 1) a leader checks that a V1
//! producer's partition is in its open transaction before accepting its produce.
//!
//! As Kafka 4.4 answers: a partition of a topic that does not exist gets
//! UNKNOWN_TOPIC_OR_PARTITION and every other partition of its transaction
//! OPERATION_NOT_ATTEMPTED; otherwise every partition gets the coordinator's one code (the
//! per-partition codes of a verification). An add that finds the coordinator busy with the
//! same transaction is asked again for a while
//! ([`crate::handlers::transaction_hop::while_busy`]).

use std::collections::BTreeSet;
use std::rc::Rc;

use crate::handlers::transaction_hop::{on_coordinator, while_busy};
use crate::model::cluster_view::ClusterView;
use crate::protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult, AddPartitionsToTxnTopic, AddPartitionsToTxnTopicResult,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::transactions::coordinator::{AddPartitionsRequest, VerifyPartitionsRequest};
use crate::transactions::metadata::TopicPartition;
use crate::transactions::state::TransactionVersion;

/// Answers AddPartitionsToTxn at `version`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: AddPartitionsToTxnRequest,
    version: i16,
) -> AddPartitionsToTxnResponse {
    if version <= 3 {
        let transaction = Transaction {
            transactional_id: request.v3_and_below_transactional_id,
            producer_id: request.v3_and_below_producer_id,
            producer_epoch: request.v3_and_below_producer_epoch,
            verify_only: false,
            topics: request.v3_and_below_topics,
        };
        let (_, results) = answer(shard, transaction, version).await;
        return AddPartitionsToTxnResponse {
            results_by_topic_v3_and_below: results,
            ..Default::default()
        };
    }
    let mut results_by_transaction = Vec::with_capacity(request.transactions.len());
    for transaction in request.transactions {
        let transaction = Transaction {
            transactional_id: transaction.transactional_id,
            producer_id: transaction.producer_id,
            producer_epoch: transaction.producer_epoch,
            verify_only: transaction.verify_only,
            topics: transaction.topics,
        };
        let (transactional_id, topic_results) = answer(shard, transaction, version).await;
        results_by_transaction.push(AddPartitionsToTxnResult {
            transactional_id,
            topic_results,
        });
    }
    AddPartitionsToTxnResponse {
        results_by_transaction,
        ..Default::default()
    }
}

/// One transaction of a request, whichever version carried it.
struct Transaction {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    topics: Vec<AddPartitionsToTxnTopic>,
}

/// The answer for one transaction: its id and its per-partition codes.
async fn answer(
    shard: &Rc<Shard>,
    transaction: Transaction,
    version: i16,
) -> (String, Vec<AddPartitionsToTxnTopicResult>) {
    let view = shard.view.load();
    let requested: Vec<(TopicPartition, bool)> = transaction
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|&partition| {
                let known = exists(&view, &topic.name, partition);
                (TopicPartition::new(topic.name.clone(), partition), known)
            })
        })
        .collect();
    drop(view);
    let codes: Vec<(TopicPartition, ErrorCode)> = if requested.iter().any(|(_, known)| !known) {
        requested
            .into_iter()
            .map(|(partition, known)| {
                let code = if known {
                    ErrorCode::OperationNotAttempted
                } else {
                    ErrorCode::UnknownTopicOrPartition
                };
                (partition, code)
            })
            .collect()
    } else {
        let partitions: BTreeSet<TopicPartition> = requested
            .into_iter()
            .map(|(partition, _)| partition)
            .collect();
        coordinate(shard, &transaction, partitions, version).await
    };
    (transaction.transactional_id, by_topic(codes))
}

/// The coordinator's codes for `partitions`.
async fn coordinate(
    shard: &Rc<Shard>,
    transaction: &Transaction,
    partitions: BTreeSet<TopicPartition>,
    version: i16,
) -> Vec<(TopicPartition, ErrorCode)> {
    let all = |partitions: &BTreeSet<TopicPartition>, code: ErrorCode| {
        partitions.iter().map(|p| (p.clone(), code)).collect()
    };
    let id = transaction.transactional_id.clone();
    if transaction.verify_only {
        let verify = VerifyPartitionsRequest {
            transactional_id: id.clone(),
            producer_id: transaction.producer_id,
            producer_epoch: transaction.producer_epoch,
            partitions: partitions.clone(),
        };
        return match on_coordinator(shard, &id, move |driver| async move {
            driver.machine().verify_partitions(&verify)
        })
        .await
        {
            Ok(codes) => codes,
            Err(error) => all(&partitions, error),
        };
    }
    let add = AddPartitionsRequest {
        transactional_id: id.clone(),
        producer_id: transaction.producer_id,
        producer_epoch: transaction.producer_epoch,
        partitions: partitions.clone(),
        client_version: TransactionVersion::for_add_partitions(version),
    };
    let error = while_busy(
        || {
            let add = add.clone();
            async {
                match on_coordinator(shard, &id, move |driver| async move {
                    driver.add_partitions(add).await
                })
                .await
                {
                    Ok(answer) => answer.error(),
                    Err(error) => error,
                }
            }
        },
        |error| *error == ErrorCode::ConcurrentTransactions,
    )
    .await;
    all(&partitions, error)
}

/// Whether the view has `topic`-`partition`.
fn exists(view: &ClusterView, topic: &str, partition: i32) -> bool {
    view.topic(topic)
        .is_some_and(|info| (0..info.partitions()).contains(&partition))
}

/// Codes grouped by topic, topics in first-seen order.
fn by_topic(codes: Vec<(TopicPartition, ErrorCode)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut topics: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (partition, code) in codes {
        let result = AddPartitionsToTxnPartitionResult {
            partition_index: partition.partition,
            partition_error_code: code.code(),
        };
        match topics.iter_mut().find(|t| t.name == partition.topic) {
            Some(topic) => topic.results_by_partition.push(result),
            None => topics.push(AddPartitionsToTxnTopicResult {
                name: partition.topic,
                results_by_partition: vec![result],
            }),
        }
    }
    topics
}
