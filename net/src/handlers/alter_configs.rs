//! AlterConfigs (key 33), the legacy API: each resource's configs are replaced whole, so a
//! config the request does not name goes back to its default (as in Kafka). Topic and group
//! resources are altered; broker settings are refused as read-only. In cluster mode a
//! topic's new full set replaces its KafkaTopic's configs as a whole.

use std::rc::Rc;

use crate::handlers::config_changes::{
    broker_refusal, replace_all, GroupOverrides, TopicOverrides,
};
use crate::handlers::describe_configs::{
    unnamed_group, RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC,
};
use crate::handlers::with_topic_admin;
use crate::protocol::messages::alter_configs::{
    AlterConfigsRequest, AlterConfigsResourceResponse, AlterConfigsResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers AlterConfigs.
pub async fn handle(shard: &Rc<Shard>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(request.resources.len());
    for resource in request.resources {
        let mut response = AlterConfigsResourceResponse {
            resource_type: resource.resource_type,
            resource_name: resource.resource_name.clone(),
            ..Default::default()
        };
        let name = resource.resource_name;
        let configs: Vec<(String, Option<String>)> = resource
            .configs
            .into_iter()
            .map(|c| (c.name, c.value))
            .collect();
        let validate_only = request.validate_only;
        let outcome = match resource.resource_type {
            RESOURCE_TOPIC => with_topic_admin(shard, move |admin_shard, changes| async move {
                let defaults = admin_shard.config.topic_defaults.clone();
                changes
                    .replace_configs(
                        &admin_shard,
                        &name,
                        |config| {
                            let mut target = TopicOverrides {
                                config,
                                defaults: &defaults,
                            };
                            replace_all(&mut target, &borrowed(&configs))
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
                            replace_all(&mut target, &borrowed(&configs))
                        },
                        validate_only,
                    )
                    .await
            })
            .await
            .map_err(|e| (e.code, e.message)),
            RESOURCE_BROKER => {
                let names: Vec<&str> = configs.iter().map(|(n, _)| n.as_str()).collect();
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
    AlterConfigsResponse {
        responses,
        ..Default::default()
    }
}

fn borrowed(configs: &[(String, Option<String>)]) -> Vec<(&str, Option<&str>)> {
    configs
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_deref()))
        .collect()
}
