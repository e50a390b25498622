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

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::BrokerId;
use support::cluster::{cluster_moves, finish, java_cluster_moves_paced, run, ClientRun};
use support::kube_cluster::{Endpoint, KubeCluster};

const TOPIC: &str = "orders";
const PARTITIONS: i32 = 6;
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/clients/python/cluster_failover.py"
);
/// Short Lease times keep the controller's failover (Lease duration plus a renew period)
/// within a few seconds.
const LEASE_FLAGS: &[&str] = &[
    "--lease-duration-ms",
    "3000",
    "--lease-renew-period-ms",
    "1000",
];
/// Bound of each wait for the cluster to react (the machine is loaded).
const REACT: Duration = Duration::from_secs(30);

/// A cluster_failover.py role.
fn role(bootstrap: &str, role: &str, args: &[&str]) -> Command {
    let mut command = Command::new("python3");
    command
        .arg(SCRIPT)
        .args(["--bootstrap", bootstrap, role, "--topic", TOPIC])
        .args(args)
        .stdout(Stdio::piped());
    command
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// The first line of `file` as a number (a client's progress), 0 while it is not there.
fn progress_count(file: &Path) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

/// The number of records a consumer's progress file says it consumed.
fn consumed_count(file: &Path) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v["consumed"].as_u64())
        .unwrap_or(0)
}

