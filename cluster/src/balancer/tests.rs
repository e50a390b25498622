use std::collections::{BTreeMap, BTreeSet};

use super::*;
use crate::ids::TopicId;

fn endpoints(ids: &[i32]) -> BTreeMap<BrokerId, BrokerEndpoint> {
    ids.iter()
        .map(|id| {
            let endpoint = BrokerEndpoint {
                id: BrokerId(*id),
                host: format!("10.0.0.{id}"),
                port: 9092,
            };
            (BrokerId(*id), endpoint)
        })
        .collect()
}

fn topic(name: &str, id_byte: u8, partitions: i32) -> (TopicName, TopicInfo) {
    let name = TopicName::new(name).expect("legal");
    let mut id = [0u8; 16];
    id[0] = id_byte;
    id[15] = 1;
    let info = TopicInfo {
        name: name.clone(),
        id: TopicId(id),
        partitions,
        configs: BTreeMap::new(),
    };
    (name, info)
}

struct Inputs {
    brokers: BTreeMap<BrokerId, BrokerEndpoint>,
    topics: BTreeMap<TopicName, TopicInfo>,
    groups: BTreeSet<GroupId>,
    floors: BTreeMap<TopicPartition, LeaderEpoch>,
}

impl Inputs {
    fn new(brokers: &[i32], topics: &[(&str, u8, i32)], groups: &[&str]) -> Self {
        Inputs {
            brokers: endpoints(brokers),
            topics: topics.iter().map(|(n, i, p)| topic(n, *i, *p)).collect(),
            groups: groups.iter().map(|g| GroupId::new(g)).collect(),
            floors: BTreeMap::new(),
        }
    }

    fn balance(&self, previous: Option<&Assignment>, epoch: u64) -> Assignment {
        self.try_balance(previous, epoch).expect("balances")
    }

    fn try_balance(
        &self,
        previous: Option<&Assignment>,
        epoch: u64,
    ) -> Result<Assignment, BalanceError> {
        let version = previous.map_or(1, |p| p.version().0 + 1);
        balance(&BalanceRequest {
            previous,
            controller_epoch: ControllerEpoch(epoch),
            version: AssignmentVersion(version),
            brokers: &self.brokers,
            topics: &self.topics,
            groups: &self.groups,
            epoch_floors: &self.floors,
        })
    }
}

fn leaders(assignment: &Assignment) -> BTreeMap<BrokerId, usize> {
    let mut counts = BTreeMap::new();
    for (_, leader) in assignment.partitions() {
        *counts.entry(leader.leader).or_default() += 1;
    }
    counts
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(TopicName::new(topic).expect("legal"), partition)
}

#[test]
fn a_first_assignment_spreads_everything_at_the_range_start() {
    let inputs = Inputs::new(
        &[0, 1, 2],
        &[("orders", 1, 6), ("audit", 2, 3)],
        &["a", "b"],
    );
    let first = inputs.balance(None, 3);
    assert_eq!(first.controller_epoch(), ControllerEpoch(3));
    assert_eq!(first.brokers().len(), 3);
    assert_eq!(
        leaders(&first).values().copied().collect::<Vec<_>>(),
        [3, 3, 3]
    );
    let range = EpochRange::of(ControllerEpoch(3)).expect("fits");
    assert!(first
        .partitions()
        .all(|(_, l)| l.leader_epoch == range.first));
    // Each topic is spread over the brokers too.
    for name in ["orders", "audit"] {
        let used: BTreeSet<BrokerId> = first
            .partitions()
            .filter(|(p, _)| p.topic.as_str() == name)
            .map(|(_, l)| l.leader)
            .collect();
        assert_eq!(used.len(), 3, "{name}");
    }
    assert_eq!(first.groups().len(), 2);
    assert_ne!(
        first.groups()[&GroupId::new("a")],
        first.groups()[&GroupId::new("b")]
    );
}

