//! OffsetFetch (key 9): committed offsets of one group (v1–7) or several (v8+).
//!
//! `require_stable` (v7+, KIP-447; one flag for every group of a v8+ request) asks for
//! stable offsets only: a partition a transaction has a pending offset commit for answers
//! UNSTABLE_OFFSET_COMMIT (offset -1) until the transaction ends, so that a consumer starting
//! after a transactional producer's crash does not read from an offset that may be aborted.

use std::rc::Rc;

use kaas_engine::group_store::CommittedOffset;

use crate::groups::offsets::{self, FetchedGroup, FetchedPartition};
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequest, OffsetFetchResponse, OffsetFetchResponseGroup,
    OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

#[cfg(test)]
mod tests;

/// One group's request: its id, the member asking (v9+), the topics (`None` = all) and
/// whether only stable offsets may be answered (v7+).
struct GroupQuery {
    group_id: String,
    member: Option<(String, i32)>,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
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
            require_stable: request.require_stable,
        };
        let (error, fetched) = fetch_group(shard, query).await;
        return OffsetFetchResponse {
            error_code: error.code(),
            topics: to_wire(
                fetched,
                |name, partitions| OffsetFetchResponseTopic { name, partitions },
                |partition_index, (committed_offset, committed_leader_epoch, metadata), error| {
                    OffsetFetchResponsePartition {
                        partition_index,
                        committed_offset,
                        committed_leader_epoch,
                        metadata: Some(metadata),
                        error_code: error.code(),
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
            require_stable: request.require_stable,
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
                |partition_index, (committed_offset, committed_leader_epoch, metadata), error| {
                    OffsetFetchResponsePartitions {
                        partition_index,
                        committed_offset,
                        committed_leader_epoch,
                        metadata: Some(metadata),
                        error_code: error.code(),
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
async fn fetch_group(shard: &Rc<Shard>, query: GroupQuery) -> (ErrorCode, FetchedGroup) {
    if query.group_id.is_empty() {
        return (ErrorCode::InvalidGroupId, Vec::new());
    }
    let group_id = query.group_id.clone();
    let fetched = on_coordinator(shard, &group_id, move |shard| async move {
        offsets::fetch_offsets(
            &shard.groups,
            &query.group_id,
            query.member,
            query.topics,
            query.require_stable,
        )
        .await
    })
    .await
    .and_then(|result| result);
    match fetched {
        Ok(fetched) => (ErrorCode::None, fetched),
        Err(error) => (error, Vec::new()),
    }
}

/// Fetched offsets in a version's wire shape: `topic` builds a topic from its partitions,
/// `partition` a partition from its offset, leader epoch and metadata, and its error.
fn to_wire<T, P>(
    fetched: FetchedGroup,
    topic: impl Fn(String, Vec<P>) -> T,
    partition: impl Fn(i32, (i64, i32, String), ErrorCode) -> P,
) -> Vec<T> {
    fetched
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|fetched: FetchedPartition| {
                    partition(fetched.partition, parts(fetched.committed), fetched.error)
                })
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
