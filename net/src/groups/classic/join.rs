//! JoinGroup and the join phase of a rebalance: adding, replacing and updating members,
//! starting a rebalance and completing it (new generation, protocol, leader).

use bytes::Bytes;
use futures_channel::oneshot;

use super::{
    ClassicGroup, ClassicGroupConfig, ClassicMember, ClassicState, JoinRequest, JoinResult,
    JoinedMember, Reply, SyncResult,
};
use crate::model::uuid_text::{format_uuid, random_uuid};
use crate::protocol::ErrorCode;

impl ClassicGroup {
    /// Handles a JoinGroup at `now_ms`.
    pub fn join(
        &mut self,
        request: JoinRequest,
        config: &ClassicGroupConfig,
        now_ms: i64,
    ) -> Reply<JoinResult> {
        let fail = |error| Reply::Now(JoinResult::error(error, &request.member_id));
        if self.state == ClassicState::Dead {
            return fail(ErrorCode::CoordinatorNotAvailable);
        }
        if request.session_timeout_ms < config.min_session_timeout_ms
            || request.session_timeout_ms > config.max_session_timeout_ms
        {
            return fail(ErrorCode::InvalidSessionTimeout);
        }
        if !self.supports_protocols(&request.protocol_type, &request.protocols) {
            return fail(ErrorCode::InconsistentGroupProtocol);
        }
        let known = !request.member_id.is_empty()
            && (self.members.contains_key(&request.member_id)
                || self.pending_members.contains_key(&request.member_id));
        let rejoining_static = request
            .group_instance_id
            .as_ref()
            .is_some_and(|instance| self.static_members.contains_key(instance));
        if !known
            && !rejoining_static
            && self.members.len() + self.pending_members.len() >= config.max_size
        {
            return fail(ErrorCode::GroupMaxSizeReached);
        }
        if request.member_id.is_empty() {
            self.join_new_member(request, config, now_ms)
        } else {
            self.join_known_member(request, config, now_ms)
        }
    }

    fn join_new_member(
        &mut self,
        request: JoinRequest,
        config: &ClassicGroupConfig,
        now_ms: i64,
    ) -> Reply<JoinResult> {
        let member_id = format!("{}-{}", request.client_id, random_id());
        if let Some(instance) = request.group_instance_id.clone() {
            if let Some(old_id) = self.static_members.get(&instance).cloned() {
                return self.replace_static_member(&old_id, member_id, request, config, now_ms);
            }
            return self.add_member(member_id, request, config, now_ms);
        }
        if request.require_known_member_id {
            self.pending_members.insert(
                member_id.clone(),
                now_ms + i64::from(request.session_timeout_ms),
            );
            return Reply::Now(JoinResult::error(ErrorCode::MemberIdRequired, &member_id));
        }
        self.add_member(member_id, request, config, now_ms)
    }

    fn join_known_member(
        &mut self,
        request: JoinRequest,
        config: &ClassicGroupConfig,
        now_ms: i64,
    ) -> Reply<JoinResult> {
        let member_id = request.member_id.clone();
        if self.pending_members.contains_key(&member_id) {
            return self.add_member(member_id, request, config, now_ms);
        }
        if let Some(error) = self.check_member(&member_id, request.group_instance_id.as_deref()) {
            return Reply::Now(JoinResult::error(error, &member_id));
        }
        match self.state {
            ClassicState::PreparingRebalance => {
                let reply = self.update_member(&member_id, request, now_ms);
                self.try_complete_join(now_ms);
                Reply::Later(reply)
            }
            ClassicState::CompletingRebalance | ClassicState::Stable => {
                let member = &self.members[&member_id];
                let unchanged = member.protocols == request.protocols;
                let is_leader = self.leader.as_deref() == Some(member_id.as_str());
                let stays = match self.state {
                    ClassicState::Stable => unchanged && !is_leader,
                    _ => unchanged,
                };
                if stays {
                    let members = if is_leader {
                        self.joined_members()
                    } else {
                        Vec::new()
                    };
                    return Reply::Now(self.join_result(&member_id, members));
                }
                let reply = self.update_member(&member_id, request, now_ms);
                self.prepare_rebalance(config, now_ms);
                Reply::Later(reply)
            }
            ClassicState::Empty | ClassicState::Dead => {
                Reply::Now(JoinResult::error(ErrorCode::UnknownMemberId, &member_id))
            }
        }
    }

