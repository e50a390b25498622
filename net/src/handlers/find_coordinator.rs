//! FindCoordinator (key 10).
//!
//! - **Groups**: a standalone broker coordinates every group (a shard inside it owns each);
//!   in cluster mode the group's broker is the assignment's `consumerGroups` entry, else
//!   kaas-cluster's fallback choice among the assignment's brokers.
//! - **Transactions**: as in Kafka, a transactional id's coordinator is the leader of its
//!   `__transaction_state` partition. The first request for one creates the topic
//!   ([`crate::topics::transaction_state`]) and, until the topic is placed, answers
//!   COORDINATOR_NOT_AVAILABLE (the client asks again).

use std::rc::Rc;

use crate::handlers::transaction_hop::coordinator_broker;
use crate::model::cluster_view::ClusterView;
use crate::protocol::messages::find_coordinator::{
    Coordinator, FindCoordinatorRequest, FindCoordinatorResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::topics::transaction_state;
use crate::transactions::TRANSACTION_STATE_TOPIC;

const GROUP_KEY: i8 = 0;
const TRANSACTION_KEY: i8 = 1;

/// The broker coordinating `group`; `None` before a cluster broker's first assignment.
pub fn group_broker(shard: &Shard, group: &str) -> Option<i32> {
    let view = shard.view.load();
    let cluster = view.cluster.as_ref()?;
    cluster
        .coordinator_of(&kaas_cluster::ids::GroupId::new(group))
        .map(|broker| broker.0)
}

/// The node id, host and port of `broker`.
fn endpoint(view: &ClusterView, broker: i32) -> Option<(i32, String, i32)> {
    let cluster = view.cluster.as_ref()?;
    let endpoint = cluster
        .brokers()
        .get(&kaas_cluster::ids::BrokerId(broker))?;
    Some((broker, endpoint.host.clone(), i32::from(endpoint.port)))
}

/// Answers FindCoordinator at `version` (v4+ carries a batch of keys).
pub async fn handle(
    shard: &Rc<Shard>,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let keys = if version >= 4 {
        request.coordinator_keys
    } else {
        vec![request.key]
    };
    if request.key_type == TRANSACTION_KEY && !transaction_state::exists(shard) {
        if let Err(error) = transaction_state::request(shard).await {
            tracing::warn!(code = ?error.code, message = %error.message, "creating {TRANSACTION_STATE_TOPIC}");
        }
    }
    let view = shard.view.load();
    let coordinators: Vec<Coordinator> = keys
        .into_iter()
        .map(|key| {
            let found = match request.key_type {
                GROUP_KEY if key.is_empty() => Err((ErrorCode::InvalidRequest, "empty group id")),
                GROUP_KEY => group_broker(shard, &key).ok_or((
                    ErrorCode::CoordinatorNotAvailable,
                    "no cluster assignment accepted yet",
                )),
                TRANSACTION_KEY => coordinator_broker(&view, &key).ok_or((
                    ErrorCode::CoordinatorNotAvailable,
                    "the transaction coordinators are being placed",
                )),
                _ => Err((ErrorCode::InvalidRequest, "unknown key type")),
            };
            let found = found.and_then(|broker| {
                endpoint(&view, broker).ok_or((
                    ErrorCode::CoordinatorNotAvailable,
                    "the coordinator's broker is not in the assignment",
                ))
            });
            match found {
                Ok((node_id, host, port)) => Coordinator {
                    key,
                    node_id,
                    host,
                    port,
                    error_code: ErrorCode::None.code(),
                    error_message: None,
                },
                Err((error, message)) => Coordinator {
                    key,
                    node_id: -1,
                    host: String::new(),
                    port: -1,
                    error_code: error.code(),
                    error_message: Some(message.to_string()),
                },
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