#[test]
fn a_departure_moves_only_the_departed_brokers_partitions_at_a_new_epoch() {
    let mut inputs = Inputs::new(&[0, 1, 2], &[("orders", 1, 6)], &["a", "b", "c"]);
    let before = inputs.balance(None, 1);
    inputs.brokers = endpoints(&[0, 2]);
    let after = inputs.balance(Some(&before), 1);
    for (partition, old) in before.partitions() {
        let new = after.leader(&partition).expect("still there");
        if old.leader == BrokerId(1) {
            assert_ne!(new.leader, BrokerId(1));
            assert!(new.leader_epoch > old.leader_epoch);
        } else {
            assert_eq!(new, old, "{partition} should not move");
        }
    }
    assert_eq!(
        leaders(&after).values().copied().collect::<Vec<_>>(),
        [3, 3]
    );
    for (group, broker) in before.groups() {
        if *broker != BrokerId(1) {
            assert_eq!(after.groups()[group], *broker);
        }
    }
}

#[test]
fn a_join_takes_only_its_share() {
    let mut inputs = Inputs::new(&[0, 1], &[("orders", 1, 6)], &[]);
    let before = inputs.balance(None, 1);
    inputs.brokers = endpoints(&[0, 1, 2]);
    let after = inputs.balance(Some(&before), 1);
    let moved: Vec<_> = before
        .partitions()
        .filter(|(p, l)| after.leader(p).map(|n| n.leader) != Some(l.leader))
        .collect();
    assert_eq!(moved.len(), 2);
    for (partition, _) in moved {
        assert_eq!(
            after.leader(&partition).map(|l| l.leader),
            Some(BrokerId(2))
        );
    }
}

#[test]
fn a_new_controller_keeps_leaders_and_epochs_and_chooses_from_its_own_range() {
    let mut inputs = Inputs::new(&[0, 1, 2], &[("orders", 1, 3)], &[]);
    let old = inputs.balance(None, 1);
    let same = inputs.balance(Some(&old), 2);
    for (partition, leader) in old.partitions() {
        assert_eq!(same.leader(&partition), Some(leader));
    }
    inputs.brokers = endpoints(&[0, 1]);
    let moved = inputs.balance(Some(&same), 2);
    let two = EpochRange::of(ControllerEpoch(2)).expect("fits");
    let changed = moved
        .partitions()
        .filter(|(p, l)| old.leader(p).map(|o| o.leader) != Some(l.leader))
        .map(|(_, l)| l.leader_epoch)
        .collect::<Vec<_>>();
    assert_eq!(changed, [two.first]);
}

#[test]
fn a_floor_forces_a_fresh_epoch_without_moving_the_leader() {
    let mut inputs = Inputs::new(&[0, 1], &[("orders", 1, 2)], &[]);
    let before = inputs.balance(None, 1);
    let fenced = before.leader(&tp("orders", 0)).expect("exists");
    inputs
        .floors
        .insert(tp("orders", 0), LeaderEpoch(fenced.leader_epoch.0 + 4));
    let after = inputs.balance(Some(&before), 1);
    let now = after.leader(&tp("orders", 0)).expect("exists");
    assert_eq!(now.leader, fenced.leader);
    assert_eq!(now.leader_epoch, LeaderEpoch(fenced.leader_epoch.0 + 5));
    assert_eq!(
        after.leader(&tp("orders", 1)),
        before.leader(&tp("orders", 1))
    );
}

#[test]
fn a_recreated_topic_is_new_but_its_epochs_still_rise() {
    let mut inputs = Inputs::new(&[0, 1], &[("orders", 1, 2)], &[]);
    let before = inputs.balance(None, 1);
    inputs.topics = [topic("orders", 9, 2)].into_iter().collect();
    let after = inputs.balance(Some(&before), 1);
    for (partition, old) in before.partitions() {
        let new = after.leader(&partition).expect("exists");
        assert!(new.leader_epoch > old.leader_epoch, "{partition}");
    }
}

