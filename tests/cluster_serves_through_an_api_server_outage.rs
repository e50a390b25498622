//! The Kubernetes API server goes away after start-up (tests/assignment_source_kube_without_api_server.rs
//! covers it missing at start-up). Three `kaas` brokers in kube mode (tests/support/kube_cluster.rs)
//! reach the shared API server only through a TCP proxy this test owns
//! (tests/support/tcp_proxy.rs); the test cuts the proxy (listener and connections closed), so
//! for the brokers the API server is gone while the other tests' use of it goes on. Then:
//!
//! - every broker logs an error naming the verb and the resource that failed (the controller
//!   `cannot update leases.coordination.k8s.io "kaas-controller" ...`, the others
//!   `cannot get leases...`, the watches `watch of endpointslices... failed`), and none exits;
//! - the controller stops writing assignments once its renew deadline has passed: a broker
//!   killed after that (whose partitions a controller in office moves within a second or
//!   two) is not moved out of `assignment.json`;
//! - the brokers still alive keep answering Produce and Fetch for the partitions they lead
//!   (the test support's wire client: every batch acknowledged is fetched back);
//! - when the proxy comes back, the Lease is renewed or re-acquired, the killed broker's
//!   partitions move at the Lease's epoch, a KafkaTopic applied then becomes a topic that
//!   takes writes, and the brokers log that their requests go through again.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::BrokerId;
use kaas_engine::batch::encode_batch_for_tests;
use kaas_test_support::apiserver;
use support::kube_cluster::{KubeCluster, Reach};
use support::tcp_proxy::TcpProxy;
use support::{fetch_batches, WireClient};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
/// Lease duration 3 s, renew period 1 s: the controller's renew deadline is 2 s after its
/// last successful renewal.
const LEASE_FLAGS: &[&str] = &[
    "--lease-duration-ms",
    "3000",
    "--lease-renew-period-ms",
    "1000",
];
/// Past the renew deadline of the last renewal before the cut (2 s), with a margin.
const PAST_THE_DEADLINE: Duration = Duration::from_secs(4);
/// How long the test watches `assignment.json` stay unchanged after the kill: a controller
/// in office moves a killed broker's partitions within about a second (its heartbeat stream
/// breaks), and in under 5 s through missed pings.
const NO_WRITE_WINDOW: Duration = Duration::from_secs(8);
/// Bound of each wait for the cluster to react (the machine is loaded).
const REACT: Duration = Duration::from_secs(30);
const NOT_LEADER_OR_FOLLOWER: i16 = 6;

fn has_topic(assignment: &Assignment, topic: &str, partitions: usize) -> bool {
    assignment
        .topics()
        .iter()
        .any(|(name, t)| name.as_str() == topic && t.partitions.len() == partitions)
}

fn leads_any(assignment: &Assignment, broker: i32) -> bool {
    assignment
        .partitions()
        .any(|(_, leader)| leader.leader == BrokerId(broker))
}

/// The partitions of `topic` that `broker` leads in `assignment`.
fn led_by(assignment: &Assignment, topic: &str, broker: i32) -> Vec<i32> {
    assignment
        .partitions()
        .filter(|(p, leader)| p.topic.as_str() == topic && leader.leader == BrokerId(broker))
        .map(|(p, _)| p.partition)
        .collect()
}

/// A one-record batch stamped now (an old timestamp would let retention delete a sealed
/// segment of it, and the test's fetch from offset 0 with it).
fn batch(value: &str) -> Vec<u8> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    encode_batch_for_tests(
        &[(None, Some(value.as_bytes()))],
        i64::try_from(now_ms).expect("a timestamp"),
        -1,
        -1,
        -1,
    )
}

