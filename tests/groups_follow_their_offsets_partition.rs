//! Cluster mode places consumer groups as Kafka does: the controller assigns the 50 partitions
//! of `__consumer_offsets` like every other partition, and a group's coordinator is the
//! leader of the group's partition of it (three `kaas` processes on a real API server,
//! tests/support/kube_cluster.rs).
//!
//! Checked: `assignment.json` places `__consumer_offsets` and names each stored group's
//! coordinator in `consumerGroups`; FindCoordinator on every broker
//! names the leader of each group's partition, and Metadata lists the topic as internal with
//! those leaders and leader epochs; the leader serves the group's records in its partition;
//! a group committed on its coordinator is, after
//! that broker is killed with `kill -9`, coordinated by the new leader of its partition, which
//! serves the group's records and answers its committed offset; and the new coordinator's store of the group is claimed on the
//! volume at that partition's leader epoch plus one (the storage fence's epoch for it), so two
//! controllers' files can never give one group one fence epoch on two brokers.

mod support;

use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::{BrokerId, TopicName, TopicPartition};
use kaas_cluster::internal_topics::{offsets_partition, OFFSETS_TOPIC};
use kaas_net::protocol::messages::find_coordinator::FindCoordinatorRequest;
use kaas_net::protocol::Response;
use support::kube_cluster::KubeCluster;
use support::offsets_topic;
use support::WireClient;

const TOPIC: &str = "placed";
const LEASE_FLAGS: &[&str] = &[
    "--lease-duration-ms",
    "3000",
    "--lease-renew-period-ms",
    "1000",
];
const REACT: Duration = Duration::from_secs(30);

fn offsets_leader(assignment: &Assignment, group: &str) -> (BrokerId, i32) {
    let topic = TopicName::new(OFFSETS_TOPIC).expect("legal");
    let leader = assignment
        .leader(&TopicPartition::new(topic, offsets_partition(group)))
        .expect("__consumer_offsets is placed");
    (leader.leader, leader.leader_epoch.0)
}

fn coordinator(client: &mut WireClient, group: &str) -> (i16, i32) {
    let find = FindCoordinatorRequest {
        key_type: 0,
        coordinator_keys: vec![group.into()],
        ..Default::default()
    };
    let Response::FindCoordinator(found) = client.call(4, &find) else {
        panic!("not FindCoordinator")
    };
    let answer = &found.coordinators[0];
    (answer.error_code, answer.node_id)
}

/// Retries `call` while it answers a retriable coordinator error (load in progress, not
/// coordinator, not available), at most [`REACT`].
fn settle<T>(what: &str, mut call: impl FnMut() -> (i16, T)) -> T {
    let deadline = Instant::now() + REACT;
    loop {
        let (code, value) = call();
        match code {
            0 => return value,
            14..=16 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            code => panic!("{what}: error {code}"),
        }
    }
}

/// Metadata names, for every partition, the assignment's leader and leader epoch.
fn assert_metadata_follows(client: &mut WireClient, assignment: &Assignment) {
    let topic = TopicName::new(OFFSETS_TOPIC).expect("legal");
    let expected: Vec<(i32, i32)> = (0..50)
        .map(|p| {
            let leader = assignment
                .leader(&TopicPartition::new(topic.clone(), p))
                .expect("placed");
            (leader.leader.0, leader.leader_epoch.0)
        })
        .collect();
    assert_eq!(client.topic_leaders(OFFSETS_TOPIC), (0, true, expected));
}

