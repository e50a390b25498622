//! Property tests of the balancer: from a random earlier assignment and random changes
//! (brokers leaving and joining, topics created, deleted, grown or created again, groups,
//! floors), the result is valid, even, moves the fewest partitions and groups any even
//! spread can, and gives leader epochs that rise on every change, from this controller's
//! range only.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::ids::TopicId;

/// SplitMix64, so a failing case is one `u64`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const TOPICS: [&str; 5] = ["orders", "audit", "a.b", "x_y-z", "t"];

#[derive(Clone)]
struct World {
    brokers: BTreeMap<BrokerId, BrokerEndpoint>,
    topics: BTreeMap<TopicName, TopicInfo>,
    groups: BTreeSet<GroupId>,
    floors: BTreeMap<TopicPartition, LeaderEpoch>,
    /// Bumped when a topic is created again, so its id changes.
    incarnation: u8,
}

fn endpoint(id: i32) -> BrokerEndpoint {
    BrokerEndpoint {
        id: BrokerId(id),
        host: format!("b{id}"),
        port: 9092,
    }
}

fn topic_info(name: &str, index: usize, incarnation: u8, partitions: i32) -> TopicInfo {
    let mut id = [0u8; 16];
    id[0] = 0x10 + index as u8;
    id[1] = incarnation;
    id[15] = 3;
    TopicInfo {
        name: TopicName::new(name).expect("legal"),
        id: TopicId(id),
        partitions,
        configs: BTreeMap::new(),
    }
}

fn random_world(rng: &mut Rng) -> World {
    let mut brokers: BTreeMap<BrokerId, BrokerEndpoint> = (0..6)
        .filter(|_| rng.chance(60))
        .map(|id| (BrokerId(id), endpoint(id)))
        .collect();
    if brokers.is_empty() {
        brokers.insert(BrokerId(0), endpoint(0));
    }
    let mut topics = BTreeMap::new();
    for (index, name) in TOPICS.iter().enumerate() {
        if rng.chance(70) {
            let info = topic_info(name, index, 0, 1 + rng.below(12) as i32);
            topics.insert(info.name.clone(), info);
        }
    }
    let groups = (0..rng.below(12))
        .map(|i| GroupId::new(&format!("g{i}")))
        .collect();
    World {
        brokers,
        topics,
        groups,
        floors: BTreeMap::new(),
        incarnation: 0,
    }
}

/// What kind of change a step made, for the stronger checks that hold for one kind alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    Departures,
    Joins,
    TopicsGrown,
    Mixed,
}

fn change(rng: &mut Rng, world: &World, previous: &Assignment) -> (World, Change) {
    let mut next = world.clone();
    next.floors.clear();
    let kind = match rng.below(4) {
        0 => Change::Departures,
        1 => Change::Joins,
        2 => Change::TopicsGrown,
        _ => Change::Mixed,
    };
    let depart = |next: &mut World, rng: &mut Rng| {
        let ids: Vec<BrokerId> = next.brokers.keys().copied().collect();
        for id in ids {
            if next.brokers.len() > 1 && rng.chance(30) {
                next.brokers.remove(&id);
            }
        }
    };
    let join = |next: &mut World, rng: &mut Rng| {
        for id in 0..8 {
            if rng.chance(25) {
                next.brokers
                    .entry(BrokerId(id))
                    .or_insert_with(|| endpoint(id));
            }
        }
    };
    let grow = |next: &mut World, rng: &mut Rng| {
        for (index, name) in TOPICS.iter().enumerate() {
            let name = TopicName::new(name).expect("legal");
            match next.topics.get_mut(&name) {
                Some(info) if rng.chance(40) => info.partitions += 1 + rng.below(4) as i32,
                None if rng.chance(40) => {
                    let info = topic_info(
                        name.as_str(),
                        index,
                        next.incarnation,
                        1 + rng.below(6) as i32,
                    );
                    next.topics.insert(name, info);
                }
                _ => {}
            }
        }
    };
    match kind {
        Change::Departures => depart(&mut next, rng),
        Change::Joins => join(&mut next, rng),
        Change::TopicsGrown => grow(&mut next, rng),
        Change::Mixed => {
            depart(&mut next, rng);
            join(&mut next, rng);
            grow(&mut next, rng);
            let names: Vec<TopicName> = next.topics.keys().cloned().collect();
            for name in names {
                if rng.chance(15) {
                    next.topics.remove(&name);
                } else if rng.chance(10) {
                    next.incarnation += 1;
                    let index = TOPICS.iter().position(|t| *t == name.as_str()).unwrap_or(0);
                    let partitions = next.topics[&name].partitions;
                    let info = topic_info(name.as_str(), index, next.incarnation, partitions);
                    next.topics.insert(name, info);
                }
            }
            for i in 0..12 {
                let group = GroupId::new(&format!("g{i}"));
                if rng.chance(20) {
                    next.groups.insert(group);
                } else if rng.chance(10) {
                    next.groups.remove(&group);
                }
            }
            for (partition, leader) in previous.partitions() {
                if rng.chance(10) {
                    let floor = LeaderEpoch(leader.leader_epoch.0 + rng.below(3) as i32);
                    next.floors.insert(partition, floor);
                }
            }
        }
    }
    (next, kind)
}

