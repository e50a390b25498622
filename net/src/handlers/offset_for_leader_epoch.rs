//! OffsetForLeaderEpoch (key 23): where a leader epoch ends, so a consumer can detect that
//! the log it read was truncated.

use std::rc::Rc;

use kaas_engine::{LogConfig, PartitionId};

use crate::broker::shard::Shard;
use crate::handlers::partition_work::{run_on_owners, Item};
use crate::handlers::{check_leader_epoch, error_code};
use crate::protocol::messages::offset_for_leader_epoch::{
    EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
};
use crate::protocol::ErrorCode;

/// Answers OffsetForLeaderEpoch.
pub async fn handle(
    shard: &Rc<Shard>,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let view = shard.view.load();
    let mut topics = Vec::new();
    let mut slots = Vec::new();
    let mut items = Vec::new();
    for topic in request.topics {
        let info = view.topic(&topic.topic);
        let mut partitions = Vec::new();
        for partition in topic.partitions {
            let mut result = EpochEndOffset {
                partition: partition.partition,
                leader_epoch: -1,
                end_offset: -1,
                ..Default::default()
            };
            let code = match info {
                Some(t) if (0..t.partitions).contains(&partition.partition) => {
                    let code = check_leader_epoch(
                        partition.current_leader_epoch,
                        view.leader_epoch(&t.name, partition.partition),
                    );
                    if code == ErrorCode::None {
                        slots.push((topics.len(), partitions.len()));
                        items.push(Item {
                            slot: slots.len() - 1,
                            id: PartitionId::new(t.name.clone(), partition.partition),
                            input: (partition.leader_epoch, t.log_config.clone()),
                        });
                    }
                    code
                }
                _ => ErrorCode::UnknownTopicOrPartition,
            };
            result.error_code = code.code();
            partitions.push(result);
        }
        topics.push(OffsetForLeaderTopicResult {
            topic: topic.topic,
            partitions,
        });
    }
    for (slot, answer) in run_on_owners(shard, items, lookup_on_owner).await {
        let (t, p) = slots[slot];
        let result = &mut topics[t].partitions[p];
        match answer {
            Ok(Some((epoch, end_offset))) => {
                result.leader_epoch = epoch;
                result.end_offset = end_offset;
            }
            Ok(None) => {}
            Err(code) => result.error_code = code.code(),
        }
    }
    OffsetForLeaderEpochResponse {
        topics,
        ..Default::default()
    }
}

type Answer = Result<Option<(i32, i64)>, ErrorCode>;

async fn lookup_on_owner(
    shard: Rc<Shard>,
    items: Vec<Item<(i32, LogConfig)>>,
) -> Vec<(usize, Answer)> {
    let mut answers = Vec::with_capacity(items.len());
    for item in items {
        let (epoch, config) = item.input;
        let answer = match shard.log(&item.id, config).await {
            Err(error) => Err(error_code(&error)),
            Ok(log) => {
                let offsets = log.offsets();
                match log.end_offset_for_epoch(epoch) {
                    Some((found, end)) => Ok(Some((found, end as i64))),
                    // An empty log (or one written before epochs) ends at its end offset in
                    // the current epoch.
                    None if log.latest_epoch().is_none() => Ok(Some((
                        shard.open_epoch(&item.id),
                        offsets.log_end_offset as i64,
                    ))),
                    None => Ok(None),
                }
            }
        };
        answers.push((item.slot, answer));
    }
    answers
}
