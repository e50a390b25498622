//! OffsetCommit, OffsetFetch and OffsetDelete on a coordinator's groups: Kafka's validation
//! (group, member, generation or member epoch, partition, metadata size) in front of the
//! group's durable store. Transactional commits are in [`super::txn_offsets`]; OffsetFetch
//! here answers for them (`require_stable`, KIP-447).

use kaas_engine::group_store::{CommittedOffset, GroupChange};
use kaas_engine::EngineError;

use crate::groups::classic::ClassicState;
use crate::groups::consumer_group::CommitCheck;
use crate::groups::coordinator::GroupCoordinator;
use crate::groups::group::GroupState;
use crate::groups::offsets_topic;
use crate::model::cluster_view::ClusterView;
use crate::protocol::ErrorCode;

/// Who commits: a member of the group, or a tool (generation -1, no member id).
#[derive(Debug, Clone)]
pub struct Committer {
    /// Member id (empty for tools).
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// Generation id (classic) or member epoch (consumer groups); -1 for tools.
    pub generation_or_epoch: i32,
    /// OffsetCommit version.
    pub api_version: i16,
}

/// One offset to commit.
#[derive(Debug, Clone)]
pub struct OffsetToCommit {
    /// Topic name.
    pub topic: String,
    /// Partition.
    pub partition: i32,
    /// Offset (the next record to consume).
    pub offset: i64,
    /// Leader epoch of the last consumed record, -1 if unknown.
    pub leader_epoch: i32,
    /// Client metadata.
    pub metadata: Option<String>,
}

/// Commits `offsets` for `group_id`; one error code per offset, in order.
pub async fn commit(
    coordinator: &GroupCoordinator,
    view: &ClusterView,
    group_id: &str,
    committer: Committer,
    offsets: Vec<OffsetToCommit>,
    now_ms: i64,
) -> Vec<ErrorCode> {
    let all = |error: ErrorCode| vec![error; offsets.len()];
    if group_id.is_empty() {
        return all(ErrorCode::InvalidGroupId);
    }
    let group = match coordinator.find(group_id).await {
        Err(error) => return all(error),
        Ok(Some(group)) => group,
        Ok(None) if committer.generation_or_epoch < 0 => {
            match coordinator.find_or_create(group_id).await {
                Ok(group) => group,
                Err(error) => return all(error),
            }
        }
        Ok(None) if committer.api_version >= 9 => return all(ErrorCode::GroupIdNotFound),
        Ok(None) => return all(ErrorCode::IllegalGeneration),
    };
    let _busy = group.busy();
    let check = match &*group.state.borrow() {
        GroupState::Classic(classic) => match classic.validate_offset_commit(
            &committer.member_id,
            committer.group_instance_id.as_deref(),
            committer.generation_or_epoch,
        ) {
            ErrorCode::None => Ok(CommitCheck::Any),
            error => Err(error),
        },
        GroupState::Consumer(consumer) => consumer.validate_offset_commit(
            &committer.member_id,
            committer.group_instance_id.as_deref(),
            committer.generation_or_epoch,
            committer.api_version,
        ),
    };
    let check = match check {
        Ok(check) => check,
        Err(error) => return all(error),
    };
    let mut errors = Vec::with_capacity(offsets.len());
    let mut changes = Vec::new();
    for offset in offsets {
        let mut error = offset_error(coordinator, view, &offset);
        if error == ErrorCode::None {
            let topic_id = view.topic(&offset.topic).map(|topic| topic.id());
            error = check.partition_error(topic_id, offset.partition);
        }
        errors.push(error);
        if error == ErrorCode::None {
            changes.push(GroupChange::Commit {
                topic: offset.topic,
                partition: offset.partition,
                committed: CommittedOffset {
                    offset: offset.offset,
                    leader_epoch: offset.leader_epoch,
                    metadata: offset.metadata.unwrap_or_default(),
                    commit_timestamp_ms: now_ms,
                },
            });
        }
    }
    if changes.is_empty() {
        return errors;
    }
    if let Err(error) = group.store.apply(changes).await {
        tracing::error!(group = %group_id, %error, "committing offsets");
        let code = commit_error_code(&error);
        for slot in errors.iter_mut().filter(|c| **c == ErrorCode::None) {
            *slot = code;
        }
    }
    errors
}

