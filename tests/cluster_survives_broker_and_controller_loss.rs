//! Cluster mode on a real Kubernetes API server, end to end: three `kaas` processes
//! (`--assignment-source kube`, pods `kaas-0..2` on their own loopback addresses with the
//! default ports, one shared data directory; tests/support/kube_cluster.rs) elect a
//! controller on the Lease, which assigns the partitions of a `KafkaTopic` applied with
//! kubectl. Real librdkafka clients (tests/clients/python/cluster_failover.py) keep producing
//! (idempotent, acks=all) and consuming in two groups, one classic and one KIP-848
//! (`group.protocol=consumer`), committing every record, and beside them the Java client
//! (the `cluster-moves` scenario: an idempotent producer and a committing classic group of its
//! own, on the same topic) does the same, while:
//!
//! 1. a broker that is not the controller is killed with `kill -9`: the controller sees its
//!    heartbeat stream break and moves exactly its partitions to the others; the broker
//!    restarts (as its StatefulSet would) and gets partitions back;
//! 2. the controller itself is killed with `kill -9`: another broker takes the Lease once it
//!    expires, at a higher epoch, and moves the dead one's partitions; it restarts too;
//! 3. a broker is frozen with SIGSTOP: it misses its pings, ages out and its partitions move;
//!    after SIGCONT it rejoins and follows the newer assignment;
//! 4. a broker's endpoint is marked not ready in the EndpointSlice (the kubelet's view): its
//!    partitions move although its heartbeat is fine; ready again, it gets some back.
//!
//! After each step the producer's acknowledgements advance again and both groups' committed
//! offsets are at least what they were before it. At the end every record either producer
//! acknowledged is in the log exactly once at its acknowledged offset (cluster_moves.py
//! `verify`), each librdkafka group consumed every acknowledged record of both producers and
//! no record again after its commit succeeded, its committed offsets are its final positions;
//! the Java group read every Java record and its committed offsets are at least its last
//! commits (cluster_moves.py `consume --check`); and `kubectl get kafkaclusterassignments`
//! shows the epoch and version of `assignment.json`.

mod support;

use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::BrokerId;
use support::cluster_load::{controller, has_broker, leads_any, ClusterLoad, REACT};
use support::kube_cluster::{Endpoint, KubeCluster};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
/// Short Lease times keep the controller's failover (Lease duration plus a renew period)
/// within a few seconds.
const LEASE_FLAGS: &[&str] = &[
    "--lease-duration-ms",
    "3000",
    "--lease-renew-period-ms",
    "1000",
];
/// The Java producer's records and the pause between two sends: about 30 s of sending (the
/// broker and controller kills and into the pause), few records beside librdkafka's, as the
/// librdkafka groups commit each record they read, Java's too.
const JAVA_RECORDS: usize = 600;
const JAVA_PACE_MS: u64 = 50;

fn has_topic(assignment: &Assignment) -> bool {
    assignment.topics().iter().any(|(name, topic)| {
        name.as_str() == TOPIC && topic.partitions.len() == PARTITIONS as usize
    })
}

/// Waits until no partition is led by `broker` and it is out of the assignment; returns it.
fn wait_until_gone(cluster: &mut KubeCluster, broker: i32, what: &str) -> Assignment {
    let assignment = cluster.wait_for_assignment(what, REACT, |a| {
        has_topic(a) && !has_broker(a, broker) && !leads_any(a, broker)
    });
    cluster.wait_until_applied(assignment.version().0);
    assignment
}

/// Waits until `broker` is back in the assignment and leads a partition again.
fn wait_until_back(cluster: &mut KubeCluster, broker: i32, what: &str) -> Assignment {
    let assignment = cluster.wait_for_assignment(what, REACT, |a| {
        has_topic(a) && has_broker(a, broker) && leads_any(a, broker)
    });
    cluster.wait_until_applied(assignment.version().0);
    assignment
}

