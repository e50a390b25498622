//! ListOffsets (key 2): earliest, latest, max-timestamp and by-timestamp offsets.

use std::rc::Rc;

use crate::groups::offsets_topic;
use crate::handlers::partition_request::{Owned, PartitionRequests, Position};
use crate::handlers::{error_code, partition_error_code};
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Kafka's special timestamps.
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;

/// Answers ListOffsets.
pub async fn handle(shard: &Rc<Shard>, request: ListOffsetsRequest) -> ListOffsetsResponse {
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
    for (position, answer) in requests.run(shard, list_on_owner).await {
        let result = &mut topics[position.topic].partitions[position.partition];
        match answer.and_then(|answer| answer) {
            Ok(Some((offset, timestamp, leader_epoch))) => {
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

/// The offset found, its timestamp, and the leader epoch the partition is served at.
type Answer = Result<Option<(i64, i64, i32)>, ErrorCode>;

async fn list_on_owner(shard: Rc<Shard>, items: Vec<Owned<i64>>) -> Vec<(Position, Answer)> {
    let mut answers = Vec::with_capacity(items.len());
    for item in items {
        let timestamp = item.input;
        let leader_epoch = item.partition.leader_epoch;
        let with_epoch = |found: Option<(i64, i64)>| {
            found.map(|(offset, timestamp)| (offset, timestamp, leader_epoch))
        };
        if item.partition.is_offsets_topic() {
            let topic = shard.groups.offsets_topic();
            let answer = topic.list_offset(item.partition.id.partition, timestamp);
            answers.push((item.position, answer.map(with_epoch)));
            continue;
        }
        let answer = match item.partition.log(&shard).await {
            Err(error) => Err(partition_error_code(&error)),
            Ok(log) => {
                let offsets = log.offsets();
                match timestamp {
                    LATEST | LATEST_TIERED => Ok(Some((offsets.high_watermark as i64, -1))),
                    EARLIEST | EARLIEST_LOCAL => Ok(Some((offsets.log_start_offset as i64, -1))),
                    MAX_TIMESTAMP => log
                        .max_timestamp_record()
                        .await
                        .map(|found| found.map(|(offset, ts)| (offset as i64, ts)))
                        .map_err(|e| error_code(&e)),
                    ts if ts >= 0 => log
                        .offset_for_timestamp(ts)
                        .await
                        .map(|found| found.map(|(offset, ts)| (offset as i64, ts)))
                        .map_err(|e| error_code(&e)),
                    _ => Err(ErrorCode::InvalidRequest),
                }
            }
        };
        answers.push((item.position, answer.map(with_epoch)));
    }
    answers
}
