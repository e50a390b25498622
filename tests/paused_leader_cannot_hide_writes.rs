//! The storage fence in cluster mode, end to end: a leader paused by the kernel (SIGSTOP)
//! while another broker takes its partitions and its group over at a higher epoch wakes up
//! (SIGCONT) still believing it leads, and whatever it does then is neither acknowledged nor
//! visible.
//!
//! Three real `kaas` processes share one data directory; the test writes `assignment.json`.
//! Idempotent librdkafka, franz-go and Java producers (acks=all) write throughout (the Java
//! client's `cluster-moves` scenario also consumes in a group of its own that moves from broker
//! 1 to broker 0 meanwhile) and a group commits on broker 2 before it is paused. While it is stopped, the test moves its partitions to
//! brokers 0 and 1 at leader epoch 2 and the group to broker 0, and writes to the new leaders.
//! Requests sent to the paused broker meanwhile (a produce and an offset commit, in flight
//! in its socket) are answered after SIGCONT.
//!
//! Broker 2 follows its own copy of `assignment.json` (every other file of the volume is
//! shared, through symlinks: `support::cluster::lagging_view_dir`), so after waking it keeps
//! believing the old assignment until the test lets it see the new one: a broker whose view
//! lags, as the fence must tolerate (a paused follower thread, a cut-off controller), made
//! deterministic. Without the fence it would append to the partition files and the group's
//! offsets file the new owners use, and acknowledge.
//!
//! Afterwards, and again after a restart of all three from the files: every acknowledged
//! record is there exactly once at its acknowledged offset, offsets dense, nothing the stale
//! broker wrote after waking is in any partition, and the group's committed offsets are those
//! its consumer committed (none past a partition's end, where the stale commit points); the
//! Java group's too.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kaas_engine::batch::encode_batch_for_tests;
use kaas_net::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kaas_net::protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestGroup};
use kaas_net::protocol::messages::produce::ProduceRequest;
use kaas_net::protocol::{ApiMessage, Response};
use support::cluster::{
    append_lines, bootstrap, cluster_moves, endpoints, finish, java_cluster_moves,
    lagging_view_dir, run, start_all, write_assignment, Broker,
};
use support::{produce_request, WireClient};

const TOPIC: &str = "orders";
const PARTITIONS: usize = 6;
const GROUP: &str = "billing";
/// The Java client's group: on broker 1 in assignment 1, on broker 0 from assignment 2 on.
const JAVA_GROUP: &str = "billing-java";
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
/// What a leader answers when its flush finds a newer claim: the batch may be in the files the
/// new leader reads ("possibly written"), so producers retry the same sequence there.
const REQUEST_TIMED_OUT: i16 = 7;
const NOT_COORDINATOR: i16 = 16;
/// What the stale broker tries to commit: past the end of every partition.
const STALE_OFFSET: i64 = 999_999;

fn batch(value: &str) -> Vec<u8> {
    encode_batch_for_tests(
        &[(None, Some(value.as_bytes()))],
        1_700_000_000_000,
        -1,
        -1,
        -1,
    )
}

fn produce_one(topic_partition: i32, value: &str) -> ProduceRequest {
    produce_request(TOPIC, vec![(topic_partition, batch(value))])
}

/// (error code, base offset) of a one-partition produce answer.
fn produce_answer(response: Response) -> (i16, i64) {
    match response {
        Response::Produce(r) => {
            let partition = &r.responses[0].partition_responses[0];
            (partition.error_code, partition.base_offset)
        }
        other => panic!("unexpected {other:?}"),
    }
}

