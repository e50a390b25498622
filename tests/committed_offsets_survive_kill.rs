//! Offset commits while the broker is killed with `kill -9`: after a restart every
//! acknowledged commit is what OffsetFetch returns (or a later one that was written but not
//! yet acknowledged), and a real consumer group (franz-go) resumes from its commits.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kaas_net::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kaas_net::protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestGroup};
use kaas_net::protocol::Response;
use support::{Kaas, WireClient};

const TOPIC: &str = "commits";
const PARTITIONS: i32 = 4;

/// Per (group, partition): the last acknowledged offset and the last one sent.
type Progress = Arc<Mutex<HashMap<(String, i32), (i64, i64)>>>;

fn commit_until_stopped(
    addr: std::net::SocketAddr,
    group: String,
    progress: Progress,
    stop: Arc<AtomicBool>,
) {
    let mut client = WireClient::connect(addr);
    let mut offset = 0i64;
    while !stop.load(Ordering::Relaxed) {
        offset += 1;
        let partitions = (0..PARTITIONS)
            .map(|partition| OffsetCommitRequestPartition {
                partition_index: partition,
                committed_offset: offset * 10 + i64::from(partition),
                committed_leader_epoch: 0,
                committed_metadata: Some(format!("{group}@{offset}")),
            })
            .collect();
        {
            let mut progress = progress.lock().expect("lock");
            for partition in 0..PARTITIONS {
                let entry = progress
                    .entry((group.clone(), partition))
                    .or_insert((-1, -1));
                entry.1 = offset * 10 + i64::from(partition);
            }
        }
        let request = OffsetCommitRequest {
            group_id: group.clone(),
            generation_id_or_member_epoch: -1,
            topics: vec![OffsetCommitRequestTopic {
                name: TOPIC.into(),
                partitions,
                ..Default::default()
            }],
            ..Default::default()
        };
        let Some(Response::OffsetCommit(response)) = client.try_call(8, &request) else {
            return;
        };
        let partitions = &response.topics[0].partitions;
        assert!(
            partitions.iter().all(|p| p.error_code == 0),
            "commit failed: {partitions:?}"
        );
        let mut progress = progress.lock().expect("lock");
        for partition in 0..PARTITIONS {
            progress
                .get_mut(&(group.clone(), partition))
                .expect("recorded")
                .0 = offset * 10 + i64::from(partition);
        }
    }
}

#[test]
fn acknowledged_commits_survive_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start(Some(dir.path()), &["--shards", "2"]);
    kaas.client().create_topic(TOPIC, PARTITIONS, &[]);
    let progress: Progress = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let committers: Vec<_> = (0..4)
        .map(|i| {
            let (progress, stop, addr) = (progress.clone(), stop.clone(), kaas.kafka);
            std::thread::spawn(move || {
                commit_until_stopped(addr, format!("group-{i}"), progress, stop)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    kaas.kill9();
    stop.store(true, Ordering::Relaxed);
    for committer in committers {
        let _ = committer.join();
    }
    let progress = progress.lock().expect("lock").clone();
    assert!(
        progress.values().all(|(acked, _)| *acked > 100),
        "every committer made progress: {progress:?}"
    );

    kaas.restart();
    let mut client = kaas.client();
    for i in 0..4 {
        let group = format!("group-{i}");
        let request = OffsetFetchRequest {
            groups: vec![OffsetFetchRequestGroup {
                group_id: group.clone(),
                topics: None,
                ..Default::default()
            }],
            ..Default::default()
        };
        let Response::OffsetFetch(fetched) = client.call(8, &request) else {
            panic!("not OffsetFetch")
        };
        let fetched = &fetched.groups[0];
        assert_eq!(fetched.error_code, 0);
        assert_eq!(fetched.topics.len(), 1, "{group}: {fetched:?}");
        assert_eq!(fetched.topics[0].partitions.len(), PARTITIONS as usize);
        for partition in &fetched.topics[0].partitions {
            let (acked, sent) = progress[&(group.clone(), partition.partition_index)];
            let committed = partition.committed_offset;
            assert!(
                committed == acked || committed == sent,
                "{group}/{}: acknowledged {acked}, last sent {sent}, recovered {committed}",
                partition.partition_index
            );
            let round = committed / 10;
            assert_eq!(
                partition.metadata.as_deref(),
                Some(format!("{group}@{round}").as_str())
            );
        }
    }
}

fn go_scenarios(bootstrap: std::net::SocketAddr, scenario: &str, topic: &str, group: &str) {
    let binary = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/go/scenarios");
    let status = Command::new(&binary)
        .args(["-bootstrap", &bootstrap.to_string(), "-scenario", scenario])
        .args(["-topic", topic, "-group", group, "-records", "2000"])
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "run {} (built by tests/clients/prepare.sh): {e}",
                binary.display()
            )
        });
    assert!(
        status.success(),
        "{scenario} failed against kaas (see its output above)"
    );
}

#[test]
fn a_group_resumes_from_its_commits_after_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = ["--shards", "2", "--group-initial-rebalance-delay-ms", "0"];
    let mut kaas = Kaas::start(Some(dir.path()), &flags);
    go_scenarios(
        kaas.kafka,
        "group-resume-commit",
        "resume-after-kill",
        "resumer",
    );
    kaas.kill9();
    kaas.restart();
    go_scenarios(
        kaas.kafka,
        "group-resume-check",
        "resume-after-kill",
        "resumer",
    );
}
