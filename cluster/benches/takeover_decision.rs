//! What the cluster logic costs on an assignment change, before any file is opened: parse and
//! check `assignment.json`, build the broker's view, and plan the takeover, for 100, 1,000 and
//! 10,000 partitions. The change: broker 1 of three leaves, and broker 0 (2 shards) takes over
//! the partitions broker 1 led (about a third) at a new leader epoch.
//!
//! Run: `cargo bench -p kaas-cluster --bench takeover_decision`. Knob (environment):
//! `KAAS_BENCH_SAMPLES` (default 15). Medians of this thread's CPU time are printed (on a
//! shared machine wall time mostly measures the other processes), with the wall-clock median
//! of the three steps together for comparison.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kaas_cluster::assignment::{Assignment, AssignmentFile, BrokerFile, PartitionFile, TopicFile};
use kaas_cluster::ids::{BrokerId, TopicId};
use kaas_cluster::open_state::OpenState;
use kaas_cluster::takeover::plan_takeover;
use kaas_cluster::view::ClusterView;

const PARTITIONS_PER_TOPIC: usize = 10;
const SHARDS: usize = 2;

/// `partitions` partitions over three brokers (or two, once broker 1 has left).
fn assignment_json(partitions: usize, version: u64, broker_1_left: bool) -> Vec<u8> {
    let brokers: Vec<i32> = if broker_1_left {
        vec![0, 2]
    } else {
        vec![0, 1, 2]
    };
    let mut topics = BTreeMap::new();
    let mut leaders = BTreeMap::new();
    for topic in 0..partitions / PARTITIONS_PER_TOPIC {
        let name = format!("topic-{topic:05}");
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&(topic as u64 + 1).to_be_bytes());
        id[8] = 0x5a;
        topics.insert(
            name.clone(),
            TopicFile {
                id: TopicId(id).to_string(),
                partitions: PARTITIONS_PER_TOPIC as i32,
                configs: BTreeMap::from([("retention.ms".into(), "86400000".into())]),
            },
        );
        let list = (0..PARTITIONS_PER_TOPIC)
            .map(|p| {
                let original = ((topic * PARTITIONS_PER_TOPIC + p) % 3) as i32;
                let moved = broker_1_left && original == 1;
                PartitionFile {
                    leader: if moved { 0 } else { original },
                    leader_epoch: if moved { 1 } else { 0 },
                }
            })
            .collect();
        leaders.insert(name, list);
    }
    let file = AssignmentFile {
        format: 1,
        controller_epoch: 1,
        assignment_version: version,
        brokers: brokers
            .iter()
            .map(|id| BrokerFile {
                id: *id,
                host: format!("kaas-{id}.kaas"),
                port: 9092,
            })
            .collect(),
        topics,
        partitions: leaders,
        consumer_groups: BTreeMap::new(),
    };
    Assignment::try_from(file).expect("consistent").to_json()
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec into a live local.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let samples: usize = std::env::var("KAAS_BENCH_SAMPLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    let me = BrokerId(0);
    println!(
        "partitions  file KiB  parse+check  view (CPU)  plan (CPU)  all (wall)  opens  closes"
    );
    for partitions in [100, 1_000, 10_000] {
        let before = Assignment::from_json(&assignment_json(partitions, 1, false)).expect("valid");
        let old = ClusterView::new(&before, me, SHARDS);
        let mut open = OpenState::new();
        for partition in old.partitions_led_by(me) {
            let placement = old.leader_of(partition).expect("led");
            open.insert_partition(
                placement.owner_shard,
                partition.clone(),
                placement.leader_epoch,
            );
        }
        let bytes = assignment_json(partitions, 2, true);
        let (mut parse, mut view, mut plan) = (Vec::new(), Vec::new(), Vec::new());
        let mut wall = Vec::new();
        let mut counts = (0, 0);
        for _ in 0..samples {
            let wall_start = Instant::now();
            let started = thread_cpu();
            let after = Assignment::from_json(&bytes).expect("valid");
            let parsed = thread_cpu();
            let new = ClusterView::new(&after, me, SHARDS);
            let viewed = thread_cpu();
            let planned = plan_takeover(Some(&old), &new, &open);
            let done = thread_cpu();
            wall.push(wall_start.elapsed());
            parse.push(parsed - started);
            view.push(viewed - parsed);
            plan.push(done - viewed);
            counts = (
                planned.open_phase().commands().len(),
                planned.close_phase().commands().len(),
            );
        }
        println!(
            "{partitions:>10}  {:>8.1}  {:>11.2?}  {:>10.2?}  {:>10.2?}  {:>10.2?}  {:>5}  {:>6}",
            bytes.len() as f64 / 1024.0,
            median(parse),
            median(view),
            median(plan),
            median(wall),
            counts.0,
            counts.1
        );
    }
}
