//! FindCoordinator (key 10): this broker coordinates every group (a shard inside it owns
//! each); transactions are not served.

use crate::broker::shard::Shard;
use crate::protocol::messages::find_coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::ErrorCode;

const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

/// Answers FindCoordinator at `version` (v4+ carries a batch of keys).
pub fn handle(
    shard: &Shard,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let keys = if version >= 4 {
        request.coordinator_keys
    } else {
        vec![request.key]
    };
    let coordinators: Vec<Coordinator> = keys
        .into_iter()
        .map(|key| {
            let (error, message) = match request.key_type {
                GROUP_KEY if key.is_empty() => (ErrorCode::InvalidRequest, "empty group id"),
                GROUP_KEY => (ErrorCode::None, ""),
                TRANSACTION_KEY => (
                    ErrorCode::TransactionalIdAuthorizationFailed,
                    "transactions are not supported",
                ),
                _ => (ErrorCode::InvalidRequest, "unknown key type"),
            };
            let found = error == ErrorCode::None;
            Coordinator {
                key,
                node_id: if found { shard.config.node_id } else { -1 },
                host: if found {
                    shard.config.advertised_host.clone()
                } else {
                    String::new()
                },
                port: if found {
                    shard.config.advertised_port
                } else {
                    -1
                },
                error_code: error.code(),
                error_message: (!found).then(|| message.to_string()),
            }
        })
        .collect();
    if version >= 4 {
        return FindCoordinatorResponse {
            coordinators,
            ..Default::default()
        };
    }
    let single = coordinators.into_iter().next().unwrap_or_default();
    FindCoordinatorResponse {
        error_code: single.error_code,
        error_message: single.error_message,
        node_id: single.node_id,
        host: single.host,
        port: single.port,
        ..Default::default()
    }
}
