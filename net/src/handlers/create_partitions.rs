//! CreatePartitions (key 37): raise a topic's partition count.

use std::rc::Rc;

use crate::broker::shard::Shard;
use crate::handlers::{admin, with_topic_admin};
use crate::protocol::messages::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use crate::protocol::ErrorCode;

/// Answers CreatePartitions.
pub async fn handle(
    shard: &Rc<Shard>,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut result = CreatePartitionsTopicResult {
            name: topic.name.clone(),
            ..Default::default()
        };
        if topic.assignments.as_ref().is_some_and(|a| !a.is_empty()) {
            result.error_code = ErrorCode::InvalidReplicaAssignment.code();
            result.error_message = Some("Manual replica assignments are not supported.".into());
            results.push(result);
            continue;
        }
        let (name, count, validate_only) = (topic.name, topic.count, request.validate_only);
        let outcome = with_topic_admin(shard, move |admin_shard| async move {
            admin(&admin_shard)
                .add_partitions(&admin_shard, &name, count, validate_only)
                .await
        })
        .await;
        if let Err(error) = outcome {
            result.error_code = error.code.code();
            result.error_message = Some(error.message);
        }
        results.push(result);
    }
    CreatePartitionsResponse {
        results,
        ..Default::default()
    }
}
