//! CreateTopics (key 19).

use std::rc::Rc;

use crate::broker::shard::Shard;
use crate::broker::topic_config::{ConfigKey, TopicConfig, SETTABLE_KEYS};
use crate::groups::offsets_topic;
use crate::handlers::{admin, with_topic_admin};
use crate::protocol::messages::create_topics::{
    CreatableTopicConfigs, CreatableTopicResult, CreateTopicsRequest, CreateTopicsResponse,
};
use crate::protocol::ErrorCode;

/// Kafka's config source codes (DescribeConfigs and CreateTopics v5+).
pub const SOURCE_TOPIC: i8 = 1;
/// Default config source.
pub const SOURCE_DEFAULT: i8 = 5;

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
        let partitions = if topic.num_partitions == -1 {
            shard.config.default_partitions
        } else {
            topic.num_partitions
        };
        let refused = if offsets_topic::is_offsets_topic(&topic.name) {
            Some((
                ErrorCode::TopicAlreadyExists,
                format!("Topic '{}' already exists.", topic.name),
            ))
        } else if !topic.assignments.is_empty() {
            Some((
                ErrorCode::InvalidRequest,
                "Manual replica assignments are not supported.".to_string(),
            ))
        } else if !matches!(topic.replication_factor, -1 | 1) {
            Some((
                ErrorCode::InvalidReplicationFactor,
                format!(
                    "Replication factor must be 1 (or -1 for the default); got {}.",
                    topic.replication_factor
                ),
            ))
        } else {
            None
        };
        if let Some((code, message)) = refused {
            result.error_code = code.code();
            result.error_message = Some(message);
            results.push(result);
            continue;
        }
        let config = match TopicConfig::from_pairs(
            topic
                .configs
                .iter()
                .map(|c| (c.name.as_str(), c.value.as_deref())),
        ) {
            Ok(config) => config,
            Err(error) => {
                result.error_code = ErrorCode::InvalidConfig.code();
                result.error_message = Some(error.0);
                results.push(result);
                continue;
            }
        };
        let name = topic.name.clone();
        let validate_only = request.validate_only;
        let created = with_topic_admin(shard, move |admin_shard| async move {
            admin(&admin_shard)
                .create(&admin_shard, &name, partitions, config, validate_only)
                .await
        })
        .await;
        match created {
            Ok(info) => {
                result.topic_id = info.id;
                result.num_partitions = info.partitions;
                result.replication_factor = 1;
                result.configs = Some(
                    SETTABLE_KEYS
                        .iter()
                        .map(|key| describe(*key, &info.config, shard))
                        .collect(),
                );
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

fn describe(key: ConfigKey, config: &TopicConfig, shard: &Shard) -> CreatableTopicConfigs {
    CreatableTopicConfigs {
        name: key.name().to_string(),
        value: Some(config.value(key, &shard.config.topic_defaults)),
        read_only: false,
        config_source: if config.get(key).is_some() {
            SOURCE_TOPIC
        } else {
            SOURCE_DEFAULT
        },
        is_sensitive: false,
    }
}
