//! DeleteRecords (key 21): move partitions' log start offsets forward.

use std::rc::Rc;

use kaas_engine::{LogConfig, PartitionId};

use crate::broker::shard::Shard;
use crate::handlers::error_code;
use crate::handlers::partition_work::{run_on_owners, Item};
use crate::protocol::messages::delete_records::{
    DeleteRecordsPartitionResult, DeleteRecordsRequest, DeleteRecordsResponse,
    DeleteRecordsTopicResult,
};
use crate::protocol::ErrorCode;

/// Offset -1 means "up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

/// Answers DeleteRecords.
pub async fn handle(shard: &Rc<Shard>, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let view = shard.view.load();
    let mut topics = Vec::new();
    let mut slots = Vec::new();
    let mut items = Vec::new();
    for topic in request.topics {
        let info = view.topic(&topic.name);
        let mut partitions = Vec::new();
        for partition in topic.partitions {
            let mut result = DeleteRecordsPartitionResult {
                partition_index: partition.partition_index,
                low_watermark: -1,
                error_code: ErrorCode::None.code(),
            };
            match info {
                Some(t) if (0..t.partitions).contains(&partition.partition_index) => {
                    if partition.offset < HIGH_WATERMARK {
                        result.error_code = ErrorCode::OffsetOutOfRange.code();
                    } else {
                        slots.push((topics.len(), partitions.len()));
                        items.push(Item {
                            slot: slots.len() - 1,
                            id: PartitionId::new(t.name.clone(), partition.partition_index),
                            input: (partition.offset, t.log_config.clone()),
                        });
                    }
                }
                _ => result.error_code = ErrorCode::UnknownTopicOrPartition.code(),
            }
            partitions.push(result);
        }
        topics.push(DeleteRecordsTopicResult {
            name: topic.name,
            partitions,
        });
    }
    for (slot, (code, low_watermark)) in run_on_owners(shard, items, delete_on_owner).await {
        let (t, p) = slots[slot];
        topics[t].partitions[p].error_code = code.code();
        topics[t].partitions[p].low_watermark = low_watermark;
    }
    DeleteRecordsResponse {
        topics,
        ..Default::default()
    }
}

async fn delete_on_owner(
    shard: Rc<Shard>,
    items: Vec<Item<(i64, LogConfig)>>,
) -> Vec<(usize, (ErrorCode, i64))> {
    let mut results = Vec::with_capacity(items.len());
    for item in items {
        let (offset, config) = item.input;
        let outcome = match shard.log(&item.id, config).await {
            Ok(log) => {
                let target = if offset == HIGH_WATERMARK {
                    log.offsets().high_watermark
                } else {
                    offset as u64
                };
                log.delete_records(target).await
            }
            Err(error) => Err(error),
        };
        results.push(match outcome {
            Ok(low_watermark) => (item.slot, (ErrorCode::None, low_watermark as i64)),
            Err(error) => (item.slot, (error_code(&error), -1)),
        });
    }
    results
}
