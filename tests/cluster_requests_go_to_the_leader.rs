//! A broker of a cluster answers from the assignment it follows: Metadata lists every broker
//! and each partition's leader and leader epoch; Produce and Fetch for a partition another
//! broker leads answer NOT_LEADER_OR_FOLLOWER, and a Fetch with a stale or future
//! `current_leader_epoch` FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH; FindCoordinator names
//! the group's broker and group requests elsewhere answer NOT_COORDINATOR; topic changes are
//! refused, since topics come from the assignment.

mod support;

use kaas_cluster::assignment::Assignment;
use kaas_engine::batch::encode_batch_for_tests;
use kaas_net::protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use kaas_net::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use kaas_net::protocol::messages::find_coordinator::FindCoordinatorRequest;
use kaas_net::protocol::messages::metadata::MetadataRequest;
use kaas_net::protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestGroup};
use kaas_net::protocol::Response;
use support::cluster::{file_brokers, start_all};
use support::WireClient;

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const NOT_COORDINATOR: i16 = 16;
const INVALID_REQUEST: i16 = 42;
const FENCED_LEADER_EPOCH: i16 = 74;
const UNKNOWN_LEADER_EPOCH: i16 = 75;

fn fetch_error(client: &mut WireClient, partition: i32, current_leader_epoch: i32) -> i16 {
    let request = FetchRequest {
        max_wait_ms: 0,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            topic: "t".into(),
            partitions: vec![FetchPartition {
                partition,
                current_leader_epoch,
                fetch_offset: 0,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::Fetch(response) = client.call(12, &request) else {
        panic!("not a fetch response")
    };
    let partition = &response.responses[0].partitions[0];
    // Kafka answers a refused partition with an empty record set, never a null one (which
    // librdkafka reports as a protocol parse failure).
    assert!(
        partition.records.is_some(),
        "null records for partition {partition:?}"
    );
    partition.error_code
}

#[test]
fn a_broker_answers_for_what_it_leads_and_points_elsewhere_for_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let mut brokers = file_brokers(2, &data);
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": 1,
            "brokers": [{{"id": 0, "host": "127.0.0.1", "port": {}}},
                        {{"id": 1, "host": "127.0.0.1", "port": {}}}],
            "topics": {{"t": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 2}}}},
            "partitions": {{"t": [{{"leader": 0, "leader_epoch": 5}}, {{"leader": 1, "leader_epoch": 7}}]}},
            "consumerGroups": {{"g": 1}}}}"#,
        brokers[0].kafka.port(),
        brokers[1].kafka.port()
    );
    let assignment = Assignment::from_json(text.as_bytes()).expect("valid");
    kaas_cluster_file::write_assignment(&kaas_volume::cluster_dir(&data), &assignment)
        .expect("write");
    start_all(&mut brokers, 1);
    let mut client = WireClient::connect(brokers[0].kafka);

    let Response::Metadata(metadata) = client.call(
        12,
        &MetadataRequest {
            topics: None,
            ..Default::default()
        },
    ) else {
        panic!("not Metadata")
    };
    let mut listed: Vec<(i32, i32)> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id, b.port))
        .collect();
    listed.sort_unstable();
    assert_eq!(
        listed,
        vec![
            (0, i32::from(brokers[0].kafka.port())),
            (1, i32::from(brokers[1].kafka.port()))
        ]
    );
    let leaders: Vec<(i32, i32, Vec<i32>)> = metadata.topics[0]
        .partitions
        .iter()
        .map(|p| (p.leader_id, p.leader_epoch, p.replica_nodes.clone()))
        .collect();
    assert_eq!(leaders, vec![(0, 5, vec![0]), (1, 7, vec![1])]);

    let batch = encode_batch_for_tests(
        &[(None, Some(b"v".as_slice()))],
        1_700_000_000_000,
        -1,
        0,
        -1,
    );
    // The assignment's version is visible once the view is published; the leader may still be
    // opening partition 0 and answer NOT_LEADER_OR_FOLLOWER for a moment, which clients retry.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let produced = loop {
        let produced = client.produce("t", vec![(0, batch.clone()), (1, batch.clone())]);
        if produced[0].1 != NOT_LEADER_OR_FOLLOWER || std::time::Instant::now() > deadline {
            break produced;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(produced[0].1, 0, "partition 0 is led here: {produced:?}");
    assert_eq!(produced[1].1, NOT_LEADER_OR_FOLLOWER, "{produced:?}");

    assert_eq!(fetch_error(&mut client, 0, 5), 0);
    assert_eq!(fetch_error(&mut client, 0, -1), 0);
    assert_eq!(fetch_error(&mut client, 0, 4), FENCED_LEADER_EPOCH);
    assert_eq!(fetch_error(&mut client, 0, 6), UNKNOWN_LEADER_EPOCH);
    assert_eq!(fetch_error(&mut client, 1, 7), NOT_LEADER_OR_FOLLOWER);

    let find = FindCoordinatorRequest {
        key_type: 0,
        coordinator_keys: vec!["g".into()],
        ..Default::default()
    };
    let Response::FindCoordinator(found) = client.call(4, &find) else {
        panic!("not FindCoordinator")
    };
    let coordinator = &found.coordinators[0];
    assert_eq!(
        (
            coordinator.error_code,
            coordinator.node_id,
            coordinator.port
        ),
        (0, 1, i32::from(brokers[1].kafka.port()))
    );
    let offsets = OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup {
            group_id: "g".into(),
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::OffsetFetch(fetched) = client.call(8, &offsets) else {
        panic!("not OffsetFetch")
    };
    assert_eq!(fetched.groups[0].error_code, NOT_COORDINATOR);
    let mut coordinator_client = WireClient::connect(brokers[1].kafka);
    let Response::OffsetFetch(fetched) = coordinator_client.call(8, &offsets) else {
        panic!("not OffsetFetch")
    };
    assert_eq!(fetched.groups[0].error_code, 0);

    let create = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: "new".into(),
            num_partitions: 1,
            replication_factor: -1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let Response::CreateTopics(created) = client.call(7, &create) else {
        panic!("not CreateTopics")
    };
    assert_eq!(created.topics[0].error_code, INVALID_REQUEST);

    for broker in &mut brokers {
        broker.terminate();
    }
}
