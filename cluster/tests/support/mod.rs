//! Shared by the cluster crate's property and simulation tests: random but consistent
//! assignments, a seeded random source, and an independent model of what shards have open.

#![allow(dead_code)]

use std::collections::BTreeMap;

use kaas_cluster::assignment::{Assignment, AssignmentFile, BrokerFile, PartitionFile, TopicFile};
use kaas_cluster::command::{AddressedCommand, ShardCommand};
use kaas_cluster::ids::{GroupId, LeaderEpoch, ShardIndex, TopicPartition};
use kaas_cluster::view::ClusterView;

/// SplitMix64: a tiny seeded generator whose sequence never changes with a crate upgrade, so
/// a printed seed replays the same run forever.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (`bound` > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

pub const TOPIC_POOL: [&str; 4] = ["orders", "audit", "a.b", "x_y-z"];
pub const GROUP_POOL: [&str; 5] = ["billing", "shipping", "g0", "g1", "g2"];

/// A distinct, valid topic id for topic `index` of the pool (never a reserved id).
pub fn topic_id(index: usize) -> String {
    let mut bytes = [0u8; 16];
    bytes[0] = 0x40 + index as u8;
    bytes[15] = 0x11;
    kaas_cluster::ids::TopicId(bytes).to_string()
}

/// The shape of a random assignment, in plain numbers.
#[derive(Clone, Debug)]
pub struct Shape {
    pub brokers: Vec<i32>,
    /// Per topic of the pool: `None` (absent) or every partition's (leader index, epoch).
    pub topics: Vec<Option<Vec<(usize, i32)>>>,
    /// Per group of the pool: `None` (unnamed) or the broker index.
    pub groups: Vec<Option<usize>>,
}

/// A random shape over brokers drawn from `0..max_broker_id`.
pub fn random_shape(rng: &mut Rng, max_broker_id: i32) -> Shape {
    let mut brokers: Vec<i32> = (0..max_broker_id).filter(|_| rng.chance(60)).collect();
    if brokers.is_empty() {
        brokers.push(rng.below(max_broker_id as u64) as i32);
    }
    let topics = TOPIC_POOL
        .iter()
        .map(|_| {
            rng.chance(75).then(|| {
                let count = 1 + rng.below(4) as usize;
                (0..count)
                    .map(|_| {
                        (
                            rng.below(brokers.len() as u64) as usize,
                            rng.below(6) as i32,
                        )
                    })
                    .collect()
            })
        })
        .collect();
    let groups = GROUP_POOL
        .iter()
        .map(|_| {
            rng.chance(50)
                .then(|| rng.below(brokers.len() as u64) as usize)
        })
        .collect();
    Shape {
        brokers,
        topics,
        groups,
    }
}

/// The file of `shape` at `epoch` and `version`.
pub fn file_of(shape: &Shape, epoch: u64, version: u64) -> AssignmentFile {
    let mut topics = BTreeMap::new();
    let mut partitions = BTreeMap::new();
    for (index, topic) in shape.topics.iter().enumerate() {
        let Some(leaders) = topic else { continue };
        let name = TOPIC_POOL[index].to_string();
        topics.insert(
            name.clone(),
            TopicFile {
                id: topic_id(index),
                partitions: leaders.len() as i32,
                configs: BTreeMap::from([("retention.ms".to_string(), format!("{index}000"))]),
            },
        );
        let leaders = leaders
            .iter()
            .map(|(broker, epoch)| PartitionFile {
                leader: shape.brokers[*broker],
                leader_epoch: *epoch,
            })
            .collect();
        partitions.insert(name, leaders);
    }
    AssignmentFile {
        format: 1,
        controller_epoch: epoch,
        assignment_version: version,
        brokers: shape
            .brokers
            .iter()
            .map(|id| BrokerFile {
                id: *id,
                host: format!("127.0.0.{}", id + 1),
                port: 19092,
            })
            .collect(),
        topics,
        partitions,
        consumer_groups: shape
            .groups
            .iter()
            .enumerate()
            .filter_map(|(i, broker)| broker.map(|b| (GROUP_POOL[i].to_string(), shape.brokers[b])))
            .collect(),
    }
}

/// The assignment of `shape` at `epoch` and `version`.
pub fn assignment_of(shape: &Shape, epoch: u64, version: u64) -> Assignment {
    Assignment::try_from(file_of(shape, epoch, version)).expect("shapes are consistent")
}

/// An independent model of what a broker's shards have open, that fails loudly on any command
/// that would open something twice or close something that is not open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardModel {
    pub partitions: BTreeMap<TopicPartition, Vec<(ShardIndex, LeaderEpoch)>>,
    pub groups: BTreeMap<GroupId, Vec<ShardIndex>>,
}

