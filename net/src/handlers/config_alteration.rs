//! The per-resource flow AlterConfigs and IncrementalAlterConfigs share: dispatch on the
//! resource type, the hop to shard 0 for topic and group changes (where the topic admin
//! runs), validate-only, and the error code and message of every refusal. The two handlers
//! differ only in how their entries decode into a [`ConfigEdit`] and in their response types.
//!
//! TOPIC and GROUP resources are altered; a GROUP with an empty name and any BROKER resource
//! are refused without the hop; other resource types are INVALID_REQUEST.

use std::rc::Rc;

use crate::handlers::config_changes::{broker_refusal, ConfigEdit, GroupOverrides, TopicOverrides};
use crate::handlers::describe_configs::{
    unnamed_group, RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC,
};
use crate::handlers::with_topic_changes;
use crate::model::group_configs::GroupConfigOverrides;
use crate::model::topic_config::TopicConfig;
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// One resource's answer: its error code (0 when altered, or valid under validate-only) and
/// error message (none then).
pub struct ResourceAnswer {
    /// The resource type, as the request gave it.
    pub resource_type: i8,
    /// The resource name, as the request gave it.
    pub resource_name: String,
    /// The Kafka error code.
    pub error_code: i16,
    /// Why the resource was refused.
    pub error_message: Option<String>,
}

/// Alters each `(resource type, resource name, edit)` in turn, or only checks it when
/// `validate_only`; one answer each, in request order.
pub async fn alter_resources(
    shard: &Rc<Shard>,
    resources: impl IntoIterator<Item = (i8, String, ConfigEdit)>,
    validate_only: bool,
) -> Vec<ResourceAnswer> {
    let mut answers = Vec::new();
    for (resource_type, resource_name, edit) in resources {
        let outcome = alter_resource(
            shard,
            resource_type,
            resource_name.clone(),
            edit,
            validate_only,
        )
        .await;
        let (error_code, error_message) = match outcome {
            Ok(()) => (ErrorCode::None.code(), None),
            Err((code, message)) => (code.code(), Some(message)),
        };
        answers.push(ResourceAnswer {
            resource_type,
            resource_name,
            error_code,
            error_message,
        });
    }
    answers
}

async fn alter_resource(
    shard: &Rc<Shard>,
    resource_type: i8,
    name: String,
    edit: ConfigEdit,
    validate_only: bool,
) -> Result<(), (ErrorCode, String)> {
    match resource_type {
        RESOURCE_TOPIC => with_topic_changes(shard, move |admin_shard, changes| async move {
            let defaults = admin_shard.config.topic_defaults.clone();
            let replaces_whole_set = edit.replaces_whole_set();
            let change = |config: &mut TopicConfig| {
                edit.apply(&mut TopicOverrides {
                    config,
                    defaults: &defaults,
                })
            };
            if replaces_whole_set {
                changes
                    .replace_configs(&admin_shard, &name, change, validate_only)
                    .await
            } else {
                changes
                    .alter_configs(&admin_shard, &name, change, validate_only)
                    .await
            }
        })
        .await
        .map_err(|e| (e.code, e.message)),
        RESOURCE_GROUP if name.is_empty() => Err(unnamed_group()),
        RESOURCE_GROUP => with_topic_changes(shard, move |admin_shard, changes| async move {
            let broker = admin_shard.config.groups.clone();
            let change = |config: &mut GroupConfigOverrides| {
                edit.apply(&mut GroupOverrides {
                    config,
                    broker: &broker,
                })
            };
            changes
                .alter_group_configs(&admin_shard, &name, change, validate_only)
                .await
        })
        .await
        .map_err(|e| (e.code, e.message)),
        RESOURCE_BROKER => Err(broker_refusal(&edit.names())),
        other => Err((
            ErrorCode::InvalidRequest,
            format!("Unsupported resource type {other}"),
        )),
    }
}
