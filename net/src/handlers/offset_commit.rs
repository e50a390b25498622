//! OffsetCommit (key 8): durable before it is acknowledged.

use std::rc::Rc;

use crate::groups::offsets::{self, Committer, OffsetToCommit};
use crate::handlers::group_hop::on_coordinator;
use crate::handlers::now_ms;
use crate::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetCommitResponsePartition,
    OffsetCommitResponseTopic,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers OffsetCommit at `version`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let committer = Committer {
        member_id: request.member_id.clone(),
        group_instance_id: request.group_instance_id.clone(),
        generation_or_epoch: request.generation_id_or_member_epoch,
        api_version: version,
    };
    let to_commit: Vec<OffsetToCommit> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(|p| OffsetToCommit {
                topic: topic.name.clone(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.clone(),
            })
        })
        .collect();
    let group_id = request.group_id.clone();
    let count = to_commit.len();
    let errors = on_coordinator(shard, &group_id.clone(), move |shard| async move {
        let view = shard.view.load();
        offsets::commit(
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
    .unwrap_or_else(|error| vec![error; count]);
    let mut errors = errors.into_iter();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| OffsetCommitResponseTopic {
            name: topic.name,
            partitions: topic
                .partitions
                .iter()
                .map(|p| OffsetCommitResponsePartition {
                    partition_index: p.partition_index,
                    error_code: errors
                        .next()
                        .unwrap_or(ErrorCode::UnknownServerError)
                        .code(),
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    OffsetCommitResponse {
        topics,
        ..Default::default()
    }
}
