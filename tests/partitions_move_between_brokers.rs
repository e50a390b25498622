//! Cluster mode end to end: three real `kaas` processes share one data directory and follow
//! `assignment.json`, which this test writes (atomically, with kaas-cluster-file's writer).
//! Three real clients work on one topic at once: idempotent producers (acks=all) of librdkafka
//! (tests/clients/python/cluster_moves.py), the Java client and franz-go (their `cluster-moves`
//! scenarios, which also consume in a group of their own and commit as they go) keep producing
//! while partitions and the Java and franz-go groups move between brokers and a leader and
//! coordinator is killed with `kill -9` and its partitions and groups moved to the survivors.
//! Afterwards every record any of them had acknowledged is there exactly once at its
//! acknowledged offset, offsets dense (cluster_moves.py's `verify` over all three clients'
//! records). A librdkafka group then consumes and commits while it moves to another broker.
//! Every group's committed offsets are at least what its consumer last committed and never past
//! a partition's end. Then all three brokers restart from the files and both checks hold again.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::cluster::{
    append_lines, bootstrap, file_brokers, go_cluster_moves, java_cluster_moves, start_all, Broker,
};

const TOPIC: &str = "orders";
const PARTITIONS: usize = 6;
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/clients/python/cluster_moves.py"
);
/// The librdkafka group (cluster_moves.py consume), the Java and the franz-go one.
const GROUP: &str = "billing";
const JAVA_GROUP: &str = "billing-java";
const GO_GROUP: &str = "billing-go";

/// Writes assignment `version`: `live` brokers, partition leaders and epochs, and the
/// coordinators of `GROUP`, `JAVA_GROUP` and `GO_GROUP`.
fn write_assignment(
    data_dir: &Path,
    brokers: &[Broker],
    live: &[i32],
    version: u64,
    leaders: &[(i32, i32)],
    coordinators: [i32; 3],
) {
    let live: Vec<(i32, u16)> = brokers
        .iter()
        .filter(|b| live.contains(&b.id))
        .map(support::cluster::endpoint)
        .collect();
    let groups = [GROUP, JAVA_GROUP, GO_GROUP];
    let groups: Vec<(&str, i32)> = groups.into_iter().zip(coordinators).collect();
    support::cluster::write_assignment(
        &kaas_volume::cluster_dir(data_dir),
        version,
        &live,
        TOPIC,
        leaders,
        &groups,
    );
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
    let acked = dir.path().join("acked.txt");
    let committed = dir.path().join("committed.txt");
    let java_committed = dir.path().join("committed-java.txt");
    let go_committed = dir.path().join("committed-go.txt");
    let mut brokers = file_brokers(3, &data);
    let bootstrap = bootstrap(&brokers);
    let partitions = PARTITIONS.to_string();
    let started = Instant::now();

    let mut leaders: Vec<(i32, i32)> = (0..PARTITIONS as i32).map(|p| (p % 3, 1)).collect();
    write_assignment(&data, &brokers, &[0, 1, 2], 1, &leaders, [0, 1, 2]);
    start_all(&mut brokers, 1);

    // Produce with all three clients while partitions and groups move and a broker dies; the
    // Java and franz-go clients consume in their groups meanwhile.
    let mut java = java_cluster_moves(&bootstrap, TOPIC, JAVA_GROUP, 1500);
    let mut go = go_cluster_moves(&bootstrap, TOPIC, GO_GROUP, 1500);
    java.wait_for_line("PRODUCING");
    go.wait_for_line("PRODUCING");
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
    // Broker 0's partitions go to broker 1, broker 1's to broker 2, at a new epoch; the Java
    // group moves to broker 2, the franz-go group to broker 0.
    for (leader, epoch) in &mut leaders {
        if *leader < 2 {
            *leader += 1;
            *epoch = 2;
        }
    }
    write_assignment(&data, &brokers, &[0, 1, 2], 2, &leaders, [0, 2, 0]);
    std::thread::sleep(Duration::from_millis(1500));
    // Broker 2 (now leading four partitions and coordinating the Java group) dies; they go to
    // brokers 0 and 1, and the franz-go group moves once more.
    brokers[2].kill9();
    for (partition, (leader, epoch)) in leaders.iter_mut().enumerate() {
        if *leader == 2 {
            *leader = (partition % 2) as i32;
            *epoch = 3;
        }
    }
    write_assignment(&data, &brokers, &[0, 1], 3, &leaders, [0, 0, 1]);
    finish(producer, "producing through moves and a kill -9");
    let java = java.finish();
    let go = go.finish();
    append_lines(&acked, &java.acked);
    append_lines(&acked, &go.acked);
    append_lines(&java_committed, &java.committed);
    append_lines(&go_committed, &go.committed);
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
            GROUP,
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
    write_assignment(&data, &brokers, &[0, 1], 4, &leaders, [1, 0, 1]);
    finish(consumer, "consuming while the group moves");
    let groups: [(&str, &PathBuf); 3] = [
        (GROUP, &committed),
        (JAVA_GROUP, &java_committed),
        (GO_GROUP, &go_committed),
    ];
    let check_commits = |when: &str| {
        for (group, file) in groups {
            let mut command = python(&bootstrap, &["consume", "--group", group, "--check"]);
            command.arg("--committed").arg(file);
            run(command, &format!("committed offsets of {group} {when}"));
        }
    };
    check_commits("after the groups moved");

    // Restart all three from the files, with the partitions and groups spread again.
    brokers[0].terminate();
    brokers[1].terminate();
    for (partition, (leader, epoch)) in leaders.iter_mut().enumerate() {
        *leader = (partition % 3) as i32;
        *epoch = 4;
    }
    write_assignment(&data, &brokers, &[0, 1, 2], 5, &leaders, [2, 1, 2]);
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
    check_commits("after restarting all brokers");
    for broker in &mut brokers {
        broker.terminate();
    }
    assert!(
        started.elapsed() < Duration::from_secs(150),
        "bounded: took {:?}",
        started.elapsed()
    );
}
