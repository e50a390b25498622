//! IncrementalAlterConfigs (key 44): set, delete, append to or subtract from topic and group
//! configs; broker settings are refused as read-only. The per-resource flow is shared with
//! the legacy AlterConfigs ([`super::config_alteration`]).

use std::rc::Rc;

use crate::handlers::config_alteration::alter_resources;
use crate::handlers::config_changes::ConfigEdit;
use crate::protocol::messages::incremental_alter_configs::{
    AlterConfigsResourceResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use crate::shard::Shard;

/// Answers IncrementalAlterConfigs.
pub async fn handle(
    shard: &Rc<Shard>,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let resources = request.resources.into_iter().map(|resource| {
        let configs = resource.configs.into_iter();
        let operations = configs.map(|c| (c.name, c.config_operation, c.value));
        let edit = ConfigEdit::Incremental(operations.collect());
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
    IncrementalAlterConfigsResponse {
        responses,
        ..Default::default()
    }
}
