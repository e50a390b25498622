//! ListGroups on a cluster broker lists every group that broker coordinates, loaded or not
//! (two real `kaas` processes on one data directory). Kafka's ListGroups on a broker lists the
//! groups of the `__consumer_offsets` partitions it leads, all loaded; a kaas broker loads a
//! group on demand, so a group that moved to it by the fallback rule (never adopted by a
//! command), and every group after a restart, has a store on the volume but is not loaded
//! until a request for it arrives. Those must be listed too, and a broker must not list a
//! group the assignment gives another broker.

mod support;

use std::time::{Duration, Instant};

use kaas_net::protocol::messages::list_groups::ListGroupsRequest;
use kaas_net::protocol::Response;
use support::cluster::{
    endpoints, file_brokers, group_whose_fallback_is_broker_1, start_all, write_assignment,
};
use support::WireClient;

const TOPIC: &str = "listed";
const NAMED: &str = "named-listed";
const STAYS: &str = "stays-on-0";

/// The group ids a broker lists (ListGroups v5, no filter), sorted; `(error, groups)`.
fn listed(client: &mut WireClient) -> (i16, Vec<String>) {
    let Response::ListGroups(listed) = client.call(5, &ListGroupsRequest::default()) else {
        panic!("not ListGroups")
    };
    let mut groups: Vec<String> = listed.groups.into_iter().map(|g| g.group_id).collect();
    groups.sort();
    (listed.error_code, groups)
}

/// Commits until the coordinator answers (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
/// while the view reaches the broker).
fn commit_on_coordinator(client: &mut WireClient, group: &str, offset: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let code = client.simple_commit(group, TOPIC, offset);
        if code == 0 {
            return;
        }
        assert!(
            (code == 16 || code == 14) && Instant::now() < deadline,
            "commit of {group}: {code}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_broker_lists_the_groups_it_coordinates_loaded_or_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let cluster = kaas_volume::cluster_dir(&data);
    let unnamed = group_whose_fallback_is_broker_1("unnamed-listed");
    let mut brokers = file_brokers(2, &data);
    let endpoints = endpoints(&brokers);
    let all_on_0 = [(NAMED, 0), (unnamed.as_str(), 0), (STAYS, 0)];
    write_assignment(&cluster, 1, &endpoints, TOPIC, &[(0, 0)], &all_on_0);
    start_all(&mut brokers, 1);
    let mut first = WireClient::connect(brokers[0].kafka);
    for (offset, group) in [NAMED, unnamed.as_str(), STAYS].into_iter().enumerate() {
        commit_on_coordinator(&mut first, group, offset as i64);
    }
    let mut expected_on_0 = vec![NAMED.to_string(), unnamed.clone(), STAYS.to_string()];
    expected_on_0.sort();
    assert_eq!(listed(&mut first), (0, expected_on_0));
    let mut second = WireClient::connect(brokers[1].kafka);
    assert_eq!(
        listed(&mut second),
        (0, Vec::new()),
        "broker 1 coordinates none yet"
    );

    // NAMED moves to broker 1 by name (adopted there); the assignment stops naming `unnamed`,
    // whose fallback coordinator is broker 1: nothing loads it there until a request does.
    write_assignment(
        &cluster,
        2,
        &endpoints,
        TOPIC,
        &[(0, 0)],
        &[(NAMED, 1), (STAYS, 0)],
    );
    for broker in &mut brokers {
        broker.wait_for_version(2);
    }
    let mut expected_on_1 = vec![NAMED.to_string(), unnamed.clone()];
    expected_on_1.sort();
    assert_eq!(
        listed(&mut second),
        (0, expected_on_1.clone()),
        "broker 1 lists the groups that moved to it, the one no command loaded included"
    );
    assert_eq!(
        listed(&mut first),
        (0, vec![STAYS.to_string()]),
        "broker 0 no longer lists the groups it gave up"
    );

    // After a restart nothing is loaded: the listing comes from the volume.
    brokers[1].terminate();
    brokers[1].wait_for_ports_closed();
    brokers[1].start();
    brokers[1].wait_for_version(2);
    let mut restarted = WireClient::connect(brokers[1].kafka);
    assert_eq!(listed(&mut restarted), (0, expected_on_1));
    for broker in &mut brokers {
        broker.terminate();
    }
}
