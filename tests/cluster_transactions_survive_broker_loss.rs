//! Transactions in cluster mode on a real Kubernetes API server: three `kaas` processes on one
//! shared volume (tests/support/kube_cluster.rs), a `KafkaTopic` of six partitions spread over
//! them, and a real librdkafka transactional producer (Transactions V1,
//! tests/clients/python/cluster_transactions.py) running one transaction after another over
//! every partition, aborting every fifth, while:
//!
//! 1. the broker coordinating its transactional id (the leader of the id's
//!    `__transaction_state` partition) is killed with `kill -9`: the partition moves, the new
//!    leader loads the coordinator from the log and finishes what was in flight (markers of a
//!    prepared transaction sent again), and the producer carries on; the broker restarts;
//! 2. a broker leading some of the topic's partitions but not coordinating is killed with
//!    `kill -9`: markers and transactional writes follow the partitions to their new leaders;
//!    it restarts.
//!
//! Then every partition is read `read_committed` to its end (no transaction left open, the
//! last stable offset never stuck): every transaction librdkafka reported committed is there
//! exactly once in every partition, and no record of an aborted one is visible. Last, the Java
//! client's commit / abort scenario (Transactions V2: partitions added by their leaders with a
//! coordinator on another broker) passes on the same cluster.

mod support;

use std::time::Duration;

use kaas_cluster::assignment::Assignment;
use kaas_net::protocol::messages::find_coordinator::FindCoordinatorRequest;
use kaas_net::protocol::Response;
use support::cluster::{finish, ClientRun};
use support::cluster_load::{has_broker, leads_any, REACT};
use support::kube_cluster::KubeCluster;
use support::WireClient;

const TOPIC: &str = "payments";
const PARTITIONS: i32 = 6;
const TRANSACTIONAL_ID: &str = "payments-writer";
/// Enough transactions (about 50 ms apart) to outlast both kills.
const TRANSACTIONS: usize = 400;
const FLAGS: &[&str] = &[
    "--lease-duration-ms",
    "3000",
    "--lease-renew-period-ms",
    "1000",
    "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
    "1000",
];

fn has_topic(assignment: &Assignment) -> bool {
    assignment
        .topics()
        .iter()
        .any(|(name, t)| name.as_str() == TOPIC && t.partitions.len() == PARTITIONS as usize)
}

fn script(bootstrap: &str, phase: &str, outcomes: &str) -> std::process::Command {
    let mut command = std::process::Command::new("python3");
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/clients/python/cluster_transactions.py"
        ))
        .args(["--bootstrap", bootstrap, phase, "--topic", TOPIC])
        .args([
            "--partitions",
            &PARTITIONS.to_string(),
            "--outcomes",
            outcomes,
        ]);
    command
}

/// How many transactions the producer reported committed so far.
fn committed(outcomes: &str) -> usize {
    std::fs::read_to_string(outcomes)
        .unwrap_or_default()
        .lines()
        .filter(|line| line.starts_with("COMMITTED "))
        .count()
}

/// Waits until the producer committed `more` transactions beyond `since`; the count then.
fn wait_for_commits(outcomes: &str, since: usize, more: usize, what: &str) -> usize {
    support::wait_until(what, REACT, || committed(outcomes) >= since + more);
    committed(outcomes)
}

/// The node coordinating [`TRANSACTIONAL_ID`], asked of broker `via`.
fn coordinator(cluster: &KubeCluster, via: usize) -> i32 {
    let mut client = WireClient::connect(cluster.brokers[via].kafka);
    let request = FindCoordinatorRequest {
        key: TRANSACTIONAL_ID.into(),
        key_type: 1,
        ..Default::default()
    };
    support::wait_until(
        "the transaction coordinator is known",
        REACT,
        || matches!(client.call(3, &request), Response::FindCoordinator(r) if r.error_code == 0),
    );
    match client.call(3, &request) {
        Response::FindCoordinator(r) => r.node_id,
        other => panic!("unexpected {other:?}"),
    }
}

/// Kills `victim` with `kill -9`, waits until the controller moved everything it led, and
/// restarts it.
fn kill_and_restart(cluster: &mut KubeCluster, victim: i32, what: &str) {
    cluster.broker(victim).kill9();
    let without = cluster.wait_for_assignment(what, REACT, |a| {
        has_topic(a) && !has_broker(a, victim) && !leads_any(a, victim)
    });
    cluster.wait_until_applied(without.version().0);
    cluster.broker(victim).wait_for_ports_closed();
    cluster.broker(victim).start();
    let back = cluster.wait_for_assignment("the broker back", REACT, |a| {
        has_topic(a) && has_broker(a, victim)
    });
    cluster.wait_until_applied(back.version().0);
}

#[test]
fn committed_transactions_survive_coordinator_and_leader_kill() {
    let mut cluster = KubeCluster::start("txn-kill", 3, FLAGS);
    cluster.apply_topic(TOPIC, PARTITIONS);
    let placed = cluster.wait_for_assignment("the topic placed", Duration::from_secs(60), |a| {
        has_topic(a) && (0..3).all(|b| leads_any(a, b))
    });
    cluster.wait_until_applied(placed.version().0);
    let bootstrap = cluster.bootstrap();
    let outcomes = cluster.scratch.join("outcomes");
    let outcomes = outcomes.display().to_string();

    let mut produce = script(&bootstrap, "produce", &outcomes);
    produce.args([
        "--txn-id",
        TRANSACTIONAL_ID,
        "--transactions",
        &TRANSACTIONS.to_string(),
        "--pace-ms",
        "50",
    ]);
    let mut producer = ClientRun::spawn(produce, "librdkafka transactional producer");
    producer.wait_for_line("STARTED");
    let before = wait_for_commits(&outcomes, 0, 10, "commits before the kills");

    let victim = coordinator(&cluster, 0);
    kill_and_restart(&mut cluster, victim, "without the coordinator's broker");
    let coordinating = coordinator(&cluster, 0);
    let before = wait_for_commits(
        &outcomes,
        before,
        10,
        "commits after the coordinator's kill",
    );
    let assignment = cluster.assignment().expect("an assignment");
    let leader = (0..3)
        .find(|&b| b != coordinating && leads_any(&assignment, b))
        .expect("a leader that does not coordinate");
    kill_and_restart(&mut cluster, leader, "without a partition leader");
    let after = wait_for_commits(&outcomes, before, 10, "commits after the leader's kill");
    assert!(
        after < TRANSACTIONS * 4 / 5,
        "the kills came after the producer's last transactions"
    );

    producer.finish();
    let mut verify = script(&bootstrap, "verify", &outcomes);
    verify.stdout(std::process::Stdio::piped());
    finish(
        verify.spawn().expect("spawn python3"),
        "read_committed verification",
    );

    // Transactions V2 across the brokers: the Java client's transactions, whose partitions
    // their leaders add with the coordinator on another broker.
    let jar = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients/java/target/kaas-java-scenarios.jar");
    let mut java = std::process::Command::new("java");
    java.arg("-jar")
        .arg(jar)
        .args(["--bootstrap", &bootstrap, "--scenario", "txn-commit-abort"]);
    ClientRun::spawn(java, "the Java transaction scenarios").finish();
    cluster.assert_none_exited();
    cluster.stop();
}
