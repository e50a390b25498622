//! OffsetForLeaderEpoch (key 23): where a leader epoch ends, so a consumer can detect that
//! the log it read was truncated.

use std::rc::Rc;

use crate::handlers::partition_error_code;
use crate::handlers::partition_request::{Owned, PartitionRequests, Position};
use crate::protocol::messages::offset_for_leader_epoch::{
    EpochEndOffset, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers OffsetForLeaderEpoch.
pub async fn handle(
    shard: &Rc<Shard>,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    let view = shard.view.load();
    let mut topics = Vec::new();
    let mut requests = PartitionRequests::new(view.clone(), shard.router.shards());
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
            let position = Position {
                topic: topics.len(),
                partition: partitions.len(),
            };
            let code = match info {
                Some(t) => requests
                    .add(
                        position,
                        t,
                        partition.partition,
                        partition.current_leader_epoch,
                        partition.leader_epoch,
                    )
                    .err()
                    .unwrap_or(ErrorCode::None),
                None => ErrorCode::UnknownTopicOrPartition,
            };
            result.error_code = code.code();
            partitions.push(result);
        }
        topics.push(OffsetForLeaderTopicResult {
            topic: topic.topic,
            partitions,
        });
    }
    for (position, answer) in requests.run(shard, lookup_on_owner).await {
        let result = &mut topics[position.topic].partitions[position.partition];
        match answer.and_then(|answer| answer) {
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

async fn lookup_on_owner(shard: Rc<Shard>, items: Vec<Owned<i32>>) -> Vec<(Position, Answer)> {
    let mut answers = Vec::with_capacity(items.len());
    for item in items {
        let epoch = item.input;
        let answer = match item.partition.log(&shard).await {
            Err(error) => Err(partition_error_code(&error)),
            Ok(log) => {
                let offsets = log.offsets();
                match log.end_offset_for_epoch(epoch) {
                    Some((found, end)) => Ok(Some((found, end as i64))),
                    // An empty log (or one written before epochs) ends at its end offset in
                    // the current epoch.
                    None if log.latest_epoch().is_none() => Ok(Some((
                        item.partition.leader_epoch,
                        offsets.log_end_offset as i64,
                    ))),
                    None => Ok(None),
                }
            }
        };
        answers.push((item.position, answer));
    }
    answers
}
