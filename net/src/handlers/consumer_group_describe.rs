//! ConsumerGroupDescribe (key 69): members, epochs and assignments of KIP-848 groups.

use std::rc::Rc;

use crate::groups::group::GroupState;
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::consumer_group_describe::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, DescribedGroup,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers ConsumerGroupDescribe.
pub async fn handle(
    shard: &Rc<Shard>,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let mut groups = Vec::with_capacity(request.group_ids.len());
    for group_id in request.group_ids {
        let id = group_id.clone();
        let described = on_coordinator(shard, &group_id, move |shard| async move {
            let group = match shard.groups.find(&id).await {
                Ok(Some(group)) => group,
                Ok(None) => {
                    return Err((ErrorCode::GroupIdNotFound, format!("Group {id} not found.")))
                }
                Err(error) => return Err((error, String::new())),
            };
            let topics = shard.groups.topics();
            let state = group.state.borrow();
            let described = match &*state {
                GroupState::Consumer(consumer) => Ok(consumer.describe(&topics)),
                GroupState::Classic(_) => Err((
                    ErrorCode::GroupIdNotFound,
                    format!("Group {id} is not a consumer group."),
                )),
            };
            described
        })
        .await
        .unwrap_or_else(|error| Err((error, String::new())));
        groups.push(match described {
            Ok(group) => group,
            Err((error, message)) => DescribedGroup {
                error_code: error.code(),
                error_message: (!message.is_empty()).then_some(message),
                group_id,
                ..Default::default()
            },
        });
    }
    ConsumerGroupDescribeResponse {
        groups,
        ..Default::default()
    }
}
