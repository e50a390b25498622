//! JoinGroup (key 11): joins a classic group; answered when the join phase completes.

use std::rc::Rc;

use crate::groups::classic::{JoinRequest, JoinResult, Reply};
use crate::groups::clock::monotonic_ms;
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::join_group::{
    JoinGroupRequest, JoinGroupResponse, JoinGroupResponseMember,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers JoinGroup at `version` for a client `client_id` at `client_host`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: JoinGroupRequest,
    version: i16,
    client_id: String,
    client_host: String,
) -> JoinGroupResponse {
    let group_id = request.group_id.clone();
    if group_id.is_empty() {
        return response(
            JoinResult::error(ErrorCode::InvalidGroupId, &request.member_id),
            version,
        );
    }
    let join = JoinRequest {
        member_id: request.member_id,
        group_instance_id: request.group_instance_id,
        client_id,
        client_host,
        session_timeout_ms: request.session_timeout_ms,
        rebalance_timeout_ms: if version == 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        },
        protocol_type: request.protocol_type,
        protocols: request
            .protocols
            .into_iter()
            .map(|p| (p.name, p.metadata))
            .collect(),
        require_known_member_id: version >= 4,
    };
    let member_id = join.member_id.clone();
    let result = on_coordinator(shard, &group_id.clone(), move |shard| async move {
        join_on_coordinator(&shard, &group_id, join).await
    })
    .await
    .unwrap_or_else(|error| JoinResult::error(error, &member_id));
    response(result, version)
}

async fn join_on_coordinator(shard: &Shard, group_id: &str, join: JoinRequest) -> JoinResult {
    let member_id = join.member_id.clone();
    let group = match shard.groups.find_or_create(group_id).await {
        Ok(group) => group,
        Err(error) => return JoinResult::error(error, &member_id),
    };
    let reply = match group.state.borrow_mut().classic_for_join(group_id) {
        Some(classic) => classic.join(join, &shard.groups.config.classic, monotonic_ms()),
        None => Reply::Now(JoinResult::error(
            ErrorCode::InconsistentGroupProtocol,
            &member_id,
        )),
    };
    group.persist_if_changed().await;
    match reply {
        Reply::Now(result) => result,
        Reply::Later(pending) => {
            let result = pending.await;
            group.persist_if_changed().await;
            result.unwrap_or_else(|_| {
                JoinResult::error(ErrorCode::CoordinatorNotAvailable, &member_id)
            })
        }
    }
}

fn response(result: JoinResult, version: i16) -> JoinGroupResponse {
    let protocol_name = match result.protocol_name {
        None if version < 7 => Some(String::new()),
        name => name,
    };
    JoinGroupResponse {
        error_code: result.error.code(),
        generation_id: result.generation_id,
        protocol_type: result.protocol_type,
        protocol_name,
        leader: result.leader,
        member_id: result.member_id,
        members: result
            .members
            .into_iter()
            .map(|m| JoinGroupResponseMember {
                member_id: m.member_id,
                group_instance_id: m.group_instance_id,
                metadata: m.metadata,
            })
            .collect(),
        ..Default::default()
    }
}
