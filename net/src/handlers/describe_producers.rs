//! DescribeProducers (key 61): the producers each partition remembers (id, epoch, last
//! sequence, last batch's timestamp, the epoch of the coordinator that wrote its last
//! transaction marker and the first offset of its open transaction), read on the
//! partition's owner shard. As Kafka's `ProducerStateEntry`: `coordinator_epoch` is -1 before
//! the producer's first marker, `current_txn_start_offset` -1 when no transaction is open.
//!
//! Errors as Apache Kafka 4.4 answers them: an invalid topic name gets INVALID_TOPIC_EXCEPTION
//! with Kafka's message, an unknown topic UNKNOWN_TOPIC_OR_PARTITION with its default message,
//! an unknown partition of a known topic UNKNOWN_TOPIC_OR_PARTITION without a message, and a
//! partition its owner shard cannot serve (closed, being moved) NOT_LEADER_OR_FOLLOWER. A
//! `__consumer_offsets` partition this broker serves has no producers (`kafka-transactions.sh
//! find-hanging` asks for every partition a broker hosts).

use std::rc::Rc;

use kaas_cluster::ids::{TopicName, TopicNameError, MAX_TOPIC_NAME_LEN};

use crate::groups::offsets_topic;
use crate::handlers::partition_error_code;
use crate::handlers::partition_request::{Owned, PartitionRequests, Position};
use crate::model::cluster_view::{ClusterView, Leadership};
use crate::protocol::messages::describe_producers::{
    DescribeProducersPartitionResponse, DescribeProducersRequest, DescribeProducersResponse,
    DescribeProducersTopicResponse, ProducerState,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// The code for a `__consumer_offsets` partition, which has no producers here: its records
/// are the group stores' (transactional offset commits are pending in the groups, not open
/// transactions of a log). NONE where this broker serves it, as Kafka answers a partition
/// without producers.
fn offsets_partition_code(view: &ClusterView, partition: i32) -> ErrorCode {
    match offsets_topic::leadership(view, partition) {
        Leadership::Here { .. } => ErrorCode::None,
        Leadership::Elsewhere => ErrorCode::NotLeaderOrFollower,
        Leadership::Unknown => ErrorCode::UnknownTopicOrPartition,
    }
}

/// Kafka's default message for UNKNOWN_TOPIC_OR_PARTITION.
const UNKNOWN_TOPIC_MESSAGE: &str = "This server does not host this topic-partition.";

/// Answers DescribeProducers.
pub async fn handle(
    shard: &Rc<Shard>,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let view = shard.view.load();
    let mut topics = Vec::with_capacity(request.topics.len());
    let mut requests = PartitionRequests::new(view.clone(), shard.router.shards());
    for requested in request.topics {
        let topic_error = match invalid_topic_message(&requested.name) {
            Some(message) => Some((ErrorCode::InvalidTopicException, Some(message))),
            None if view.topic(&requested.name).is_none() => Some((
                ErrorCode::UnknownTopicOrPartition,
                Some(UNKNOWN_TOPIC_MESSAGE.to_string()),
            )),
            None => None,
        };
        let info = view.topic(&requested.name);
        let mut partitions = Vec::with_capacity(requested.partition_indexes.len());
        for partition in requested.partition_indexes {
            let mut result = DescribeProducersPartitionResponse {
                partition_index: partition,
                ..Default::default()
            };
            let position = Position {
                topic: topics.len(),
                partition: partitions.len(),
            };
            if offsets_topic::is_offsets_topic(&requested.name) {
                result.error_code = offsets_partition_code(&view, partition).code();
                partitions.push(result);
                continue;
            }
            match (&topic_error, info) {
                (Some((code, message)), _) => {
                    result.error_code = code.code();
                    result.error_message = message.clone();
                }
                (None, Some(topic)) => {
                    if let Err(code) = requests.add(position, topic, partition, -1, ()) {
                        result.error_code = code.code();
                    }
                }
                (None, None) => result.error_code = ErrorCode::UnknownTopicOrPartition.code(),
            }
            partitions.push(result);
        }
        topics.push(DescribeProducersTopicResponse {
            name: requested.name,
            partitions,
        });
    }
    // A shard that stopped before answering cannot serve its partitions: the pipeline answers
    // NOT_LEADER_OR_FOLLOWER for them.
    for (position, answer) in requests.run(shard, producers_on_owner).await {
        let result = &mut topics[position.topic].partitions[position.partition];
        match answer.and_then(|answer| answer) {
            Ok(producers) => result.active_producers = producers,
            Err(code) => result.error_code = code.code(),
        }
    }
    DescribeProducersResponse {
        topics,
        ..Default::default()
    }
}

type Answer = Result<Vec<ProducerState>, ErrorCode>;

async fn producers_on_owner(shard: Rc<Shard>, items: Vec<Owned<()>>) -> Vec<(Position, Answer)> {
    let mut answers = Vec::with_capacity(items.len());
    for item in items {
        let answer = match item.partition.log(&shard).await {
            Err(error) => Err(partition_error_code(&error)),
            Ok(log) => Ok(log
                .producers()
                .iter()
                .map(|producer| {
                    let last = producer.last_batch();
                    ProducerState {
                        producer_id: producer.producer_id(),
                        producer_epoch: i32::from(producer.epoch()),
                        last_sequence: last.map_or(-1, |batch| batch.last_seq),
                        last_timestamp: last.map_or(-1, |batch| batch.max_timestamp),
                        coordinator_epoch: producer.coordinator_epoch(),
                        current_txn_start_offset: producer.open_transaction().unwrap_or(-1),
                    }
                })
                .collect()),
        };
        answers.push((item.position, answer));
    }
    answers
}

/// Kafka's `Topic.validate` message for an illegal topic name, or `None` for a legal one.
fn invalid_topic_message(name: &str) -> Option<String> {
    let reason = match TopicName::new(name).err()? {
        TopicNameError::Empty => "the empty string is not allowed".to_string(),
        TopicNameError::DotName => format!("'{name}' is not allowed"),
        TopicNameError::TooLong(_) => format!(
            "the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LEN}"
        ),
        TopicNameError::IllegalCharacter(_) => format!(
            "'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
        ),
    };
    Some(format!("Topic name is invalid: {reason}"))
}

#[cfg(test)]
mod tests {
    use kaas_engine::batch::txn_marker::TxnResult;

    use super::*;
    use crate::protocol::messages::describe_producers::DescribeProducersTopicRequest;
    use crate::shard::test_support::{
        append_batch, end_transaction, open_log, producer_batch, run, shard_zero, standalone_view,
        topic, TEST_NOW_MS,
    };

    #[test]
    fn producers_show_their_open_transaction_and_coordinator_epoch() {
        run(|root| {
            Box::pin(async move {
                let topic = topic("t", 1);
                let shard = shard_zero(&root, standalone_view(1, &[topic]));
                let log = open_log(&shard, &root, "t", 0).await;
                // Producer 1's transaction at 0 aborted at 1 by a coordinator at epoch 7;
                // producer 3's open since 2.
                append_batch(&log, &producer_batch(1, TEST_NOW_MS, 1, 0, true)).await;
                end_transaction(&log, 1, TxnResult::Abort, 7).await;
                append_batch(&log, &producer_batch(2, TEST_NOW_MS, 3, 0, true)).await;
                let request = DescribeProducersRequest {
                    topics: vec![DescribeProducersTopicRequest {
                        name: "t".into(),
                        partition_indexes: vec![0],
                    }],
                };
                let response = handle(&shard, request).await;
                let partition = &response.topics[0].partitions[0];
                assert_eq!(partition.error_code, 0);
                let mut producers: Vec<(i64, i32, i64, i32)> = partition
                    .active_producers
                    .iter()
                    .map(|p| {
                        (
                            p.producer_id,
                            p.coordinator_epoch,
                            p.current_txn_start_offset,
                            p.last_sequence,
                        )
                    })
                    .collect();
                producers.sort();
                assert_eq!(producers, vec![(1, 7, -1, 0), (3, -1, 2, 1)]);
            })
        });
    }

    #[test]
    fn a_served_consumer_offsets_partition_has_no_producers() {
        run(|root| {
            Box::pin(async move {
                let shard = shard_zero(&root, standalone_view(1, &[]));
                let request = DescribeProducersRequest {
                    topics: vec![DescribeProducersTopicRequest {
                        name: offsets_topic::NAME.into(),
                        partition_indexes: vec![0, 49, 50],
                    }],
                };
                let response = handle(&shard, request).await;
                let answers: Vec<(i16, usize)> = response.topics[0]
                    .partitions
                    .iter()
                    .map(|p| (p.error_code, p.active_producers.len()))
                    .collect();
                let unknown = ErrorCode::UnknownTopicOrPartition.code();
                assert_eq!(answers, vec![(0, 0), (0, 0), (unknown, 0)]);
            })
        });
    }

    #[test]
    fn invalid_topic_messages_are_kafkas() {
        assert_eq!(
            invalid_topic_message("").as_deref(),
            Some("Topic name is invalid: the empty string is not allowed")
        );
        assert_eq!(
            invalid_topic_message("..").as_deref(),
            Some("Topic name is invalid: '..' is not allowed")
        );
        assert_eq!(
            invalid_topic_message("bad/name").as_deref(),
            Some("Topic name is invalid: 'bad/name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'")
        );
        let long = "x".repeat(250);
        assert_eq!(
            invalid_topic_message(&long),
            Some(format!("Topic name is invalid: the length of '{long}' is longer than the max allowed length 249"))
        );
        assert_eq!(invalid_topic_message(&"x".repeat(249)), None);
        assert_eq!(invalid_topic_message("ok.name_1-2"), None);
    }
}
