//! Transactional offset commits on a coordinator's groups: TxnOffsetCommit (a transactional
//! producer committing a group's offsets inside its transaction, the Java producer's
//! `sendOffsetsToTransaction`) and the transaction marker that completes them.
//!
//! As in Kafka 4.4 (`KafkaApis.handleTxnOffsetCommitRequest`,
//! `GroupCoordinatorService.commitTransactionalOffsets`,
//! `OffsetMetadataManager.commitTransactionalOffset`):
//!
//! - Offsets of topics or partitions that do not exist answer UNKNOWN_TOPIC_OR_PARTITION
//!   (UNKNOWN_TOPIC_ID for a v6 topic id), whatever else happens; when no offset names a
//!   known partition the group is not looked at (nor created).
//! - The other offsets all get the group's error, if any: INVALID_GROUP_ID for an empty id;
//!   the coordinator's state (COORDINATOR_LOAD_IN_PROGRESS, answered COORDINATOR_NOT_AVAILABLE
//!   to v0 and v1, as Kafka does for producers older than 2.0; NOT_COORDINATOR); a group
//!   that does not exist is created as a simple group when the generation is negative, and
//!   is ILLEGAL_GENERATION otherwise; then the member checks, made only when the request
//!   names a member, an instance or a generation (v3+): a classic group answers
//!   UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID or ILLEGAL_GENERATION (and COORDINATOR_NOT_AVAILABLE
//!   once Dead), never REBALANCE_IN_PROGRESS; a KIP-848 group UNKNOWN_MEMBER_ID, and
//!   ILLEGAL_GENERATION for a stale member epoch (Kafka turns STALE_MEMBER_EPOCH into
//!   ILLEGAL_GENERATION for TxnOffsetCommit), also when a commit at an older epoch names a
//!   partition the member has not owned since (KIP-1251): then nothing of the request is
//!   written.
//! - Per offset: OFFSET_METADATA_TOO_LARGE over `offset.metadata.max.bytes`.
//! - The remaining offsets are written to the group's store as pending for the producer, in
//!   one apply (durable before the answer). When the write fails every known offset gets
//!   the error, as when Kafka's append fails: INVALID_PRODUCER_EPOCH for an epoch older
//!   than the one the producer's pending offsets in this group were written at (what
//!   Kafka's producer state answers), NOT_COORDINATOR when a newer coordinator claimed the
//!   group, COORDINATOR_NOT_AVAILABLE for another store failure.
//!
//! What kaas leaves to the TxnOffsetCommit handler and the transaction coordinator: Kafka
//! 4.4 verifies the transaction with its coordinator before writing (that the producer's
//! epoch is current and the group's partition is in the transaction, KIP-890); here that
//! belongs to the caller, before [`commit_transactional`].
//!
//! [`complete_transaction`] is what a WriteTxnMarkers to `__consumer_offsets-<partition>`
//! does: every group of that partition with pending offsets of the producer commits or
//! drops them.

use kaas_engine::group_store::{CommittedOffset, GroupChange};

use crate::groups::consumer_group::CommitCheck;
use crate::groups::coordinator::GroupCoordinator;
use crate::groups::group::GroupState;
use crate::groups::offsets::commit_error_code;
use crate::groups::offsets_topic;
use crate::model::cluster_view::ClusterView;
use crate::protocol::{ErrorCode, Uuid};

/// Who commits transactionally: the producer, and the consumer group member whose offsets
/// it commits (TxnOffsetCommit v3+; before v3 the member fields are -1, empty and none).
#[derive(Debug, Clone)]
pub struct TxnCommitter {
    /// The transactional producer's id.
    pub producer_id: i64,
    /// Its epoch.
    pub producer_epoch: i16,
    /// The member id, empty when unknown.
    pub member_id: String,
    /// The static member's instance id.
    pub group_instance_id: Option<String>,
    /// The generation (classic groups) or member epoch (KIP-848 groups), -1 when unknown.
    pub generation_or_epoch: i32,
    /// The TxnOffsetCommit version.
    pub api_version: i16,
}

/// A topic as TxnOffsetCommit names it: by name up to v5, by id from v6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicRef {
    /// The topic's name.
    Name(String),
    /// The topic's id.
    Id(Uuid),
}

/// One offset to commit transactionally.
#[derive(Debug, Clone)]
pub struct TxnOffsetToCommit {
    /// The topic.
    pub topic: TopicRef,
    /// Partition.
    pub partition: i32,
    /// Offset (the next record to consume).
    pub offset: i64,
    /// Leader epoch of the last consumed record, -1 if unknown.
    pub leader_epoch: i32,
    /// Client metadata.
    pub metadata: Option<String>,
}

