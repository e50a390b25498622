//! Real clients keeping a kaas cluster busy while a test injures it, and the checks that
//! nothing they were told was lost: a librdkafka producer (idempotent, acks=all) and two
//! librdkafka groups (classic and KIP-848) committing every record
//! (tests/clients/python/cluster_failover.py), and the Java client's `cluster-moves` scenario
//! (an idempotent producer and a committing classic group of its own) on the same topic.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::BrokerId;

use super::cluster::{cluster_moves, finish, java_cluster_moves_paced, run, ClientRun};
use super::kube_cluster::KubeCluster;

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/clients/python/cluster_failover.py"
);

/// Bound of each wait for the cluster to react (the machine is loaded).
pub const REACT: Duration = Duration::from_secs(30);

/// The librdkafka groups: (group, `group.protocol`).
const GROUPS: [(&str, &str); 2] = [
    ("billing-classic", "classic"),
    ("billing-kip848", "consumer"),
];

/// The Java client's group (its consumer commits in it; cluster_moves.py checks it).
const JAVA_GROUP: &str = "billing-java";

/// A cluster_failover.py role on `topic`.
fn role(bootstrap: &str, topic: &str, role: &str, args: &[&str]) -> Command {
    let mut command = Command::new("python3");
    command
        .arg(SCRIPT)
        .args(["--bootstrap", bootstrap, role, "--topic", topic])
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
pub fn wait_for_growth(what: &str, by: u64, count: impl Fn() -> u64) {
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

/// Whether `broker` leads a partition in `assignment`.
pub fn leads_any(assignment: &Assignment, broker: i32) -> bool {
    assignment
        .partitions()
        .any(|(_, leader)| leader.leader == BrokerId(broker))
}

/// Whether `assignment` lists `broker`.
pub fn has_broker(assignment: &Assignment, broker: i32) -> bool {
    assignment.brokers().contains_key(&BrokerId(broker))
}

/// The broker holding the controller Lease.
pub fn controller(cluster: &KubeCluster) -> i32 {
    cluster
        .lease_holder()
        .expect("a controller holds the Lease")
}

/// The running clients, their topic and their files.
pub struct ClusterLoad {
    bootstrap: String,
    topic: String,
    partitions: i32,
    java_records: usize,
    dir: PathBuf,
    producer: Option<Child>,
    consumers: Vec<(&'static str, Child)>,
    java: Option<ClientRun>,
}

impl ClusterLoad {
    /// A file of the clients.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Whether `assignment` has the load's topic with all its partitions.
    pub fn has_topic(&self, assignment: &Assignment) -> bool {
        assignment.topics().iter().any(|(name, topic)| {
            name.as_str() == self.topic && topic.partitions.len() == self.partitions as usize
        })
    }

    /// Starts every client on `topic` (`partitions` partitions) through `bootstrap`, their
    /// files in `dir`; the Java producer sends `java_records` records `java_pace_ms` apart.
    /// Returns once the Java client is producing.
    pub fn start(
        bootstrap: String,
        dir: &Path,
        topic: &str,
        partitions: i32,
        java_records: usize,
        java_pace_ms: u64,
    ) -> ClusterLoad {
        let mut load = ClusterLoad {
            bootstrap,
            topic: topic.to_string(),
            partitions,
            java_records,
            dir: dir.to_path_buf(),
            producer: None,
            consumers: Vec::new(),
            java: None,
        };
        let count = partitions.to_string();
        let producer = role(
            &load.bootstrap,
            topic,
            "produce",
            &[
                "--partitions",
                &count,
                "--pace-ms",
                "4",
                "--until",
                path(&load.file("stop")),
                "--acked",
                path(&load.file("acked.txt")),
                "--progress",
                path(&load.file("produced")),
                "--gaps",
                path(&load.file("gaps.txt")),
            ],
        )
        .spawn()
        .expect("spawn the producer");
        load.producer = Some(producer);
        for (group, protocol) in GROUPS {
            let consumer = role(
                &load.bootstrap,
                topic,
                "consume",
                &[
                    "--group",
                    group,
                    "--protocol",
                    protocol,
                    "--acked",
                    path(&load.file("acked-all.txt")),
                    "--progress",
                    path(&load.file(group)),
                ],
            )
            .spawn()
            .expect("spawn a consumer");
            load.consumers.push((group, consumer));
        }
        let mut java = java_cluster_moves_paced(
            &load.bootstrap,
            topic,
            JAVA_GROUP,
            java_records,
            java_pace_ms,
        );
        java.wait_for_line("PRODUCING");
        load.java = Some(java);
        load
    }

    /// Waits until the producer's acknowledgements and both groups' consumption advance.
    pub fn wait_for_progress(&self, what: &str) {
        wait_for_growth(&format!("acknowledgements {what}"), 100, || {
            progress_count(&self.file("produced"))
        });
        for (group, _) in GROUPS {
            wait_for_growth(&format!("group {group} consuming {what}"), 50, || {
                consumed_count(&self.file(group))
            });
        }
    }

    /// Copies each group's progress file (its committed offsets now) for
    /// [`ClusterLoad::check_commits`].
    pub fn snapshot_commits(&self) {
        for (group, _) in GROUPS {
            std::fs::copy(self.file(group), self.file(&format!("{group}.snapshot")))
                .expect("snapshot a consumer's progress");
        }
    }

    /// Each group's committed offsets are at least those of its last snapshot.
    pub fn check_commits(&self, what: &str) {
        for (group, protocol) in GROUPS {
            let snapshot = self.file(&format!("{group}.snapshot"));
            run(
                role(
                    &self.bootstrap,
                    &self.topic,
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

    /// Stops the producer and waits for every client's verdict (each fails on any error of
    /// its client). The librdkafka groups are given every record either producer
    /// acknowledged (`acked-all.txt`, written whole once both are done); the Java group's last
    /// commits go to `committed-java.txt`.
    pub fn finish(&mut self) {
        std::fs::write(self.file("stop"), b"").expect("stop file");
        finish(self.producer.take().expect("producer"), "producing");
        let java = self.java.take().expect("the Java client").finish();
        assert_eq!(
            java.acked.lines().count(),
            self.java_records,
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

    /// After [`ClusterLoad::finish`]: every record either producer acknowledged is in the log
    /// exactly once at its acknowledged offset and nothing else is (no duplicates), and the
    /// Java group's committed offsets are at least its last commits.
    pub fn verify(&self) {
        let partitions = self.partitions.to_string();
        let mut verify = cluster_moves(
            &self.bootstrap,
            &self.topic,
            &["verify", "--partitions", &partitions],
        );
        verify.arg("--acked").arg(self.file("acked-all.txt"));
        run(
            verify,
            "every acknowledged record (librdkafka's and Java's) once in the log",
        );
        let mut java_commits = cluster_moves(
            &self.bootstrap,
            &self.topic,
            &["consume", "--group", JAVA_GROUP, "--check"],
        );
        java_commits
            .arg("--committed")
            .arg(self.file("committed-java.txt"));
        run(java_commits, "the Java group's committed offsets");
    }

    /// After [`ClusterLoad::finish`]: the librdkafka producer's longest time without an
    /// acknowledgement on each partition, in seconds.
    pub fn ack_gaps(&self) -> Vec<(i32, f64)> {
        let text = std::fs::read_to_string(self.file("gaps.txt")).expect("gaps.txt");
        text.lines()
            .filter_map(|line| {
                let (partition, gap) = line.split_once(' ')?;
                Some((partition.parse().ok()?, gap.parse().ok()?))
            })
            .collect()
    }
}

impl Drop for ClusterLoad {
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
