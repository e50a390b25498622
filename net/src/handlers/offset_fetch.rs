//! OffsetFetch (key 9): committed offsets of one group (v1–7) or several (v8+).

use std::rc::Rc;

use kaas_engine::group_store::CommittedOffset;

use crate::broker::shard::Shard;
use crate::groups::offsets::{self, FetchedOffsets};
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use crate::protocol::ErrorCode;

/// One group's request: its id, the member asking (v9+) and the topics (`None` = all).
struct GroupQuery {
    group_id: String,
    member: Option<(String, i32)>,
    topics: Option<Vec<(String, Vec<i32>)>>,
}

/// Answers OffsetFetch at `version`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version < 8 {
        let query = GroupQuery {
            group_id: request.group_id,
            member: None,
            topics: request.topics.map(|topics| {
                topics
                    .into_iter()
                    .map(|t| (t.name, t.partition_indexes))
                    .collect()
            }),
        };
        let (error, fetched) = match fetch_group(shard, query).await {
            Ok(fetched) => (ErrorCode::None, fetched),
            Err(error) => (error, Vec::new()),
        };
        return OffsetFetchResponse {
            error_code: error.code(),
            topics: fetched
                .into_iter()
                .map(|(name, partitions)| OffsetFetchResponseTopic {
                    name,
                    partitions: partitions
                        .into_iter()
                        .map(|(partition_index, committed)| {
                            let (offset, epoch, metadata) = parts(committed);
                            OffsetFetchResponsePartition {
                                partition_index,
                                committed_offset: offset,
                                committed_leader_epoch: epoch,
                                metadata: Some(metadata),
                                error_code: ErrorCode::None.code(),
                            }
                        })
                        .collect(),
                })
                .collect(),
            ..Default::default()
        };
    }
    let mut groups = Vec::with_capacity(request.groups.len());
    for group in request.groups {
        let query = GroupQuery {
            group_id: group.group_id.clone(),
            member: group.member_id.map(|id| (id, group.member_epoch)),
            topics: group.topics.map(|topics| {
                topics
                    .into_iter()
                    .map(|t| (t.name, t.partition_indexes))
                    .collect()
            }),
        };
        let (error, fetched) = match fetch_group(shard, query).await {
            Ok(fetched) => (ErrorCode::None, fetched),
            Err(error) => (error, Vec::new()),
        };
        groups.push(OffsetFetchResponseGroup {
            group_id: group.group_id,
            error_code: error.code(),
            topics: fetched
                .into_iter()
                .map(|(name, partitions)| OffsetFetchResponseTopics {
                    name,
                    partitions: partitions
                        .into_iter()
                        .map(|(partition_index, committed)| {
                            let (offset, epoch, metadata) = parts(committed);
                            OffsetFetchResponsePartitions {
                                partition_index,
                                committed_offset: offset,
                                committed_leader_epoch: epoch,
                                metadata: Some(metadata),
                                error_code: ErrorCode::None.code(),
                            }
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
        });
    }
    OffsetFetchResponse {
        groups,
        ..Default::default()
    }
}

async fn fetch_group(shard: &Rc<Shard>, query: GroupQuery) -> Result<FetchedOffsets, ErrorCode> {
    if query.group_id.is_empty() {
        return Err(ErrorCode::InvalidGroupId);
    }
    let group_id = query.group_id.clone();
    on_coordinator(shard, &group_id.clone(), move |shard| async move {
        offsets::fetch(&shard.groups, &query.group_id, query.member, query.topics).await
    })
    .await?
}

/// Offset, leader epoch and metadata of a commit, or Kafka's "none" (-1, -1, "").
fn parts(committed: Option<CommittedOffset>) -> (i64, i32, String) {
    match committed {
        Some(c) => (c.offset, c.leader_epoch, c.metadata),
        None => (-1, -1, String::new()),
    }
}