/// Produces one record to each of `partitions` of `topic` at `leader` (acks=all) and fetches
/// each partition back: every produce is acknowledged without error, and the partition then
/// holds a batch with that record's CRC at the acknowledged offset. With `settle`, a
/// NOT_LEADER_OR_FOLLOWER is tried again for at most [`REACT`] (a partition just assigned is
/// opened a moment after the assignment is applied); without, the first answer counts.
fn produce_and_fetch(
    leader: SocketAddr,
    topic: &str,
    partitions: &[i32],
    what: &str,
    settle: bool,
) {
    let mut client = WireClient::connect(leader);
    for &partition in partitions {
        let bytes = batch(&format!("{what}-{partition}"));
        let crc = u32::from_be_bytes(bytes[17..21].try_into().expect("a CRC"));
        let deadline = Instant::now() + REACT;
        let (error, base_offset) = loop {
            let answers = client.produce(topic, vec![(partition, bytes.clone())]);
            assert_eq!(answers.len(), 1, "{what}: {answers:?}");
            let (_, error, base_offset) = answers[0];
            if !(settle && error == NOT_LEADER_OR_FOLLOWER && Instant::now() < deadline) {
                break (error, base_offset);
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(
            error, 0,
            "{what}: produce to {topic}-{partition} at {leader} answered error {error}"
        );
        let stored = fetch_batches(&mut client, topic, partition);
        assert!(
            stored
                .iter()
                .any(|h| h.base_offset == base_offset && h.crc == crc),
            "{what}: {topic}-{partition} at {leader} does not hold the batch acknowledged at {base_offset}: {stored:?}"
        );
    }
}

/// Waits (at most [`REACT`]) until broker `id`'s log holds `text`.
fn wait_for_log(cluster: &mut KubeCluster, id: i32, text: &str) {
    let deadline = Instant::now() + REACT;
    loop {
        cluster.assert_none_exited();
        let log = cluster.broker(id).log_text();
        if log.contains(text) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "broker {id} never logged {text:?}; its log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn brokers_keep_serving_and_the_controller_stops_writing_while_the_api_server_is_gone() {
    let api = apiserver::api_server();
    let mut proxy = TcpProxy::start(SocketAddr::from(([127, 0, 0, 1], api.port)));
    let reach = Reach {
        api_port: Some(proxy.listen.port()),
        rust_log: Some("warn,kaas_cluster_kube=info".into()),
        logs: true,
    };
    let mut cluster = KubeCluster::start_with("apioutage", 3, LEASE_FLAGS, &reach);
    let namespace = cluster.namespace.clone();
    cluster.apply_topic(TOPIC, PARTITIONS);
    let before = cluster.wait_for_assignment(
        "of three brokers leading the KafkaTopic's partitions",
        Duration::from_secs(60),
        |a| has_topic(a, TOPIC, PARTITIONS as usize) && (0..3).all(|b| leads_any(a, b)),
    );
    cluster.wait_until_applied(before.version().0);
    assert!(
        proxy.accepted() > 0,
        "the brokers reach the API through the proxy"
    );
    let controller = cluster.lease_holder().expect("a controller");
    let others: Vec<i32> = (0..3).filter(|&b| b != controller).collect();
    for broker in 0..3 {
        let addr = cluster.broker(broker).kafka;
        produce_and_fetch(
            addr,
            TOPIC,
            &led_by(&before, TOPIC, broker),
            "before the cut",
            true,
        );
    }

    // The API server goes away for the brokers.
    let lease_at_cut = cluster.lease_version();
    proxy.cut();
    let cut = Instant::now();
    let lease =
        format!(r#"leases.coordination.k8s.io "kaas-controller" in namespace "{namespace}""#);
    wait_for_log(&mut cluster, controller, &format!("cannot update {lease}"));
    for &other in &others {
        wait_for_log(&mut cluster, other, &format!("cannot get {lease}"));
    }
    let watched = format!(r#"watch of endpointslices.discovery.k8s.io in namespace "{namespace}""#);
    let deadline = Instant::now() + REACT;
    while !(0..3).any(|b| cluster.broker(b).log_text().contains(&watched)) {
        assert!(
            Instant::now() < deadline,
            "no broker logged {watched:?}; the controller's log:\n{}",
            cluster.broker(controller).log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Past the renew deadline, a broker dies: the controller must not write any more.
    std::thread::sleep(PAST_THE_DEADLINE.saturating_sub(cut.elapsed()));
    let victim = others[0];
    let survivor = others[1];
    cluster.broker(victim).kill9();
    let killed = Instant::now();
    while killed.elapsed() < NO_WRITE_WINDOW {
        cluster.assert_none_exited();
        let now = cluster.assignment().expect("assignment.json");
        assert_eq!(
            now.version(),
            before.version(),
            "the controller wrote an assignment after its renew deadline, the API server gone"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The brokers alive still serve what they lead.
    for broker in [controller, survivor] {
        let addr = cluster.broker(broker).kafka;
        produce_and_fetch(
            addr,
            TOPIC,
            &led_by(&before, TOPIC, broker),
            "while the API server is gone",
            false,
        );
    }
    assert_eq!(
        cluster.lease_version(),
        lease_at_cut,
        "nothing reached the Lease through the cut proxy"
    );

    // The API server comes back: the Lease is renewed or re-acquired and the cluster resumes.
    proxy.restore();
    let after =
        cluster.wait_for_assignment("without the broker killed during the outage", REACT, |a| {
            has_topic(a, TOPIC, PARTITIONS as usize)
                && !a.brokers().contains_key(&BrokerId(victim))
                && !leads_any(a, victim)
        });
    assert_ne!(
        cluster.lease_version(),
        lease_at_cut,
        "the Lease was renewed or re-acquired"
    );
    let holder = cluster.lease_holder().expect("a controller again");
    assert_ne!(holder, victim, "a live broker holds the Lease");
    assert_eq!(
        after.controller_epoch().0,
        u64::try_from(cluster.lease_transitions()).expect("a positive epoch"),
        "written at the Lease's epoch"
    );
    cluster.wait_until_applied(after.version().0);
    wait_for_log(&mut cluster, holder, "Kubernetes requests go through again");
    cluster.apply_topic("invoices", 2);
    let with_new =
        cluster.wait_for_assignment("with the KafkaTopic applied after the outage", REACT, |a| {
            has_topic(a, "invoices", 2)
        });
    cluster.wait_until_applied(with_new.version().0);
    for broker in [controller, survivor] {
        let addr = cluster.broker(broker).kafka;
        produce_and_fetch(
            addr,
            "invoices",
            &led_by(&with_new, "invoices", broker),
            "after the API server came back",
            true,
        );
        produce_and_fetch(
            addr,
            TOPIC,
            &led_by(&with_new, TOPIC, broker),
            "after the API server came back",
            true,
        );
    }
    cluster.stop();
}
