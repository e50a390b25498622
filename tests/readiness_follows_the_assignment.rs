//! `/readyz`, the Kubernetes readiness probe: a standalone broker is ready as soon as it
//! serves; a cluster broker only once it has applied an assignment and opened every
//! partition that assignment gives it.

mod support;

use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use support::cluster::Broker;
use support::http_get;

fn readyz(admin: std::net::SocketAddr) -> Option<(u16, String)> {
    http_get(admin, "/readyz")
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

    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": 1,
            "brokers": [{{"id": 0, "host": "127.0.0.1", "port": {}}}],
            "topics": {{"t": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 3}}}},
            "partitions": {{"t": [{{"leader": 0, "leader_epoch": 1}}, {{"leader": 0, "leader_epoch": 1}},
                                  {{"leader": 0, "leader_epoch": 1}}]}},
            "consumerGroups": {{}}}}"#,
        broker.kafka.port()
    );
    let assignment = Assignment::from_json(text.as_bytes()).expect("valid");
    kaas_cluster_file::write_assignment(&kaas_volume::cluster_dir(&data), &assignment)
        .expect("write");
    let (code, body) = wait_for_ready(broker.admin);
    assert_eq!(code, 200, "{body}");
    let (_, health) = http_get(broker.admin, "/healthz").expect("healthz");
    assert!(health.contains("\"partitions_open\":3"), "{health}");
}

#[test]
fn a_standalone_broker_is_ready_when_it_serves() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kaas = support::Kaas::start(Some(dir.path()), &[]);
    let (code, body) = readyz(kaas.admin).expect("answers");
    assert_eq!(code, 200, "{body}");
}
