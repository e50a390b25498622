//! IncrementalAlterConfigs (key 44): set, delete, append to or subtract from topic configs.

use std::rc::Rc;

use crate::broker::shard::Shard;
use crate::broker::topic_config::{ConfigKey, InvalidConfig, TopicConfig};
use crate::handlers::describe_configs::{RESOURCE_BROKER, RESOURCE_TOPIC};
use crate::handlers::{admin, with_topic_admin};
use crate::protocol::messages::incremental_alter_configs::{
    AlterConfigsResourceResponse, AlterableConfig, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
};
use crate::protocol::ErrorCode;

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// Answers IncrementalAlterConfigs.
pub async fn handle(
    shard: &Rc<Shard>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let mut response = AlterConfigsResourceResponse {
            resource_type: resource.resource_type,
            resource_name: resource.resource_name.clone(),
            ..Default::default()
        };
        let outcome = match resource.resource_type {
            RESOURCE_TOPIC => {
                let name = resource.resource_name.clone();
                let operations = resource.configs;
                let validate_only = request.validate_only;
                with_topic_admin(shard, move |admin_shard| async move {
                    admin(&admin_shard)
                        .alter_configs(
                            &admin_shard,
                            &name,
                            |config| apply(config, &operations),
                            validate_only,
                        )
                        .await
                })
                .await
                .map_err(|e| (e.code, e.message))
            }
            RESOURCE_BROKER => Err((
                ErrorCode::InvalidConfig,
                "Broker configs are set at start-up and cannot be altered.".to_string(),
            )),
            other => Err((
                ErrorCode::InvalidRequest,
                format!("Unsupported resource type {other}"),
            )),
        };
        if let Err((code, message)) = outcome {
            response.error_code = code.code();
            response.error_message = Some(message);
        }
        responses.push(response);
    }
    IncrementalAlterConfigsResponse {
        responses,
        ..Default::default()
    }
}

/// Applies every operation, or none when one is invalid.
fn apply(config: &mut TopicConfig, operations: &[AlterableConfig]) -> Result<(), InvalidConfig> {
    let mut next = config.clone();
    let mut seen = std::collections::HashSet::new();
    for operation in operations {
        if !seen.insert(operation.name.as_str()) {
            return Err(InvalidConfig(format!(
                "Duplicate configuration {} in the request",
                operation.name
            )));
        }
        let key = ConfigKey::from_name(&operation.name).ok_or_else(|| {
            InvalidConfig(format!("Unknown topic config name: {}", operation.name))
        })?;
        match operation.config_operation {
            SET => {
                let value = operation.value.as_deref().ok_or_else(|| {
                    InvalidConfig(format!("Null value not supported for {}", operation.name))
                })?;
                next.set(&operation.name, value)?;
            }
            DELETE => next.delete(&operation.name)?,
            APPEND | SUBTRACT if key.type_code() == 7 => {
                let defaults = Default::default();
                let mut items: Vec<String> = next
                    .value(key, &defaults)
                    .split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect();
                for value in operation
                    .value
                    .as_deref()
                    .unwrap_or("")
                    .split(',')
                    .map(str::trim)
                {
                    if operation.config_operation == APPEND {
                        if !value.is_empty() && !items.iter().any(|i| i == value) {
                            items.push(value.to_string());
                        }
                    } else {
                        items.retain(|i| i != value);
                    }
                }
                next.set(&operation.name, &items.join(","))?;
            }
            APPEND | SUBTRACT => {
                return Err(InvalidConfig(format!(
                    "Config {} is not a list: APPEND and SUBTRACT do not apply",
                    operation.name
                )))
            }
            other => return Err(InvalidConfig(format!("Unknown config operation {other}"))),
        }
    }
    *config = next;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(name: &str, operation: i8, value: Option<&str>) -> AlterableConfig {
        AlterableConfig {
            name: name.into(),
            config_operation: operation,
            value: value.map(str::to_string),
        }
    }

    #[test]
    fn operations_apply_all_or_nothing() {
        let mut config = TopicConfig::default();
        apply(&mut config, &[op("retention.ms", SET, Some("5000"))]).expect("valid");
        assert_eq!(config.get(ConfigKey::RetentionMs), Some("5000"));
        let refused = apply(
            &mut config,
            &[
                op("retention.bytes", SET, Some("10")),
                op("segment.bytes", SET, Some("x")),
            ],
        );
        assert!(refused.is_err());
        assert_eq!(config.get(ConfigKey::RetentionBytes), None);
        apply(&mut config, &[op("retention.ms", DELETE, None)]).expect("valid");
        assert_eq!(config.get(ConfigKey::RetentionMs), None);
        assert!(apply(&mut config, &[op("retention.ms", APPEND, Some("1"))]).is_err());
        assert!(apply(
            &mut config,
            &[op("cleanup.policy", APPEND, Some("compact"))]
        )
        .is_err());
        apply(&mut config, &[op("cleanup.policy", APPEND, Some("delete"))]).expect("no change");
    }
}
