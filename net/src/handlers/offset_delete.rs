//! OffsetDelete (key 47): removes committed offsets of topics a group no longer consumes.

use std::rc::Rc;

use crate::groups::offsets;
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::offset_delete::{
    OffsetDeleteRequest, OffsetDeleteResponse, OffsetDeleteResponsePartition,
    OffsetDeleteResponseTopic,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers OffsetDelete.
pub async fn handle(shard: &Rc<Shard>, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let group_id = request.group_id.clone();
    let topics: Vec<(String, Vec<i32>)> = request
        .topics
        .into_iter()
        .map(|t| {
            (
                t.name,
                t.partitions
                    .into_iter()
                    .map(|p| p.partition_index)
                    .collect(),
            )
        })
        .collect();
    let result = if group_id.is_empty() {
        Err(ErrorCode::InvalidGroupId)
    } else {
        on_coordinator(shard, &group_id.clone(), move |shard| async move {
            offsets::delete(&shard.groups, &group_id, topics).await
        })
        .await
        .unwrap_or_else(Err)
    };
    match result {
        Ok(topics) => OffsetDeleteResponse {
            topics: topics
                .into_iter()
                .map(|(name, partitions)| OffsetDeleteResponseTopic {
                    name,
                    partitions: partitions
                        .into_iter()
                        .map(|(partition_index, error)| OffsetDeleteResponsePartition {
                            partition_index,
                            error_code: error.code(),
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        },
        Err(error) => OffsetDeleteResponse {
            error_code: error.code(),
            ..Default::default()
        },
    }
}
