//! ListGroups (key 16): every group of every shard, filtered by state and type.
//!
//! Kafka's ListGroups lists the groups the broker coordinates. Standalone that is every group
//! (all are loaded at start-up). In cluster mode groups load on demand, so each shard first
//! loads the stored groups the view places on this broker and the shard coordinates
//! (`GroupCoordinator::load_stored_groups`): a group that moved here is listed before any
//! member's request reached it. Loaded groups the view gives another broker (a view that
//! moved while the takeover driver has not dropped them yet) are left out.

use std::rc::Rc;

use crate::handlers::find_coordinator::group_broker;
use crate::protocol::messages::list_groups::{ListGroupsRequest, ListGroupsResponse, ListedGroup};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers ListGroups.
pub async fn handle(shard: &Rc<Shard>, request: ListGroupsRequest) -> ListGroupsResponse {
    let per_shard = shard
        .router
        .broadcast(shard, |shard| async move {
            let placed_here = |group: &str| {
                !shard.view.load().is_cluster()
                    || group_broker(&shard, group) == Some(shard.config.node_id)
            };
            shard.groups.load_stored_groups(placed_here).await?;
            Ok::<_, ErrorCode>(
                shard
                    .groups
                    .groups()
                    .iter()
                    .filter(|group| placed_here(&group.id))
                    .map(|group| group.listing())
                    .collect::<Vec<ListedGroup>>(),
            )
        })
        .await;
    let mut groups = Vec::new();
    for listed in per_shard {
        match listed {
            Some(Ok(listed)) => groups.extend(listed),
            Some(Err(error)) => {
                return ListGroupsResponse {
                    error_code: error.code(),
                    ..Default::default()
                }
            }
            None => {
                return ListGroupsResponse {
                    error_code: ErrorCode::CoordinatorNotAvailable.code(),
                    ..Default::default()
                }
            }
        }
    }
    let wanted = |filter: &[String], value: &str| {
        filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(value))
    };
    groups.retain(|g| {
        wanted(&request.states_filter, &g.group_state)
            && wanted(&request.types_filter, &g.group_type)
    });
    groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
    ListGroupsResponse {
        groups,
        ..Default::default()
    }
}