#[test]
fn acked_records_and_commits_survive_broker_kill_controller_kill_and_pause() {
    let started = Instant::now();
    let mut cluster = KubeCluster::start("failover", 3, LEASE_FLAGS);
    let bootstrap = cluster.bootstrap();
    cluster.apply_topic(TOPIC, PARTITIONS);
    let first = cluster.wait_for_assignment(
        "of three brokers leading the KafkaTopic's partitions",
        Duration::from_secs(60),
        |a| has_topic(a) && (0..3).all(|b| has_broker(a, b) && leads_any(a, b)),
    );
    cluster.wait_until_applied(first.version().0);
    assert_eq!(
        first.controller_epoch().0,
        u64::try_from(cluster.lease_transitions()).expect("a positive epoch"),
        "the assignment's epoch is the Lease's transitions"
    );
    let mut clients = ClusterLoad::start(
        bootstrap.clone(),
        &cluster.scratch,
        TOPIC,
        PARTITIONS,
        JAVA_RECORDS,
        JAVA_PACE_MS,
    );
    clients.wait_for_progress("at the start");

    // 1. kill -9 of a broker that is not the controller.
    let leader = controller(&cluster);
    let victim = (0..3).find(|&b| b != leader).expect("another broker");
    clients.snapshot_commits();
    cluster.broker(victim).kill9();
    let without = wait_until_gone(&mut cluster, victim, "without the killed broker");
    assert_eq!(
        without.controller_epoch(),
        first.controller_epoch(),
        "the controller stayed"
    );
    for (partition, before) in first.partitions() {
        if before.leader != BrokerId(victim) {
            assert_eq!(
                without.leader(&partition).map(|l| l.leader),
                Some(before.leader),
                "{partition} was not the killed broker's and stays where it was"
            );
        }
    }
    clients.wait_for_progress("after a broker's kill -9");
    clients.check_commits("after a broker's kill -9");
    cluster.broker(victim).wait_for_ports_closed();
    cluster.broker(victim).start();
    wait_until_back(&mut cluster, victim, "with the restarted broker");

    // 2. kill -9 of the controller.
    let old = controller(&cluster);
    let old_epoch = cluster.lease_transitions();
    clients.snapshot_commits();
    cluster.broker(old).kill9();
    let after = wait_until_gone(&mut cluster, old, "without the killed controller");
    let new = controller(&cluster);
    assert_ne!(new, old, "another broker holds the Lease");
    assert!(cluster.lease_transitions() > old_epoch, "at a higher epoch");
    assert_eq!(
        after.controller_epoch().0,
        u64::try_from(cluster.lease_transitions()).expect("a positive epoch"),
        "the new controller wrote at the Lease's epoch"
    );
    clients.wait_for_progress("after the controller's kill -9");
    clients.check_commits("after the controller's kill -9");
    cluster.broker(old).wait_for_ports_closed();
    cluster.broker(old).start();
    wait_until_back(&mut cluster, old, "with the restarted old controller");

    // 3. SIGSTOP of a broker that is not the controller, then SIGCONT.
    let leader = controller(&cluster);
    let frozen = (0..3).find(|&b| b != leader).expect("another broker");
    clients.snapshot_commits();
    cluster.broker(frozen).pause();
    wait_until_gone(&mut cluster, frozen, "without the paused broker");
    clients.wait_for_progress("while a broker is paused");
    clients.check_commits("while a broker is paused");
    cluster.broker(frozen).resume();
    wait_until_back(&mut cluster, frozen, "with the resumed broker");
    clients.wait_for_progress("after the paused broker resumed");

    // 4. A broker the EndpointSlice says is not ready.
    let leader = controller(&cluster);
    let unready = (0..3).find(|&b| b != leader).expect("another broker");
    cluster.set_endpoint(unready, Endpoint::NotReady);
    wait_until_gone(
        &mut cluster,
        unready,
        "without the broker that is not ready",
    );
    clients.wait_for_progress("while a broker is not ready");
    cluster.set_endpoint(unready, Endpoint::Ready);
    wait_until_back(&mut cluster, unready, "with the broker ready again");

    clients.finish();
    clients.verify();

    // The mirror shows the assignment on the volume (fire-and-forget: it may lag a moment).
    let deadline = Instant::now() + REACT;
    loop {
        let current = cluster.assignment().expect("an assignment");
        let shown = cluster.mirrored_assignments();
        let wanted = (current.controller_epoch().0, current.version().0);
        if shown == [wanted] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl get kafkaclusterassignments shows {shown:?}, assignment.json is {wanted:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.stop();
    eprintln!("the cluster test took {:?}", started.elapsed());
}
