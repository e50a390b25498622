//! CreatePartitions (key 37): raise a topic's partition count (a manual assignment of the new
//! partitions is accepted when it names registered brokers; see `replica_assignment`).

use std::rc::Rc;

use crate::handlers::with_topic_changes;
use crate::protocol::messages::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreatePartitionsTopicResult,
};
use crate::shard::Shard;
use crate::topics::topic_changes::wait_of_timeout;

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
        let (name, count, validate_only) = (topic.name, topic.count, request.validate_only);
        let assignments = topic
            .assignments
            .map(|list| list.into_iter().map(|a| a.broker_ids).collect());
        let wait = wait_of_timeout(request.timeout_ms);
        let outcome = with_topic_changes(shard, move |admin_shard, changes| async move {
            changes
                .add_partitions(&admin_shard, &name, count, assignments, validate_only, wait)
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
