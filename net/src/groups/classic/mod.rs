//! Classic consumer groups (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as a state machine.
//!
//! The group holds its members and drives the rebalance protocol the clients run:
//! `Empty → PreparingRebalance → CompletingRebalance → Stable`, back to `PreparingRebalance`
//! whenever membership or a member's protocols change. A JoinGroup is answered when the join
//! phase completes (every member rejoined, or the rebalance timeout passed) and a SyncGroup
//! when the leader's assignment arrives, so both can return a [`Reply::Later`].
//!
//! Time comes in as `now_ms` (a monotonic clock in milliseconds) and the caller runs
//! [`ClassicGroup::tick`] for session, join and pending-member deadlines; no I/O happens
//! here. After each call the caller checks [`ClassicGroup::take_dirty`] and persists
//! [`ClassicGroup::encode`] through the group store.

mod join;
mod membership;
mod state_codec;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;
use futures_channel::oneshot;

use crate::protocol::ErrorCode;

pub use membership::LeavingMember;
pub use state_codec::DecodeError;

/// Rebalance settings of the broker (Kafka's `group.*` settings).
#[derive(Debug, Clone)]
pub struct ClassicGroupConfig {
    /// `group.min.session.timeout.ms`.
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long a new group waits for more members.
    pub initial_rebalance_delay_ms: i32,
    /// `group.max.size`.
    pub max_size: usize,
}

impl Default for ClassicGroupConfig {
    fn default() -> Self {
        ClassicGroupConfig {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: usize::MAX,
        }
    }
}

/// Where a classic group is in the rebalance protocol (Kafka's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicState {
    /// No members (offsets only, or everyone left).
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Waiting for the leader's assignment.
    CompletingRebalance,
    /// Every member has its assignment.
    Stable,
    /// Deleted.
    Dead,
}

impl ClassicState {
    /// Kafka's name of the state.
    pub fn as_str(self) -> &'static str {
        match self {
            ClassicState::Empty => "Empty",
            ClassicState::PreparingRebalance => "PreparingRebalance",
            ClassicState::CompletingRebalance => "CompletingRebalance",
            ClassicState::Stable => "Stable",
            ClassicState::Dead => "Dead",
        }
    }
}

/// An answer now, or one that arrives when the rebalance moves on.
#[derive(Debug)]
pub enum Reply<T> {
    /// The answer.
    Now(T),
    /// Completed by a later call (or dropped if the group is dropped).
    Later(oneshot::Receiver<T>),
}

/// A JoinGroup as the group sees it.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// Member id, empty on the first join.
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// Client id (prefix of generated member ids).
    pub client_id: String,
    /// Client address.
    pub client_host: String,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Rebalance timeout (the session timeout for JoinGroup v0).
    pub rebalance_timeout_ms: i32,
    /// Protocol type, "consumer" for consumers.
    pub protocol_type: String,
    /// Supported protocols with their metadata, in preference order.
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new dynamic member must rejoin with the id it is given.
    pub require_known_member_id: bool,
}

/// A member as listed to the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// Member id.
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// Metadata for the selected protocol.
    pub metadata: Bytes,
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResult {
    /// Error code.
    pub error: ErrorCode,
    /// Generation the member joined.
    pub generation_id: i32,
    /// Protocol type.
    pub protocol_type: Option<String>,
    /// Selected protocol.
    pub protocol_name: Option<String>,
    /// Leader member id.
    pub leader: String,
    /// The member's id.
    pub member_id: String,
    /// Every member, for the leader only.
    pub members: Vec<JoinedMember>,
}

impl JoinResult {
    /// A failed join.
    pub fn error(error: ErrorCode, member_id: &str) -> Self {
        JoinResult {
            error,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
        }
    }
}

/// A SyncGroup as the group sees it.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    /// Member id.
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// Generation the member is in.
    pub generation_id: i32,
    /// Protocol type, when the client sends it (v5+).
    pub protocol_type: Option<String>,
    /// Protocol name, when the client sends it (v5+).
    pub protocol_name: Option<String>,
    /// The leader's assignment per member (empty from followers).
    pub assignments: Vec<(String, Bytes)>,
}

