//! LeaveGroup (key 13): members leave a classic group (v3+ several at once, by member or
//! static instance id).

use std::rc::Rc;

use crate::groups::classic::LeavingMember;
use crate::groups::clock::monotonic_ms;
use crate::groups::group::GroupState;
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::leave_group::{
    LeaveGroupRequest, LeaveGroupResponse, MemberResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers LeaveGroup at `version`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: LeaveGroupRequest,
    version: i16,
) -> LeaveGroupResponse {
    let leaving: Vec<LeavingMember> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: request.member_id.clone(),
            group_instance_id: None,
        }]
    };
    let group_id = request.group_id.clone();
    let (error, errors) = if group_id.is_empty() {
        (ErrorCode::InvalidGroupId, Vec::new())
    } else {
        let members = leaving.clone();
        on_coordinator(shard, &group_id.clone(), move |shard| async move {
            leave_on_coordinator(&shard, &group_id, &members).await
        })
        .await
        .unwrap_or_else(|error| (error, Vec::new()))
    };
    if version < 3 {
        let error = match (error, errors.first()) {
            (ErrorCode::None, Some(member_error)) => *member_error,
            (error, _) => error,
        };
        return LeaveGroupResponse {
            error_code: error.code(),
            ..Default::default()
        };
    }
    let members = if error == ErrorCode::None {
        leaving
            .into_iter()
            .zip(errors)
            .map(|(member, error)| MemberResponse {
                member_id: member.member_id,
                group_instance_id: member.group_instance_id,
                error_code: error.code(),
            })
            .collect()
    } else {
        Vec::new()
    };
    LeaveGroupResponse {
        error_code: error.code(),
        members,
        ..Default::default()
    }
}

async fn leave_on_coordinator(
    shard: &Shard,
    group_id: &str,
    members: &[LeavingMember],
) -> (ErrorCode, Vec<ErrorCode>) {
    let group = match shard.groups.find(group_id).await {
        Ok(Some(group)) => group,
        Ok(None) => return (ErrorCode::UnknownMemberId, Vec::new()),
        Err(error) => return (error, Vec::new()),
    };
    let result = match &mut *group.state.borrow_mut() {
        GroupState::Classic(classic) => {
            classic.leave(members, &shard.groups.config.classic, monotonic_ms())
        }
        GroupState::Consumer(_) => (ErrorCode::UnknownMemberId, Vec::new()),
    };
    group.persist_if_changed().await;
    result
}
