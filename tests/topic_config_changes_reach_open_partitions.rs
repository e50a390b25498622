//! A topic config change reaches the partitions already open, standalone and in a cluster:
//! after `max.message.bytes` is lowered, a batch above it is refused MESSAGE_TOO_LARGE by the
//! partition that had accepted one of that size before. Both modes go through the same
//! driver (a standalone broker follows its own one-broker assignment), which hands the open
//! logs the new settings.

mod support;

use kaas_cluster::assignment::Assignment;
use kaas_engine::batch::encode_batch_for_tests;
use kaas_net::protocol::ErrorCode;
use support::cluster::{file_brokers, start_all};
use support::{Kaas, WireClient};

/// A batch of one record with a 5,000-byte value.
fn big_batch() -> Vec<u8> {
    let value = vec![7u8; 5_000];
    encode_batch_for_tests(&[(None, Some(&value))], 1_000, -1, 0, -1)
}

/// The error code of producing a big batch to partition 0 of `topic`.
fn produce_big(client: &mut WireClient, topic: &str) -> i16 {
    client.produce(topic, vec![(0, big_batch())])[0].1
}

#[test]
fn standalone_a_lowered_max_message_bytes_applies_to_the_open_partition() {
    let kaas = Kaas::start(None, &[]);
    let mut client = kaas.client();
    client.create_topic("shrinking", 1, &[]);
    assert_eq!(produce_big(&mut client, "shrinking"), 0);

    let altered = client.set_config(2, "shrinking", "max.message.bytes", "2000");
    assert_eq!(altered.error_code, 0, "{altered:?}");
    assert_eq!(
        produce_big(&mut client, "shrinking"),
        ErrorCode::MessageTooLarge.code()
    );
}

/// Assignment `version` of one broker at `port` leading topic `t`'s one partition, with
/// `configs` as the topic's overrides.
fn assignment(version: u64, port: u16, configs: &str) -> Assignment {
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
            "brokers": [{{"id": 0, "host": "127.0.0.1", "port": {port}}}],
            "topics": {{"t": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 1, "configs": {{{configs}}}}}}},
            "partitions": {{"t": [{{"leader": 0, "leader_epoch": 0}}]}}}}"#
    );
    Assignment::from_json(text.as_bytes()).expect("valid")
}

#[test]
fn cluster_a_lowered_max_message_bytes_applies_to_the_open_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let cluster_dir = kaas_volume::cluster_dir(&data);
    let mut brokers = file_brokers(1, &data);
    let port = brokers[0].kafka.port();
    kaas_cluster_file::write_assignment(&cluster_dir, &assignment(1, port, "")).expect("write");
    start_all(&mut brokers, 1);
    brokers[0].wait_for_health("\"partitions_open\":1");
    let mut client = WireClient::connect(brokers[0].kafka);
    assert_eq!(produce_big(&mut client, "t"), 0);

    // The same leader at the same epoch: the partition stays open, only its configs change.
    let lowered = assignment(2, port, r#""max.message.bytes": "2000""#);
    kaas_cluster_file::write_assignment(&cluster_dir, &lowered).expect("write");
    brokers[0].wait_for_version(2);
    assert_eq!(
        produce_big(&mut client, "t"),
        ErrorCode::MessageTooLarge.code()
    );
}
