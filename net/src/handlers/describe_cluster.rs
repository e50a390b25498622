//! DescribeCluster (key 60): this broker is the whole cluster and its controller; authorized
//! operations, when asked for, are every cluster operation (no authorizer).

use std::rc::Rc;

use crate::handlers::authorized_operations;
use crate::protocol::messages::describe_cluster::{
    DescribeClusterBroker, DescribeClusterRequest, DescribeClusterResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Endpoint type "brokers" (KIP-919); "controllers" (2) is not served.
const ENDPOINT_TYPE_BROKERS: i8 = 1;

/// Answers DescribeCluster.
pub fn handle(shard: &Rc<Shard>, request: DescribeClusterRequest) -> DescribeClusterResponse {
    let config = &shard.config;
    if request.endpoint_type != ENDPOINT_TYPE_BROKERS {
        return DescribeClusterResponse {
            error_code: ErrorCode::UnsupportedVersion.code(),
            error_message: Some("Only the brokers endpoint type is served.".into()),
            endpoint_type: request.endpoint_type,
            ..Default::default()
        };
    }
    DescribeClusterResponse {
        cluster_id: shard.view.load().cluster_id.clone(),
        controller_id: config.node_id,
        endpoint_type: ENDPOINT_TYPE_BROKERS,
        brokers: vec![DescribeClusterBroker {
            broker_id: config.node_id,
            host: config.advertised_host.clone(),
            port: config.advertised_port,
            rack: None,
            is_fenced: false,
        }],
        cluster_authorized_operations: authorized_operations::cluster(
            request.include_cluster_authorized_operations,
        ),
        ..Default::default()
    }
}
