//! ConsumerGroupHeartbeat: join, heartbeat, leave.

use std::collections::BTreeSet;

use super::assignor;
use super::group::{ConsumerGroup, Timers};
use super::member::{
    assignment_from_wire, assignment_to_wire, is_subset, Assignment, Member, MemberState,
    LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
use super::reconcile::{reconcile, ReconcileInput};
use super::regex::Regex;
use super::topics::TopicSnapshot;
use super::ConsumerGroupConfig;
use crate::protocol::{ErrorCode, Uuid};

/// From ConsumerGroupHeartbeat v1 the client generates its member id.
const CLIENT_GENERATED_MEMBER_ID_VERSION: i16 = 1;

/// One ConsumerGroupHeartbeat request, as the group needs it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Heartbeat {
    /// Member id (empty on a v0 join).
    pub member_id: String,
    /// Member epoch: 0 joins, -1 leaves, -2 leaves a static member temporarily.
    pub member_epoch: i32,
    /// Static instance id.
    pub instance_id: Option<String>,
    /// Rack id.
    pub rack_id: Option<String>,
    /// Rebalance timeout, or -1 when unchanged.
    pub rebalance_timeout_ms: i32,
    /// Subscribed topic names, or `None` when unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// Subscribed topic regex, or `None` when unchanged.
    pub subscribed_topic_regex: Option<String>,
    /// Server-side assignor, or `None`.
    pub server_assignor: Option<String>,
    /// Owned partitions, or `None` when unchanged.
    pub owned: Option<Vec<(Uuid, Vec<i32>)>>,
    /// Client id of the connection.
    pub client_id: String,
    /// Client host of the connection.
    pub client_host: String,
    /// ConsumerGroupHeartbeat version.
    pub api_version: i16,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResult {
    /// Error code.
    pub error: ErrorCode,
    /// Error message.
    pub error_message: Option<String>,
    /// Member id (the generated one on a v0 join).
    pub member_id: Option<String>,
    /// Member epoch.
    pub member_epoch: i32,
    /// Heartbeat interval.
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, when it changed or the request was a full one.
    pub assignment: Option<Vec<(Uuid, Vec<i32>)>>,
    /// Whether persistent state changed: the caller persists `encode()` before answering.
    pub changed: bool,
}

impl HeartbeatResult {
    fn error(error: ErrorCode, message: impl Into<String>, config: &ConsumerGroupConfig) -> Self {
        HeartbeatResult {
            error,
            error_message: Some(message.into()),
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            assignment: None,
            changed: false,
        }
    }
}

type Rejection = (ErrorCode, String);

fn invalid(message: &str) -> Rejection {
    (ErrorCode::InvalidRequest, message.to_owned())
}

fn empty_string(value: Option<&str>) -> bool {
    value.is_some_and(str::is_empty)
}

/// Kafka's request validation (`throwIfConsumerGroupHeartbeatRequestIsInvalid`).
fn validate(hb: &Heartbeat) -> Result<(), Rejection> {
    if (hb.api_version >= CLIENT_GENERATED_MEMBER_ID_VERSION
        || hb.member_epoch > 0
        || hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH)
        && hb.member_id.is_empty()
    {
        return Err(invalid("MemberId can't be empty."));
    }
    if empty_string(hb.instance_id.as_deref()) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if empty_string(hb.rack_id.as_deref()) {
        return Err(invalid("RackId can't be empty."));
    }
    if hb.member_epoch == 0 {
        if hb.rebalance_timeout_ms == -1 {
            return Err(invalid(
                "RebalanceTimeoutMs must be provided in first request.",
            ));
        }
        if hb.owned.as_ref().is_none_or(|owned| !owned.is_empty()) {
            return Err(invalid("TopicPartitions must be empty when (re-)joining."));
        }
        if hb.subscribed_topic_names.is_none() && hb.subscribed_topic_regex.is_none() {
            return Err(invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            ));
        }
    } else if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        if hb.instance_id.is_none() {
            return Err(invalid("InstanceId can't be null."));
        }
    } else if hb.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH {
        return Err(invalid("MemberEpoch is invalid."));
    }
    if let Some(regex) = hb
        .subscribed_topic_regex
        .as_deref()
        .filter(|r| !r.is_empty())
    {
        if let Err(error) = Regex::new(regex) {
            return Err((
                ErrorCode::InvalidRequest,
                format!(
                    "SubscribedTopicRegex `{regex}` is not a valid regular expression: {error}."
                ),
            ));
        }
    }
    if let Some(name) = hb.server_assignor.as_deref() {
        if !assignor::SUPPORTED.contains(&name) {
            return Err((
                ErrorCode::UnsupportedAssignor,
                format!(
                    "ServerAssignor {name} is not supported. Supported assignors: {}.",
                    assignor::SUPPORTED.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

fn fenced_epoch(received: i32, member: &Member) -> Rejection {
    let relation = if received > member.member_epoch {
        "greater"
    } else {
        "smaller"
    };
    (
        ErrorCode::FencedMemberEpoch,
        format!(
            "The consumer group member has a {relation} member epoch ({received}) than the one known by \
             the group coordinator ({}). The member must abandon all its partitions and rejoin.",
            member.member_epoch
        ),
    )
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`: a greater epoch is fenced; a smaller
/// one only passes as the previous epoch with owned partitions inside the assignment (the
/// answer that bumped the epoch may have been lost).
fn check_epoch(
    member: &Member,
    received: i32,
    owned: Option<&Assignment>,
) -> Result<(), Rejection> {
    if received > member.member_epoch {
        return Err(fenced_epoch(received, member));
    }
    if received < member.member_epoch
        && (received != member.previous_member_epoch
            || !owned.is_some_and(|owned| is_subset(owned, &member.assigned)))
    {
        return Err(fenced_epoch(received, member));
    }
    Ok(())
}

/// A member that rejoins at epoch 0 has abandoned its partitions: it starts over.
fn reset_for_rejoin(member: &mut Member) {
    member.member_epoch = 0;
    member.previous_member_epoch = 0;
    member.state = MemberState::Stable;
    member.assigned.clear();
    member.pending_revocation.clear();
    member.assignment_epochs.clear();
}

impl ConsumerGroup {
    /// Handles one ConsumerGroupHeartbeat for this group.
    ///
    /// Deliberate differences from Kafka 4.x:
    /// - A known member (same member id) that rejoins at epoch 0 is accepted and starts over
    ///   with no partitions, instead of being fenced until its session expires; this is the
    ///   path a fenced client takes, since it keeps its member id.
    /// - An invalid regex answers INVALID_REQUEST (Kafka: INVALID_REGULAR_EXPRESSION, which
    ///   the protocol crate does not define); regexes are resolved synchronously against the
    ///   snapshot with a small RE2-like subset (see `regex`).
    /// - Members are ordered by member id in the assignors, so assignments are reproducible.
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &TopicSnapshot,
        config: &ConsumerGroupConfig,
        now_ms: i64,
    ) -> HeartbeatResult {
        self.default_assignor = config.default_assignor;
        if let Err((error, message)) = validate(&hb) {
            return HeartbeatResult::error(error, message, config);
        }
        let result = if hb.member_epoch == LEAVE_GROUP_MEMBER_EPOCH
            || hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
        {
            self.leave(&hb, topics, config, now_ms)
        } else {
            self.join_or_heartbeat(hb, topics, config, now_ms)
        };
        result.unwrap_or_else(|(error, message)| HeartbeatResult::error(error, message, config))
    }

    fn leave(
        &mut self,
        hb: &Heartbeat,
        topics: &TopicSnapshot,
        config: &ConsumerGroupConfig,
        now_ms: i64,
    ) -> Result<HeartbeatResult, Rejection> {
        let member_id = match hb.instance_id.as_deref() {
            None => {
                if !self.members.contains_key(&hb.member_id) {
                    return Err(unknown_member(&hb.member_id, &self.group_id));
                }
                hb.member_id.clone()
            }
            Some(instance_id) => {
                let existing = self.static_member_id(instance_id).ok_or_else(|| {
                    (
                        ErrorCode::UnknownMemberId,
                        format!("Instance id {instance_id} is unknown."),
                    )
                })?;
                if existing != hb.member_id {
                    return Err(fenced_instance(&hb.member_id, instance_id, &existing));
                }
                existing
            }
        };
        let mut changed = true;
        if hb.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH {
            // The static member keeps its assignment for a session timeout so that the same
            // instance can come back without a rebalance.
            if let Some(member) = self.members.get_mut(&member_id) {
                changed = member.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH;
                member.update_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH);
            }
            self.timers.insert(
                member_id.clone(),
                Timers {
                    session_deadline_ms: now_ms
                        .saturating_add(i64::from(config.session_timeout_ms)),
                    rebalance_deadline_ms: None,
                },
            );
        } else {
            self.remove_member(&member_id, topics);
        }
        Ok(HeartbeatResult {
            error: ErrorCode::None,
            error_message: None,
            member_id: Some(member_id),
            member_epoch: hb.member_epoch,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            assignment: None,
            changed,
        })
    }

    fn next_member_id(&mut self, now_ms: i64) -> String {
        self.member_id_sequence = self.member_id_sequence.wrapping_add(1);
        generate_member_id(&self.group_id, now_ms, self.member_id_sequence)
    }

    /// Finds or creates the member the heartbeat is for; returns the member as it was before
    /// this heartbeat (for a new member, a blank one) and whether the member is new.
    fn resolve_member(
        &mut self,
        hb: &Heartbeat,
        member_id: &str,
        owned: Option<&Assignment>,
    ) -> Result<(Member, bool), Rejection> {
        let joining = hb.member_epoch == 0;
        match hb.instance_id.as_deref() {
            None => match self.members.get(member_id) {
                Some(member) if joining => {
                    let mut member = member.clone();
                    reset_for_rejoin(&mut member);
                    Ok((member, false))
                }
                Some(member) => {
                    check_epoch(member, hb.member_epoch, owned)?;
                    Ok((member.clone(), false))
                }
                None if joining => Ok((Member::new(member_id.to_owned()), true)),
                None => Err(unknown_member(member_id, &self.group_id)),
            },
            Some(instance_id) => {
                let existing = self.static_member_id(instance_id);
                match existing {
                    None if joining => {
                        if self.members.contains_key(member_id) {
                            // The id belongs to a dynamic member: it rejoins as a static one.
                            let mut member = self.members[member_id].clone();
                            reset_for_rejoin(&mut member);
                            return Ok((member, false));
                        }
                        Ok((Member::new(member_id.to_owned()), true))
                    }
                    None => Err((
                        ErrorCode::UnknownMemberId,
                        format!("Instance id {instance_id} is unknown."),
                    )),
                    Some(existing_id) if joining => {
                        let Some(old) = self.members.get(&existing_id).cloned() else {
                            return Err(unknown_member(&existing_id, &self.group_id));
                        };
                        if existing_id == member_id {
                            let mut member = old;
                            reset_for_rejoin(&mut member);
                            return Ok((member, false));
                        }
                        if old.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH {
                            return Err((
                                ErrorCode::UnreleasedInstanceId,
                                format!(
                                    "Static member {member_id} with instance id {instance_id} cannot join the \
                                     group because the instance id is owned by {existing_id} member."
                                ),
                            ));
                        }
                        // The new instance takes over the old member's assignment and target.
                        let mut member = old;
                        member.member_id = member_id.to_owned();
                        member.member_epoch = 0;
                        member.previous_member_epoch = 0;
                        member.assignment_epochs.clear();
                        self.members.remove(&existing_id);
                        self.timers.remove(&existing_id);
                        if let Some(target) = self.target.remove(&existing_id) {
                            self.target.insert(member_id.to_owned(), target);
                        }
                        self.members.insert(member_id.to_owned(), member.clone());
                        Ok((member, true))
                    }
                    Some(existing_id) => {
                        if existing_id != member_id {
                            return Err(fenced_instance(member_id, instance_id, &existing_id));
                        }
                        let member = &self.members[&existing_id];
                        check_epoch(member, hb.member_epoch, owned)?;
                        Ok((member.clone(), false))
                    }
                }
            }
        }
    }

    fn join_or_heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &TopicSnapshot,
        config: &ConsumerGroupConfig,
        now_ms: i64,
    ) -> Result<HeartbeatResult, Rejection> {
        if self.members.len() >= config.max_size
            && (hb.member_id.is_empty() || !self.members.contains_key(&hb.member_id))
        {
            return Err((
                ErrorCode::GroupMaxSizeReached,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    config.max_size
                ),
            ));
        }
        let member_id = if hb.member_id.is_empty() {
            self.next_member_id(now_ms)
        } else {
            hb.member_id.clone()
        };
        let owned = hb.owned.as_deref().map(assignment_from_wire);
        let stored_before = self.members.get(&member_id).cloned();
        let (member, replaced) = self.resolve_member(&hb, &member_id, owned.as_ref())?;
        let epoch_before = (self.group_epoch, self.assignment_epoch);

        let mut updated = member.clone();
        if hb.instance_id.is_some() {
            updated.instance_id = hb.instance_id.clone();
        }
        if hb.rack_id.is_some() {
            updated.rack_id = hb.rack_id.clone();
        }
        if hb.rebalance_timeout_ms > 0 {
            updated.rebalance_timeout_ms = hb.rebalance_timeout_ms;
        }
        if hb.server_assignor.is_some() {
            updated.server_assignor = hb.server_assignor.clone();
        }
        if let Some(names) = &hb.subscribed_topic_names {
            updated.subscribed_topic_names = names.iter().cloned().collect::<BTreeSet<_>>();
        }
        if let Some(regex) = &hb.subscribed_topic_regex {
            updated.subscribed_topic_regex = (!regex.is_empty()).then(|| regex.clone());
        }
        updated.client_id = hb.client_id.clone();
        updated.client_host = hb.client_host.clone();

        let subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
            || updated.subscribed_topic_regex != member.subscribed_topic_regex;
        self.members.insert(member_id.clone(), updated.clone());

        let force_bump = self.group_epoch == 0 || subscription_changed;
        self.refresh_metadata(topics, force_bump);
        if self.group_epoch > self.assignment_epoch {
            self.update_target(topics);
        }

        let reconciled = {
            let owners = self.owners();
            let empty = Assignment::new();
            let subscribed = ConsumerGroup::subscribed_ids(&updated, topics);
            let input = ReconcileInput {
                target_epoch: self.assignment_epoch,
                target: self.target.get(&member_id).unwrap_or(&empty),
                subscribed_topic_ids: &subscribed,
                owned: owned.as_ref(),
                owned_by_other: |topic: Uuid, partition: i32| {
                    owners
                        .get(&(topic, partition))
                        .is_some_and(|owner| *owner != member_id.as_str())
                },
                subscription_changed,
            };
            reconcile(&updated, &input)
        };

        let session_deadline_ms = now_ms.saturating_add(i64::from(config.session_timeout_ms));
        let previous_rebalance = self
            .timers
            .get(&member_id)
            .and_then(|t| t.rebalance_deadline_ms);
        let rebalance_deadline_ms = if reconciled.state != MemberState::UnrevokedPartitions {
            None
        } else if reconciled != updated || previous_rebalance.is_none() {
            Some(now_ms.saturating_add(i64::from(reconciled.rebalance_timeout_ms.max(0))))
        } else {
            previous_rebalance
        };
        self.timers.insert(
            member_id.clone(),
            Timers {
                session_deadline_ms,
                rebalance_deadline_ms,
            },
        );

        let assignment_changed = reconciled.assigned != member.assigned;
        let full_request = hb.member_epoch == 0
            || (hb.rebalance_timeout_ms != -1
                && (hb.subscribed_topic_names.is_some() || hb.subscribed_topic_regex.is_some())
                && hb.owned.is_some());
        let changed = replaced
            || stored_before.as_ref() != Some(&reconciled)
            || epoch_before != (self.group_epoch, self.assignment_epoch);
        let result = HeartbeatResult {
            error: ErrorCode::None,
            error_message: None,
            member_id: Some(member_id.clone()),
            member_epoch: reconciled.member_epoch,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            assignment: (full_request || assignment_changed)
                .then(|| assignment_to_wire(&reconciled.assigned)),
            changed,
        };
        self.members.insert(member_id, reconciled);
        Ok(result)
    }
}

fn unknown_member(member_id: &str, group_id: &str) -> Rejection {
    (
        ErrorCode::UnknownMemberId,
        format!("Member {member_id} is not a member of group {group_id}."),
    )
}

fn fenced_instance(member_id: &str, instance_id: &str, existing: &str) -> Rejection {
    (
        ErrorCode::FencedInstanceId,
        format!("Static member {member_id} with instance id {instance_id} was fenced by member {existing}."),
    )
}

/// A member id for a v0 join: 16 bytes derived from the group, the time and a per-group
/// sequence, in Kafka's URL-safe base64 form (22 characters).
fn generate_member_id(group_id: &str, now_ms: i64, sequence: u64) -> String {
    let mut seed = 0xcbf2_9ce4_8422_2325u64;
    for byte in group_id.as_bytes() {
        seed = (seed ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut state =
        seed ^ (now_ms as u64).rotate_left(17) ^ sequence.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut bytes = [0u8; 16];
    for chunk in bytes.chunks_mut(8) {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_be_bytes());
    }
    kaas_cluster::ids::url_safe_base64(&bytes)
}