/// TxnOffsetCommit for `group_id`: the offsets are written as pending for the producer,
/// to become the group's committed offsets when its transaction commits
/// ([`complete_transaction`]). One error code per offset, in order (see the module doc).
pub async fn commit_transactional(
    coordinator: &GroupCoordinator,
    view: &ClusterView,
    group_id: &str,
    committer: TxnCommitter,
    offsets: Vec<TxnOffsetToCommit>,
    now_ms: i64,
) -> Vec<ErrorCode> {
    let resolved: Vec<Result<(String, Option<Uuid>), ErrorCode>> =
        offsets.iter().map(|offset| resolve(view, offset)).collect();
    let mut errors: Vec<ErrorCode> = resolved
        .iter()
        .map(|r| r.as_ref().err().copied().unwrap_or(ErrorCode::None))
        .collect();
    if errors.iter().all(|error| *error != ErrorCode::None) {
        return errors;
    }
    let fail_known = |errors: &mut Vec<ErrorCode>, code: ErrorCode| {
        // Kafka before 2.0 did not know COORDINATOR_LOAD_IN_PROGRESS here (KAFKA-7296).
        let code = match code {
            ErrorCode::CoordinatorLoadInProgress if committer.api_version < 2 => {
                ErrorCode::CoordinatorNotAvailable
            }
            code => code,
        };
        for slot in errors.iter_mut().filter(|c| **c == ErrorCode::None) {
            *slot = code;
        }
    };
    if group_id.is_empty() {
        fail_known(&mut errors, ErrorCode::InvalidGroupId);
        return errors;
    }
    let group = match coordinator.find(group_id).await {
        Err(error) => {
            fail_known(&mut errors, error);
            return errors;
        }
        Ok(Some(group)) => group,
        Ok(None) if committer.generation_or_epoch < 0 => {
            match coordinator.find_or_create(group_id).await {
                Ok(group) => group,
                Err(error) => {
                    fail_known(&mut errors, error);
                    return errors;
                }
            }
        }
        Ok(None) => {
            fail_known(&mut errors, ErrorCode::IllegalGeneration);
            return errors;
        }
    };
    let _busy = group.busy();
    let check = match &*group.state.borrow() {
        GroupState::Classic(classic) => match classic.validate_txn_offset_commit(
            &committer.member_id,
            committer.group_instance_id.as_deref(),
            committer.generation_or_epoch,
        ) {
            ErrorCode::None => Ok(CommitCheck::Any),
            error => Err(error),
        },
        GroupState::Consumer(consumer) => consumer.validate_txn_offset_commit(
            &committer.member_id,
            committer.group_instance_id.as_deref(),
            committer.generation_or_epoch,
        ),
    };
    let check = match check {
        Ok(check) => check,
        Err(error) => {
            fail_known(&mut errors, transactional(error));
            return errors;
        }
    };
    // What Kafka answers when the operation fails as a whole (a partition's member check,
    // the append): every known offset gets the error.
    let known = errors.clone();
    let whole_request = |code: ErrorCode| {
        let mut errors = known.clone();
        fail_known(&mut errors, code);
        errors
    };
    let max_metadata = coordinator.config.offset_metadata_max_bytes;
    let mut changes = Vec::new();
    for ((resolved, offset), error) in resolved.into_iter().zip(offsets).zip(errors.iter_mut()) {
        let Ok((topic, topic_id)) = resolved else {
            continue;
        };
        if offset.metadata.as_ref().map_or(0, String::len) > max_metadata {
            *error = ErrorCode::OffsetMetadataTooLarge;
            continue;
        }
        if check.partition_error(topic_id, offset.partition) != ErrorCode::None {
            // Kafka's per-partition check throws: nothing is written.
            return whole_request(ErrorCode::IllegalGeneration);
        }
        changes.push(GroupChange::PendingCommit {
            producer_id: committer.producer_id,
            producer_epoch: committer.producer_epoch,
            topic,
            partition: offset.partition,
            committed: CommittedOffset {
                offset: offset.offset,
                leader_epoch: offset.leader_epoch,
                metadata: offset.metadata.unwrap_or_default(),
                commit_timestamp_ms: now_ms,
            },
        });
    }
    if changes.is_empty() {
        return errors;
    }
    // The append's producer-epoch check, after the request's own checks as in Kafka.
    if group
        .store
        .pending_producer_epoch(committer.producer_id)
        .is_some_and(|epoch| committer.producer_epoch < epoch)
    {
        return whole_request(ErrorCode::InvalidProducerEpoch);
    }
    if let Err(error) = group.store.apply(changes).await {
        tracing::error!(group = %group_id, %error, "committing transactional offsets");
        return whole_request(commit_error_code(&error));
    }
    errors
}