fn balance_world(
    world: &World,
    previous: Option<&Assignment>,
    epoch: u64,
) -> Result<Assignment, BalanceError> {
    let version = previous.map_or(1, |p| p.version().0 + 1);
    balance(&BalanceRequest {
        previous,
        controller_epoch: ControllerEpoch(epoch),
        version: AssignmentVersion(version),
        brokers: &world.brokers,
        topics: &world.topics,
        groups: &world.groups,
        epoch_floors: &world.floors,
    })
}

/// The fewest kept things any even spread must move: `Σ max(0, kept_b − quota_b)` with the
/// larger quotas on the brokers keeping most.
fn fewest_moves(mut kept: Vec<usize>, total: usize, brokers: usize) -> usize {
    kept.resize(brokers, 0);
    kept.sort_unstable_by(|a, b| b.cmp(a));
    let (base, larger) = (total / brokers, total % brokers);
    kept.iter()
        .enumerate()
        .map(|(rank, k)| k.saturating_sub(base + usize::from(rank < larger)))
        .sum()
}

fn check_even<T>(
    placed: impl Iterator<Item = (T, BrokerId)>,
    brokers: &BTreeSet<BrokerId>,
) -> Result<(), String> {
    let mut loads: BTreeMap<BrokerId, usize> = brokers.iter().map(|b| (*b, 0)).collect();
    for (_, broker) in placed {
        *loads
            .get_mut(&broker)
            .ok_or(format!("placed on {broker:?}, not alive"))? += 1;
    }
    let (min, max) = (loads.values().min(), loads.values().max());
    match min.zip(max) {
        Some((min, max)) if max - min > 1 => Err(format!("uneven: {loads:?}")),
        _ => Ok(()),
    }
}

fn check_step(
    previous: &Assignment,
    next: &Assignment,
    world: &World,
    kind: Change,
    epoch: u64,
) -> Result<(), String> {
    let alive: BTreeSet<BrokerId> = world.brokers.keys().copied().collect();
    // Valid: it survives the file's round trip unchanged.
    let reread = Assignment::from_json(&next.to_json()).map_err(|e| e.to_string())?;
    if &reread != next {
        return Err("the written file reads back differently".into());
    }
    if next.brokers().keys().copied().collect::<BTreeSet<_>>() != alive {
        return Err("brokers are not the alive set".into());
    }
    check_even(next.partitions().map(|(p, l)| (p, l.leader)), &alive)?;
    check_even(next.groups().iter().map(|(g, b)| (g.clone(), *b)), &alive)?;
    if next.groups().keys().cloned().collect::<BTreeSet<_>>() != world.groups {
        return Err("groups are not the known set".into());
    }

    // Minimal movement, partitions.
    let same_topic = |p: &TopicPartition| {
        previous.topics().get(&p.topic).map(|t| t.id) == world.topics.get(&p.topic).map(|t| t.id)
    };
    let mut kept: BTreeMap<BrokerId, usize> = BTreeMap::new();
    let mut moved = 0;
    let mut moved_from: BTreeSet<BrokerId> = BTreeSet::new();
    let mut moved_to: BTreeSet<BrokerId> = BTreeSet::new();
    for (partition, now) in next.partitions() {
        let before = previous
            .leader(&partition)
            .filter(|_| same_topic(&partition));
        if let Some(before) = before.filter(|b| alive.contains(&b.leader)) {
            *kept.entry(before.leader).or_default() += 1;
            if before.leader != now.leader {
                moved += 1;
                moved_from.insert(before.leader);
                moved_to.insert(now.leader);
            }
        }
    }
    let total = next.partitions().count();
    let fewest = fewest_moves(kept.values().copied().collect(), total, alive.len());
    if moved != fewest {
        return Err(format!("moved {moved} partitions, {fewest} would do"));
    }
    let was_even = check_even(
        previous.partitions().map(|(p, l)| (p, l.leader)),
        &previous.brokers().keys().copied().collect(),
    )
    .is_ok();
    match kind {
        Change::Departures | Change::TopicsGrown if was_even && moved != 0 => {
            return Err(format!("{kind:?} moved {moved} kept partitions"));
        }
        Change::Joins => {
            let joined: BTreeSet<BrokerId> = alive
                .iter()
                .filter(|b| !previous.brokers().contains_key(b))
                .copied()
                .collect();
            if !moved_to.is_subset(&joined) {
                return Err(format!(
                    "a join moved partitions to {moved_to:?}, not only to {joined:?}"
                ));
            }
        }
        _ => {}
    }

    // Minimal movement, groups.
    let mut kept_groups: BTreeMap<BrokerId, usize> = BTreeMap::new();
    let mut moved_groups = 0;
    for (group, now) in next.groups() {
        let before = previous.groups().get(group).copied().or_else(|| {
            crate::placement::fallback_coordinator(group, previous.brokers().keys().copied())
        });
        if let Some(before) = before.filter(|b| alive.contains(b)) {
            *kept_groups.entry(before).or_default() += 1;
            moved_groups += usize::from(before != *now);
        }
    }
    let fewest = fewest_moves(
        kept_groups.values().copied().collect(),
        next.groups().len(),
        alive.len(),
    );
    if moved_groups != fewest {
        return Err(format!("moved {moved_groups} groups, {fewest} would do"));
    }

    // Epochs.
    let range = EpochRange::of(ControllerEpoch(epoch)).map_err(|e| e.to_string())?;
    for (partition, now) in next.partitions() {
        let old = previous.leader(&partition);
        let floor = world.floors.get(&partition).copied();
        let kept_pair = old.filter(|o| {
            same_topic(&partition)
                && o.leader == now.leader
                && floor.is_none_or(|f| o.leader_epoch > f)
        });
        match kept_pair {
            Some(old) if old.leader_epoch != now.leader_epoch => {
                return Err(format!("{partition} kept its leader but its epoch changed"));
            }
            Some(_) => {}
            None => {
                let above_old = old.is_none_or(|o| now.leader_epoch > o.leader_epoch);
                let above_floor = floor.is_none_or(|f| now.leader_epoch > f);
                if !(above_old && above_floor && range.contains(now.leader_epoch)) {
                    return Err(format!(
                        "{partition}: new epoch {:?} after {old:?}, floor {floor:?}, range {range:?}",
                        now.leader_epoch
                    ));
                }
            }
        }
    }
    Ok(())
}