    fn add_member(
        &mut self,
        member_id: String,
        request: JoinRequest,
        config: &ClassicGroupConfig,
        now_ms: i64,
    ) -> Reply<JoinResult> {
        let (reply, receiver) = oneshot::channel();
        self.pending_members.remove(&member_id);
        if let Some(instance) = &request.group_instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(request.protocol_type.clone());
        }
        let member = ClassicMember {
            member_id: member_id.clone(),
            group_instance_id: request.group_instance_id,
            client_id: request.client_id,
            client_host: request.client_host,
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            protocols: request.protocols,
            assignment: Bytes::new(),
            join_order: self.next_join_order,
            session_deadline: now_ms + i64::from(request.session_timeout_ms),
            awaiting_join: Some(reply),
            awaiting_sync: None,
        };
        self.next_join_order += 1;
        self.members.insert(member_id, member);
        if self.state == ClassicState::PreparingRebalance && self.initial_delay_remaining.is_some()
        {
            self.new_member_added = true;
        }
        self.maybe_prepare_rebalance(config, now_ms);
        self.try_complete_join(now_ms);
        Reply::Later(receiver)
    }

    /// A static member came back with a new member id: it takes the old member's place. A
    /// stable group does not rebalance for it unless the selected protocol would change.
    fn replace_static_member(
        &mut self,
        old_id: &str,
        new_id: String,
        request: JoinRequest,
        config: &ClassicGroupConfig,
        now_ms: i64,
    ) -> Reply<JoinResult> {
        let current_leader = self.leader.clone().unwrap_or_default();
        let Some(mut member) = self.members.remove(old_id) else {
            return Reply::Now(JoinResult::error(ErrorCode::UnknownMemberId, &new_id));
        };
        if let Some(reply) = member.awaiting_join.take() {
            let _ = reply.send(JoinResult::error(ErrorCode::FencedInstanceId, old_id));
        }
        if let Some(reply) = member.awaiting_sync.take() {
            let _ = reply.send(SyncResult::error(ErrorCode::FencedInstanceId));
        }
        member.member_id = new_id.clone();
        if let Some(instance) = &member.group_instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(old_id) {
            self.leader = Some(new_id.clone());
        }
        self.members.insert(new_id.clone(), member);
        self.dirty = true;
        let receiver = self.update_member(&new_id, request, now_ms);
        match self.state {
            ClassicState::Stable
                if self.protocol_name.is_some()
                    && self.select_protocol().as_deref() == self.protocol_name.as_deref() =>
            {
                let member = self.members.get_mut(&new_id).expect("just inserted");
                member.awaiting_join = None;
                let mut result = self.join_result(&new_id, Vec::new());
                result.leader = current_leader;
                Reply::Now(result)
            }
            ClassicState::PreparingRebalance => {
                self.try_complete_join(now_ms);
                Reply::Later(receiver)
            }
            _ => {
                self.prepare_rebalance(config, now_ms);
                Reply::Later(receiver)
            }
        }
    }

    /// Records a member's (re)join: its protocols, timeouts and the reply to send when the
    /// join phase completes.
    fn update_member(
        &mut self,
        member_id: &str,
        request: JoinRequest,
        now_ms: i64,
    ) -> oneshot::Receiver<JoinResult> {
        let (reply, receiver) = oneshot::channel();
        let member = self.members.get_mut(member_id).expect("caller checked");
        member.protocols = request.protocols;
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.client_id = request.client_id;
        member.client_host = request.client_host;
        member.session_deadline = now_ms + i64::from(member.session_timeout_ms);
        if let Some(previous) = member.awaiting_join.replace(reply) {
            let _ = previous.send(JoinResult::error(ErrorCode::RebalanceInProgress, member_id));
        }
        receiver
    }

    pub(super) fn maybe_prepare_rebalance(&mut self, config: &ClassicGroupConfig, now_ms: i64) {
        if matches!(
            self.state,
            ClassicState::Stable | ClassicState::CompletingRebalance | ClassicState::Empty
        ) {
            self.prepare_rebalance(config, now_ms);
        }
    }

    /// Starts a join phase: members waiting for a sync are told to rejoin, and a new group
    /// first waits `initial_rebalance_delay_ms` (extended while members keep arriving).
    /// Otherwise the phase completes at once if no member is left to rejoin (a lone member
    /// that rejoined with a new subscription, say), as Kafka's `prepareRebalance` does; only
    /// members still to rejoin make it wait for the rebalance timeout.
    pub(super) fn prepare_rebalance(&mut self, config: &ClassicGroupConfig, now_ms: i64) {
        if self.state == ClassicState::CompletingRebalance {
            for member in self.members.values_mut() {
                member.assignment = Bytes::new();
                if let Some(reply) = member.awaiting_sync.take() {
                    let _ = reply.send(SyncResult::error(ErrorCode::RebalanceInProgress));
                }
            }
        }
        let rebalance_timeout = i64::from(self.max_rebalance_timeout_ms());
        let delay = i64::from(config.initial_rebalance_delay_ms);
        if self.state == ClassicState::Empty && delay > 0 {
            self.join_deadline = now_ms + delay;
            self.initial_delay_remaining = Some((rebalance_timeout - delay).max(0));
            self.new_member_added = false;
        } else {
            self.join_deadline = now_ms + rebalance_timeout;
            self.initial_delay_remaining = None;
        }
        self.state = ClassicState::PreparingRebalance;
        self.try_complete_join(now_ms);
    }

    /// Completes the join phase if every member has rejoined (never during the initial
    /// delay of a new group).
    pub(super) fn try_complete_join(&mut self, now_ms: i64) {
        if self.state != ClassicState::PreparingRebalance || self.initial_delay_remaining.is_some()
        {
            return;
        }
        let all_joined = self.members.values().all(|m| m.awaiting_join.is_some());
        if all_joined && self.pending_members.is_empty() {
            self.complete_join(now_ms);
        }
    }

    /// The join deadline passed: extend a new group's delay while members keep arriving,
    /// otherwise complete with the members that rejoined.
    pub(super) fn join_deadline_passed(&mut self, config: &ClassicGroupConfig, now_ms: i64) {
        if let Some(remaining) = self.initial_delay_remaining {
            if self.new_member_added && remaining > 0 {
                let delay = i64::from(config.initial_rebalance_delay_ms).min(remaining);
                self.join_deadline = now_ms + delay;
                self.initial_delay_remaining = Some(remaining - delay);
                self.new_member_added = false;
                return;
            }
        }
        self.complete_join(now_ms);
    }

    /// Ends the join phase: dynamic members that did not rejoin are dropped, the generation
    /// advances, a protocol and a leader are chosen, and every waiting member is answered.
    pub(super) fn complete_join(&mut self, now_ms: i64) {
        self.initial_delay_remaining = None;
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && !m.is_static())
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in gone {
            self.members.remove(&member_id);
        }
        self.generation_id += 1;
        self.dirty = true;
        if self.members.is_empty() {
            self.state = ClassicState::Empty;
            self.empty_since_ms = None;
            self.protocol_name = None;
            self.leader = None;
            self.static_members.clear();
            return;
        }
        self.protocol_name = self.select_protocol();
        let leader_present = self
            .leader
            .as_ref()
            .is_some_and(|leader| self.members.contains_key(leader));
        if !leader_present {
            self.leader = self
                .members
                .values()
                .filter(|m| m.awaiting_join.is_some())
                .min_by_key(|m| m.join_order)
                .or_else(|| self.members.values().min_by_key(|m| m.join_order))
                .map(|m| m.member_id.clone());
        }
        self.state = ClassicState::CompletingRebalance;
        let all_members = self.joined_members();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for member_id in ids {
            let is_leader = self.leader.as_deref() == Some(member_id.as_str());
            let members = if is_leader {
                all_members.clone()
            } else {
                Vec::new()
            };
            let result = self.join_result(&member_id, members);
            let member = self.members.get_mut(&member_id).expect("listed");
            member.session_deadline = now_ms + i64::from(member.session_timeout_ms);
            if let Some(reply) = member.awaiting_join.take() {
                let _ = reply.send(result);
            }
        }
    }

    fn join_result(&self, member_id: &str, members: Vec<JoinedMember>) -> JoinResult {
        JoinResult {
            error: ErrorCode::None,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members,
        }
    }

    fn joined_members(&self) -> Vec<JoinedMember> {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let mut members: Vec<&ClassicMember> = self.members.values().collect();
        members.sort_by_key(|m| m.join_order);
        members
            .into_iter()
            .map(|m| JoinedMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata(&protocol),
            })
            .collect()
    }

    /// The protocol every member supports that most members prefer.
    pub(super) fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols()?;
        let mut votes: Vec<(String, usize)> = candidates.iter().map(|c| (c.clone(), 0)).collect();
        for member in self.members.values() {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(n, _)| candidates.contains(n))
            {
                if let Some(vote) = votes.iter_mut().find(|(c, _)| c == name) {
                    vote.1 += 1;
                }
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, count)| *count)
            .map(|(name, _)| name)
    }

    /// Protocols every member supports (in the first member's order).
    fn candidate_protocols(&self) -> Option<Vec<String>> {
        let mut members = self.members.values();
        let first = members.next()?;
        let mut candidates: Vec<String> = first.protocols.iter().map(|(n, _)| n.clone()).collect();
        for member in members {
            candidates.retain(|c| member.protocols.iter().any(|(n, _)| n == c));
        }
        Some(candidates)
    }

    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        match self.candidate_protocols() {
            Some(candidates) => protocols.iter().any(|(name, _)| candidates.contains(name)),
            None => true,
        }
    }

    fn max_rebalance_timeout_ms(&self) -> i32 {
        self.members
            .values()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }
}

/// A random id suffix in UUID form, as Kafka's generated member ids have.
pub fn random_id() -> String {
    let hex = format_uuid(&random_uuid());
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
