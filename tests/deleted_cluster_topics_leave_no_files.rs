//! A topic deleted from the assignment leaves no files on the shared volume, and a topic
//! created again under the same name (a new topic id) starts empty, as in Kafka (three real
//! `kaas` processes on one data directory, the test writing `assignment.json`).

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use kaas_engine::batch::encode_batch_for_tests;
use support::cluster::{file_brokers, start_all, Broker};
use support::WireClient;

const TOPIC: &str = "reborn";
const FIRST_ID: &str = "ASNFZ4mrze_-3LqYdlQyEA";
const SECOND_ID: &str = "_u3MqYdlQyEBI0VniavN7w";
const THIRD_ID: &str = "EjRWeJq83vAQIDBAUGBwgA";
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// Assignment `version`: the three brokers, and `topic` = (id, leader of each partition at
/// leader epoch 0) when given.
fn write_assignment(
    cluster: &Path,
    version: u64,
    brokers: &[Broker],
    topic: Option<(&str, &[i32])>,
) {
    let brokers: Vec<String> = brokers
        .iter()
        .map(|b| {
            format!(
                r#"{{"id": {}, "host": "127.0.0.1", "port": {}}}"#,
                b.id,
                b.kafka.port()
            )
        })
        .collect();
    let (topics, partitions) = match topic {
        Some((id, leaders)) => {
            let leaders: Vec<String> = leaders
                .iter()
                .map(|leader| format!(r#"{{"leader": {leader}, "leader_epoch": 0}}"#))
                .collect();
            (
                format!(
                    r#""{TOPIC}": {{"id": "{id}", "partitions": {}}}"#,
                    leaders.len()
                ),
                format!(r#""{TOPIC}": [{}]"#, leaders.join(", ")),
            )
        }
        None => (String::new(), String::new()),
    };
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
            "brokers": [{}], "topics": {{{topics}}}, "partitions": {{{partitions}}},
            "consumerGroups": {{}}}}"#,
        brokers.join(", ")
    );
    let assignment =
        kaas_cluster::assignment::Assignment::from_json(text.as_bytes()).expect("valid");
    kaas_cluster_file::write_assignment(cluster, &assignment).expect("write assignment.json");
}

/// Produces one record to `partition`, retrying while the leader takes it over: (error, base
/// offset) of the first other answer.
fn produce(client: &mut WireClient, partition: i32, value: &str) -> (i16, i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let batch = encode_batch_for_tests(&[(None, Some(value.as_bytes()))], 1_000, -1, 0, -1);
        let answer = client.produce(TOPIC, vec![(partition, batch)]);
        let (code, offset) = (answer[0].1, answer[0].2);
        let retriable = code == NOT_LEADER_OR_FOLLOWER || code == UNKNOWN_TOPIC_OR_PARTITION;
        if !retriable || Instant::now() > deadline {
            return (code, offset);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every file under `topics/` (relative paths), recursively.
fn topic_files(data: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if let Ok(relative) = path.strip_prefix(root) {
                out.push(relative.display().to_string());
            }
        }
    }
    let mut files = Vec::new();
    walk(&data.join("topics"), data, &mut files);
    files.sort();
    files
}

#[test]
fn a_deleted_topic_goes_from_the_volume_and_comes_back_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let cluster = kaas_volume::cluster_dir(&data);
    let mut brokers = file_brokers(3, &data);
    // Partition 0 on broker 0, partition 1 on broker 1; broker 2 leads nothing of it.
    write_assignment(&cluster, 1, &brokers, Some((FIRST_ID, &[0, 1])));
    start_all(&mut brokers, 1);
    let mut leaders = [
        WireClient::connect(brokers[0].kafka),
        WireClient::connect(brokers[1].kafka),
    ];
    for round in 0..3 {
        for (partition, client) in leaders.iter_mut().enumerate() {
            let value = format!("first-life-{round}");
            assert_eq!(produce(client, partition as i32, &value), (0, round));
        }
    }
    assert!(!topic_files(&data).is_empty(), "the topic has files");

    // Deleted: once every broker follows, nothing of it is left under topics/.
    write_assignment(&cluster, 2, &brokers, None);
    for broker in &mut brokers {
        broker.wait_for_version(2);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !topic_files(&data).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        topic_files(&data),
        Vec::<String>::new(),
        "the deleted topic's files are gone"
    );

    // Created again under the same name with a new id, led the other way round: empty.
    write_assignment(&cluster, 3, &brokers, Some((SECOND_ID, &[1, 0])));
    for broker in &mut brokers {
        broker.wait_for_version(3);
    }
    let mut leaders = [
        WireClient::connect(brokers[1].kafka),
        WireClient::connect(brokers[0].kafka),
    ];
    for (partition, client) in leaders.iter_mut().enumerate() {
        assert_eq!(
            produce(client, partition as i32, "second-life"),
            (0, 0),
            "the new topic {TOPIC} starts at offset 0"
        );
        assert_eq!(produce(client, partition as i32, "second-life"), (0, 1));
    }
    let second_dir = format!("topics/{TOPIC}@{SECOND_ID}/");
    assert!(topic_files(&data)
        .iter()
        .all(|f| f.starts_with(&second_dir)));

    // Deleted and created again between two assignments (same name, new id, same leaders):
    // the open logs of the old id are closed, its files go, the new one starts empty.
    write_assignment(&cluster, 4, &brokers, Some((THIRD_ID, &[1, 0])));
    for broker in &mut brokers {
        broker.wait_for_version(4);
    }
    for (partition, client) in leaders.iter_mut().enumerate() {
        assert_eq!(
            produce(client, partition as i32, "third-life"),
            (0, 0),
            "the topic replaced in one step starts at offset 0"
        );
    }
    let third_dir = format!("topics/{TOPIC}@{THIRD_ID}/");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !topic_files(&data).iter().all(|f| f.starts_with(&third_dir)) {
        assert!(
            Instant::now() < deadline,
            "files of the replaced topic left: {:?}",
            topic_files(&data)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for broker in &mut brokers {
        broker.terminate();
    }
}