/// The answer to a SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResult {
    /// Error code.
    pub error: ErrorCode,
    /// Protocol type.
    pub protocol_type: Option<String>,
    /// Selected protocol.
    pub protocol_name: Option<String>,
    /// The member's assignment.
    pub assignment: Bytes,
}

impl SyncResult {
    /// A failed sync.
    pub fn error(error: ErrorCode) -> Self {
        SyncResult {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// One member of a classic group.
#[derive(Debug)]
pub struct ClassicMember {
    /// Member id.
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client address.
    pub client_host: String,
    /// Session timeout.
    pub session_timeout_ms: i32,
    /// Rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Supported protocols and their metadata.
    pub protocols: Vec<(String, Bytes)>,
    /// Assignment of the current generation.
    pub assignment: Bytes,
    /// Order of joining (the first member becomes leader).
    join_order: u64,
    session_deadline: i64,
    awaiting_join: Option<oneshot::Sender<JoinResult>>,
    awaiting_sync: Option<oneshot::Sender<SyncResult>>,
}

impl ClassicMember {
    /// Metadata for `protocol`, empty if the member does not support it.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, metadata)| metadata.clone())
            .unwrap_or_default()
    }

    fn is_static(&self) -> bool {
        self.group_instance_id.is_some()
    }
}

/// A classic group.
#[derive(Debug)]
pub struct ClassicGroup {
    group_id: String,
    state: ClassicState,
    generation_id: i32,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, ClassicMember>,
    static_members: HashMap<String, String>,
    pending_members: HashMap<String, i64>,
    join_deadline: i64,
    /// While a new group waits for more members: what is left of the rebalance timeout.
    initial_delay_remaining: Option<i64>,
    new_member_added: bool,
    next_join_order: u64,
    dirty: bool,
    /// Wall-clock ms when the group last became Empty (Kafka's `currentStateTimestamp` of an
    /// Empty group): offsets of an Empty group expire that long after it. `None` until the
    /// coordinator stamps it ([`stamp_empty_since`](Self::stamp_empty_since)), and while the
    /// group has members.
    empty_since_ms: Option<i64>,
}

impl ClassicGroup {
    /// A new empty group.
    pub fn new(group_id: &str) -> Self {
        ClassicGroup {
            group_id: group_id.to_string(),
            state: ClassicState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: HashMap::new(),
            pending_members: HashMap::new(),
            join_deadline: 0,
            initial_delay_remaining: None,
            new_member_added: false,
            next_join_order: 0,
            dirty: false,
            empty_since_ms: None,
        }
    }

    /// The group id.
    pub fn group_id(&self) -> &str {
        &self.group_id
    }

    /// Current state.
    pub fn state(&self) -> ClassicState {
        self.state
    }

    /// Current generation.
    pub fn generation_id(&self) -> i32 {
        self.generation_id
    }

    /// Protocol type ("consumer" for consumers), once a member joined.
    pub fn protocol_type(&self) -> Option<&str> {
        self.protocol_type.as_deref()
    }

    /// Selected protocol of the current generation.
    pub fn protocol_name(&self) -> Option<&str> {
        self.protocol_name.as_deref()
    }

    /// Leader member id.
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// Members by id.
    pub fn members(&self) -> impl Iterator<Item = &ClassicMember> {
        self.members.values()
    }

    /// Whether the group has no members (pending ones included).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.pending_members.is_empty()
    }

    /// When the group last became Empty (wall-clock ms), if it is Empty and was stamped.
    pub fn empty_since_ms(&self) -> Option<i64> {
        match self.state {
            ClassicState::Empty => self.empty_since_ms,
            _ => None,
        }
    }

    /// Stamps an Empty group that is not stamped yet with `wall_ms` as the time it became
    /// Empty; clears the stamp of a group that is not Empty. The coordinator calls it before
    /// persisting a change, so the time a group empties is written with that change.
    pub fn stamp_empty_since(&mut self, wall_ms: i64) {
        if self.state == ClassicState::Empty {
            self.empty_since_ms.get_or_insert(wall_ms);
        } else {
            self.empty_since_ms = None;
        }
    }

    /// Whether persistent state changed since the last call (and clears the flag).
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Marks the group deleted: every waiting member is told to find the coordinator again.
    pub fn mark_dead(&mut self) {
        for member in self.members.values_mut() {
            if let Some(reply) = member.awaiting_join.take() {
                let _ = reply.send(JoinResult::error(
                    ErrorCode::CoordinatorNotAvailable,
                    &member.member_id,
                ));
            }
            if let Some(reply) = member.awaiting_sync.take() {
                let _ = reply.send(SyncResult::error(ErrorCode::CoordinatorNotAvailable));
            }
        }
        self.state = ClassicState::Dead;
    }

    /// The earliest time [`tick`](Self::tick) has work to do.
    pub fn next_deadline(&self) -> Option<i64> {
        let sessions = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.awaiting_sync.is_none())
            .map(|m| m.session_deadline);
        let pending = self.pending_members.values().copied();
        let join = (self.state == ClassicState::PreparingRebalance).then_some(self.join_deadline);
        sessions.chain(pending).chain(join).min()
    }

