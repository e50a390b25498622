//! IncrementalAlterConfigs (key 44): set, delete, append to or subtract from topic and group
//! configs; broker settings are refused as read-only.

use std::rc::Rc;

use crate::handlers::config_changes::{
    apply_incremental, broker_refusal, GroupOverrides, TopicOverrides,
};
use crate::handlers::describe_configs::{
    unnamed_group, RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC,
};
use crate::handlers::with_topic_admin;
use crate::protocol::messages::incremental_alter_configs::{
    AlterConfigsResourceResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

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
        let name = resource.resource_name;
        let operations: Vec<(String, i8, Option<String>)> = resource
            .configs
            .into_iter()
            .map(|c| (c.name, c.config_operation, c.value))
            .collect();
        let validate_only = request.validate_only;
        let outcome = match resource.resource_type {
            RESOURCE_TOPIC => with_topic_admin(shard, move |admin_shard, changes| async move {
                let defaults = admin_shard.config.topic_defaults.clone();
                changes
                    .alter_configs(
                        &admin_shard,
                        &name,
                        |config| {
                            let mut target = TopicOverrides {
                                config,
                                defaults: &defaults,
                            };
                            apply_incremental(&mut target, &borrowed(&operations))
                        },
                        validate_only,
                    )
                    .await
            })
            .await
            .map_err(|e| (e.code, e.message)),
            RESOURCE_GROUP if name.is_empty() => Err(unnamed_group()),
            RESOURCE_GROUP => with_topic_admin(shard, move |admin_shard, changes| async move {
                let broker = admin_shard.config.groups.clone();
                changes
                    .alter_group_configs(
                        &admin_shard,
                        &name,
                        |config| {
                            let mut target = GroupOverrides {
                                config,
                                broker: &broker,
                            };
                            apply_incremental(&mut target, &borrowed(&operations))
                        },
                        validate_only,
                    )
                    .await
            })
            .await
            .map_err(|e| (e.code, e.message)),
            RESOURCE_BROKER => {
                let names: Vec<&str> = operations.iter().map(|(n, _, _)| n.as_str()).collect();
                Err(broker_refusal(&names))
            }
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

fn borrowed(operations: &[(String, i8, Option<String>)]) -> Vec<(&str, i8, Option<&str>)> {
    operations
        .iter()
        .map(|(name, operation, value)| (name.as_str(), *operation, value.as_deref()))
        .collect()
}
