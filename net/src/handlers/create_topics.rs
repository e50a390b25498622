//! CreateTopics (key 19).

use std::rc::Rc;

use crate::groups::offsets_topic;
use crate::handlers::describe_configs::origin_source;
use crate::handlers::with_topic_changes;
use crate::model::topic_config::{TopicConfig, TOPIC_CONFIGS};
use crate::protocol::messages::create_topics::{
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::topics::checks::NewTopic;
use crate::topics::topic_changes::wait_of_timeout;

/// The replication factor kaas reports: the leader is the only replica it keeps (durability
/// is the shared volume's), whatever factor was asked for.
const KEPT_REPLICATION_FACTOR: i16 = 1;

/// Answers CreateTopics.
pub async fn handle(shard: &Rc<Shard>, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(request.topics.len());
    let mut seen = std::collections::HashSet::new();
    for topic in request.topics {
        let mut result = CreatableTopicResult {
            name: topic.name.clone(),
            ..Default::default()
        };
        if !seen.insert(topic.name.clone()) {
            result.error_code = ErrorCode::InvalidRequest.code();
            result.error_message = Some(format!(
                "Duplicate topic name {} in the request",
                topic.name
            ));
            results.push(result);
            continue;
        }
        let exists = offsets_topic::is_offsets_topic(&topic.name)
            || shard.view.load().topic(&topic.name).is_some();
        if kaas_cluster::internal_topics::is_internal(&topic.name) && exists {
            result.error_code = ErrorCode::TopicAlreadyExists.code();
            result.error_message = Some(format!("Topic '{}' already exists.", topic.name));
            results.push(result);
            continue;
        }
        // `__transaction_state` is created by the brokers when the first transactional
        // client comes (Kafka also lets a client create it first).
        if kaas_cluster::internal_topics::is_internal(&topic.name) {
            result.error_code = ErrorCode::InvalidTopicException.code();
            result.error_message = Some(format!(
                "Topic '{}' is internal: the brokers create it when it is first needed.",
                topic.name
            ));
            results.push(result);
            continue;
        }
        let new_topic = NewTopic {
            name: topic.name,
            num_partitions: topic.num_partitions,
            replication_factor: topic.replication_factor,
            assignments: topic
                .assignments
                .into_iter()
                .map(|a| (a.partition_index, a.broker_ids))
                .collect(),
            configs: topic
                .configs
                .into_iter()
                .map(|c| (c.name, c.value))
                .collect(),
        };
        let validate_only = request.validate_only;
        let wait = wait_of_timeout(request.timeout_ms);
        let created = with_topic_changes(shard, move |admin_shard, changes| async move {
            changes
                .create_topic(&admin_shard, new_topic, validate_only, wait)
                .await
        })
        .await;
        match created {
            Ok(info) => {
                result.topic_id = info.id();
                result.num_partitions = info.partitions();
                result.replication_factor = KEPT_REPLICATION_FACTOR;
                result.configs = Some(describe(&info.config, shard));
            }
            Err(error) => {
                result.error_code = error.code.code();
                result.error_message = Some(error.message);
            }
        }
        results.push(result);
    }
    CreateTopicsResponse {
        topics: results,
        ..Default::default()
    }
}

fn describe(config: &TopicConfig, shard: &Shard) -> Vec<CreatableTopicConfigs> {
    TOPIC_CONFIGS
        .iter()
        .map(|spec| {
            let (value, origin) = config.effective(spec, &shard.config.topic_defaults);
            CreatableTopicConfigs {
                name: spec.name.to_string(),
                value: Some(value),
                read_only: false,
                config_source: origin_source(origin),
                is_sensitive: false,
            }
        })
        .collect()
}
