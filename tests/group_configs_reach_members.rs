//! A KIP-848 group's own `consumer.heartbeat.interval.ms` (a GROUP config set with
//! IncrementalAlterConfigs) is what ConsumerGroupHeartbeat tells that group's members; other
//! groups keep the broker's setting.

mod support;

use kaas_net::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatRequest;
use kaas_net::protocol::Response;
use support::{Kaas, WireClient};

/// Joins `group` as a new member and returns the heartbeat interval the broker asks for.
fn join(client: &mut WireClient, group: &str) -> i32 {
    let request = ConsumerGroupHeartbeatRequest {
        group_id: group.into(),
        member_id: format!("member-of-{group}"),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(vec!["configured-topic".into()]),
        topic_partitions: Some(Vec::new()),
        ..Default::default()
    };
    let Response::ConsumerGroupHeartbeat(response) = client.call(0, &request) else {
        panic!("not ConsumerGroupHeartbeat")
    };
    assert_eq!(response.error_code, 0, "{response:?}");
    response.heartbeat_interval_ms
}

#[test]
fn a_groups_heartbeat_interval_reaches_its_members() {
    let kaas = Kaas::start(None, &["--group-consumer-heartbeat-interval-ms", "5000"]);
    let mut client = kaas.client();
    client.create_topic("configured-topic", 1, &[]);
    let altered = client.set_config(32, "tuned", "consumer.heartbeat.interval.ms", "7000");
    assert_eq!(altered.error_code, 0, "{altered:?}");
    assert_eq!(join(&mut client, "tuned"), 7000, "the group's own interval");
    assert_eq!(join(&mut client, "untuned"), 5000, "the broker's interval");
}
