//! DescribeConfigs (key 32): topic configs (and this broker's read-only settings).

use std::rc::Rc;

use crate::broker::shard::Shard;
use crate::broker::topic_config::{TopicConfig, FIXED_CONFIGS, SETTABLE_KEYS};
use crate::groups::offsets_topic;
use crate::handlers::create_topics::{SOURCE_DEFAULT, SOURCE_TOPIC};
use crate::protocol::messages::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResourceResult, DescribeConfigsResponse,
    DescribeConfigsResult, DescribeConfigsSynonym,
};
use crate::protocol::ErrorCode;

/// Kafka's resource type codes.
pub const RESOURCE_TOPIC: i8 = 2;
/// Broker resource.
pub const RESOURCE_BROKER: i8 = 4;
/// Config source of a static broker setting.
const SOURCE_STATIC_BROKER: i8 = 4;
/// Kafka's config type codes: STRING, BOOLEAN, INT.
const TYPE_STRING: i8 = 2;
const TYPE_BOOLEAN: i8 = 1;
const TYPE_INT: i8 = 3;

/// Answers DescribeConfigs.
pub fn handle(shard: &Rc<Shard>, request: DescribeConfigsRequest) -> DescribeConfigsResponse {
    let view = shard.view.load();
    let results = request
        .resources
        .into_iter()
        .map(|resource| {
            let mut result = DescribeConfigsResult {
                resource_type: resource.resource_type,
                resource_name: resource.resource_name.clone(),
                ..Default::default()
            };
            let wanted = |name: &str| match &resource.configuration_keys {
                Some(keys) if !keys.is_empty() => keys.iter().any(|k| k == name),
                _ => true,
            };
            match resource.resource_type {
                RESOURCE_TOPIC => match view.topic(&resource.resource_name) {
                    Some(topic) => {
                        result.configs =
                            topic_entries(shard, &topic.config, request.include_synonyms)
                                .into_iter()
                                .filter(|entry| wanted(&entry.name))
                                .collect();
                    }
                    None if offsets_topic::is_offsets_topic(&resource.resource_name) => {
                        result.configs = offsets_topic_entries(shard, request.include_synonyms)
                            .into_iter()
                            .filter(|entry| wanted(&entry.name))
                            .collect();
                    }
                    None => {
                        result.error_code = ErrorCode::UnknownTopicOrPartition.code();
                        result.error_message = Some(format!(
                            "Topic '{}' does not exist.",
                            resource.resource_name
                        ));
                    }
                },
                RESOURCE_BROKER
                    if resource.resource_name.is_empty()
                        || resource.resource_name == shard.config.node_id.to_string() =>
                {
                    result.configs = broker_entries(shard)
                        .into_iter()
                        .filter(|entry| wanted(&entry.name))
                        .collect();
                }
                RESOURCE_BROKER => {
                    result.error_code = ErrorCode::InvalidRequest.code();
                    result.error_message =
                        Some(format!("Unknown broker {}", resource.resource_name));
                }
                other => {
                    result.error_code = ErrorCode::InvalidRequest.code();
                    result.error_message = Some(format!("Unsupported resource type {other}"));
                }
            }
            result
        })
        .collect();
    DescribeConfigsResponse {
        results,
        ..Default::default()
    }
}

/// `__consumer_offsets`'s configs: the defaults with Kafka's overrides for it.
fn offsets_topic_entries(shard: &Shard, synonyms: bool) -> Vec<DescribeConfigsResourceResult> {
    let mut entries = topic_entries(shard, &TopicConfig::default(), synonyms);
    for entry in &mut entries {
        if let Some((_, value)) = offsets_topic::CONFIGS
            .iter()
            .find(|(n, _)| *n == entry.name)
        {
            entry.value = Some(value.to_string());
            entry.config_source = SOURCE_TOPIC;
            for synonym in &mut entry.synonyms {
                synonym.value = Some(value.to_string());
                synonym.source = SOURCE_TOPIC;
            }
        }
    }
    entries
}

fn topic_entries(
    shard: &Shard,
    config: &TopicConfig,
    synonyms: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let defaults = &shard.config.topic_defaults;
    let mut entries: Vec<DescribeConfigsResourceResult> = SETTABLE_KEYS
        .iter()
        .map(|key| {
            let value = config.value(*key, defaults);
            let source = if config.get(*key).is_some() {
                SOURCE_TOPIC
            } else {
                SOURCE_DEFAULT
            };
            DescribeConfigsResourceResult {
                name: key.name().to_string(),
                value: Some(value.clone()),
                read_only: false,
                config_source: source,
                is_sensitive: false,
                synonyms: if synonyms {
                    vec![DescribeConfigsSynonym {
                        name: key.name().to_string(),
                        value: Some(value),
                        source,
                    }]
                } else {
                    Vec::new()
                },
                config_type: key.type_code(),
                documentation: None,
            }
        })
        .collect();
    entries.extend(
        FIXED_CONFIGS
            .iter()
            .map(|(name, value)| DescribeConfigsResourceResult {
                name: (*name).to_string(),
                value: Some((*value).to_string()),
                read_only: true,
                config_source: SOURCE_DEFAULT,
                is_sensitive: false,
                synonyms: Vec::new(),
                config_type: TYPE_STRING,
                documentation: None,
            }),
    );
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

fn broker_entries(shard: &Shard) -> Vec<DescribeConfigsResourceResult> {
    let config = &shard.config;
    let defaults = &config.topic_defaults;
    let settings: [(&str, String, i8); 7] = [
        (
            "auto.create.topics.enable",
            config.auto_create_topics.to_string(),
            TYPE_BOOLEAN,
        ),
        (
            "num.partitions",
            config.default_partitions.to_string(),
            TYPE_INT,
        ),
        ("log.retention.ms", defaults.retention_ms.to_string(), 5),
        (
            "log.retention.bytes",
            defaults.retention_bytes.to_string(),
            5,
        ),
        (
            "log.segment.bytes",
            defaults.segment_bytes.to_string(),
            TYPE_INT,
        ),
        (
            "message.max.bytes",
            defaults.max_message_bytes.to_string(),
            TYPE_INT,
        ),
        (
            "socket.request.max.bytes",
            config.max_request_bytes.to_string(),
            TYPE_INT,
        ),
    ];
    settings
        .into_iter()
        .map(|(name, value, config_type)| DescribeConfigsResourceResult {
            name: name.to_string(),
            value: Some(value),
            read_only: true,
            config_source: SOURCE_STATIC_BROKER,
            is_sensitive: false,
            synonyms: Vec::new(),
            config_type,
            documentation: None,
        })
        .collect()
}
