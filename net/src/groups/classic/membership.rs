//! SyncGroup, Heartbeat, LeaveGroup and the deadlines (sessions, join phase, pending
//! members) of a classic group.

use bytes::Bytes;
use futures_channel::oneshot;

use super::{
    ClassicGroup, ClassicGroupConfig, ClassicState, JoinResult, Reply, SyncRequest, SyncResult,
};
use crate::protocol::ErrorCode;

/// A member leaving: by member id, by static instance id, or both.
#[derive(Debug, Clone)]
pub struct LeavingMember {
    /// Member id (may be empty when the instance id names the member).
    pub member_id: String,
    /// Static membership id.
    pub group_instance_id: Option<String>,
}

impl ClassicGroup {
    /// Handles a SyncGroup at `now_ms`.
    pub fn sync(&mut self, request: SyncRequest, now_ms: i64) -> Reply<SyncResult> {
        let fail = |error| Reply::Now(SyncResult::error(error));
        if self.state == ClassicState::Dead {
            return fail(ErrorCode::CoordinatorNotAvailable);
        }
        if let Some(error) =
            self.check_member(&request.member_id, request.group_instance_id.as_deref())
        {
            return fail(error);
        }
        if request.generation_id != self.generation_id {
            return fail(ErrorCode::IllegalGeneration);
        }
        let type_mismatch = request
            .protocol_type
            .as_ref()
            .is_some_and(|t| Some(t) != self.protocol_type.as_ref());
        let name_mismatch = request
            .protocol_name
            .as_ref()
            .is_some_and(|n| Some(n) != self.protocol_name.as_ref());
        if type_mismatch || name_mismatch {
            return fail(ErrorCode::InconsistentGroupProtocol);
        }
        match self.state {
            ClassicState::Empty | ClassicState::Dead => fail(ErrorCode::UnknownMemberId),
            ClassicState::PreparingRebalance => fail(ErrorCode::RebalanceInProgress),
            ClassicState::Stable => {
                let member = self.members.get_mut(&request.member_id).expect("checked");
                member.session_deadline = now_ms + i64::from(member.session_timeout_ms);
                let assignment = member.assignment.clone();
                Reply::Now(self.sync_result(assignment))
            }
            ClassicState::CompletingRebalance => {
                let (reply, receiver) = oneshot::channel();
                let member = self.members.get_mut(&request.member_id).expect("checked");
                member.session_deadline = now_ms + i64::from(member.session_timeout_ms);
                if let Some(previous) = member.awaiting_sync.replace(reply) {
                    let _ = previous.send(SyncResult::error(ErrorCode::RebalanceInProgress));
                }
                if self.leader.as_deref() == Some(request.member_id.as_str()) {
                    self.complete_sync(request.assignments);
                }
                Reply::Later(receiver)
            }
        }
    }