/// The code for a commit the store did not take.
pub(crate) fn commit_error_code(error: &EngineError) -> ErrorCode {
    match error {
        // The commit does not fit in one store record: Kafka's answer for a commit larger
        // than its log accepts.
        EngineError::Io { source, .. } if source.kind() == std::io::ErrorKind::InvalidInput => {
            ErrorCode::InvalidCommitOffsetSize
        }
        // A newer coordinator claimed the group: nothing of this commit is acknowledged
        // here, and the client looks the coordinator up again.
        other => crate::groups::coordinator::store_error_code(other),
    }
}

fn offset_error(
    coordinator: &GroupCoordinator,
    view: &ClusterView,
    offset: &OffsetToCommit,
) -> ErrorCode {
    // `__consumer_offsets` is not among the view's topics, but a group reading it may commit.
    let known = view
        .topic(&offset.topic)
        .cloned()
        .or_else(|| offsets_topic::topic_by_name(view, &offset.topic))
        .is_some_and(|topic| (0..topic.partitions()).contains(&offset.partition));
    if !known {
        return ErrorCode::UnknownTopicOrPartition;
    }
    let metadata_len = offset.metadata.as_ref().map_or(0, String::len);
    if metadata_len > coordinator.config.offset_metadata_max_bytes {
        return ErrorCode::OffsetMetadataTooLarge;
    }
    ErrorCode::None
}

/// Committed offsets by topic, as OffsetFetch returns them.
pub type FetchedOffsets = Vec<(String, Vec<(i32, Option<CommittedOffset>)>)>;

/// One partition of an OffsetFetch answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPartition {
    /// Partition index.
    pub partition: i32,
    /// The committed offset; `None` when there is none, or when `error` is set (Kafka's
    /// offset -1, leader epoch -1, empty metadata).
    pub committed: Option<CommittedOffset>,
    /// The partition's error: UNSTABLE_OFFSET_COMMIT when the request wants stable offsets
    /// and a transaction has a pending offset for the partition, else NONE.
    pub error: ErrorCode,
}

/// An OffsetFetch answer for one group, by topic in the order asked (every committed
/// topic, in name order, when all were asked for).
pub type FetchedGroup = Vec<(String, Vec<FetchedPartition>)>;

/// OffsetFetch for one group without `require_stable`: the requested partitions (or every
/// committed one when `topics` is `None`); partitions without a commit come back as `None`.
/// `member` is the asking member's id and epoch (OffsetFetch v9+), checked for consumer
/// groups. Pending transactional offsets never show: a partition answers its last
/// committed offset. [`fetch_offsets`] with `require_stable` false, in the shape of the
/// versions before require_stable existed.
pub async fn fetch(
    coordinator: &GroupCoordinator,
    group_id: &str,
    member: Option<(String, i32)>,
    topics: Option<Vec<(String, Vec<i32>)>>,
) -> Result<FetchedOffsets, ErrorCode> {
    let fetched = fetch_offsets(coordinator, group_id, member, topics, false).await?;
    Ok(fetched
        .into_iter()
        .map(|(topic, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|p| (p.partition, p.committed))
                .collect();
            (topic, partitions)
        })
        .collect())
}