/// Fetches the group's partition from its leader until it holds a record keyed by `group`
/// with a value (the group's committed offset), at most [`REACT`].
fn fetch_group_record(client: &mut WireClient, group: &str) {
    let deadline = Instant::now() + REACT;
    loop {
        let (error, _, records) = offsets_topic::fetch(client, offsets_partition(group), 0, 500);
        let found = records.iter().any(|(_, key, value)| {
            value.is_some() && key.windows(group.len()).any(|w| w == group.as_bytes())
        });
        if error == 0 && found {
            return;
        }
        assert!(error == 0 || error == 6, "fetch error {error}");
        assert!(
            Instant::now() < deadline,
            "{OFFSETS_TOPIC} never served {group}'s record"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The fence epochs at which `group`'s store has been opened (its `offsets-e<epoch>.log`
/// files on the shared volume).
fn store_epochs(cluster: &KubeCluster, group: &str) -> Vec<u32> {
    let dir = cluster.data_dir.join("groups").join(group);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut epochs: Vec<u32> = entries
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_prefix("offsets-e")?
                .strip_suffix(".log")?
                .parse()
                .ok()
        })
        .collect();
    epochs.sort_unstable();
    epochs
}

#[test]
fn groups_are_coordinated_by_the_leader_of_their_offsets_partition() {
    let mut cluster = KubeCluster::start("offsets-placed", 3, LEASE_FLAGS);
    cluster.apply_topic(TOPIC, 1);
    let first =
        cluster.wait_for_assignment("placing the topic and __consumer_offsets", REACT, |a| {
            a.brokers().len() == 3
                && a.topics().contains_key(TOPIC)
                && a.topics()
                    .get(OFFSETS_TOPIC)
                    .is_some_and(|t| t.partitions.len() == 50)
        });
    cluster.wait_until_applied(first.version().0);

    // Every broker names the partition leader as each group's coordinator.
    let groups: Vec<String> = (0..12).map(|i| format!("placed-group-{i}")).collect();
    for broker in 0..3 {
        let mut client = WireClient::connect(cluster.brokers[broker].kafka);
        for group in &groups {
            let (leader, _) = offsets_leader(&first, group);
            assert_eq!(
                coordinator(&mut client, group),
                (0, leader.0),
                "FindCoordinator({group}) on broker {broker}"
            );
        }
    }

    // A group whose coordinator is not the controller (its kill is only a broker's kill).
    let holder = cluster
        .lease_holder()
        .expect("a controller holds the Lease");
    let group = groups
        .iter()
        .find(|g| offsets_leader(&first, g).0 .0 != holder)
        .expect("some group's partition is led by a broker that is not the controller")
        .clone();
    let (old_leader, old_epoch) = offsets_leader(&first, &group);
    let mut client = WireClient::connect(cluster.brokers[old_leader.0 as usize].kafka);
    settle("commit on the first coordinator", || {
        (client.simple_commit(&group, TOPIC, 42), ())
    });
    assert_eq!(
        store_epochs(&cluster, &group),
        [old_epoch as u32 + 1],
        "the first coordinator claims the group at its partition's fence epoch"
    );
    // The controller finds the group on the volume and names its coordinator in
    // `consumerGroups`, as operators read it.
    cluster.wait_for_assignment("naming the group's coordinator", REACT, |a| {
        a.groups().get(&kaas_cluster::ids::GroupId::new(&group)) == Some(&old_leader)
    });
    // Metadata lists the topic as Kafka does, led where the groups are coordinated, and the
    // leader serves the group's records.
    assert_metadata_follows(&mut client, &first);
    fetch_group_record(&mut client, &group);
    drop(client);

    cluster.broker(old_leader.0).kill9();
    let moved = cluster.wait_for_assignment("moving the dead broker's partitions", REACT, |a| {
        !a.brokers().contains_key(&old_leader)
            && a.topics().contains_key(OFFSETS_TOPIC)
            && offsets_leader(a, &group).0 != old_leader
    });
    cluster.wait_until_applied(moved.version().0);
    let (new_leader, new_epoch) = offsets_leader(&moved, &group);
    assert!(new_epoch > old_epoch, "a new leader, a higher leader epoch");
    assert_eq!(
        moved.groups().get(&kaas_cluster::ids::GroupId::new(&group)),
        Some(&new_leader),
        "consumerGroups follows the partition's new leader"
    );
    let survivor = if holder == new_leader.0 {
        holder
    } else {
        (0..3)
            .find(|b| *b != old_leader.0 && *b != new_leader.0)
            .expect("three brokers")
    };
    let mut asker = WireClient::connect(cluster.brokers[survivor as usize].kafka);
    assert_eq!(
        settle("FindCoordinator after the move", || {
            let (code, node) = coordinator(&mut asker, &group);
            (code, node)
        }),
        new_leader.0
    );
    let mut client = WireClient::connect(cluster.brokers[new_leader.0 as usize].kafka);
    assert_eq!(
        settle("OffsetFetch on the new coordinator", || client
            .committed_offset(&group, TOPIC, 0)),
        Some(42),
        "the new coordinator loads what the old one committed"
    );
    assert_eq!(
        store_epochs(&cluster, &group).last().copied(),
        Some(new_epoch as u32 + 1),
        "the new coordinator claims the group at its partition's new fence epoch"
    );
    cluster.stop();
}
