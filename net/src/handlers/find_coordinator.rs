//! FindCoordinator (key 10): a standalone broker coordinates every group (a shard inside it
//! owns each); in cluster mode the group's broker is the assignment's `consumerGroups` entry,
//! else kaas-cluster's fallback choice among the assignment's brokers. Transactions are not
//! served.

use crate::protocol::messages::find_coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

fn endpoint_missing(error: ErrorCode) -> bool {
    error != ErrorCode::None
}

/// The broker coordinating `group`; `None` before a cluster broker's first assignment.
pub fn group_broker(shard: &Shard, group: &str) -> Option<i32> {
    let view = shard.view.load();
    let cluster = view.cluster.as_ref()?;
    cluster
        .coordinator_of(&kaas_cluster::ids::GroupId::new(group))
        .map(|broker| broker.0)
}

/// The node id, host and port of `group`'s coordinator.
fn coordinator(shard: &Shard, group: &str) -> Option<(i32, String, i32)> {
    let view = shard.view.load();
    let cluster = view.cluster.as_ref()?;
    let broker = group_broker(shard, group)?;
    let endpoint = cluster
        .brokers()
        .get(&kaas_cluster::ids::BrokerId(broker))?;
    Some((broker, endpoint.host.clone(), i32::from(endpoint.port)))
}

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
            let (error, message, endpoint) = match (error, coordinator(shard, &key)) {
                (ErrorCode::None, Some(endpoint)) => (error, message, Some(endpoint)),
                (ErrorCode::None, None) => (
                    ErrorCode::CoordinatorNotAvailable,
                    "no cluster assignment accepted yet",
                    None,
                ),
                (error, _) => (error, message, None),
            };
            let (node_id, host, port) = endpoint.unwrap_or((-1, String::new(), -1));
            Coordinator {
                key,
                node_id,
                host,
                port,
                error_code: error.code(),
                error_message: endpoint_missing(error).then(|| message.to_string()),
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