/// OffsetFetch for one group, as Kafka 4.4's `OffsetMetadataManager.fetchOffsets` /
/// `fetchAllOffsets`: the requested partitions (or every committed one when `topics` is
/// `None`) with their committed offsets. With `require_stable` (OffsetFetch v7+, KIP-447),
/// a partition some transaction has a pending offset for answers UNSTABLE_OFFSET_COMMIT
/// (and no offset) so that the consumer retries once the transaction has completed;
/// without it, the last committed offset. The group-level answer stays NONE: Kafka reports
/// UNSTABLE_OFFSET_COMMIT per partition only, in the v8+ groups array as before it (the
/// group's `error_code` is for group errors such as STALE_MEMBER_EPOCH). As in Kafka, a
/// partition with a pending offset but no committed one is not listed when all
/// partitions are asked for. `member` is the asking member's id and epoch (OffsetFetch
/// v9+), checked for consumer groups.
pub async fn fetch_offsets(
    coordinator: &GroupCoordinator,
    group_id: &str,
    member: Option<(String, i32)>,
    topics: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<FetchedGroup, ErrorCode> {
    let group = coordinator.find(group_id).await?;
    if let Some(group) = &group {
        let error = group.validate_offset_fetch(member.as_ref());
        if error != ErrorCode::None {
            return Err(error);
        }
    }
    let absent = |partition| FetchedPartition {
        partition,
        committed: None,
        error: ErrorCode::None,
    };
    let Some(group) = group else {
        return Ok(topics
            .unwrap_or_default()
            .into_iter()
            .map(|(topic, partitions)| (topic, partitions.into_iter().map(absent).collect()))
            .collect());
    };
    let store = &group.store;
    let answer = |topic: &str, partition: i32, committed: Option<CommittedOffset>| {
        if require_stable && store.has_pending_offset(topic, partition) {
            FetchedPartition {
                partition,
                committed: None,
                error: ErrorCode::UnstableOffsetCommit,
            }
        } else {
            FetchedPartition {
                partition,
                committed,
                error: ErrorCode::None,
            }
        }
    };
    Ok(match topics {
        Some(topics) => topics
            .into_iter()
            .map(|(topic, partitions)| {
                let offsets = partitions
                    .into_iter()
                    .map(|p| answer(&topic, p, store.offset(&topic, p)))
                    .collect();
                (topic, offsets)
            })
            .collect(),
        None => {
            let mut by_topic: FetchedGroup = Vec::new();
            for (topic, partition, committed) in store.offsets() {
                let fetched = answer(&topic, partition, Some(committed));
                match by_topic.last_mut() {
                    Some((last, partitions)) if *last == topic => partitions.push(fetched),
                    _ => by_topic.push((topic, vec![fetched])),
                }
            }
            by_topic
        }
    })
}

/// OffsetDelete: removes committed offsets of topics the group does not subscribe to.
pub async fn delete(
    coordinator: &GroupCoordinator,
    group_id: &str,
    topics: Vec<(String, Vec<i32>)>,
) -> Result<Vec<(String, Vec<(i32, ErrorCode)>)>, ErrorCode> {
    let Some(group) = coordinator.find(group_id).await? else {
        return Err(ErrorCode::GroupIdNotFound);
    };
    let _busy = group.busy();
    let subscribed = match &*group.state.borrow() {
        GroupState::Classic(classic) => {
            if classic.state() == ClassicState::Dead {
                return Err(ErrorCode::GroupIdNotFound);
            }
            let members = classic.members().next().is_some();
            if members && classic.protocol_type() != Some("consumer") {
                return Err(ErrorCode::NonEmptyGroup);
            }
            classic.subscribed_topics()
        }
        GroupState::Consumer(consumer) => Some(
            topics
                .iter()
                .filter(|(topic, _)| consumer.is_subscribed_to(topic))
                .map(|(topic, _)| topic.clone())
                .collect(),
        ),
    };
    let is_subscribed = |topic: &str| {
        subscribed
            .as_ref()
            .is_none_or(|topics| topics.iter().any(|t| t == topic))
    };
    let mut results = Vec::with_capacity(topics.len());
    let mut changes = Vec::new();
    for (topic, partitions) in topics {
        let error = if is_subscribed(&topic) {
            ErrorCode::GroupSubscribedToTopic
        } else {
            ErrorCode::None
        };
        if error == ErrorCode::None {
            changes.extend(
                partitions
                    .iter()
                    .map(|&partition| GroupChange::DeleteOffset {
                        topic: topic.clone(),
                        partition,
                    }),
            );
        }
        results.push((topic, partitions.into_iter().map(|p| (p, error)).collect()));
    }
    if !changes.is_empty() {
        if let Err(error) = group.store.apply(changes).await {
            tracing::error!(group = %group_id, %error, "deleting offsets");
            return Err(crate::groups::coordinator::store_error_code(&error));
        }
    }
    Ok(results)
}
