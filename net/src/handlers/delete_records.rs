//! DeleteRecords (key 21): move partitions' log start offsets forward.

use std::rc::Rc;

use crate::handlers::partition_error_code;
use crate::handlers::partition_request::{Owned, PartitionRequests, Position};
use crate::protocol::messages::delete_records::{
    DeleteRecordsPartitionResult, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteRecordsTopicResult,
};
use crate::protocol::ErrorCode;
use crate::shard::partition_error::PartitionError;
use crate::shard::Shard;

/// Offset -1 means "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

/// Answers DeleteRecords.
pub async fn handle(shard: &Rc<Shard>, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let view = shard.view.load();
    let mut topics = Vec::new();
    let mut requests = PartitionRequests::new(view.clone(), shard.router.shards());
    for topic in request.topics {
        let info = view.topic(&topic.name);
        let mut partitions = Vec::new();
        for partition in topic.partitions {
            let mut result = DeleteRecordsPartitionResult {
                partition_index: partition.partition_index,
                low_watermark: -1,
                error_code: ErrorCode::None.code(),
            };
            let position = Position {
                topic: topics.len(),
                partition: partitions.len(),
            };
            let code = match info {
                Some(t) if (0..t.partitions()).contains(&partition.partition_index) => {
                    if partition.offset < HIGH_WATERMARK {
                        ErrorCode::OffsetOutOfRange
                    } else {
                        requests
                            .add(position, t, partition.partition_index, -1, partition.offset)
                            .err()
                            .unwrap_or(ErrorCode::None)
                    }
                }
                _ => ErrorCode::UnknownTopicOrPartition,
            };
            result.error_code = code.code();
            partitions.push(result);
        }
        topics.push(DeleteRecordsTopicResult {
            name: topic.name,
            partitions,
        });
    }
    for (position, outcome) in requests.run(shard, delete_on_owner).await {
        let result = &mut topics[position.topic].partitions[position.partition];
        let (code, low_watermark) = outcome.unwrap_or_else(|code| (code, -1));
        result.error_code = code.code();
        result.low_watermark = low_watermark;
    }
    DeleteRecordsResponse {
        topics,
        ..Default::default()
    }
}

async fn delete_on_owner(
    shard: Rc<Shard>,
    items: Vec<Owned<i64>>,
) -> Vec<(Position, (ErrorCode, i64))> {
    let mut results = Vec::with_capacity(items.len());
    for item in items {
        let offset = item.input;
        let outcome = match item.partition.log(&shard).await {
            Ok(log) => {
                let target = if offset == HIGH_WATERMARK {
                    log.offsets().high_watermark
                } else {
                    offset as u64
                };
                log.delete_records(target)
                    .await
                    .map_err(PartitionError::from)
            }
            Err(error) => Err(error),
        };
        results.push(match outcome {
            Ok(low_watermark) => (item.position, (ErrorCode::None, low_watermark as i64)),
            Err(error) => (item.position, (partition_error_code(&error), -1)),
        });
    }
    results
}
