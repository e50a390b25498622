//! SyncGroup (key 14): the leader hands out the assignment; every member receives its own.

use std::rc::Rc;

use crate::groups::classic::{Reply, SyncRequest, SyncResult};
use crate::groups::clock::monotonic_ms;
use crate::groups::group::GroupState;
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupResponse};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers SyncGroup.
pub async fn handle(shard: &Rc<Shard>, request: SyncGroupRequest) -> SyncGroupResponse {
    let group_id = request.group_id.clone();
    let sync = SyncRequest {
        member_id: request.member_id,
        group_instance_id: request.group_instance_id,
        generation_id: request.generation_id,
        protocol_type: request.protocol_type,
        protocol_name: request.protocol_name,
        assignments: request
            .assignments
            .into_iter()
            .map(|a| (a.member_id, a.assignment))
            .collect(),
    };
    let result = if group_id.is_empty() {
        SyncResult::error(ErrorCode::InvalidGroupId)
    } else {
        on_coordinator(shard, &group_id.clone(), move |shard| async move {
            sync_on_coordinator(&shard, &group_id, sync).await
        })
        .await
        .unwrap_or_else(SyncResult::error)
    };
    SyncGroupResponse {
        error_code: result.error.code(),
        protocol_type: result.protocol_type,
        protocol_name: result.protocol_name,
        assignment: result.assignment,
        ..Default::default()
    }
}

async fn sync_on_coordinator(shard: &Shard, group_id: &str, sync: SyncRequest) -> SyncResult {
    let group = match shard.groups.find(group_id).await {
        Ok(Some(group)) => group,
        Ok(None) => return SyncResult::error(ErrorCode::UnknownMemberId),
        Err(error) => return SyncResult::error(error),
    };
    let reply = match &mut *group.state.borrow_mut() {
        GroupState::Classic(classic) => classic.sync(sync, monotonic_ms()),
        GroupState::Consumer(_) => Reply::Now(SyncResult::error(ErrorCode::UnknownMemberId)),
    };
    group.persist_if_changed().await;
    match reply {
        Reply::Now(result) => result,
        Reply::Later(pending) => pending
            .await
            .unwrap_or_else(|_| SyncResult::error(ErrorCode::CoordinatorNotAvailable)),
    }
}