#[test]
fn growing_a_topic_moves_nothing_that_was_placed() {
    let mut inputs = Inputs::new(&[0, 1, 2], &[("orders", 1, 4)], &[]);
    let before = inputs.balance(None, 1);
    inputs.topics = [topic("orders", 1, 9), topic("audit", 2, 2)]
        .into_iter()
        .collect();
    let after = inputs.balance(Some(&before), 1);
    for (partition, old) in before.partitions() {
        assert_eq!(after.leader(&partition), Some(old));
    }
    let loads = leaders(&after);
    let (min, max) = (loads.values().min(), loads.values().max());
    assert!(
        max.zip(min).is_some_and(|(max, min)| max - min <= 1),
        "{loads:?}"
    );
}

#[test]
fn refuses_no_brokers_an_exhausted_range_and_an_epoch_past_the_i32() {
    let inputs = Inputs::new(&[], &[("orders", 1, 1)], &[]);
    assert_eq!(inputs.try_balance(None, 1), Err(BalanceError::NoBrokers));
    let mut inputs = Inputs::new(&[0], &[("orders", 1, 1)], &[]);
    let range = EpochRange::of(ControllerEpoch(1)).expect("fits");
    inputs.floors.insert(tp("orders", 0), range.last);
    assert!(matches!(
        inputs.try_balance(None, 1),
        Err(BalanceError::EpochRangeExhausted { .. })
    ));
    inputs.floors.clear();
    assert!(matches!(
        inputs.try_balance(None, MAX_CONTROLLER_EPOCH + 1),
        Err(BalanceError::ControllerEpochTooLarge(_))
    ));
    let top = inputs.balance(None, MAX_CONTROLLER_EPOCH);
    assert!(top.partitions().all(|(_, l)| l.leader_epoch.0 > 0));
}

#[test]
fn an_unnamed_group_is_named_where_the_fallback_already_put_it() {
    let mut inputs = Inputs::new(&[0, 1, 2], &[("orders", 1, 1)], &[]);
    let before = inputs.balance(None, 1);
    inputs.groups = ["g"].iter().map(|g| GroupId::new(g)).collect();
    let after = inputs.balance(Some(&before), 1);
    let group = GroupId::new("g");
    assert_eq!(
        after.groups().get(&group).copied(),
        fallback_coordinator(&group, before.brokers().keys().copied())
    );
}

#[test]
fn groups_follow_the_leaders_of_their_offsets_partitions_across_a_departure() {
    let mut inputs = Inputs::new(
        &[0, 1, 2],
        &[("orders", 1, 6)],
        &["billing", "lag-tool", "g7"],
    );
    inputs.topics = crate::internal_topics::with_internal_topics(
        &inputs.topics,
        None,
        ControllerEpoch(2),
        false,
    );
    let first = inputs.balance(None, 2);
    let offsets = |assignment: &Assignment, group: &str| {
        let partition = crate::internal_topics::offsets_partition(group);
        assignment
            .leader(&tp(crate::internal_topics::OFFSETS_TOPIC, partition))
            .expect("placed")
    };
    for group in ["billing", "lag-tool", "g7"] {
        assert_eq!(
            first.groups().get(&GroupId::new(group)),
            Some(&offsets(&first, group).leader)
        );
    }
    // Broker 1 leaves: its offsets partitions move at new epochs, and its groups with them.
    inputs.brokers.remove(&BrokerId(1));
    let second = inputs.balance(Some(&first), 2);
    for group in ["billing", "lag-tool", "g7"] {
        let (before, after) = (offsets(&first, group), offsets(&second, group));
        assert_eq!(
            second.groups().get(&GroupId::new(group)),
            Some(&after.leader)
        );
        assert_ne!(after.leader, BrokerId(1));
        if before.leader == BrokerId(1) {
            assert!(after.leader_epoch > before.leader_epoch);
        } else {
            assert_eq!(
                after, before,
                "a partition whose leader stays keeps its epoch"
            );
        }
    }
}
