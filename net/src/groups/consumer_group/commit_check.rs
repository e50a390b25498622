//! Which partitions a KIP-848 member may commit offsets for (Kafka's
//! `ConsumerGroup.validateOffsetCommit`, with KIP-1251's assignment epochs).
//!
//! A commit at the member's epoch may name any partition. A commit at an older epoch is the
//! usual race of a member that sent it before the heartbeat answer that moved it on arrived:
//! it is accepted for each partition the member has owned since that epoch or before, and
//! refused with STALE_MEMBER_EPOCH for the others, which may already be consumed elsewhere.

use std::collections::BTreeMap;

use super::group::ConsumerGroup;
use super::member::Member;
use crate::protocol::{ErrorCode, Uuid};

/// How the partitions of one OffsetCommit are checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommitCheck {
    /// Every partition may be committed.
    Any,
    /// Only partitions owned since `received_epoch`: each owned partition with the epoch it
    /// was assigned at.
    OwnedSince {
        /// The epoch the commit was sent at, older than the member's.
        received_epoch: i32,
        /// The member's partitions and their assignment epochs.
        owned: BTreeMap<(Uuid, i32), i32>,
    },
}

impl CommitCheck {
    /// The error for committing `partition` of the topic with id `topic_id` (`None` when
    /// the topic is not known by id).
    pub fn partition_error(&self, topic_id: Option<Uuid>, partition: i32) -> ErrorCode {
        match self {
            CommitCheck::Any => ErrorCode::None,
            CommitCheck::OwnedSince {
                received_epoch,
                owned,
            } => match topic_id.and_then(|id| owned.get(&(id, partition))) {
                Some(assigned_at) if assigned_at <= received_epoch => ErrorCode::None,
                _ => ErrorCode::StaleMemberEpoch,
            },
        }
    }

    fn owned_since(member: &Member, received_epoch: i32) -> Self {
        let owned = member
            .owned_partitions()
            .filter_map(|p| Some((p, member.assignment_epoch_of(p)?)))
            .collect();
        CommitCheck::OwnedSince {
            received_epoch,
            owned,
        }
    }
}

impl ConsumerGroup {
    /// OffsetCommit validation: a negative epoch commits freely while the group has no
    /// members (admin and simple consumers); otherwise the member must exist, use
    /// OffsetCommit v9+, and commit at its epoch, or at an older one for partitions it has
    /// owned since (see the module docs).
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        _instance_id: Option<&str>,
        member_epoch: i32,
        api_version: i16,
    ) -> Result<CommitCheck, ErrorCode> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(CommitCheck::Any);
        }
        let Some(member) = self.members.get(member_id) else {
            return Err(ErrorCode::UnknownMemberId);
        };
        if api_version < 9 {
            return Err(ErrorCode::UnsupportedVersion);
        }
        Self::check_member_epoch(member, member_epoch)
    }

    /// TxnOffsetCommit validation, as Kafka's `ConsumerGroup.validateOffsetCommit` for a
    /// transactional commit: like an OffsetCommit, except that a request naming no member
    /// (epoch -1, empty member id, no instance id: TxnOffsetCommit before v3) is accepted
    /// even while the group has members, and any version may be used. The errors are the
    /// OffsetCommit ones; Kafka answers STALE_MEMBER_EPOCH as ILLEGAL_GENERATION to a
    /// TxnOffsetCommit, which the caller does.
    pub fn validate_txn_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<CommitCheck, ErrorCode> {
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(CommitCheck::Any);
        }
        if member_epoch == -1 && member_id.is_empty() && instance_id.is_none() {
            return Ok(CommitCheck::Any);
        }
        let Some(member) = self.members.get(member_id) else {
            return Err(ErrorCode::UnknownMemberId);
        };
        Self::check_member_epoch(member, member_epoch)
    }

    /// A commit at the member's epoch may name any partition, one at an older epoch the
    /// partitions owned since; a newer or negative epoch is stale.
    fn check_member_epoch(member: &Member, member_epoch: i32) -> Result<CommitCheck, ErrorCode> {
        if member_epoch == member.member_epoch {
            Ok(CommitCheck::Any)
        } else if member_epoch < 0 || member_epoch > member.member_epoch {
            Err(ErrorCode::StaleMemberEpoch)
        } else {
            Ok(CommitCheck::owned_since(member, member_epoch))
        }
    }
}