    /// The leader's assignment arrived: every member gets its part and the group is stable.
    fn complete_sync(&mut self, assignments: Vec<(String, Bytes)>) {
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
        }
        for (member_id, assignment) in assignments {
            if let Some(member) = self.members.get_mut(&member_id) {
                member.assignment = assignment;
            }
        }
        self.state = ClassicState::Stable;
        self.dirty = true;
        let protocol_type = self.protocol_type.clone();
        let protocol_name = self.protocol_name.clone();
        for member in self.members.values_mut() {
            if let Some(reply) = member.awaiting_sync.take() {
                let _ = reply.send(SyncResult {
                    error: ErrorCode::None,
                    protocol_type: protocol_type.clone(),
                    protocol_name: protocol_name.clone(),
                    assignment: member.assignment.clone(),
                });
            }
        }
    }

    fn sync_result(&self, assignment: Bytes) -> SyncResult {
        SyncResult {
            error: ErrorCode::None,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment,
        }
    }

    /// Handles a Heartbeat at `now_ms`.
    pub fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation_id: i32,
        now_ms: i64,
    ) -> ErrorCode {
        if self.state == ClassicState::Dead {
            return ErrorCode::CoordinatorNotAvailable;
        }
        if let Some(error) = self.check_member(member_id, instance_id) {
            return error;
        }
        if generation_id != self.generation_id {
            return ErrorCode::IllegalGeneration;
        }
        let member = self.members.get_mut(member_id).expect("checked");
        member.session_deadline = now_ms + i64::from(member.session_timeout_ms);
        match self.state {
            ClassicState::Empty | ClassicState::Dead => ErrorCode::UnknownMemberId,
            ClassicState::PreparingRebalance => ErrorCode::RebalanceInProgress,
            ClassicState::CompletingRebalance | ClassicState::Stable => ErrorCode::None,
        }
    }

    /// Handles a LeaveGroup: the group error and one error per leaving member.
    pub fn leave(
        &mut self,
        leaving: &[LeavingMember],
        config: &ClassicGroupConfig,
        now_ms: i64,
    ) -> (ErrorCode, Vec<ErrorCode>) {
        if self.state == ClassicState::Dead {
            return (ErrorCode::CoordinatorNotAvailable, Vec::new());
        }
        let mut errors = Vec::with_capacity(leaving.len());
        for member in leaving {
            let member_id = match &member.group_instance_id {
                Some(instance) => match self.static_members.get(instance) {
                    None => {
                        errors.push(ErrorCode::UnknownMemberId);
                        continue;
                    }
                    Some(current)
                        if !member.member_id.is_empty() && *current != member.member_id =>
                    {
                        errors.push(ErrorCode::FencedInstanceId);
                        continue;
                    }
                    Some(current) => current.clone(),
                },
                None => member.member_id.clone(),
            };
            if self.pending_members.remove(&member_id).is_some() {
                errors.push(ErrorCode::None);
                self.try_complete_join(now_ms);
                continue;
            }
            if !self.members.contains_key(&member_id) {
                errors.push(ErrorCode::UnknownMemberId);
                continue;
            }
            self.remove_member(&member_id, config, now_ms);
            errors.push(ErrorCode::None);
        }
        (ErrorCode::None, errors)
    }

    /// Removes a member (left or timed out) and rebalances the rest.
    fn remove_member(&mut self, member_id: &str, config: &ClassicGroupConfig, now_ms: i64) {
        let Some(mut member) = self.members.remove(member_id) else {
            return;
        };
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if let Some(reply) = member.awaiting_join.take() {
            let _ = reply.send(JoinResult::error(ErrorCode::UnknownMemberId, member_id));
        }
        if let Some(reply) = member.awaiting_sync.take() {
            let _ = reply.send(SyncResult::error(ErrorCode::UnknownMemberId));
        }
        match self.state {
            ClassicState::Stable | ClassicState::CompletingRebalance => {
                self.prepare_rebalance(config, now_ms);
            }
            ClassicState::PreparingRebalance => self.try_complete_join(now_ms),
            ClassicState::Empty | ClassicState::Dead => {}
        }
    }

    /// Runs every deadline that passed by `now_ms`: pending members that never rejoined,
    /// members whose session expired, and the end of a join phase.
    pub fn tick(&mut self, config: &ClassicGroupConfig, now_ms: i64) {
        if self.state == ClassicState::Dead {
            return;
        }
        let before = self.pending_members.len();
        self.pending_members
            .retain(|_, deadline| *deadline > now_ms);
        if self.pending_members.len() != before {
            self.try_complete_join(now_ms);
        }
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.awaiting_sync.is_none())
            .filter(|m| m.session_deadline <= now_ms)
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in expired {
            tracing::info!(group = %self.group_id, member = %member_id, "session expired");
            self.remove_member(&member_id, config, now_ms);
        }
        if self.state == ClassicState::PreparingRebalance && self.join_deadline <= now_ms {
            self.join_deadline_passed(config, now_ms);
        }
    }
}
