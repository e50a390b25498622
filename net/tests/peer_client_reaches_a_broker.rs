//! The inter-broker client against a real broker (a standalone `Broker` in this process):
//! ApiVersions advertises WriteTxnMarkers, and WriteTxnMarkers v1 and v2 sent through the
//! client are answered per partition with Kafka's codes, on one reused connection.

#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use kaas_net::peers::{Endpoint, PeerClient};
use kaas_net::protocol::messages::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use kaas_net::protocol::messages::write_txn_markers::{
    WritableTxnMarker, WritableTxnMarkerTopic, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kaas_net::protocol::ErrorCode;
use kaas_net::runtime::server::Broker;
use kaas_net::shard::config::BrokerConfig;

const TIMEOUT: Duration = Duration::from_secs(10);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// An abort marker of producer 7 for `topic`'s `partitions`.
fn abort(topic: &str, partitions: Vec<i32>, transaction_version: i8) -> WriteTxnMarkersRequest {
    WriteTxnMarkersRequest {
        markers: vec![WritableTxnMarker {
            producer_id: 7,
            producer_epoch: 0,
            transaction_result: false,
            topics: vec![WritableTxnMarkerTopic {
                name: topic.into(),
                partition_indexes: partitions,
            }],
            coordinator_epoch: 0,
            transaction_version,
        }],
    }
}

/// (partition, code) of the one marker result's one topic.
fn codes(response: &WriteTxnMarkersResponse) -> Vec<(i32, ErrorCode)> {
    assert_eq!(response.markers.len(), 1);
    assert_eq!(response.markers[0].producer_id, 7);
    response.markers[0].topics[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                ErrorCode::from_code(p.error_code).unwrap(),
            )
        })
        .collect()
}

#[test]
fn write_txn_markers_through_the_peer_client_is_answered_by_a_broker() {
    let port = free_port();
    let mut config = BrokerConfig::new(SocketAddr::from(([127, 0, 0, 1], port)));
    config.shards = 2;
    let broker = Broker::start(config).unwrap();
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            let client = PeerClient::for_broker(3);
            let to = Endpoint::new("127.0.0.1", port);
            let versions: ApiVersionsResponse = client
                .call(&to, 3, &ApiVersionsRequest::default(), TIMEOUT)
                .await
                .unwrap();
            let markers = versions.api_keys.iter().find(|api| api.api_key == 27);
            let markers = markers.expect("WriteTxnMarkers advertised");
            assert_eq!((markers.min_version, markers.max_version), (1, 2));

            for version in [1, 2] {
                let answer: WriteTxnMarkersResponse = client
                    .call(
                        &to,
                        version,
                        &abort("unknown", vec![0], version as i8),
                        TIMEOUT,
                    )
                    .await
                    .unwrap();
                assert_eq!(
                    codes(&answer),
                    vec![(0, ErrorCode::UnknownTopicOrPartition)]
                );
            }
            // `__consumer_offsets` partitions are the group coordinators': no pending offsets
            // of the producer, nothing to complete; a partition past its 50 does not exist.
            let answer: WriteTxnMarkersResponse = client
                .call(
                    &to,
                    2,
                    &abort("__consumer_offsets", vec![3, 49, 50], 0),
                    TIMEOUT,
                )
                .await
                .unwrap();
            assert_eq!(
                codes(&answer),
                vec![
                    (3, ErrorCode::None),
                    (49, ErrorCode::None),
                    (50, ErrorCode::UnknownTopicOrPartition),
                ]
            );
            assert!(client.is_connected(&to));
        })
        .unwrap()
        .join()
        .unwrap();
    broker.stop();
}
