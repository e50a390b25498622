//! Heartbeat (key 12): keeps a classic member's session alive and tells it when to rejoin.

use std::rc::Rc;

use crate::groups::clock::monotonic_ms;
use crate::groups::group::GroupState;
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::heartbeat::{HeartbeatRequest, HeartbeatResponse};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers Heartbeat.
pub async fn handle(shard: &Rc<Shard>, request: HeartbeatRequest) -> HeartbeatResponse {
    let group_id = request.group_id.clone();
    let error = if group_id.is_empty() {
        ErrorCode::InvalidGroupId
    } else {
        on_coordinator(shard, &group_id.clone(), move |shard| async move {
            let group = match shard.groups.find(&request.group_id).await {
                Ok(Some(group)) => group,
                Ok(None) => return ErrorCode::UnknownMemberId,
                Err(error) => return error,
            };
            let error = match &mut *group.state.borrow_mut() {
                GroupState::Classic(classic) => classic.heartbeat(
                    &request.member_id,
                    request.group_instance_id.as_deref(),
                    request.generation_id,
                    monotonic_ms(),
                ),
                GroupState::Consumer(_) => ErrorCode::UnknownMemberId,
            };
            error
        })
        .await
        .unwrap_or_else(|error| error)
    };
    HeartbeatResponse {
        error_code: error.code(),
        ..Default::default()
    }
}
