//! DescribeConfigs (key 32): topic configs, group configs, and this broker's read-only
//! settings.

use std::rc::Rc;

use crate::groups::offsets_topic;
use crate::model::group_configs::{self, GroupConfigOverrides, GROUP_CONFIGS};
use crate::model::topic_config::{ConfigOrigin, TopicConfig, TOPIC_CONFIGS};
use crate::protocol::messages::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResourceResult, DescribeConfigsResponse,
    DescribeConfigsResult, DescribeConfigsSynonym,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Kafka's resource type codes.
pub const RESOURCE_TOPIC: i8 = 2;
/// Broker resource.
pub const RESOURCE_BROKER: i8 = 4;
/// Group resource (KIP-848 group configs).
pub const RESOURCE_GROUP: i8 = 32;
/// Kafka's config source codes (DescribeConfigs and CreateTopics v5+): a topic override.
pub const SOURCE_TOPIC: i8 = 1;
/// Config source of a static broker setting.
pub const SOURCE_STATIC_BROKER: i8 = 4;
/// Default config source.
pub const SOURCE_DEFAULT: i8 = 5;
/// A group override.
pub const SOURCE_GROUP: i8 = 8;
/// Kafka's config type codes: BOOLEAN, INT, LONG.
const TYPE_BOOLEAN: i8 = 1;
const TYPE_INT: i8 = 3;
const TYPE_LONG: i8 = 5;

/// The config source code of a topic config's origin.
pub fn origin_source(origin: ConfigOrigin) -> i8 {
    match origin {
        ConfigOrigin::Topic => SOURCE_TOPIC,
        ConfigOrigin::Broker => SOURCE_STATIC_BROKER,
        ConfigOrigin::Default => SOURCE_DEFAULT,
    }
}

/// The refusal of a GROUP resource without a name (Kafka has no default group configs).
pub fn unnamed_group() -> (ErrorCode, String) {
    (
        ErrorCode::InvalidRequest,
        "Default group resources are not allowed.".to_string(),
    )
}

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
            let mut refuse = |(code, message): (ErrorCode, String)| {
                result.error_code = code.code();
                result.error_message = Some(message);
            };
            let entries = match resource.resource_type {
                RESOURCE_TOPIC => match view.topic(&resource.resource_name) {
                    Some(topic) => topic_entries(shard, &topic.config, request.include_synonyms),
                    None if offsets_topic::topic_by_name(&view, &resource.resource_name)
                        .is_some() =>
                    {
                        offsets_topic_entries(shard, request.include_synonyms)
                    }
                    None => {
                        refuse((
                            ErrorCode::UnknownTopicOrPartition,
                            format!("Topic '{}' does not exist.", resource.resource_name),
                        ));
                        Vec::new()
                    }
                },
                RESOURCE_GROUP if resource.resource_name.is_empty() => {
                    refuse(unnamed_group());
                    Vec::new()
                }
                RESOURCE_GROUP => {
                    let none = GroupConfigOverrides::default();
                    let overrides = view
                        .group_configs
                        .get(&resource.resource_name)
                        .unwrap_or(&none);
                    group_entries(shard, overrides, request.include_synonyms)
                }
                RESOURCE_BROKER
                    if resource.resource_name.is_empty()
                        || resource.resource_name == shard.config.node_id.to_string() =>
                {
                    broker_entries(shard)
                }
                RESOURCE_BROKER => {
                    refuse((
                        ErrorCode::InvalidRequest,
                        format!("Unknown broker {}", resource.resource_name),
                    ));
                    Vec::new()
                }
                other => {
                    refuse((
                        ErrorCode::InvalidRequest,
                        format!("Unsupported resource type {other}"),
                    ));
                    Vec::new()
                }
            };
            result.configs = entries
                .into_iter()
                .filter(|entry| wanted(&entry.name))
                .collect();
            result
        })
        .collect();
    DescribeConfigsResponse {
        results,
        ..Default::default()
    }
}

/// One entry with Kafka's synonym list: the override (if any), the broker's setting (when its
/// flag differs from Kafka's default), then Kafka's default of that setting.
fn entry(
    spec: &crate::model::topic_config::ConfigSpec,
    value: String,
    source: i8,
    override_source: i8,
    broker_value: Option<String>,
    synonyms: bool,
) -> DescribeConfigsResourceResult {
    let mut list = Vec::new();
    if synonyms {
        if source == override_source {
            list.push(DescribeConfigsSynonym {
                name: spec.name.to_string(),
                value: Some(value.clone()),
                source,
            });
        }
        if let Some(synonym) = spec.synonym {
            if let Some(broker) = broker_value.filter(|v| v != spec.default) {
                list.push(DescribeConfigsSynonym {
                    name: synonym.name.to_string(),
                    value: Some(broker),
                    source: SOURCE_STATIC_BROKER,
                });
            }
            if synonym.listed_by_default {
                list.push(DescribeConfigsSynonym {
                    name: synonym.name.to_string(),
                    value: Some(spec.default.to_string()),
                    source: SOURCE_DEFAULT,
                });
            }
        }
    }
    DescribeConfigsResourceResult {
        name: spec.name.to_string(),
        value: Some(value),
        read_only: false,
        config_source: source,
        is_sensitive: false,
        synonyms: list,
        config_type: spec.value_type.code(),
        documentation: None,
    }
}

fn topic_entries(
    shard: &Shard,
    config: &TopicConfig,
    synonyms: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let defaults = &shard.config.topic_defaults;
    TOPIC_CONFIGS
        .iter()
        .map(|spec| {
            let (value, origin) = config.effective(spec, defaults);
            let broker = defaults.broker_value(spec.name).map(|v| v.to_string());
            entry(
                spec,
                value,
                origin_source(origin),
                SOURCE_TOPIC,
                broker,
                synonyms,
            )
        })
        .collect()
}

fn group_entries(
    shard: &Shard,
    overrides: &GroupConfigOverrides,
    synonyms: bool,
) -> Vec<DescribeConfigsResourceResult> {
    let broker = &shard.config.groups;
    GROUP_CONFIGS
        .iter()
        .map(|spec| {
            let (value, from_broker) = overrides.effective(spec, broker);
            let source = if overrides.get(spec.name).is_some() {
                SOURCE_GROUP
            } else if from_broker {
                SOURCE_STATIC_BROKER
            } else {
                SOURCE_DEFAULT
            };
            let broker_value =
                group_configs::broker_value(spec.name, broker).map(|v| v.to_string());
            entry(spec, value, source, SOURCE_GROUP, broker_value, synonyms)
        })
        .collect()
}

fn broker_entries(shard: &Shard) -> Vec<DescribeConfigsResourceResult> {
    let config = &shard.config;
    let defaults = &config.topic_defaults;
    let settings: [(&str, String, i8); 9] = [
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
        (
            "log.retention.ms",
            defaults.retention_ms.to_string(),
            TYPE_LONG,
        ),
        (
            "log.retention.bytes",
            defaults.retention_bytes.to_string(),
            TYPE_LONG,
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
        (
            "producer.id.expiration.ms",
            config.producer_expiration.expiration_ms.to_string(),
            TYPE_INT,
        ),
        (
            "producer.id.expiration.check.interval.ms",
            config.producer_expiration.check_interval_ms.to_string(),
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
