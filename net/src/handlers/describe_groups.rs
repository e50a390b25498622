//! DescribeGroups (key 15): state, protocol and members of classic groups.

use std::rc::Rc;

use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::describe_groups::{
    DescribeGroupsRequest, DescribeGroupsResponse, DescribedGroup,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers DescribeGroups at `version`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: DescribeGroupsRequest,
    version: i16,
) -> DescribeGroupsResponse {
    let mut groups = Vec::with_capacity(request.groups.len());
    for group_id in request.groups {
        let id = group_id.clone();
        let described = on_coordinator(shard, &group_id.clone(), move |shard| async move {
            match shard.groups.find(&id).await {
                Ok(Some(group)) => group.describe_classic(),
                Ok(None) => None,
                Err(error) => Some(DescribedGroup {
                    error_code: error.code(),
                    group_id: id,
                    ..Default::default()
                }),
            }
        })
        .await;
        groups.push(match described {
            Ok(Some(group)) => group,
            Ok(None) => missing(group_id, version),
            Err(error) => DescribedGroup {
                error_code: error.code(),
                group_id,
                ..Default::default()
            },
        });
    }
    DescribeGroupsResponse {
        groups,
        ..Default::default()
    }
}

/// An unknown group (or one that is not classic): "Dead" before v6, GROUP_ID_NOT_FOUND
/// from v6 as Kafka answers.
fn missing(group_id: String, version: i16) -> DescribedGroup {
    let error = if version >= 6 {
        ErrorCode::GroupIdNotFound
    } else {
        ErrorCode::None
    };
    DescribedGroup {
        error_code: error.code(),
        error_message: (version >= 6).then(|| format!("Group {group_id} not found.")),
        group_id,
        group_state: "Dead".into(),
        ..Default::default()
    }
}