impl ShardModel {
    pub fn apply(&mut self, command: &AddressedCommand) -> Result<(), String> {
        let shard = command.shard;
        match &command.command {
            ShardCommand::OpenPartition {
                partition,
                leader_epoch,
            } => {
                let places = self.partitions.entry(partition.clone()).or_default();
                if !places.is_empty() {
                    return Err(format!(
                        "open {partition} on {shard:?} while open on {places:?}"
                    ));
                }
                places.push((shard, *leader_epoch));
            }
            ShardCommand::ClosePartition { partition, .. } => {
                let places = self.partitions.entry(partition.clone()).or_default();
                let before = places.len();
                places.retain(|(s, _)| *s != shard);
                if places.len() == before {
                    return Err(format!("close {partition} on {shard:?}, not open there"));
                }
                if places.is_empty() {
                    self.partitions.remove(partition);
                }
            }
            ShardCommand::AdoptGroup { group } => {
                let places = self.groups.entry(group.clone()).or_default();
                if !places.is_empty() {
                    return Err(format!("adopt {group} on {shard:?} while on {places:?}"));
                }
                places.push(shard);
            }
            ShardCommand::DropGroup { group } => {
                let places = self.groups.entry(group.clone()).or_default();
                let before = places.len();
                places.retain(|s| *s != shard);
                if places.len() == before {
                    return Err(format!("drop {group} on {shard:?}, not adopted there"));
                }
                if places.is_empty() {
                    self.groups.remove(group);
                }
            }
        }
        self.check_single_owner()
    }

    /// No partition or group is open on two shards.
    pub fn check_single_owner(&self) -> Result<(), String> {
        if let Some((p, places)) = self.partitions.iter().find(|(_, v)| v.len() > 1) {
            return Err(format!("{p} open on several shards: {places:?}"));
        }
        if let Some((g, places)) = self.groups.iter().find(|(_, v)| v.len() > 1) {
            return Err(format!("group {g} on several shards: {places:?}"));
        }
        Ok(())
    }

    /// The model as the crate's `OpenState`, for planning.
    pub fn to_open_state(&self) -> kaas_cluster::open_state::OpenState {
        let mut state = kaas_cluster::open_state::OpenState::new();
        for (partition, places) in &self.partitions {
            for (shard, epoch) in places {
                state.insert_partition(*shard, partition.clone(), *epoch);
            }
        }
        for (group, places) in &self.groups {
            for shard in places {
                state.insert_group(*shard, group.clone());
            }
        }
        state
    }
}

/// What `view` gives its broker: the partitions it leads at their owner shards and epochs,
/// the groups named for it, and the unnamed groups adopted before (`adopted_before`) that the
/// fallback still places on it.
pub fn expected(view: &ClusterView, adopted_before: &[GroupId]) -> ShardModel {
    let me = view.this_broker();
    let mut model = ShardModel::default();
    for partition in view.partitions_led_by(me) {
        let placement = view.leader_of(partition).expect("led partitions exist");
        model.partitions.insert(
            partition.clone(),
            vec![(placement.owner_shard, placement.leader_epoch)],
        );
    }
    let candidates = view.named_groups().keys().chain(adopted_before);
    for group in candidates {
        let named_here = view.named_groups().get(group) == Some(&me);
        let unnamed_kept = !view.named_groups().contains_key(group)
            && adopted_before.contains(group)
            && view.coordinator_of(group) == Some(me);
        if named_here || unnamed_kept {
            model
                .groups
                .insert(group.clone(), vec![view.group_shard(group)]);
        }
    }
    model
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs `simulate` for each seed and hands each run's result to `add`: `KAAS_SIM_SEED=<seed>`
/// replays one run, otherwise `KAAS_SIM_RUNS` runs (default `default_runs`) from seeds that
/// `salt` derives. A failed or panicking run fails the test naming its seed and how to
/// replay it.
pub fn run_seeds<S>(
    salt: u64,
    default_runs: u64,
    simulate: impl Fn(u64) -> Result<S, String> + std::panic::RefUnwindSafe,
    mut add: impl FnMut(S),
) {
    let seeds: Vec<u64> = match env_u64("KAAS_SIM_SEED") {
        Some(seed) => vec![seed],
        None => {
            let runs = env_u64("KAAS_SIM_RUNS").unwrap_or(default_runs);
            let base = Rng::new(salt).next_u64();
            (0..runs).map(|i| base.wrapping_add(i)).collect()
        }
    };
    for seed in seeds {
        match std::panic::catch_unwind(|| simulate(seed)) {
            Ok(Ok(outcome)) => add(outcome),
            Ok(Err(message)) => {
                panic!(
                    "simulation failed with seed {seed} (replay: KAAS_SIM_SEED={seed}): {message}"
                )
            }
            Err(_) => panic!("simulation panicked with seed {seed} (replay: KAAS_SIM_SEED={seed})"),
        }
    }
}
