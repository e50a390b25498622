//! DeleteGroups (key 42): removes empty groups and their committed offsets.

use std::rc::Rc;

use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::delete_groups::{
    DeletableGroupResult, DeleteGroupsRequest, DeleteGroupsResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers DeleteGroups.
pub async fn handle(shard: &Rc<Shard>, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut results = Vec::with_capacity(request.groups_names.len());
    for group_id in request.groups_names {
        let error = if group_id.is_empty() {
            ErrorCode::InvalidGroupId
        } else {
            let id = group_id.clone();
            on_coordinator(shard, &group_id.clone(), move |shard| async move {
                shard.groups.delete(&id).await
            })
            .await
            .unwrap_or_else(|error| error)
        };
        results.push(DeletableGroupResult {
            group_id,
            error_code: error.code(),
        });
    }
    DeleteGroupsResponse {
        results,
        ..Default::default()
    }
}
