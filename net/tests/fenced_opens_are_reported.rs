//! A cluster broker reports the partitions it was given but cannot claim: a real `Broker` in
//! cluster mode (in this process, following `assignment.json` on a temporary volume) is given
//! a partition whose directory holds a newer claim (as a broker that followed a deposed
//! controller's file leaves it). The open is refused by the storage fence, and
//! `Broker::fence_reports` (what the cluster core puts in every heartbeat ping) names the
//! partition with the claim's leader epoch; once an assignment gives the partition an epoch
//! above the claim, it opens and the report is gone. A partition given to another broker is
//! not reported.

#![allow(clippy::unwrap_used)]

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::{Duration, Instant};

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::{LeaderEpoch, TopicName, TopicPartition};
use kaas_net::runtime::server::Broker;
use kaas_net::shard::config::{BrokerConfig, ClusterSettings};

const TOPIC_ID: &str = "ASNFZ4mrze_-3LqYdlQyEA";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// `orders` with partition 0 on broker 0 at `epoch_0` and partition 1 on broker 1.
fn write_assignment(cluster_dir: &Path, version: u64, port: u16, epoch_0: i32) {
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
            "brokers": [{{"id": 0, "host": "127.0.0.1", "port": {port}}},
                        {{"id": 1, "host": "127.0.0.1", "port": 1}}],
            "topics": {{"orders": {{"id": "{TOPIC_ID}", "partitions": 2}}}},
            "partitions": {{"orders": [{{"leader": 0, "leader_epoch": {epoch_0}}},
                                      {{"leader": 1, "leader_epoch": 1}}]}}}}"#
    );
    let assignment = Assignment::from_json(text.as_bytes()).unwrap();
    kaas_cluster_file::write_assignment(cluster_dir, &assignment).unwrap();
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_open_refused_by_a_newer_claim_is_reported_until_an_epoch_above_it_opens() {
    let dir = tempfile::tempdir().unwrap();
    let cluster_dir = kaas_volume::cluster_dir(dir.path());
    std::fs::create_dir_all(&cluster_dir).unwrap();
    // A claim at fence epoch 10 (leader epoch 9) on orders-0 and orders-1.
    for partition in [0, 1] {
        let claims = dir
            .path()
            .join(
                kaas_engine::topic_incarnation::partition_dir("orders", TOPIC_ID, partition)
                    .unwrap(),
            )
            .join("claims");
        std::fs::create_dir_all(&claims).unwrap();
        std::fs::write(claims.join(format!("{:020}", 10)), b"").unwrap();
    }
    let port = free_port();
    write_assignment(&cluster_dir, 1, port, 3);
    let mut config = BrokerConfig::new(SocketAddr::from(([127, 0, 0, 1], port)));
    config.shards = 2;
    config.data_dir = Some(dir.path().to_path_buf());
    config.cluster = Some(ClusterSettings { broker_id: 0 });
    let broker = Broker::start(config).unwrap();
    let reports = broker.fence_reports().expect("a cluster broker reports");
    let orders_0 = TopicPartition::new(TopicName::new("orders").unwrap(), 0);

    wait_for("fence report", || !reports.list().is_empty());
    assert_eq!(reports.list(), [(orders_0.clone(), LeaderEpoch(9))]);

    // The controller gives it an epoch above the claim: it opens, the report is gone.
    write_assignment(&cluster_dir, 2, port, 9 + 1);
    wait_for("the report cleared", || reports.list().is_empty());
    broker.stop();
}
