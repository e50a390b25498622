//! TxnOffsetCommit (key 28): a transactional producer commits a consumer group's offsets
//! inside its transaction (`sendOffsetsToTransaction`). The offsets stay pending until the
//! transaction's marker reaches the group's `__consumer_offsets` partition
//! ([`crate::groups::txn_offsets`]).
//!
//! First the group's `__consumer_offsets` partition is checked with the transaction's
//! coordinator ([`transaction_verification`]: verified for a V1 producer, added for a V2
//! one, v5+), so offsets of a transaction that has ended are never left pending; a
//! coordinator that is moving answers COORDINATOR_NOT_AVAILABLE (Kafka's group coordinator
//! translates NOT_ENOUGH_REPLICAS so). Then the group's coordinator writes them.

use std::collections::BTreeSet;
use std::rc::Rc;

use crate::groups::offsets_topic;
use crate::groups::txn_offsets::{self, TopicRef, TxnCommitter, TxnOffsetToCommit};
use crate::handlers::group_hop::on_coordinator;
use crate::handlers::now_ms;
use crate::handlers::transaction_verification::{self, SupportedOperation, TransactionalWrite};
use crate::protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::transactions::metadata::TopicPartition;

/// Answers TxnOffsetCommit at `version`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    let to_commit: Vec<TxnOffsetToCommit> = request
        .topics
        .iter()
        .flat_map(|topic| {
            let topic_ref = if version >= 6 {
                TopicRef::Id(topic.topic_id)
            } else {
                TopicRef::Name(topic.name.clone())
            };
            topic.partitions.iter().map(move |p| TxnOffsetToCommit {
                topic: topic_ref.clone(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.clone(),
            })
        })
        .collect();
    let count = to_commit.len();
    let errors = match verify(shard, &request, version).await {
        Some(error) => vec![error; count],
        None => commit(shard, &request, version, to_commit).await,
    };
    let mut errors = errors.into_iter();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| TxnOffsetCommitResponseTopic {
            partitions: topic
                .partitions
                .iter()
                .map(|p| TxnOffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: errors.next().unwrap_or(ErrorCode::None).code(),
                })
                .collect(),
            name: topic.name,
            topic_id: topic.topic_id,
        })
        .collect();
    TxnOffsetCommitResponse {
        topics,
        ..Default::default()
    }
}

/// The code every offset gets when the transaction's coordinator refuses the group's
/// partition, `None` when it accepts it.
async fn verify(
    shard: &Rc<Shard>,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> Option<ErrorCode> {
    if request.group_id.is_empty() || request.transactional_id.is_empty() {
        // Refused by the group side (INVALID_GROUP_ID) or by the coordinator alike.
        return None;
    }
    let write = TransactionalWrite {
        transactional_id: request.transactional_id.clone(),
        producer_id: request.producer_id,
        producer_epoch: request.producer_epoch,
        operation: SupportedOperation::for_txn_offset_commit(version),
    };
    let partition = TopicPartition::new(
        offsets_topic::NAME,
        offsets_topic::partition_for(&request.group_id),
    );
    let refused = transaction_verification::check(shard, &write, BTreeSet::from([partition])).await;
    refused.into_iter().next().map(|(_, code)| match code {
        ErrorCode::NotEnoughReplicas => ErrorCode::CoordinatorNotAvailable,
        code => code,
    })
}

/// The group coordinator's codes, one per offset.
async fn commit(
    shard: &Rc<Shard>,
    request: &TxnOffsetCommitRequest,
    version: i16,
    to_commit: Vec<TxnOffsetToCommit>,
) -> Vec<ErrorCode> {
    let count = to_commit.len();
    let committer = TxnCommitter {
        producer_id: request.producer_id,
        producer_epoch: request.producer_epoch,
        member_id: request.member_id.clone(),
        group_instance_id: request.group_instance_id.clone(),
        generation_or_epoch: request.generation_id,
        api_version: version,
    };
    let group_id = request.group_id.clone();
    on_coordinator(shard, &request.group_id, move |shard| async move {
        let view = shard.view.load();
        txn_offsets::commit_transactional(
            &shard.groups,
            &view,
            &group_id,
            committer,
            to_commit,
            now_ms(),
        )
        .await
    })
    .await
    .unwrap_or_else(|error| vec![error; count])
}
