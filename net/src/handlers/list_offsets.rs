//! ListOffsets (key 2): earliest, latest, max-timestamp and by-timestamp offsets.

use std::rc::Rc;

use kaas_engine::{LogConfig, PartitionId};

use crate::broker::shard::Shard;
use crate::groups::offsets_topic;
use crate::handlers::partition_work::{run_on_owners, Item};
use crate::handlers::{check_leader_epoch, error_code};
use crate::protocol::messages::list_offsets::{
    ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopicResponse,
};
use crate::protocol::ErrorCode;

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
    let mut slots = Vec::new();
    let mut items = Vec::new();
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
            let code = match info.as_ref() {
                Some(t) if (0..t.partitions).contains(&partition.partition_index) => {
                    let code = check_leader_epoch(
                        partition.current_leader_epoch,
                        view.leader_epoch(&t.name, partition.partition_index),
                    );
                    if code == ErrorCode::None {
                        slots.push((topics.len(), partitions.len()));
                        items.push(Item {
                            slot: slots.len() - 1,
                            id: PartitionId::new(t.name.clone(), partition.partition_index),
                            input: (partition.timestamp, t.log_config.clone()),
                        });
                    }
                    code
                }
                _ => ErrorCode::UnknownTopicOrPartition,
            };
            result.error_code = code.code();
            partitions.push(result);
        }
        topics.push(ListOffsetsTopicResponse {
            name: topic.name,
            partitions,
        });
    }
    for (slot, answer) in run_on_owners(shard, items, list_on_owner).await {
        let (t, p) = slots[slot];
        let leader_epoch =
            view.leader_epoch(&topics[t].name, topics[t].partitions[p].partition_index);
        let result = &mut topics[t].partitions[p];
        match answer {
            Ok(Some((offset, timestamp))) => {
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

type Answer = Result<Option<(i64, i64)>, ErrorCode>;

async fn list_on_owner(
    shard: Rc<Shard>,
    items: Vec<Item<(i64, LogConfig)>>,
) -> Vec<(usize, Answer)> {
    let mut answers = Vec::with_capacity(items.len());
    for item in items {
        let (timestamp, config) = item.input;
        if offsets_topic::is_offsets_topic(&item.id.topic) {
            let topic = shard.groups.offsets_topic();
            answers.push((item.slot, topic.list_offset(item.id.partition, timestamp)));
            continue;
        }
        let answer = match shard.log(&item.id, config).await {
            Err(error) => Err(error_code(&error)),
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
        answers.push((item.slot, answer));
    }
    answers
}