fn run(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed);
    let mut epoch = 1 + rng.below(5);
    let mut world = random_world(&mut rng);
    let mut previous = balance_world(&world, None, epoch).map_err(|e| e.to_string())?;
    for _ in 0..6 {
        if rng.chance(20) {
            epoch += 1;
        }
        let (next_world, kind) = change(&mut rng, &world, &previous);
        let next = balance_world(&next_world, Some(&previous), epoch).map_err(|e| e.to_string())?;
        check_step(&previous, &next, &next_world, kind, epoch)?;
        // Balancing again with nothing changed changes nothing.
        let mut settled = next_world.clone();
        settled.floors.clear();
        let again = balance_world(&settled, Some(&next), epoch).map_err(|e| e.to_string())?;
        if again.partitions().ne(next.partitions()) || again.groups() != next.groups() {
            return Err("a second balance of the same inputs changed something".into());
        }
        previous = next;
        world = settled;
    }
    Ok(())
}

/// Two controllers building on one assignment with different alive sets (a deposed one and
/// its successor) never give a partition one epoch with two leaders.
fn two_controllers(seed: u64) -> Result<(), String> {
    let mut rng = Rng(seed);
    let epoch = 1 + rng.below(5);
    let world = random_world(&mut rng);
    let base = balance_world(&world, None, epoch).map_err(|e| e.to_string())?;
    let (stale_world, _) = change(&mut rng, &world, &base);
    let (new_world, _) = change(&mut rng, &world, &base);
    let stale = balance_world(&stale_world, Some(&base), epoch).map_err(|e| e.to_string())?;
    let newer = balance_world(&new_world, Some(&base), epoch + 1 + rng.below(3))
        .map_err(|e| e.to_string())?;
    for (partition, a) in stale.partitions() {
        if let Some(b) = newer.leader(&partition) {
            if a.leader_epoch == b.leader_epoch && a.leader != b.leader {
                return Err(format!(
                    "{partition}: epoch {:?} given to {:?} and {:?}",
                    a.leader_epoch, a.leader, b.leader
                ));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn balance_is_valid_even_minimal_and_raises_epochs(seed in any::<u64>()) {
        prop_assert_eq!(run(seed), Ok(()), "seed {}", seed);
    }

    #[test]
    fn two_controllers_never_share_an_epoch_with_two_leaders(seed in any::<u64>()) {
        prop_assert_eq!(two_controllers(seed), Ok(()), "seed {}", seed);
    }
}
