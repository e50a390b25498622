//! AlterConfigs (key 33), the legacy API: each resource's configs are replaced whole, so a
//! config the request does not name goes back to its default (as in Kafka). Topic and group
//! resources are altered; broker settings are refused as read-only. In cluster mode a
//! topic's new full set replaces its KafkaTopic's configs as a whole. The per-resource flow
//! is shared with IncrementalAlterConfigs ([`super::config_alteration`]).

use std::rc::Rc;

use crate::handlers::config_alteration::alter_resources;
use crate::handlers::config_changes::ConfigEdit;
use crate::protocol::messages::alter_configs::{
    AlterConfigsRequest, AlterConfigsResourceResponse, AlterConfigsResponse,
};
use crate::shard::Shard;

/// Answers AlterConfigs.
pub async fn handle(shard: &Rc<Shard>, request: AlterConfigsRequest) -> AlterConfigsResponse {
    let resources = request.resources.into_iter().map(|resource| {
        let configs = resource.configs.into_iter().map(|c| (c.name, c.value));
        let edit = ConfigEdit::ReplaceAll(configs.collect());
        (resource.resource_type, resource.resource_name, edit)
    });
    let answers = alter_resources(shard, resources, request.validate_only).await;
    let responses = answers
        .into_iter()
        .map(|answer| AlterConfigsResourceResponse {
            error_code: answer.error_code,
            error_message: answer.error_message,
            resource_type: answer.resource_type,
            resource_name: answer.resource_name,
        })
        .collect();
    AlterConfigsResponse {
        responses,
        ..Default::default()
    }
}
