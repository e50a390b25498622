//! Metadata (key 3): brokers, topics and partition leaders; creates unknown topics when the
//! client allows it and the broker is configured to. Authorized operations, when asked for,
//! are every operation (no authorizer), on every topic of the answer as Kafka does, unknown
//! ones included.

use std::rc::Rc;
use std::sync::Arc;

use crate::groups::offsets_topic;
use crate::handlers::{authorized_operations, cluster_metadata, with_topic_changes};
use crate::model::cluster_view::{ClusterView, TopicInfo};
use crate::protocol::messages::metadata::{
    MetadataRequest, MetadataResponse, MetadataResponsePartition, MetadataResponseTopic,
};
use crate::protocol::{ErrorCode, Uuid};
use crate::shard::Shard;
use crate::topics::checks::validate_name;

/// Answers Metadata at `version`.
pub async fn handle(shard: &Rc<Shard>, request: MetadataRequest, version: i16) -> MetadataResponse {
    let config = &shard.config;
    let view = shard.view.load();
    let topic_operations =
        authorized_operations::topic(request.include_topic_authorized_operations);
    let cluster_operations =
        authorized_operations::cluster(request.include_cluster_authorized_operations);
    let all_topics = match &request.topics {
        None => true,
        Some(topics) => version == 0 && topics.is_empty(),
    };
    let mut topics = Vec::new();
    if all_topics {
        // A user topic of that name (auto-created by an earlier version) is shadowed.
        topics.extend(
            view.topics
                .values()
                .filter(|t| !offsets_topic::is_offsets_topic(t.name()))
                .map(|t| topic_metadata(&view, t)),
        );
        if offsets_topic::is_served(&view) {
            topics.push(offsets_topic_metadata(&view));
        }
    } else {
        let auto_create =
            config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
        for requested in request.topics.unwrap_or_default() {
            topics.push(match requested.name {
                Some(name) if !name.is_empty() || requested.topic_id == Uuid::NIL => {
                    match view.topic(&name) {
                        _ if offsets_topic::topic_by_name(&view, &name).is_some() => {
                            offsets_topic_metadata(&view)
                        }
                        Some(topic) => topic_metadata(&view, topic),
                        // `__consumer_offsets` is the coordinators' (not served in cluster
                        // mode): never a topic a Metadata request creates.
                        None if auto_create && !offsets_topic::is_offsets_topic(&name) => {
                            auto_create_topic(shard, name).await
                        }
                        None => {
                            error_topic(Some(name), Uuid::NIL, ErrorCode::UnknownTopicOrPartition)
                        }
                    }
                }
                _ => match view.topic_by_id(&requested.topic_id) {
                    Some(topic) => topic_metadata(&view, topic),
                    None if offsets_topic::topic_by_id(&view, &requested.topic_id).is_some() => {
                        offsets_topic_metadata(&view)
                    }
                    None => error_topic(None, requested.topic_id, ErrorCode::UnknownTopicId),
                },
            });
        }
    }
    for topic in &mut topics {
        topic.topic_authorized_operations = topic_operations;
    }
    MetadataResponse {
        brokers: cluster_metadata::brokers(config, &view),
        cluster_id: Some(view.cluster_id.clone()),
        controller_id: config.node_id,
        topics,
        cluster_authorized_operations: cluster_operations,
        ..Default::default()
    }
}

async fn auto_create_topic(shard: &Rc<Shard>, name: String) -> MetadataResponseTopic {
    if let Err(error) = validate_name(&name) {
        return error_topic(Some(name), Uuid::NIL, error.code);
    }
    let partitions = shard.config.default_partitions;
    let create_name = name.clone();
    let created = with_topic_changes(shard, move |admin_shard, changes| async move {
        changes
            .auto_create(&admin_shard, &create_name, partitions)
            .await
    })
    .await;
    match created {
        Ok(topic) => topic_metadata(&shard.view.load(), &topic),
        Err(error) => error_topic(Some(name), Uuid::NIL, error.code),
    }
}

fn topic_metadata(view: &ClusterView, topic: &Arc<TopicInfo>) -> MetadataResponseTopic {
    MetadataResponseTopic {
        error_code: ErrorCode::None.code(),
        name: Some(topic.name().to_string()),
        topic_id: topic.id(),
        is_internal: kaas_cluster::internal_topics::is_internal(topic.name()),
        partitions: (0..topic.partitions())
            .map(|partition| {
                let (leader, leader_epoch) = if offsets_topic::is_offsets_topic(topic.name()) {
                    offsets_topic::leader(view, partition)
                } else {
                    cluster_metadata::leader(view, topic.name(), partition)
                };
                MetadataResponsePartition {
                    error_code: ErrorCode::None.code(),
                    partition_index: partition,
                    leader_id: leader,
                    leader_epoch,
                    replica_nodes: vec![leader],
                    isr_nodes: vec![leader],
                    offline_replicas: Vec::new(),
                }
            })
            .collect(),
        ..Default::default()
    }
}

/// `__consumer_offsets`, internal (never auto-created: it always exists).
fn offsets_topic_metadata(view: &ClusterView) -> MetadataResponseTopic {
    MetadataResponseTopic {
        is_internal: true,
        ..topic_metadata(view, &offsets_topic::topic_info(view))
    }
}

fn error_topic(name: Option<String>, topic_id: Uuid, code: ErrorCode) -> MetadataResponseTopic {
    MetadataResponseTopic {
        error_code: code.code(),
        name,
        topic_id,
        ..Default::default()
    }
}
