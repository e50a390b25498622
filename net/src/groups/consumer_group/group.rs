//! The group: members, epochs, target assignment, timers.

use std::collections::{BTreeMap, BTreeSet};

use super::assignor::{self, MemberSpec};
use super::member::{assignment_to_wire, Assignment, Member, MemberState};
use super::regex::Regex;
use super::topics::TopicSnapshot;
use super::ConsumerGroupConfig;
use crate::protocol::messages::consumer_group_describe as describe;
use crate::protocol::{ErrorCode, Uuid};

/// Group state as ListGroups and ConsumerGroupDescribe report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    /// No members.
    Empty,
    /// The group epoch is ahead of the target assignment.
    Assigning,
    /// Some member has not converged to the target assignment.
    Reconciling,
    /// Every member owns its target at the assignment epoch.
    Stable,
    /// The group was deleted.
    Dead,
}

impl ConsumerGroupState {
    /// Kafka's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
            ConsumerGroupState::Dead => "Dead",
        }
    }
}

/// Deadlines of one member; they are not persisted and restart on [`ConsumerGroup::restore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Timers {
    /// The member is removed if it does not heartbeat by then.
    pub session_deadline_ms: i64,
    /// The member is removed if it has not revoked its partitions by then.
    pub rebalance_deadline_ms: Option<i64>,
}

/// One KIP-848 consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroup {
    pub(super) group_id: String,
    pub(super) group_epoch: i32,
    pub(super) assignment_epoch: i32,
    pub(super) members: BTreeMap<String, Member>,
    /// Target assignment per member id.
    pub(super) target: BTreeMap<String, Assignment>,
    /// Name → (id, partitions) of every subscribed topic that exists: a change bumps the epoch.
    pub(super) subscribed_metadata: BTreeMap<String, (Uuid, i32)>,
    /// Feeds member ids generated for v0 clients.
    pub(super) member_id_sequence: u64,
    pub(super) timers: BTreeMap<String, Timers>,
    /// The configured default assignor, as last passed in (not persisted).
    pub(super) default_assignor: &'static str,
}

impl ConsumerGroup {
    /// An empty group at epoch 0.
    pub fn new(group_id: &str) -> Self {
        ConsumerGroup {
            group_id: group_id.to_owned(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            subscribed_metadata: BTreeMap::new(),
            member_id_sequence: 0,
            timers: BTreeMap::new(),
            default_assignor: assignor::UNIFORM,
        }
    }

    /// Group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// Group epoch.
    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    /// Epoch of the target assignment.
    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    /// A member by id.
    pub fn member(&self, member_id: &str) -> Option<&Member> {
        self.members.get(member_id)
    }

    /// The target assignment of a member.
    pub fn target_of(&self, member_id: &str) -> Option<&Assignment> {
        self.target.get(member_id)
    }

    /// Current state.
    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .all(|m| m.is_reconciled_to(self.assignment_epoch))
        {
            ConsumerGroupState::Stable
        } else {
            ConsumerGroupState::Reconciling
        }
    }

