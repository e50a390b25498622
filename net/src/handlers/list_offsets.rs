//! ListOffsets (key 2): earliest, latest, max-timestamp and by-timestamp offsets.
//!
//! As Kafka 4.4 (`Partition.fetchOffsetForTimestamp`, then `ReplicaManager.fetchOffset`):
//! the request's isolation level (v2+) sets the last fetchable offset, the high watermark
//! for READ_UNCOMMITTED and the last stable offset for READ_COMMITTED. LATEST answers it;
//! a lookup (a timestamp, MAX_TIMESTAMP) whose offset is at or past it answers no offset
//! (-1, no error), so a consumer never starts inside an open transaction or past what it may
//! read; EARLIEST and EARLIEST_LOCAL are not bounded. LATEST_TIERED answers -1 (epoch -1),
//! Kafka's answer without remote storage. An isolation level Kafka does not know fails
//! every partition with UNKNOWN_SERVER_ERROR (`IsolationLevel.forId` throws and the whole
//! request gets `getErrorResponse`).

use std::rc::Rc;

use kaas_engine::PartitionLog;

use crate::groups::offsets_topic;
use crate::handlers::fetch::isolation::Isolation;
use crate::handlers::partition_request::{Owned, PartitionRequests, Position};
use crate::handlers::{error_code, partition_error_code};
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

#[cfg(test)]
mod tests;

/// Kafka's special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// Answers ListOffsets.
pub async fn handle(shard: &Rc<Shard>, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let Some(isolation) = Isolation::from_wire(request.isolation_level) else {
        return unknown_isolation_level(request);
    };
    let view = shard.view.load();
    let mut topics = Vec::new();
    let mut requests = PartitionRequests::new(view.clone(), shard.router.shards());
    for topic in request.topics {
        let info = offsets_topic::topic_by_name(&view, &topic.name)
            .or_else(|| view.topic(&topic.name).cloned());
        let mut partitions = Vec::new();
        for partition in topic.partitions {
            let mut result = ListOffsetsPartitionResponse {
                partition_index: partition.partition_index,
                timestamp: -1,
                offset: -1,
                leader_epoch: -1,
                ..Default::default()
            };
            let position = Position {
                topic: topics.len(),
                partition: partitions.len(),
            };
            let code = match info.as_ref() {
                Some(t) => requests
                    .add(
                        position,
                        t,
                        partition.partition_index,
                        partition.current_leader_epoch,
                        partition.timestamp,
                    )
                    .err()
                    .unwrap_or(ErrorCode::None),
                None => ErrorCode::UnknownTopicOrPartition,
            };
            result.error_code = code.code();
            partitions.push(result);
        }
        topics.push(ListOffsetsTopicResponse {
            name: topic.name,
            partitions,
        });
    }
    let answers = requests
        .run(shard, move |owner, items| {
            list_on_owner(owner, items, isolation)
        })
        .await;
    for (position, answer) in answers {
        let result = &mut topics[position.topic].partitions[position.partition];
        match answer.and_then(|answer| answer) {
            Ok(Some(Found {
                offset,
                timestamp,
                leader_epoch,
            })) => {
                result.offset = offset;
                result.timestamp = timestamp;
                result.leader_epoch = leader_epoch;
            }
            Ok(None) => {}
            Err(code) => result.error_code = code.code(),
        }
    }
    ListOffsetsResponse {
        topics,
        ..Default::default()
    }
}

/// What a lookup found: the offset, its timestamp (-1 for LATEST and EARLIEST), and the
/// leader epoch answered with it.
struct Found {
    offset: i64,
    timestamp: i64,
    leader_epoch: i32,
}

/// A partition's answer: what was found, nothing (offset -1, no error), or its error.
type Answer = Result<Option<Found>, ErrorCode>;

async fn list_on_owner(
    shard: Rc<Shard>,
    items: Vec<Owned<i64>>,
    isolation: Isolation,
) -> Vec<(Position, Answer)> {
    let mut answers = Vec::with_capacity(items.len());
    for item in items {
        let timestamp = item.input;
        let leader_epoch = item.partition.leader_epoch;
        let with_epoch = |found: Option<(i64, i64)>| {
            found.map(|(offset, timestamp)| Found {
                offset,
                timestamp,
                leader_epoch,
            })
        };
        if item.partition.is_offsets_topic() {
            let topic = shard.groups.offsets_topic();
            let answer = topic.list_offset(item.partition.id.partition, timestamp);
            answers.push((item.position, answer.map(with_epoch)));
            continue;
        }
        let answer = match item.partition.log(&shard).await {
            Err(error) => Err(partition_error_code(&error)),
            // Kafka answers LATEST_TIERED without remote storage with no epoch either.
            Ok(_) if timestamp == LATEST_TIERED => Ok(Some(Found {
                offset: -1,
                timestamp: -1,
                leader_epoch: -1,
            })),
            Ok(log) => list_in_log(&log, timestamp, isolation)
                .await
                .map(with_epoch),
        };
        answers.push((item.position, answer));
    }
    answers
}

/// One partition's lookup of `timestamp` in its log at `isolation`: the offset and its
/// timestamp, or `None` for no offset.
async fn list_in_log(
    log: &PartitionLog,
    timestamp: i64,
    isolation: Isolation,
) -> Result<Option<(i64, i64)>, ErrorCode> {
    let offsets = log.offsets();
    let last_fetchable = match isolation {
        Isolation::ReadUncommitted => offsets.high_watermark,
        Isolation::ReadCommitted => log.last_stable_offset().min(offsets.high_watermark),
    };
    let found = match timestamp {
        LATEST => return Ok(Some((last_fetchable as i64, -1))),
        EARLIEST | EARLIEST_LOCAL => return Ok(Some((offsets.log_start_offset as i64, -1))),
        MAX_TIMESTAMP => log.max_timestamp_record().await,
        ts if ts >= 0 => log.offset_for_timestamp(ts).await,
        _ => return Err(ErrorCode::InvalidRequest),
    };
    let found = found.map_err(|e| error_code(&e))?;
    // Kafka drops a lookup's offset at or past the last fetchable offset.
    Ok(found
        .filter(|(offset, _)| *offset < last_fetchable)
        .map(|(offset, ts)| (offset as i64, ts)))
}

/// Kafka's answer to an `isolation_level` it does not know: UNKNOWN_SERVER_ERROR, offset
/// and timestamp -1, on every partition asked for.
fn unknown_isolation_level(request: ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|topic| ListOffsetsTopicResponse {
            name: topic.name,
            partitions: topic
                .partitions
                .into_iter()
                .map(|partition| ListOffsetsPartitionResponse {
                    partition_index: partition.partition_index,
                    error_code: ErrorCode::UnknownServerError.code(),
                    timestamp: -1,
                    offset: -1,
                    leader_epoch: -1,
                })
                .collect(),
        })
        .collect();
    ListOffsetsResponse {
        topics,
        ..Default::default()
    }
}
