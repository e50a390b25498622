//! Cluster mode end to end: three real `kaas` processes share one data directory and follow
//! `assignment.json`, which this test writes (atomically, with kaas-cluster-file's writer).
//! An idempotent librdkafka producer (acks=all) keeps producing while partitions move between
//! brokers and a leader is killed with `kill -9` and its partitions moved to the survivors;
//! afterwards every acknowledged record is there exactly once at its acknowledged offset,
//! offsets dense. A group consumes and commits while it moves to another broker, and its
//! committed offsets stay. Then all three restart from the files and both checks hold again.

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use support::cluster::Broker;

const TOPIC: &str = "orders";
const PARTITIONS: usize = 6;
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/clients/python/cluster_moves.py"
);

/// Writes assignment `version`: `live` brokers, partition leaders and epochs, the group's
/// coordinator.
fn write_assignment(
    data_dir: &Path,
    brokers: &[Broker],
    live: &[i32],
    version: u64,
    leaders: &[(i32, i32)],
    group_broker: i32,
) {
    let brokers: Vec<String> = brokers
        .iter()
        .filter(|b| live.contains(&b.id))
        .map(|b| {
            format!(
                r#"{{"id": {}, "host": "127.0.0.1", "port": {}}}"#,
                b.id,
                b.kafka.port()
            )
        })
        .collect();
    let partitions: Vec<String> = leaders
        .iter()
        .map(|(leader, epoch)| format!(r#"{{"leader": {leader}, "leader_epoch": {epoch}}}"#))
        .collect();
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
            "brokers": [{}],
            "topics": {{"{TOPIC}": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": {}}}}},
            "partitions": {{"{TOPIC}": [{}]}},
            "consumerGroups": {{"billing": {group_broker}}}}}"#,
        brokers.join(", "),
        leaders.len(),
        partitions.join(", ")
    );
    let assignment = Assignment::from_json(text.as_bytes()).expect("a valid assignment");
    kaas_cluster_file::write_assignment(&data_dir.join("__cluster"), &assignment)
        .expect("write assignment.json");
}

fn python(bootstrap: &str, args: &[&str]) -> Command {
    let mut command = Command::new("python3");
    command
        .arg(SCRIPT)
        .args(["--bootstrap", bootstrap])
        .args(args)
        .args(["--topic", TOPIC]);
    command
}

/// Runs a phase to completion (at most 120 s) and asserts it passed.
fn run(mut command: Command, what: &str) {
    let child = command
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn python3");
    finish(child, what);
}

fn finish(child: Child, what: &str) {
    let output = child.wait_with_output().expect("wait for python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("PASS"),
        "{what} failed: {stdout}"
    );
}

#[test]
fn acked_records_and_commits_survive_moves_kills_and_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(data.join("__cluster")).expect("data dir");
    let acked = dir.path().join("acked.txt");
    let committed = dir.path().join("committed.txt");
    let mut brokers: Vec<Broker> = (0..3).map(|id| Broker::new(id, &data)).collect();
    let bootstrap = brokers
        .iter()
        .map(|b| b.kafka.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let partitions = PARTITIONS.to_string();
    let started = Instant::now();

    let mut leaders: Vec<(i32, i32)> = (0..PARTITIONS as i32).map(|p| (p % 3, 1)).collect();
    write_assignment(&data, &brokers, &[0, 1, 2], 1, &leaders, 0);
    for broker in &mut brokers {
        broker.start();
    }
    for broker in &mut brokers {
        broker.wait_for_version(1);
    }

    // Produce while partitions move and a leader dies.
    let producer = python(
        &bootstrap,
        &[
            "produce",
            "--partitions",
            &partitions,
            "--records",
            "1200",
            "--pace-ms",
            "4",
        ],
    )
    .arg("--acked")
    .arg(&acked)
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn producer");
    std::thread::sleep(Duration::from_millis(1500));
    // Broker 0's partitions go to broker 1, broker 1's to broker 2, at a new epoch.
    for (leader, epoch) in &mut leaders {
        if *leader < 2 {
            *leader += 1;
            *epoch = 2;
        }
    }
    write_assignment(&data, &brokers, &[0, 1, 2], 2, &leaders, 0);
    std::thread::sleep(Duration::from_millis(1500));
    // Broker 2 (now leading four partitions) dies; they go to brokers 0 and 1.
    brokers[2].kill9();
    for (partition, (leader, epoch)) in leaders.iter_mut().enumerate() {
        if *leader == 2 {
            *leader = (partition % 2) as i32;
            *epoch = 3;
        }
    }
    write_assignment(&data, &brokers, &[0, 1], 3, &leaders, 0);
    finish(producer, "producing through moves and a kill -9");
    brokers[0].wait_for_version(3);
    brokers[1].wait_for_version(3);
    let verify = || {
        let mut command = python(&bootstrap, &["verify", "--partitions", &partitions]);
        command.arg("--acked").arg(&acked);
        command
    };
    run(verify(), "verifying after the moves");

    // Consume in a group while its coordinator moves from broker 0 to broker 1.
    let consumer = python(
        &bootstrap,
        &[
            "consume",
            "--group",
            "billing",
            "--records",
            "200",
            "--pace-ms",
            "10",
        ],
    )
    .arg("--committed")
    .arg(&committed)
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawn consumer");
    std::thread::sleep(Duration::from_millis(2500));
    write_assignment(&data, &brokers, &[0, 1], 4, &leaders, 1);
    finish(consumer, "consuming while the group moves");
    let check_commits = || {
        let mut command = python(&bootstrap, &["consume", "--group", "billing", "--check"]);
        command.arg("--committed").arg(&committed);
        command
    };
    run(check_commits(), "committed offsets after the group moved");

    // Restart all three from the files, with the partitions spread again.
    brokers[0].terminate();
    brokers[1].terminate();
    for (partition, (leader, epoch)) in leaders.iter_mut().enumerate() {
        *leader = (partition % 3) as i32;
        *epoch = 4;
    }
    write_assignment(&data, &brokers, &[0, 1, 2], 5, &leaders, 2);
    for broker in &mut brokers {
        broker.start();
    }
    for broker in &mut brokers {
        broker.wait_for_version(5);
        // The view is published before the open phase ends: until a partition is open its
        // leader answers NOT_LEADER_OR_FOLLOWER, which the watermark query does not retry.
        broker.wait_for_health(&format!("\"partitions_open\":{}", PARTITIONS / 3));
    }
    run(verify(), "verifying after restarting all brokers");
    run(
        check_commits(),
        "committed offsets after restarting all brokers",
    );
    for broker in &mut brokers {
        broker.terminate();
    }
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "bounded: took {:?}",
        started.elapsed()
    );
}