/// Waits until `count()` has grown by `by` from what it is now (at most [`REACT`]).
fn wait_for_growth(what: &str, by: u64, count: impl Fn() -> u64) {
    let start = count();
    let deadline = Instant::now() + REACT;
    while count() < start + by {
        assert!(
            Instant::now() < deadline,
            "{what}: stuck at {} (from {start})",
            count()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn leads_any(assignment: &Assignment, broker: i32) -> bool {
    assignment
        .partitions()
        .any(|(_, leader)| leader.leader == BrokerId(broker))
}

fn has_broker(assignment: &Assignment, broker: i32) -> bool {
    assignment.brokers().contains_key(&BrokerId(broker))
}

fn has_topic(assignment: &Assignment) -> bool {
    assignment.topics().iter().any(|(name, topic)| {
        name.as_str() == TOPIC && topic.partitions.len() == PARTITIONS as usize
    })
}

/// The Java client's group (its consumer commits in it; cluster_moves.py checks it).
const JAVA_GROUP: &str = "billing-java";
/// The Java producer's records and the pause between two sends: about 30 s of sending (the
/// broker and controller kills and into the pause), few records beside librdkafka's, as the
/// librdkafka groups commit each record they read, Java's too.
const JAVA_RECORDS: usize = 600;
const JAVA_PACE_MS: u64 = 50;

/// The running clients and their files.
struct Clients {
    bootstrap: String,
    dir: PathBuf,
    producer: Option<Child>,
    consumers: Vec<(&'static str, Child)>,
    java: Option<ClientRun>,
}

const GROUPS: [(&str, &str); 2] = [
    ("billing-classic", "classic"),
    ("billing-kip848", "consumer"),
];

impl Clients {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn start(bootstrap: String, dir: &Path) -> Clients {
        let mut clients = Clients {
            bootstrap,
            dir: dir.to_path_buf(),
            producer: None,
            consumers: Vec::new(),
            java: None,
        };
        let partitions = PARTITIONS.to_string();
        let producer = role(
            &clients.bootstrap,
            "produce",
            &[
                "--partitions",
                &partitions,
                "--pace-ms",
                "4",
                "--until",
                path(&clients.file("stop")),
                "--acked",
                path(&clients.file("acked.txt")),
                "--progress",
                path(&clients.file("produced")),
            ],
        )
        .spawn()
        .expect("spawn the producer");
        clients.producer = Some(producer);
        for (group, protocol) in GROUPS {
            let consumer = role(
                &clients.bootstrap,
                "consume",
                &[
                    "--group",
                    group,
                    "--protocol",
                    protocol,
                    "--acked",
                    path(&clients.file("acked-all.txt")),
                    "--progress",
                    path(&clients.file(group)),
                ],
            )
            .spawn()
            .expect("spawn a consumer");
            clients.consumers.push((group, consumer));
        }
        let mut java = java_cluster_moves_paced(
            &clients.bootstrap,
            TOPIC,
            JAVA_GROUP,
            JAVA_RECORDS,
            JAVA_PACE_MS,
        );
        java.wait_for_line("PRODUCING");
        clients.java = Some(java);
        clients
    }

    /// Waits until the producer's acknowledgements and both groups' consumption advance.
    fn wait_for_progress(&self, what: &str) {
        wait_for_growth(&format!("acknowledgements {what}"), 100, || {
            progress_count(&self.file("produced"))
        });
        for (group, _) in GROUPS {
            wait_for_growth(&format!("group {group} consuming {what}"), 50, || {
                consumed_count(&self.file(group))
            });
        }
    }

    /// Copies each group's progress file (its committed offsets now) for [`Clients::check_commits`].
    fn snapshot_commits(&self) {
        for (group, _) in GROUPS {
            std::fs::copy(self.file(group), self.file(&format!("{group}.snapshot")))
                .expect("snapshot a consumer's progress");
        }
    }

    /// Each group's committed offsets are at least those of its last snapshot.
    fn check_commits(&self, what: &str) {
        for (group, protocol) in GROUPS {
            let snapshot = self.file(&format!("{group}.snapshot"));
            run(
                role(
                    &self.bootstrap,
                    "committed",
                    &[
                        "--group",
                        group,
                        "--protocol",
                        protocol,
                        "--at-least",
                        path(&snapshot),
                    ],
                ),
                &format!("group {group}'s commits {what}"),
            );
        }
    }

    /// Stops the producer and waits for every client's verdict. The librdkafka groups are
    /// given every record either producer acknowledged (`acked-all.txt`, written whole once
    /// both are done), which is also what `verify` checks; the Java group's last commits go
    /// to `committed-java.txt`.
    fn finish(&mut self) {
        std::fs::write(self.file("stop"), b"").expect("stop file");
        finish(self.producer.take().expect("producer"), "producing");
        let java = self.java.take().expect("the Java client").finish();
        assert_eq!(
            java.acked.lines().count(),
            JAVA_RECORDS,
            "the Java producer's acknowledgements"
        );
        assert!(
            !java.committed.is_empty(),
            "the Java group committed nothing"
        );
        let mut all = std::fs::read_to_string(self.file("acked.txt")).expect("acked.txt");
        all.push_str(&java.acked);
        let partial = self.file("acked-all.txt.partial");
        std::fs::write(&partial, all).expect("write the acknowledged records");
        std::fs::rename(&partial, self.file("acked-all.txt")).expect("rename acked-all.txt");
        std::fs::write(self.file("committed-java.txt"), &java.committed)
            .expect("write the Java group's commits");
        for (group, consumer) in self.consumers.drain(..) {
            finish(consumer, &format!("consuming in group {group}"));
        }
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        for child in self
            .producer
            .iter_mut()
            .chain(self.consumers.iter_mut().map(|(_, c)| c))
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
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

fn controller(cluster: &KubeCluster) -> i32 {
    cluster
        .lease_holder()
        .expect("a controller holds the Lease")
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
    let mut clients = Clients::start(bootstrap.clone(), &cluster.scratch);
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
    let partitions = PARTITIONS.to_string();
    let mut verify = cluster_moves(&bootstrap, TOPIC, &["verify", "--partitions", &partitions]);
    verify.arg("--acked").arg(clients.file("acked-all.txt"));
    run(
        verify,
        "every acknowledged record (librdkafka's and Java's) once in the log",
    );
    let mut java_commits = cluster_moves(
        &bootstrap,
        TOPIC,
        &["consume", "--group", JAVA_GROUP, "--check"],
    );
    java_commits
        .arg("--committed")
        .arg(clients.file("committed-java.txt"));
    run(java_commits, "the Java group's committed offsets");

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