fn stale_commit() -> OffsetCommitRequest {
    OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id_or_member_epoch: -1,
        member_id: String::new(),
        topics: vec![OffsetCommitRequestTopic {
            name: TOPIC.into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: STALE_OFFSET,
                committed_metadata: Some(String::new()),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The group's committed offsets (partition → offset) at `broker`, `None` while it answers
/// with an error (not loaded yet, not its coordinator yet).
fn committed_at(broker: &Broker) -> Option<BTreeMap<i32, i64>> {
    let request = OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup {
            group_id: GROUP.into(),
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::OffsetFetch(fetched) = WireClient::connect(broker.kafka).call(8, &request) else {
        panic!("not an OffsetFetch answer")
    };
    let group = &fetched.groups[0];
    (group.error_code == 0).then(|| {
        group
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| (p.partition_index, p.committed_offset))
            .collect()
    })
}

fn commit_answer(response: Response) -> i16 {
    match response {
        Response::OffsetCommit(r) => r.topics[0].partitions[0].error_code,
        other => panic!("unexpected {other:?}"),
    }
}

/// Produces `value` to `partition` at `leader` (retrying while it is still opening the
/// partition) and returns its offset.
fn produce_acked(leader: &Broker, partition: i32, value: &str) -> i64 {
    let mut client = WireClient::connect(leader.kafka);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (error, offset) = produce_answer(client.call(9, &produce_one(partition, value)));
        if error == 0 {
            return offset;
        }
        assert!(
            error == NOT_LEADER_OR_FOLLOWER && Instant::now() < deadline,
            "producing {value} to partition {partition} at broker {}: error {error}",
            leader.id
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn write_both(
    dirs: &[&Path],
    version: u64,
    brokers: &[(i32, u16)],
    leaders: &[(i32, i32)],
    group: i32,
) {
    for dir in dirs {
        write_assignment(
            &kaas_volume::cluster_dir(dir),
            version,
            brokers,
            TOPIC,
            leaders,
            &[
                (GROUP, group),
                (JAVA_GROUP, if version == 1 { 1 } else { 0 }),
            ],
        );
    }
}

#[test]
fn a_paused_leader_that_wakes_up_acknowledges_nothing_and_leaves_no_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shared = dir.path().join("data");
    let lagging = dir.path().join("data-2");
    lagging_view_dir(&shared, &lagging);
    let acked = dir.path().join("acked.txt");
    let committed = dir.path().join("committed.txt");
    let java_committed = dir.path().join("committed-java.txt");
    let mut brokers = vec![
        Broker::new(0, &shared),
        Broker::new(1, &shared),
        Broker::new(2, &lagging),
    ];
    let all = endpoints(&brokers);
    let bootstrap = bootstrap(&brokers);
    let partitions = PARTITIONS.to_string();
    let started = Instant::now();

    // Version 1: partition p on broker p % 3 at leader epoch 1, the group on broker 2.
    let mut leaders: Vec<(i32, i32)> = (0..PARTITIONS as i32).map(|p| (p % 3, 1)).collect();
    write_both(&[&shared, &lagging], 1, &all, &leaders, 2);
    start_all(&mut brokers, 1);

    let mut java = java_cluster_moves(&bootstrap, TOPIC, JAVA_GROUP, 2000);
    let producer = cluster_moves(
        &bootstrap,
        TOPIC,
        &[
            "produce",
            "--partitions",
            &partitions,
            "--records",
            "2500",
            "--pace-ms",
            "4",
        ],
    )
    .arg("--acked")
    .arg(&acked)
    .spawn()
    .expect("spawn producer");
    let go_binary = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/go/scenarios");
    let go_producer = Command::new(&go_binary)
        .args(["-bootstrap", &bootstrap, "-scenario", "cluster-produce"])
        .args(["-topic", TOPIC, "-records", "1500"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "run {} (built by tests/clients/prepare.sh): {e}",
                go_binary.display()
            )
        });
    std::thread::sleep(Duration::from_millis(1000));
    // The group commits on broker 2, its coordinator.
    let mut consume = cluster_moves(
        &bootstrap,
        TOPIC,
        &[
            "consume",
            "--group",
            GROUP,
            "--records",
            "60",
            "--pace-ms",
            "5",
        ],
    );
    consume.arg("--committed").arg(&committed);
    run(consume, "consuming on broker 2");

    // Broker 2 stops while the Java client produces too; a client's produce and offset commit
    // reach its socket meanwhile.
    java.wait_for_line("PRODUCING");
    let mut stale = WireClient::connect(brokers[2].kafka);
    brokers[2].pause();
    let stale_produce = stale
        .send(9, &produce_one(2, "stale-in-flight"))
        .expect("sent");
    let stale_commit_id = stale.send(8, &stale_commit()).expect("sent");

    // Its partitions (2 and 5) go to brokers 0 and 1 at leader epoch 2, the group to broker 0;
    // broker 2 leaves the assignment. The new leaders take writes.
    for (partition, (leader, epoch)) in leaders.iter_mut().enumerate() {
        if *leader == 2 {
            *leader = (partition % 2) as i32;
            *epoch = 2;
        }
    }
    let survivors = &all[..2];
    write_both(&[&shared], 2, survivors, &leaders, 0);
    brokers[0].wait_for_version(2);
    brokers[1].wait_for_version(2);
    let mut ours = Vec::new();
    for round in 0..3 {
        for partition in [2, 5] {
            let value = format!("new-leader-{partition}-{round}");
            let leader = &brokers[leaders[partition as usize].0 as usize];
            ours.push((partition, produce_acked(leader, partition, &value), value));
        }
    }

    // The new coordinator serves the group's commits: it has claimed the group, so what the
    // old one does from now on cannot count.
    let consumed: BTreeMap<i32, i64> = std::fs::read_to_string(&committed)
        .expect("committed file")
        .lines()
        .map(|line| {
            let (partition, offset) = line.split_once(' ').expect("partition offset");
            (
                partition.parse().expect("partition"),
                offset.parse().expect("offset"),
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while committed_at(&brokers[0]).as_ref() != Some(&consumed) {
        assert!(
            Instant::now() < deadline,
            "broker 0 never served the commits {consumed:?}: {:?}",
            committed_at(&brokers[0])
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // Broker 2 wakes up believing it still leads partitions 2 and 5 and coordinates the group.
    brokers[2].resume();
    let (error, _) = produce_answer(
        stale
            .receive(ProduceRequest::API_KEY, 9, stale_produce)
            .expect("the in-flight produce is answered"),
    );
    assert!(
        error == NOT_LEADER_OR_FOLLOWER || error == REQUEST_TIMED_OUT,
        "the paused leader's in-flight produce is refused, never acknowledged: error {error}"
    );
    let error = commit_answer(
        stale
            .receive(OffsetCommitRequest::API_KEY, 8, stale_commit_id)
            .expect("the in-flight commit is answered"),
    );
    assert_eq!(
        error, NOT_COORDINATOR,
        "the paused coordinator's commit is refused"
    );
    // Later requests too: partition 2 is given up, partition 5 is fenced at its first flush
    // (REQUEST_TIMED_OUT: its batch may have reached the files) or given up by then.
    for (partition, value) in [
        (2, "stale-after-wake"),
        (5, "stale-after-wake"),
        (2, "stale-again"),
    ] {
        let (error, _) = produce_answer(stale.call(9, &produce_one(partition, value)));
        let refused =
            error == NOT_LEADER_OR_FOLLOWER || (partition == 5 && error == REQUEST_TIMED_OUT);
        assert!(
            refused,
            "stale produce of {value} to partition {partition}: error {error}"
        );
    }
    let error = commit_answer(stale.call(8, &stale_commit()));
    assert_eq!(error, NOT_COORDINATOR, "a second stale commit");
    // Still following assignment 1, it has given up both fenced partitions: nothing open
    // although its view says it leads two.
    brokers[2].wait_for_health(r#""partitions_led":2,"partitions_open":0"#);
    // Now it sees the assignment too.
    write_both(&[&lagging], 2, survivors, &leaders, 0);
    brokers[2].wait_for_version(2);
    brokers[2].wait_for_health(r#""partitions_led":0,"partitions_open":0"#);

    finish(producer, "producing through the pause and the move");
    let go_output = go_producer
        .wait_with_output()
        .expect("wait for the Go producer");
    let go_stdout = String::from_utf8_lossy(&go_output.stdout);
    assert!(
        go_output.status.success() && go_stdout.contains("PASS cluster-produce"),
        "the franz-go producer failed: {}",
        go_stdout
            .lines()
            .filter(|l| !l.starts_with("ACKED"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let java = java.finish();
    append_lines(&java_committed, &java.committed);
    let mut lines = std::fs::read_to_string(&acked).expect("acked file");
    lines.push_str(&java.acked);
    for line in go_stdout.lines() {
        if let Some(record) = line.strip_prefix("ACKED ") {
            lines.push_str(record);
            lines.push('\n');
        }
    }
    for (partition, offset, value) in &ours {
        lines.push_str(&format!("{partition} {offset} {value}\n"));
    }
    std::fs::write(&acked, lines).expect("acked file");
    let verify = || {
        let mut command =
            cluster_moves(&bootstrap, TOPIC, &["verify", "--partitions", &partitions]);
        command.arg("--acked").arg(&acked);
        command
    };
    let check_commits = |when: &str| {
        for (group, file) in [(GROUP, &committed), (JAVA_GROUP, &java_committed)] {
            let mut command =
                cluster_moves(&bootstrap, TOPIC, &["consume", "--group", group, "--check"]);
            command.arg("--committed").arg(file);
            run(command, &format!("committed offsets of {group} {when}"));
        }
    };
    run(verify(), "verifying after the stale broker woke up");
    check_commits("after the stale broker woke up");

    // All three restart from the files, the partitions spread again at leader epoch 3 and the
    // group on broker 1.
    for broker in &mut brokers {
        broker.terminate();
    }
    for (partition, (leader, epoch)) in leaders.iter_mut().enumerate() {
        *leader = (partition % 3) as i32;
        *epoch = 3;
    }
    write_both(&[&shared, &lagging], 3, &all, &leaders, 1);
    for broker in &mut brokers {
        broker.start();
    }
    for broker in &mut brokers {
        broker.wait_for_version(3);
        // Open exactly what the assignment gives it (the start-up sweep leaves nothing else).
        broker.wait_for_health(r#""partitions_led":2,"partitions_open":2"#);
    }
    run(verify(), "verifying after restarting all brokers");
    check_commits("after restarting all brokers");
    for broker in &mut brokers {
        broker.terminate();
    }
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "bounded: took {:?}",
        started.elapsed()
    );
}
