//! `/readyz`, the Kubernetes readiness probe: a standalone broker is ready as soon as it
//! serves; a cluster broker only once it has applied an assignment and opened every
//! partition that assignment gives it, and from then on while it runs: a later assignment
//! still being opened (or a partition that fails to open) never makes it not ready, since the
//! controller would then give its partitions away mid-takeover.

mod support;

use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use support::cluster::Broker;
use support::http_get;

fn readyz(admin: std::net::SocketAddr) -> Option<(u16, String)> {
    http_get(admin, "/readyz")
}

/// An assignment of version `version` giving broker 0 (Kafka port `port`) every partition of
/// `topics` (name, 22-character id, partitions), at leader epoch 1.
fn one_broker_assignment(version: u64, port: u16, topics: &[(&str, &str, usize)]) -> Assignment {
    let described: Vec<String> = topics
        .iter()
        .map(|(name, id, count)| format!(r#""{name}": {{"id": "{id}", "partitions": {count}}}"#))
        .collect();
    let leaders: Vec<String> = topics
        .iter()
        .map(|(name, _, count)| {
            let one = r#"{"leader": 0, "leader_epoch": 1}"#;
            format!(r#""{name}": [{}]"#, vec![one; *count].join(", "))
        })
        .collect();
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
            "brokers": [{{"id": 0, "host": "127.0.0.1", "port": {port}}}],
            "topics": {{{}}}, "partitions": {{{}}}, "consumerGroups": {{}}}}"#,
        described.join(", "),
        leaders.join(", ")
    );
    Assignment::from_json(text.as_bytes()).expect("valid")
}

fn wait_for_ready(admin: std::net::SocketAddr) -> (u16, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last = None;
    while Instant::now() < deadline {
        last = readyz(admin);
        if last.as_ref().is_some_and(|(code, _)| *code == 200) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    last.expect("the admin endpoint answers")
}

#[test]
fn a_cluster_broker_is_ready_once_its_assignment_is_applied_and_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    std::fs::create_dir_all(kaas_volume::cluster_dir(&data)).expect("cluster dir");
    let mut broker = Broker::new(0, &data);
    broker.start();
    // Alive (the liveness probe's /healthz) but with no assignment: not ready.
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(broker.admin, "/healthz").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, body) = readyz(broker.admin).expect("answers");
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("no assignment"), "{body}");

    let first = one_broker_assignment(1, broker.kafka.port(), &[("t", T_ID, 3)]);
    kaas_cluster_file::write_assignment(&kaas_volume::cluster_dir(&data), &first).expect("write");
    let (code, body) = wait_for_ready(broker.admin);
    assert_eq!(code, 200, "{body}");
    let (_, health) = http_get(broker.admin, "/healthz").expect("healthz");
    assert!(health.contains("\"partitions_open\":3"), "{health}");
}

const T_ID: &str = "ASNFZ4mrze_-3LqYdlQyEA";

#[test]
fn a_ready_cluster_broker_stays_ready_while_a_later_assignment_is_not_all_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    std::fs::create_dir_all(kaas_volume::cluster_dir(&data)).expect("cluster dir");
    let mut broker = Broker::new(0, &data);
    broker.start();
    let port = broker.kafka.port();
    let first = one_broker_assignment(1, port, &[("t", T_ID, 1)]);
    kaas_cluster_file::write_assignment(&kaas_volume::cluster_dir(&data), &first).expect("write");
    assert_eq!(wait_for_ready(broker.admin).0, 200);

    // Version 2 adds a topic whose partition cannot open: a file stands where its directory
    // goes. The broker keeps trying; it must stay ready all the while.
    let u_id = "_____________________w";
    let blocked = data.join("topics").join(format!("u@{u_id}"));
    std::fs::create_dir_all(&blocked).expect("topic dir");
    std::fs::write(blocked.join("0"), b"not a directory").expect("blocking file");
    let second = one_broker_assignment(2, port, &[("t", T_ID, 1), ("u", u_id, 1)]);
    kaas_cluster_file::write_assignment(&kaas_volume::cluster_dir(&data), &second).expect("write");
    broker.wait_for_version(2);
    let (_, health) = http_get(broker.admin, "/healthz").expect("healthz");
    assert!(
        health.contains("\"partitions_led\":2") && health.contains("\"partitions_open\":1"),
        "{health}"
    );
    for _ in 0..10 {
        let (code, body) = readyz(broker.admin).expect("answers");
        assert_eq!(
            code, 200,
            "still ready while a led partition is not open: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_standalone_broker_is_ready_when_it_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kaas = support::Kaas::start(Some(dir.path()), &[]);
    let (code, body) = readyz(kaas.admin).expect("answers");
    assert_eq!(code, 200, "{body}");
}
