//! ConsumerGroupHeartbeat (key 68): the KIP-848 consumer group protocol. Joining, leaving
//! and reconciling all go through this one request; the coordinator assigns partitions.

use std::rc::Rc;

use crate::groups::clock::monotonic_ms;
use crate::groups::consumer_group::{Heartbeat, HeartbeatResult};
use crate::handlers::group_hop::on_coordinator;
use crate::protocol::messages::consumer_group_heartbeat::{
    Assignment, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, TopicPartitions,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers ConsumerGroupHeartbeat at `version`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: ConsumerGroupHeartbeatRequest,
    version: i16,
    client_id: String,
    client_host: String,
) -> ConsumerGroupHeartbeatResponse {
    let group_id = request.group_id.clone();
    if group_id.is_empty() {
        return failure(ErrorCode::InvalidRequest, "GroupId can't be empty.".into());
    }
    let heartbeat = Heartbeat {
        member_id: request.member_id,
        member_epoch: request.member_epoch,
        instance_id: request.instance_id,
        rack_id: request.rack_id,
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request.subscribed_topic_names,
        subscribed_topic_regex: request.subscribed_topic_regex,
        server_assignor: request.server_assignor,
        owned: request.topic_partitions.map(|topics| {
            topics
                .into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect()
        }),
        client_id,
        client_host,
        api_version: version,
    };
    let result = on_coordinator(shard, &group_id.clone(), move |shard| async move {
        heartbeat_on_coordinator(&shard, &group_id, heartbeat).await
    })
    .await;
    match result {
        Ok(Ok(result)) => response(result),
        Ok(Err((error, message))) => failure(error, message),
        Err(error) => failure(error, "the coordinator is not available".into()),
    }
}

type Failure = (ErrorCode, String);

async fn heartbeat_on_coordinator(
    shard: &Shard,
    group_id: &str,
    heartbeat: Heartbeat,
) -> Result<HeartbeatResult, Failure> {
    let joining = heartbeat.member_epoch == 0;
    // A group that moved here in cluster mode is loaded from its store by `find`, members
    // and all, as a new Kafka coordinator loads it from __consumer_offsets; only a group with
    // no store is GROUP_ID_NOT_FOUND.
    let group = if joining {
        shard.groups.find_or_create(group_id).await
    } else {
        shard
            .groups
            .find(group_id)
            .await
            .and_then(|found| found.ok_or(ErrorCode::GroupIdNotFound))
    }
    .map_err(|error| (error, format!("Group {group_id} not found.")))?;
    let _busy = group.busy();
    let topics = shard.groups.topics();
    let config = shard.groups.consumer_config(group_id);
    let result = match group
        .state
        .borrow_mut()
        .consumer_for_heartbeat(group_id, joining)
    {
        Some(consumer) => consumer.heartbeat(heartbeat, &topics, &config, monotonic_ms()),
        None => {
            return Err((
                ErrorCode::GroupIdNotFound,
                format!("Group {group_id} is not a consumer group."),
            ))
        }
    };
    if result.changed {
        group.mark_consumer_changed();
        group.persist_if_changed().await;
    }
    Ok(result)
}

fn response(result: HeartbeatResult) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse {
        error_code: result.error.code(),
        error_message: result.error_message,
        member_id: result.member_id,
        member_epoch: result.member_epoch,
        heartbeat_interval_ms: result.heartbeat_interval_ms,
        assignment: result.assignment.map(|topics| Assignment {
            topic_partitions: topics
                .into_iter()
                .map(|(topic_id, partitions)| TopicPartitions {
                    topic_id,
                    partitions,
                })
                .collect(),
        }),
        ..Default::default()
    }
}

fn failure(error: ErrorCode, message: String) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse {
        error_code: error.code(),
        error_message: Some(message),
        ..Default::default()
    }
}