    /// Whether the group has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Number of members.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// The member holding a static instance id.
    pub(super) fn static_member_id(&self, instance_id: &str) -> Option<String> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.member_id.clone())
    }

    /// Names a member subscribes to that exist in `topics`: its names plus its regex matches.
    pub(super) fn subscribed_names(member: &Member, topics: &TopicSnapshot) -> BTreeSet<String> {
        let mut names: BTreeSet<String> = member
            .subscribed_topic_names
            .iter()
            .filter(|name| topics.by_name(name).is_some())
            .cloned()
            .collect();
        if let Some(regex) = member
            .subscribed_topic_regex
            .as_deref()
            .filter(|r| !r.is_empty())
        {
            if let Ok(regex) = Regex::new(regex) {
                names.extend(
                    topics
                        .names()
                        .filter(|n| regex.is_match(n))
                        .map(str::to_owned),
                );
            }
        }
        names
    }

    pub(super) fn subscribed_ids(member: &Member, topics: &TopicSnapshot) -> BTreeSet<Uuid> {
        Self::subscribed_names(member, topics)
            .iter()
            .filter_map(|name| topics.by_name(name).map(|(id, _)| id))
            .collect()
    }

    pub(super) fn compute_subscribed_metadata(
        &self,
        topics: &TopicSnapshot,
    ) -> BTreeMap<String, (Uuid, i32)> {
        self.members
            .values()
            .flat_map(|m| Self::subscribed_names(m, topics))
            .filter_map(|name| topics.by_name(&name).map(|meta| (name, meta)))
            .collect()
    }

    /// The assignor most members ask for (ties by name), else the configured default.
    pub(super) fn preferred_assignor(&self) -> &'static str {
        let default = self.default_assignor;
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some(name) = member.server_assignor.as_deref() {
                if let Some(known) = assignor::SUPPORTED.iter().find(|s| **s == name) {
                    *counts.entry(known).or_default() += 1;
                }
            }
        }
        let mut best: Option<(&'static str, usize)> = None;
        for (name, count) in counts {
            if best.is_none_or(|(_, c)| count > c) {
                best = Some((name, count));
            }
        }
        best.map_or(default, |(name, _)| name)
    }

    /// Recomputes the target assignment of every member at the group epoch.
    pub(super) fn update_target(&mut self, topics: &TopicSnapshot) {
        let assignor = self.preferred_assignor();
        let partitions: BTreeMap<Uuid, i32> = self.subscribed_metadata.values().copied().collect();
        let specs: Vec<MemberSpec<'_>> = self
            .members
            .values()
            .map(|m| MemberSpec {
                member_id: &m.member_id,
                subscribed: Self::subscribed_ids(m, topics)
                    .into_iter()
                    .filter(|id| partitions.contains_key(id))
                    .collect(),
                current: self.target.get(&m.member_id),
            })
            .collect();
        let target = assignor::assign(assignor, &specs, &partitions);
        self.target = target;
        self.assignment_epoch = self.group_epoch;
    }

    /// Recomputes the subscribed metadata and bumps the group epoch when it changed (or when
    /// `force_bump`); the target follows on the next heartbeat, as in Kafka. True if bumped.
    pub(super) fn refresh_metadata(&mut self, topics: &TopicSnapshot, force_bump: bool) -> bool {
        let metadata = self.compute_subscribed_metadata(topics);
        let bump = force_bump || metadata != self.subscribed_metadata;
        self.subscribed_metadata = metadata;
        if bump {
            self.group_epoch = self.group_epoch.saturating_add(1);
        }
        bump
    }

    /// Which member owns each partition (assigned or pending revocation).
    pub(super) fn owners(&self) -> BTreeMap<(Uuid, i32), &str> {
        let mut owners = BTreeMap::new();
        for member in self.members.values() {
            for partition in member.owned_partitions() {
                owners.insert(partition, member.member_id.as_str());
            }
        }
        owners
    }

    /// Removes a member and bumps the group epoch (Kafka's fencing of a member).
    pub(super) fn remove_member(&mut self, member_id: &str, topics: &TopicSnapshot) {
        self.members.remove(member_id);
        self.target.remove(member_id);
        self.timers.remove(member_id);
        self.refresh_metadata(topics, true);
    }

    /// Removes members whose session or revocation deadline has passed; true if any was.
    /// A member is removed when its session expires (no heartbeat within the session
    /// timeout) or when it has not revoked partitions within its rebalance timeout; each
    /// removal bumps the group epoch. True if state changed.
    pub fn expire(
        &mut self,
        topics: &TopicSnapshot,
        config: &ConsumerGroupConfig,
        now_ms: i64,
    ) -> bool {
        self.default_assignor = config.default_assignor;
        let expired: Vec<String> = self
            .timers
            .iter()
            .filter(|(_, t)| {
                t.session_deadline_ms <= now_ms
                    || t.rebalance_deadline_ms.is_some_and(|d| d <= now_ms)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for member_id in &expired {
            self.remove_member(member_id, topics);
        }
        !expired.is_empty()
    }

    /// The earliest time [`ConsumerGroup::expire`] could change something.
    pub fn next_deadline(&self) -> Option<i64> {
        self.timers
            .values()
            .flat_map(|t| std::iter::once(t.session_deadline_ms).chain(t.rebalance_deadline_ms))
            .min()
    }

    /// Arms every member's deadlines from `now_ms`, as after a restart: the session timeout
    /// for all, the rebalance timeout for members still revoking. Call after `decode`.
    pub fn restore(&mut self, config: &ConsumerGroupConfig, now_ms: i64) {
        self.default_assignor = config.default_assignor;
        self.timers = self
            .members
            .values()
            .map(|m| {
                let rebalance = (m.state == MemberState::UnrevokedPartitions)
                    .then(|| now_ms.saturating_add(i64::from(m.rebalance_timeout_ms.max(0))));
                (
                    m.member_id.clone(),
                    Timers {
                        session_deadline_ms: now_ms
                            .saturating_add(i64::from(config.session_timeout_ms)),
                        rebalance_deadline_ms: rebalance,
                    },
                )
            })
            .collect();
    }

    /// Topics were created, deleted or grew: bumps the group epoch when the subscribed
    /// topics' metadata changed (the next heartbeat recomputes the target); true if it did.
    pub fn topics_changed(&mut self, topics: &TopicSnapshot) -> bool {
        if self.members.is_empty() {
            return false;
        }
        self.refresh_metadata(topics, false)
    }

    /// OffsetFetch validation: no member id with a negative epoch is an admin fetch;
    /// otherwise the member must exist and fetch at its epoch.
    pub fn validate_offset_fetch(&self, member_id: Option<&str>, member_epoch: i32) -> ErrorCode {
        let Some(member_id) = member_id else {
            return if member_epoch < 0 {
                ErrorCode::None
            } else {
                ErrorCode::UnknownMemberId
            };
        };
        match self.members.get(member_id) {
            None => ErrorCode::UnknownMemberId,
            Some(member) if member.member_epoch != member_epoch => ErrorCode::StaleMemberEpoch,
            Some(_) => ErrorCode::None,
        }
    }

    /// Whether some member subscribes to `topic`, by name or by regex.
    pub fn is_subscribed_to(&self, topic: &str) -> bool {
        self.members.values().any(|m| {
            m.subscribed_topic_names.contains(topic)
                || m.subscribed_topic_regex
                    .as_deref()
                    .filter(|r| !r.is_empty())
                    .and_then(|r| Regex::new(r).ok())
                    .is_some_and(|r| r.is_match(topic))
        })
    }

    /// The ConsumerGroupDescribe entry for this group.
    pub fn describe(&self, topics: &TopicSnapshot) -> describe::DescribedGroup {
        let to_described = |assignment: &Assignment| describe::Assignment {
            topic_partitions: assignment_to_wire(assignment)
                .into_iter()
                .map(|(topic_id, partitions)| describe::TopicPartitions {
                    topic_id,
                    topic_name: topics.name(&topic_id).unwrap_or_default().to_owned(),
                    partitions,
                })
                .collect(),
        };
        let empty = Assignment::new();
        describe::DescribedGroup {
            error_code: 0,
            error_message: None,
            group_id: self.group_id.clone(),
            group_state: self.state().as_str().to_owned(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.preferred_assignor().to_owned(),
            members: self
                .members
                .values()
                .map(|m| describe::Member {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_topic_names.iter().cloned().collect(),
                    subscribed_topic_regex: m.subscribed_topic_regex.clone(),
                    assignment: to_described(&m.assigned),
                    target_assignment: to_described(
                        self.target.get(&m.member_id).unwrap_or(&empty),
                    ),
                    member_type: 1,
                })
                .collect(),
            authorized_operations: i32::MIN,
        }
    }
}
