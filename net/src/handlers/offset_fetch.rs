//! OffsetFetch (key 9): committed offsets of one group (v1–7) or several (v8+).

use std::rc::Rc;

use kaas_engine::group_store::CommittedOffset;

use crate::groups::offsets::{self, FetchedOffsets};
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

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
        let (error, fetched) = fetch_group(shard, query).await;
        return OffsetFetchResponse {
            error_code: error.code(),
            topics: to_wire(
                fetched,
                |name, partitions| OffsetFetchResponseTopic { name, partitions },
                |partition_index, (committed_offset, committed_leader_epoch, metadata)| {
                    OffsetFetchResponsePartition {
                        partition_index,
                        committed_offset,
                        committed_leader_epoch,
                        metadata: Some(metadata),
                        error_code: ErrorCode::None.code(),
                    }
                },
            ),
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
        let (error, fetched) = fetch_group(shard, query).await;
        groups.push(OffsetFetchResponseGroup {
            group_id: group.group_id,
            error_code: error.code(),
            topics: to_wire(
                fetched,
                |name, partitions| OffsetFetchResponseTopics {
                    name,
                    partitions,
                    ..Default::default()
                },
                |partition_index, (committed_offset, committed_leader_epoch, metadata)| {
                    OffsetFetchResponsePartitions {
                        partition_index,
                        committed_offset,
                        committed_leader_epoch,
                        metadata: Some(metadata),
                        error_code: ErrorCode::None.code(),
                    }
                },
            ),
        });
    }
    OffsetFetchResponse {
        groups,
        ..Default::default()
    }
}

/// One group's offsets, or its error with nothing fetched.
async fn fetch_group(shard: &Rc<Shard>, query: GroupQuery) -> (ErrorCode, FetchedOffsets) {
    if query.group_id.is_empty() {
        return (ErrorCode::InvalidGroupId, Vec::new());
    }
    let group_id = query.group_id.clone();
    let fetched = on_coordinator(shard, &group_id, move |shard| async move {
        offsets::fetch(&shard.groups, &query.group_id, query.member, query.topics).await
    })
    .await
    .and_then(|result| result);
    match fetched {
        Ok(fetched) => (ErrorCode::None, fetched),
        Err(error) => (error, Vec::new()),
    }
}

/// Fetched offsets in a version's wire shape: `topic` builds a topic from its partitions,
/// `partition` a partition from its offset, leader epoch and metadata.
fn to_wire<T, P>(
    fetched: FetchedOffsets,
    topic: impl Fn(String, Vec<P>) -> T,
    partition: impl Fn(i32, (i64, i32, String)) -> P,
) -> Vec<T> {
    fetched
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|(index, committed)| partition(index, parts(committed)))
                .collect();
            topic(name, partitions)
        })
        .collect()
}

/// Offset, leader epoch and metadata of a commit, or Kafka's "none" (-1, -1, "").
fn parts(committed: Option<CommittedOffset>) -> (i64, i32, String) {
    match committed {
        Some(c) => (c.offset, c.leader_epoch, c.metadata),
        None => (-1, -1, String::new()),
    }
}
