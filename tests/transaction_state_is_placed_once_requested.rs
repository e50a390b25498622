//! Cluster mode places `__transaction_state` as Kafka creates it: not before a broker asks for
//! it (the first transactional client), then like every other partition, for good (three
//! `kaas` processes on a real API server, tests/support/kube_cluster.rs).
//!
//! Checked: no assignment has the topic until a client's first FindCoordinator for a
//! transactional id makes its broker create `__cluster/transaction-state-requested` (the
//! answer meanwhile: COORDINATOR_NOT_AVAILABLE); then the controller
//! places its 50 partitions across the brokers, each broker opens the partitions it leads
//! (their directories and storage-fence claims appear on the volume), Metadata lists the
//! topic as internal with the assignment's leaders, FindCoordinator names the leader of the
//! id's partition, and clients cannot write to it
//! (INVALID_TOPIC_EXCEPTION, as Kafka answers), delete it (INVALID_TOPIC_EXCEPTION, where
//! Kafka would delete the transactions' state) or create it again (TOPIC_ALREADY_EXISTS).

mod support;

use std::time::Duration;

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::{TopicName, TopicPartition};
use kaas_cluster::internal_topics::{TRANSACTION_STATE_PARTITIONS, TRANSACTION_STATE_TOPIC};
use kaas_engine::batch::encode_batch_for_tests;
use kaas_net::protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use kaas_net::protocol::messages::delete_topics::DeleteTopicsRequest;
use kaas_net::protocol::messages::find_coordinator::FindCoordinatorRequest;
use kaas_net::protocol::Response;
use support::kube_cluster::KubeCluster;
use support::WireClient;

const LEASE_FLAGS: &[&str] = &[
    "--lease-duration-ms",
    "3000",
    "--lease-renew-period-ms",
    "1000",
];
const REACT: Duration = Duration::from_secs(30);
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

/// FindCoordinator (v3) for a transactional id: (code, node id).
fn find_coordinator(client: &mut WireClient, transactional_id: &str) -> (i16, i32) {
    let request = FindCoordinatorRequest {
        key: transactional_id.into(),
        key_type: 1,
        ..Default::default()
    };
    match client.call(3, &request) {
        Response::FindCoordinator(r) => (r.error_code, r.node_id),
        other => panic!("unexpected {other:?}"),
    }
}

fn placed(assignment: &Assignment) -> Option<usize> {
    assignment
        .topics()
        .get(TRANSACTION_STATE_TOPIC)
        .map(|t| t.partitions.len())
}

#[test]
fn the_transaction_state_topic_is_placed_once_a_broker_asks_for_it() {
    let mut cluster = KubeCluster::start("txn-state", 3, LEASE_FLAGS);
    let first = cluster.wait_for_assignment("three brokers", REACT, |a| a.brokers().len() == 3);
    assert_eq!(placed(&first), None, "not placed before a broker asks");

    // The first FindCoordinator for a transactional id asks for the topic, and is told to
    // come back (the client retries).
    let marker = cluster
        .data_dir
        .join(kaas_volume::CLUSTER_DIR)
        .join(kaas_volume::TRANSACTION_STATE_REQUESTED_FILE);
    let mut client = WireClient::connect(cluster.brokers[0].kafka);
    assert_eq!(
        find_coordinator(&mut client, "txn-7"),
        (COORDINATOR_NOT_AVAILABLE, -1)
    );
    assert!(
        marker.exists(),
        "the broker asked the controller for the topic"
    );
    let assignment = cluster.wait_for_assignment("__transaction_state placed", REACT, |a| {
        placed(a) == Some(TRANSACTION_STATE_PARTITIONS as usize)
    });
    cluster.wait_until_applied(assignment.version().0);

    let name = TopicName::new(TRANSACTION_STATE_TOPIC).expect("legal");
    let expected: Vec<(i32, i32)> = (0..TRANSACTION_STATE_PARTITIONS)
        .map(|p| {
            let leader = assignment
                .leader(&TopicPartition::new(name.clone(), p))
                .expect("placed");
            (leader.leader.0, leader.leader_epoch.0)
        })
        .collect();
    let leaders: std::collections::BTreeSet<i32> = expected.iter().map(|(b, _)| *b).collect();
    assert_eq!(leaders.len(), 3, "spread over the brokers: {expected:?}");
    assert_eq!(
        client.topic_leaders(TRANSACTION_STATE_TOPIC),
        (0, true, expected.clone())
    );
    // A transactional id's coordinator is the leader of its partition.
    let partition = kaas_net::transactions::partition_for("txn-7") as usize;
    assert_eq!(
        find_coordinator(&mut client, "txn-7"),
        (0, expected[partition].0)
    );

    // Every leader opened its partitions: each has a directory with a storage-fence claim.
    let id = assignment.topics()[TRANSACTION_STATE_TOPIC].id;
    let topic_dir = cluster
        .data_dir
        .join(kaas_volume::TOPICS_DIR)
        .join(format!("{TRANSACTION_STATE_TOPIC}@{id}"));
    support::wait_until("every partition opened by its leader", REACT, || {
        (0..TRANSACTION_STATE_PARTITIONS).all(|p| {
            std::fs::read_dir(topic_dir.join(p.to_string()).join("claims"))
                .is_ok_and(|mut claims| claims.next().is_some())
        })
    });

    // Clients cannot write to it, delete it or create it again.
    let (leader, _) = expected[0];
    let mut at_leader = WireClient::connect(cluster.brokers[leader as usize].kafka);
    let batch = encode_batch_for_tests(&[(None, Some(b"v"))], 1, -1, 0, -1);
    let answers = at_leader.produce(TRANSACTION_STATE_TOPIC, vec![(0, batch)]);
    assert_eq!(answers[0].1, INVALID_TOPIC_EXCEPTION, "{answers:?}");
    let delete = DeleteTopicsRequest {
        topic_names: vec![TRANSACTION_STATE_TOPIC.into()],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let Response::DeleteTopics(deleted) = client.call(5, &delete) else {
        panic!("not DeleteTopics")
    };
    assert_eq!(deleted.responses[0].error_code, INVALID_TOPIC_EXCEPTION);
    let create = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: TRANSACTION_STATE_TOPIC.into(),
            num_partitions: 50,
            replication_factor: 1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let Response::CreateTopics(created) = client.call(7, &create) else {
        panic!("not CreateTopics")
    };
    assert_eq!(created.topics[0].error_code, TOPIC_ALREADY_EXISTS);
    cluster.assert_none_exited();
    cluster.stop();
}