    /// The error for a request naming `member_id` and `instance_id`, if the member is not
    /// (or no longer) this one.
    fn check_member(&self, member_id: &str, instance_id: Option<&str>) -> Option<ErrorCode> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                Some(current) if current != member_id => return Some(ErrorCode::FencedInstanceId),
                Some(_) => {}
                None => return Some(ErrorCode::UnknownMemberId),
            }
        }
        if !self.members.contains_key(member_id) {
            return Some(ErrorCode::UnknownMemberId);
        }
        None
    }

    /// Topics the members subscribe to, from the consumer protocol metadata of the selected
    /// protocol; `None` if the group is not a consumer group or a member's metadata cannot be
    /// read (then every topic counts as subscribed).
    pub fn subscribed_topics(&self) -> Option<Vec<String>> {
        if self.members.is_empty() || self.protocol_type.as_deref() != Some("consumer") {
            return Some(Vec::new());
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = Vec::new();
        for member in self.members.values() {
            topics.extend(crate::groups::consumer_protocol::subscribed_topics(
                &member.metadata(protocol),
            )?);
        }
        topics.sort();
        topics.dedup();
        Some(topics)
    }

    /// Validates an OffsetCommit from a member (or from a tool, with generation -1 and no
    /// member id) as Kafka does.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> ErrorCode {
        match self.state {
            ClassicState::Dead => return ErrorCode::CoordinatorNotAvailable,
            ClassicState::Empty if generation_id < 0 => return ErrorCode::None,
            _ => {}
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            if let Some(error) = self.check_member(member_id, instance_id) {
                return error;
            }
            if generation_id != self.generation_id {
                return ErrorCode::IllegalGeneration;
            }
        } else {
            return ErrorCode::UnknownMemberId;
        }
        if self.state == ClassicState::CompletingRebalance {
            return ErrorCode::RebalanceInProgress;
        }
        ErrorCode::None
    }

    /// Validates a TxnOffsetCommit as Kafka's `ClassicGroup.validateOffsetCommit` does for a
    /// transactional commit: member, instance and generation are checked only when the
    /// request names one of them (TxnOffsetCommit before v3 names none), so an anonymous
    /// transactional commit is accepted even while the group has members, and the group's
    /// state (a rebalance completing) does not matter.
    pub fn validate_txn_offset_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
    ) -> ErrorCode {
        match self.state {
            ClassicState::Dead => return ErrorCode::CoordinatorNotAvailable,
            ClassicState::Empty if generation_id < 0 => return ErrorCode::None,
            _ => {}
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            if let Some(error) = self.check_member(member_id, instance_id) {
                return error;
            }
            if generation_id != self.generation_id {
                return ErrorCode::IllegalGeneration;
            }
        }
        ErrorCode::None
    }
}