/// Kafka answers a stale member epoch as ILLEGAL_GENERATION to a TxnOffsetCommit.
fn transactional(error: ErrorCode) -> ErrorCode {
    match error {
        ErrorCode::StaleMemberEpoch => ErrorCode::IllegalGeneration,
        other => other,
    }
}

/// The topic's name and id, or the error for an offset of an unknown topic or partition
/// (`__consumer_offsets` is not among the view's topics, but a group reading it may commit).
fn resolve(
    view: &ClusterView,
    offset: &TxnOffsetToCommit,
) -> Result<(String, Option<Uuid>), ErrorCode> {
    let (topic, unknown) = match &offset.topic {
        TopicRef::Name(name) => (
            view.topic(name)
                .cloned()
                .or_else(|| offsets_topic::topic_by_name(view, name)),
            ErrorCode::UnknownTopicOrPartition,
        ),
        TopicRef::Id(id) => (
            view.topic_by_id(id)
                .cloned()
                .or_else(|| offsets_topic::topic_by_id(view, id)),
            ErrorCode::UnknownTopicId,
        ),
    };
    let topic = topic.ok_or(unknown)?;
    if !(0..topic.partitions()).contains(&offset.partition) {
        return Err(ErrorCode::UnknownTopicOrPartition);
    }
    Ok((topic.name().to_string(), Some(topic.id())))
}

/// A transaction marker for `__consumer_offsets-<partition>` (WriteTxnMarkers): every
/// group of that partition coordinated here that has pending offsets of `producer_id`
/// commits them into its committed offsets (`commit`) or drops them, each durably in its
/// store. Groups without pending offsets of the producer are left alone, so a marker sent
/// again (the transaction coordinator retries until every group has it) changes nothing
/// more.
///
/// The code is WriteTxnMarkers' for the partition, as Kafka 4.4's `KafkaApis` answers it:
/// NONE; INVALID_PRODUCER_EPOCH when the marker's epoch is older than the one the
/// producer's pending offsets were written at (nothing is written then);
/// NOT_LEADER_OR_FOLLOWER where Kafka's group coordinator would fail with
/// COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR (the
/// partition is served elsewhere, the groups are loading, a store failed or was claimed by
/// a newer coordinator), which the transaction coordinator retries;
/// UNKNOWN_TOPIC_OR_PARTITION for a partition the topic does not have.
pub async fn complete_transaction(
    coordinator: &GroupCoordinator,
    partition: i32,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
) -> ErrorCode {
    if !(0..offsets_topic::PARTITIONS).contains(&partition) {
        return ErrorCode::UnknownTopicOrPartition;
    }
    let groups = match coordinator.groups_of_offsets_partition(partition).await {
        Ok(groups) => groups,
        Err(error) => return marker_error(error),
    };
    let involved: Vec<_> = groups
        .into_iter()
        .filter_map(|group| {
            let epoch = group.store.pending_producer_epoch(producer_id)?;
            Some((group, epoch))
        })
        .collect();
    if involved.iter().any(|(_, epoch)| producer_epoch < *epoch) {
        return ErrorCode::InvalidProducerEpoch;
    }
    let completions = involved.iter().map(|(group, _)| async move {
        let _busy = group.busy();
        let change = GroupChange::CompleteTransaction {
            producer_id,
            producer_epoch,
            commit,
        };
        let applied = group.store.apply(vec![change]).await;
        if let Err(error) = &applied {
            tracing::error!(group = %group.id, %error, producer_id, commit, "completing a transaction");
        }
        applied
    });
    let results = futures_util::future::join_all(completions).await;
    match results.iter().find_map(|result| result.as_ref().err()) {
        Some(error) => marker_error(crate::groups::coordinator::store_error_code(error)),
        None => ErrorCode::None,
    }
}

/// Kafka's translation of the group coordinator's errors for the transaction coordinator,
/// which does not expect them (`KafkaApis.handleWriteTxnMarkersRequest`).
fn marker_error(error: ErrorCode) -> ErrorCode {
    match error {
        ErrorCode::CoordinatorNotAvailable
        | ErrorCode::CoordinatorLoadInProgress
        | ErrorCode::NotCoordinator => ErrorCode::NotLeaderOrFollower,
        other => other,
    }
}

#[cfg(test)]
mod tests;
