//! ListGroups (key 16): every group of every shard, filtered by state and type.

use std::rc::Rc;

use crate::broker::shard::Shard;
use crate::protocol::messages::list_groups::{ListGroupsRequest, ListGroupsResponse, ListedGroup};
use crate::protocol::ErrorCode;

/// Answers ListGroups.
pub async fn handle(shard: &Rc<Shard>, request: ListGroupsRequest) -> ListGroupsResponse {
    let per_shard = shard
        .router
        .broadcast(shard, |shard| async move {
            shard.groups.check_ready()?;
            Ok::<_, ErrorCode>(
                shard
                    .groups
                    .groups()
                    .iter()
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
