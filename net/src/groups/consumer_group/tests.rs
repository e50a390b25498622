//! Behaviour tests: a simulated client loop with invariants, Kafka's error cases, the
//! assignors and the persisted format.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::assignor::{assign, MemberSpec, RANGE, UNIFORM};
use super::*;
use crate::protocol::{ErrorCode, Uuid};

const SESSION: i64 = 45_000;

fn topic_id(n: u8) -> Uuid {
    Uuid([n; 16])
}

fn snapshot(topics: &[(&str, u8, i32)]) -> TopicSnapshot {
    TopicSnapshot::new(
        topics
            .iter()
            .map(|(name, id, parts)| ((*name).to_owned(), topic_id(*id), *parts)),
    )
}

fn config() -> ConsumerGroupConfig {
    ConsumerGroupConfig::default()
}

fn join(member_id: &str, topics: &[&str]) -> Heartbeat {
    Heartbeat {
        member_id: member_id.to_owned(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(topics.iter().map(|t| (*t).to_owned()).collect()),
        owned: Some(vec![]),
        client_id: "client".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        api_version: 1,
        ..Heartbeat::default()
    }
}

/// A simulated client: obeys the last assignment it was given.
#[derive(Debug, Clone)]
struct Client {
    member_id: String,
    instance_id: Option<String>,
    topics: Vec<String>,
    epoch: i32,
    owned: Vec<(Uuid, Vec<i32>)>,
    joined: bool,
    alive: bool,
}

impl Client {
    fn new(member_id: &str, topics: &[&str]) -> Self {
        Client {
            member_id: member_id.to_owned(),
            instance_id: None,
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            epoch: 0,
            owned: vec![],
            joined: false,
            alive: true,
        }
    }

    fn request(&self) -> Heartbeat {
        if !self.joined {
            let topics: Vec<&str> = self.topics.iter().map(String::as_str).collect();
            return Heartbeat {
                instance_id: self.instance_id.clone(),
                ..join(&self.member_id, &topics)
            };
        }
        Heartbeat {
            member_id: self.member_id.clone(),
            member_epoch: self.epoch,
            instance_id: self.instance_id.clone(),
            rebalance_timeout_ms: -1,
            owned: Some(self.owned.clone()),
            client_id: "client".to_owned(),
            client_host: "/127.0.0.1".to_owned(),
            api_version: 1,
            ..Heartbeat::default()
        }
    }

    fn apply(&mut self, result: &HeartbeatResult) {
        assert_eq!(
            result.error,
            ErrorCode::None,
            "{:?} for {}",
            result.error_message,
            self.member_id
        );
        self.joined = true;
        assert!(
            result.member_epoch >= self.epoch,
            "epoch went back for {}",
            self.member_id
        );
        self.epoch = result.member_epoch;
        if let Some(member_id) = &result.member_id {
            self.member_id.clone_from(member_id);
        }
        if let Some(assignment) = &result.assignment {
            self.owned.clone_from(assignment);
        }
    }
}

struct Sim {
    group: ConsumerGroup,
    topics: TopicSnapshot,
    clients: Vec<Client>,
    now: i64,
}

impl Sim {
    fn new(topics: TopicSnapshot) -> Self {
        Sim {
            group: ConsumerGroup::new("g"),
            topics,
            clients: vec![],
            now: 0,
        }
    }

    /// One round: every live client heartbeats, then timers run; checks the invariants.
    fn round(&mut self) {
        self.now += 1_000;
        for index in 0..self.clients.len() {
            if !self.clients[index].alive {
                continue;
            }
            let request = self.clients[index].request();
            let result = self
                .group
                .heartbeat(request, &self.topics, &config(), self.now);
            self.clients[index].apply(&result);
            self.check_no_double_ownership();
        }
        self.group.expire(&self.topics, &config(), self.now);
        self.check_no_double_ownership();
    }

    /// No partition is owned by two clients, nor by two members in the coordinator's view.
    fn check_no_double_ownership(&self) {
        let mut seen = BTreeSet::new();
        for client in self.clients.iter().filter(|c| c.alive) {
            for (topic, partitions) in &client.owned {
                for partition in partitions {
                    assert!(
                        seen.insert((*topic, *partition)),
                        "{topic:?}-{partition} owned twice by clients"
                    );
                }
            }
        }
        let mut seen = BTreeSet::new();
        for member in self.group.members.values() {
            for partition in member.owned_partitions() {
                assert!(
                    seen.insert(partition),
                    "{partition:?} owned twice by members"
                );
            }
        }
    }

    fn run_until_stable(&mut self, max_rounds: usize) {
        for _ in 0..max_rounds {
            self.round();
            if self.group.state() == ConsumerGroupState::Stable && self.all_assigned() {
                return;
            }
        }
        panic!(
            "not stable: {:?} {:#?}",
            self.group.state(),
            self.group.members
        );
    }

    /// Every partition of a subscribed topic is owned by exactly one live client.
    fn all_assigned(&self) -> bool {
        let subscribed: BTreeSet<&str> = self
            .clients
            .iter()
            .filter(|c| c.alive)
            .flat_map(|c| c.topics.iter().map(String::as_str))
            .collect();
        let owned: BTreeSet<(Uuid, i32)> = self
            .clients
            .iter()
            .filter(|c| c.alive)
            .flat_map(|c| {
                c.owned
                    .iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            })
            .collect();
        subscribed.iter().all(|name| {
            self.topics
                .by_name(name)
                .is_none_or(|(id, count)| (0..count).all(|p| owned.contains(&(id, p))))
        })
    }

    fn counts(&self) -> Vec<usize> {
        self.clients
            .iter()
            .filter(|c| c.alive)
            .map(|c| c.owned.iter().map(|(_, p)| p.len()).sum())
            .collect()
    }
}

#[test]
fn members_join_in_rounds_and_converge_balanced() {
    let mut sim = Sim::new(snapshot(&[("orders", 1, 6), ("payments", 2, 3)]));
    sim.clients.push(Client::new("a", &["orders", "payments"]));
    sim.run_until_stable(5);
    assert_eq!(sim.counts(), vec![9]);
    let epoch_one = sim.group.group_epoch();

    // A join while the first member owns everything: it must revoke before the new member
    // gets anything.
    sim.clients.push(Client::new("b", &["orders", "payments"]));
    sim.clients.push(Client::new("c", &["orders", "payments"]));
    sim.run_until_stable(10);
    assert!(sim.group.group_epoch() > epoch_one);
    let counts = sim.counts();
    assert_eq!(counts.iter().sum::<usize>(), 9);
    assert!(counts.iter().max() == counts.iter().min(), "{counts:?}");
    let describe = sim.group.describe(&sim.topics);
    assert_eq!(describe.group_state, "Stable");
    assert_eq!(describe.members.len(), 3);
}

#[test]
fn a_leave_and_an_expired_member_give_their_partitions_back() {
    let mut sim = Sim::new(snapshot(&[("orders", 1, 8)]));
    for id in ["a", "b", "c", "d"] {
        sim.clients.push(Client::new(id, &["orders"]));
    }
    sim.run_until_stable(10);
    assert_eq!(sim.counts(), vec![2, 2, 2, 2]);

    // "a" leaves.
    let leave = Heartbeat {
        member_id: "a".to_owned(),
        member_epoch: -1,
        api_version: 1,
        ..Heartbeat::default()
    };
    let result = sim.group.heartbeat(leave, &sim.topics, &config(), sim.now);
    assert_eq!(
        (result.error, result.member_epoch, result.changed),
        (ErrorCode::None, -1, true)
    );
    sim.clients[0].alive = false;
    sim.run_until_stable(10);
    let mut counts = sim.counts();
    counts.sort();
    assert_eq!(counts, vec![2, 3, 3]);

    // "b" stops heartbeating: removed after the session timeout.
    sim.clients[1].alive = false;
    let deadline = sim.group.next_deadline().expect("a deadline");
    assert!(deadline <= sim.now + SESSION);
    for _ in 0..50 {
        sim.round();
    }
    assert_eq!(sim.group.member_count(), 2);
    assert!(sim.group.member("b").is_none());
    sim.run_until_stable(10);
    assert_eq!(sim.counts(), vec![4, 4]);
}

#[test]
fn partitions_added_to_a_topic_are_assigned() {
    let mut sim = Sim::new(snapshot(&[("orders", 1, 2)]));
    sim.clients.push(Client::new("a", &["orders"]));
    sim.clients.push(Client::new("b", &["orders"]));
    sim.run_until_stable(10);
    let epoch = sim.group.group_epoch();
    sim.topics = snapshot(&[("orders", 1, 6)]);
    assert!(sim.group.topics_changed(&sim.topics));
    assert_eq!(sim.group.group_epoch(), epoch + 1);
    assert!(!sim.group.topics_changed(&sim.topics));
    sim.run_until_stable(10);
    assert_eq!(sim.counts(), vec![3, 3]);
}

#[test]
fn a_topic_missing_from_the_snapshot_is_ignored_until_created() {
    let mut sim = Sim::new(snapshot(&[("orders", 1, 2)]));
    sim.clients.push(Client::new("a", &["orders", "later"]));
    sim.run_until_stable(5);
    assert_eq!(sim.counts(), vec![2]);
    sim.topics = snapshot(&[("orders", 1, 2), ("later", 2, 2)]);
    assert!(sim.group.topics_changed(&sim.topics));
    sim.run_until_stable(5);
    assert_eq!(sim.counts(), vec![4]);
}

#[test]
fn a_static_member_rejoins_without_a_rebalance() {
    let mut sim = Sim::new(snapshot(&[("orders", 1, 4)]));
    let mut a = Client::new("a-1", &["orders"]);
    a.instance_id = Some("host-a".to_owned());
    sim.clients.push(a);
    sim.clients.push(Client::new("b", &["orders"]));
    sim.run_until_stable(10);
    let epoch = sim.group.group_epoch();
    let owned_before = sim.clients[0].owned.clone();

    // Temporary leave: keeps the assignment.
    let leave = Heartbeat {
        member_id: "a-1".to_owned(),
        member_epoch: -2,
        instance_id: Some("host-a".to_owned()),
        api_version: 1,
        ..Heartbeat::default()
    };
    let result = sim.group.heartbeat(leave, &sim.topics, &config(), sim.now);
    assert_eq!((result.error, result.member_epoch), (ErrorCode::None, -2));
    assert_eq!(sim.group.group_epoch(), epoch);

    // A new process with the same instance id and a new member id takes over.
    let rejoin = Heartbeat {
        instance_id: Some("host-a".to_owned()),
        ..join("a-2", &["orders"])
    };
    let result = sim
        .group
        .heartbeat(rejoin, &sim.topics, &config(), sim.now + 10);
    assert_eq!(result.error, ErrorCode::None);
    assert_eq!(result.member_epoch, epoch);
    assert_eq!(result.assignment.as_ref(), Some(&owned_before));
    assert_eq!(sim.group.group_epoch(), epoch, "no rebalance");
    assert!(sim.group.member("a-1").is_none());
    assert_eq!(sim.group.state(), ConsumerGroupState::Stable);
}

#[test]
fn static_member_errors_match_kafka() {
    let topics = snapshot(&[("orders", 1, 4)]);
    let mut group = ConsumerGroup::new("g");
    let first = Heartbeat {
        instance_id: Some("i".to_owned()),
        ..join("m1", &["orders"])
    };
    assert_eq!(
        group.heartbeat(first, &topics, &config(), 0).error,
        ErrorCode::None
    );

    let other = Heartbeat {
        instance_id: Some("i".to_owned()),
        ..join("m2", &["orders"])
    };
    assert_eq!(
        group.heartbeat(other, &topics, &config(), 1).error,
        ErrorCode::UnreleasedInstanceId
    );

    let epoch = group.member("m1").expect("m1").member_epoch;
    let fenced = Heartbeat {
        member_id: "m2".to_owned(),
        member_epoch: epoch,
        instance_id: Some("i".to_owned()),
        api_version: 1,
        ..Heartbeat::default()
    };
    assert_eq!(
        group.heartbeat(fenced, &topics, &config(), 2).error,
        ErrorCode::FencedInstanceId
    );

    let unknown = Heartbeat {
        member_id: "m3".to_owned(),
        member_epoch: 1,
        instance_id: Some("other".to_owned()),
        api_version: 1,
        ..Heartbeat::default()
    };
    assert_eq!(
        group.heartbeat(unknown, &topics, &config(), 3).error,
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn epochs_are_fenced_as_kafka_does() {
    let topics = snapshot(&[("orders", 1, 2)]);
    let mut group = ConsumerGroup::new("g");
    let result = group.heartbeat(join("m", &["orders"]), &topics, &config(), 0);
    assert_eq!((result.error, result.member_epoch), (ErrorCode::None, 1));
    let owned = result.assignment.expect("assignment on join");

    let beat = |epoch: i32, owned: Option<Vec<(Uuid, Vec<i32>)>>| Heartbeat {
        member_id: "m".to_owned(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned,
        client_id: "client".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        api_version: 1,
        ..Heartbeat::default()
    };
    assert_eq!(
        group.heartbeat(beat(2, None), &topics, &config(), 1).error,
        ErrorCode::FencedMemberEpoch
    );
    // Previous epoch (0) with a subset of the assignment: the bump's answer was lost.
    assert_eq!(
        group
            .heartbeat(beat(0, Some(owned.clone())), &topics, &config(), 1)
            .error,
        ErrorCode::InvalidRequest
    );
    let unchanged = group.heartbeat(beat(1, Some(owned)), &topics, &config(), 2);
    assert_eq!(
        (unchanged.error, unchanged.assignment, unchanged.changed),
        (ErrorCode::None, None, false)
    );

    // A second member bumps the epoch to 2; "m" must revoke one partition before moving.
    group.heartbeat(join("n", &["orders"]), &topics, &config(), 3);
    let revoke = group.heartbeat(
        beat(1, Some(vec![(topic_id(1), vec![0, 1])])),
        &topics,
        &config(),
        4,
    );
    assert_eq!(revoke.member_epoch, 1, "keeps its epoch while revoking");
    let kept = revoke.assignment.expect("reduced assignment");
    assert_eq!(kept.iter().map(|(_, p)| p.len()).sum::<usize>(), 1);
    let moved = group.heartbeat(beat(1, Some(kept.clone())), &topics, &config(), 5);
    assert_eq!(moved.member_epoch, 2);
    // Previous epoch with a subset is accepted; a smaller, non-previous epoch is not.
    assert_eq!(
        group
            .heartbeat(beat(1, Some(kept.clone())), &topics, &config(), 6)
            .error,
        ErrorCode::None
    );
    let superset = Some(vec![(topic_id(1), vec![0, 1])]);
    assert_eq!(
        group
            .heartbeat(beat(1, superset), &topics, &config(), 6)
            .error,
        ErrorCode::FencedMemberEpoch
    );

    let unknown = Heartbeat {
        member_id: "zz".to_owned(),
        ..beat(3, None)
    };
    assert_eq!(
        group.heartbeat(unknown, &topics, &config(), 7).error,
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn join_validation_matches_kafka() {
    let topics = snapshot(&[("orders", 1, 2)]);
    let mut group = ConsumerGroup::new("g");
    let cases = [
        (Heartbeat { member_id: String::new(), ..join("x", &["orders"]) }, ErrorCode::InvalidRequest, "MemberId can't be empty."),
        (Heartbeat { rebalance_timeout_ms: -1, ..join("x", &["orders"]) }, ErrorCode::InvalidRequest, "RebalanceTimeoutMs must be provided in first request."),
        (Heartbeat { owned: None, ..join("x", &["orders"]) }, ErrorCode::InvalidRequest, "TopicPartitions must be empty when (re-)joining."),
        (Heartbeat { subscribed_topic_names: None, ..join("x", &["orders"]) }, ErrorCode::InvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
        (Heartbeat { server_assignor: Some("sticky".to_owned()), ..join("x", &["orders"]) }, ErrorCode::UnsupportedAssignor, "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
        (Heartbeat { member_epoch: -3, ..join("x", &["orders"]) }, ErrorCode::InvalidRequest, "MemberEpoch is invalid."),
        (Heartbeat { member_epoch: -2, ..join("x", &["orders"]) }, ErrorCode::InvalidRequest, "InstanceId can't be null."),
        (Heartbeat { instance_id: Some(String::new()), ..join("x", &["orders"]) }, ErrorCode::InvalidRequest, "InstanceId can't be empty."),
    ];
    for (request, error, message) in cases {
        let result = group.heartbeat(request, &topics, &config(), 0);
        assert_eq!(
            (result.error, result.error_message.as_deref()),
            (error, Some(message))
        );
        assert!(!result.changed);
    }
    assert!(group.is_empty());

    // v0: the coordinator generates the member id.
    let v0 = Heartbeat {
        member_id: String::new(),
        api_version: 0,
        ..join("", &["orders"])
    };
    let result = group.heartbeat(v0, &topics, &config(), 0);
    assert_eq!(result.error, ErrorCode::None);
    let generated = result.member_id.expect("generated id");
    assert_eq!(generated.len(), 22);
    assert!(group.member(&generated).is_some());

    let full = ConsumerGroupConfig {
        max_size: 1,
        ..config()
    };
    assert_eq!(
        group
            .heartbeat(join("y", &["orders"]), &topics, &full, 0)
            .error,
        ErrorCode::GroupMaxSizeReached
    );
}

#[test]
fn a_member_that_does_not_revoke_in_time_is_removed() {
    let topics = snapshot(&[("orders", 1, 2)]);
    let mut group = ConsumerGroup::new("g");
    group.heartbeat(join("a", &["orders"]), &topics, &config(), 0);
    group.heartbeat(join("b", &["orders"]), &topics, &config(), 0);
    let beat = Heartbeat {
        member_id: "a".to_owned(),
        member_epoch: 1,
        rebalance_timeout_ms: -1,
        owned: Some(vec![(topic_id(1), vec![0, 1])]),
        api_version: 1,
        ..Heartbeat::default()
    };
    let result = group.heartbeat(beat.clone(), &topics, &config(), 1_000);
    assert_eq!(
        group.member("a").expect("a").state,
        MemberState::UnrevokedPartitions
    );
    assert_eq!(result.member_epoch, 1);
    // Still not revoked, heartbeating fine: the session stays alive, the revocation times out.
    group.heartbeat(beat, &topics, &config(), 20_000);
    assert_eq!(group.next_deadline(), Some(31_000));
    assert!(!group.expire(&topics, &config(), 30_999));
    assert!(group.expire(&topics, &config(), 31_000));
    assert!(group.member("a").is_none());
}

#[test]
fn offset_commit_and_fetch_validation() {
    let topics = snapshot(&[("orders", 1, 2)]);
    let mut group = ConsumerGroup::new("g");
    assert_eq!(
        group.validate_offset_commit("", None, -1, 9),
        Ok(CommitCheck::Any)
    );
    assert_eq!(group.validate_offset_fetch(None, -1), ErrorCode::None);
    group.heartbeat(join("m", &["orders"]), &topics, &config(), 0);
    assert_eq!(
        group.validate_offset_commit("", None, -1, 9),
        Err(ErrorCode::UnknownMemberId)
    );
    assert_eq!(
        group.validate_offset_commit("m", None, 1, 9),
        Ok(CommitCheck::Any)
    );
    assert_eq!(
        group.validate_offset_commit("m", None, 2, 9),
        Err(ErrorCode::StaleMemberEpoch)
    );
    assert_eq!(
        group.validate_offset_commit("m", None, 1, 8),
        Err(ErrorCode::UnsupportedVersion)
    );
    // Epoch 0 is older than every partition's assignment (all given at epoch 1).
    let check = group
        .validate_offset_commit("m", None, 0, 9)
        .expect("an older epoch is checked per partition");
    assert_eq!(
        check.partition_error(Some(topic_id(1)), 0),
        ErrorCode::StaleMemberEpoch
    );
    assert_eq!(group.validate_offset_fetch(Some("m"), 1), ErrorCode::None);
    assert_eq!(
        group.validate_offset_fetch(Some("m"), 2),
        ErrorCode::StaleMemberEpoch
    );
    assert_eq!(
        group.validate_offset_fetch(Some("x"), 1),
        ErrorCode::UnknownMemberId
    );
    assert_eq!(group.validate_offset_fetch(None, -1), ErrorCode::None);
    assert!(group.is_subscribed_to("orders"));
    assert!(!group.is_subscribed_to("other"));
}

/// KIP-1251: a commit sent at the epoch before the heartbeat answer that moved the member on
/// is accepted for the partitions it owned then and still owns, and refused for the others.
#[test]
fn a_commit_at_the_previous_epoch_is_accepted_for_partitions_owned_since() {
    let topics = snapshot(&[("orders", 1, 2), ("payments", 2, 1)]);
    let mut group = ConsumerGroup::new("g");
    group.heartbeat(join("a", &["orders"]), &topics, &config(), 0);
    let beat = |epoch: i32, owned: Vec<(Uuid, Vec<i32>)>| Heartbeat {
        member_id: "a".to_owned(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(owned),
        api_version: 1,
        ..Heartbeat::default()
    };
    group.heartbeat(
        beat(1, vec![(topic_id(1), vec![0, 1])]),
        &topics,
        &config(),
        1,
    );
    // b joins: a must give up a partition of orders, then moves to epoch 2.
    group.heartbeat(join("b", &["orders"]), &topics, &config(), 2);
    group.heartbeat(
        beat(1, vec![(topic_id(1), vec![0, 1])]),
        &topics,
        &config(),
        3,
    );
    let a = group.member("a").expect("a");
    assert_eq!(
        (a.member_epoch, a.state),
        (1, MemberState::UnrevokedPartitions)
    );
    let kept = *a.assigned[&topic_id(1)].iter().next().expect("a keeps one");
    let given_up = 1 - kept;
    let result = group.heartbeat(
        beat(1, vec![(topic_id(1), vec![kept])]),
        &topics,
        &config(),
        4,
    );
    assert_eq!(result.member_epoch, 2);

    // Per partition: (topic id, partition) → the error a commit at the epoch gets.
    let errors_at = |group: &ConsumerGroup, epoch: i32, partitions: &[(Option<Uuid>, i32)]| {
        let check = group
            .validate_offset_commit("a", None, epoch, 9)
            .expect("an older epoch is checked per partition");
        partitions
            .iter()
            .map(|(topic, partition)| check.partition_error(*topic, *partition))
            .collect::<Vec<_>>()
    };
    let orders = Some(topic_id(1));
    assert_eq!(
        errors_at(
            &group,
            1,
            &[(orders, kept), (orders, given_up), (None, kept)]
        ),
        [
            ErrorCode::None,
            ErrorCode::StaleMemberEpoch,
            ErrorCode::StaleMemberEpoch
        ]
    );

    // a subscribes to payments too and is given it at a later epoch: a commit at epoch 2
    // covers the partition kept since epoch 1, not the one given after.
    let mut subscribe = beat(2, vec![(topic_id(1), vec![kept])]);
    subscribe.subscribed_topic_names = Some(vec!["orders".to_owned(), "payments".to_owned()]);
    let result = group.heartbeat(subscribe, &topics, &config(), 5);
    assert!(result.member_epoch > 2, "{result:?}");
    let a = group.member("a").expect("a");
    assert!(a.assigned.contains_key(&topic_id(2)), "{a:?}");
    assert_eq!(
        errors_at(&group, 2, &[(orders, kept), (Some(topic_id(2)), 0)]),
        [ErrorCode::None, ErrorCode::StaleMemberEpoch]
    );

    // The assignment epochs survive a coordinator move.
    let back = ConsumerGroup::decode("g", &group.encode()).expect("decodes");
    assert_eq!(back.member("a"), group.member("a"));
    assert_eq!(errors_at(&back, 1, &[(orders, kept)]), [ErrorCode::None]);
}

#[test]
fn regex_subscriptions_follow_topic_creation() {
    let mut topics = snapshot(&[("orders-eu", 1, 2), ("payments", 2, 2)]);
    let mut group = ConsumerGroup::new("g");
    let request = Heartbeat {
        subscribed_topic_names: None,
        subscribed_topic_regex: Some("orders-.*".to_owned()),
        ..join("m", &[])
    };
    let result = group.heartbeat(request, &topics, &config(), 0);
    assert_eq!(result.assignment, Some(vec![(topic_id(1), vec![0, 1])]));
    assert!(group.is_subscribed_to("orders-us"));
    topics = snapshot(&[("orders-eu", 1, 2), ("payments", 2, 2), ("orders-us", 3, 1)]);
    assert!(group.topics_changed(&topics));
}

fn spec<'a>(member_id: &'a str, topics: &[u8], current: Option<&'a Assignment>) -> MemberSpec<'a> {
    MemberSpec {
        member_id,
        subscribed: topics.iter().map(|t| topic_id(*t)).collect(),
        current,
    }
}

fn total(assignment: &Assignment) -> usize {
    assignment.values().map(BTreeSet::len).sum()
}

#[test]
fn uniform_is_balanced_sticky_and_deterministic() {
    let partitions: BTreeMap<Uuid, i32> = [(topic_id(1), 7), (topic_id(2), 5)].into();
    let members = [
        spec("a", &[1, 2], None),
        spec("b", &[1, 2], None),
        spec("c", &[1, 2], None),
    ];
    let first = assign(UNIFORM, &members, &partitions);
    assert_eq!(first, assign(UNIFORM, &members, &partitions));
    let counts: Vec<usize> = first.values().map(total).collect();
    assert_eq!(counts, vec![4, 4, 4]);

    // A fourth member: each old member keeps all but what the newcomer needs.
    let with_d = [
        spec("a", &[1, 2], first.get("a")),
        spec("b", &[1, 2], first.get("b")),
        spec("c", &[1, 2], first.get("c")),
        spec("d", &[1, 2], None),
    ];
    let second = assign(UNIFORM, &with_d, &partitions);
    assert_eq!(
        second.values().map(total).collect::<Vec<_>>(),
        vec![3, 3, 3, 3]
    );
    for id in ["a", "b", "c"] {
        let kept = super::member::flatten(&second[id])
            .filter(|p| first[id].get(&p.0).is_some_and(|s| s.contains(&p.1)))
            .count();
        assert_eq!(kept, 3, "{id} keeps three of its four");
    }
}

#[test]
fn uniform_with_different_subscriptions_covers_everything() {
    let partitions: BTreeMap<Uuid, i32> = [(topic_id(1), 6), (topic_id(2), 2)].into();
    let members = [
        spec("a", &[1], None),
        spec("b", &[1, 2], None),
        spec("c", &[2, 9], None),
    ];
    let out = assign(UNIFORM, &members, &partitions);
    let mut all = BTreeSet::new();
    for (member, assignment) in &out {
        for (topic, partition) in super::member::flatten(assignment) {
            assert!(members
                .iter()
                .any(|m| m.member_id == member && m.subscribed.contains(&topic)));
            assert!(all.insert((topic, partition)));
        }
    }
    assert_eq!(all.len(), 8);
    assert!(!out.values().any(|a| a.contains_key(&topic_id(9))));
    let counts: Vec<usize> = out.values().map(total).collect();
    assert!(
        counts.iter().max().unwrap_or(&0) - counts.iter().min().unwrap_or(&0) <= 1,
        "{counts:?}"
    );
}

#[test]
fn range_assigns_co_partitioned_ranges_and_is_sticky() {
    let partitions: BTreeMap<Uuid, i32> = [(topic_id(1), 5), (topic_id(2), 5)].into();
    let members = [spec("a", &[1, 2], None), spec("b", &[1, 2], None)];
    let out = assign(RANGE, &members, &partitions);
    assert_eq!(out["a"][&topic_id(1)], BTreeSet::from([0, 1, 2]));
    assert_eq!(out["a"][&topic_id(2)], BTreeSet::from([0, 1, 2]));
    assert_eq!(out["b"][&topic_id(1)], BTreeSet::from([3, 4]));
    let with_c = [
        spec("a", &[1, 2], out.get("a")),
        spec("b", &[1, 2], out.get("b")),
        spec("c", &[1, 2], None),
    ];
    let next = assign(RANGE, &with_c, &partitions);
    assert_eq!(next["a"][&topic_id(1)], BTreeSet::from([0, 1]));
    assert_eq!(next["b"][&topic_id(1)], BTreeSet::from([3, 4]));
    assert_eq!(next["c"][&topic_id(1)], BTreeSet::from([2]));
}

#[test]
fn range_is_used_when_members_ask_for_it() {
    let mut sim = Sim::new(snapshot(&[("orders", 1, 4)]));
    sim.clients.push(Client::new("a", &["orders"]));
    sim.clients.push(Client::new("b", &["orders"]));
    let request = Heartbeat {
        server_assignor: Some("range".to_owned()),
        ..join("a", &["orders"])
    };
    sim.group.heartbeat(request, &sim.topics, &config(), 0);
    sim.clients[0].joined = true;
    sim.clients[0].epoch = sim.group.member("a").map_or(0, |m| m.member_epoch);
    sim.clients[0].owned = sim
        .group
        .member("a")
        .map(|m| super::member::assignment_to_wire(&m.assigned))
        .unwrap_or_default();
    sim.run_until_stable(10);
    assert_eq!(sim.group.describe(&sim.topics).assignor_name, "range");
    assert_eq!(sim.clients[0].owned, vec![(topic_id(1), vec![0, 1])]);
}

#[test]
fn encode_decode_round_trips() {
    let mut sim = Sim::new(snapshot(&[("orders", 1, 5), ("payments", 2, 3)]));
    let mut a = Client::new("a", &["orders"]);
    a.instance_id = Some("host-a".to_owned());
    sim.clients.push(a);
    sim.clients.push(Client::new("b", &["orders", "payments"]));
    sim.round();
    sim.clients.push(Client::new("c", &["payments"]));
    sim.round();
    let bytes = sim.group.encode();
    let mut back = ConsumerGroup::decode("g", &bytes).expect("decodes");
    back.restore(&config(), 7);
    let mut original = sim.group.clone();
    original.restore(&config(), 7);
    assert_eq!(back, original);
    assert_eq!(back.encode(), bytes);
    assert!(matches!(
        ConsumerGroup::decode("g", b"{\"version\":2}"),
        Err(StateDecodeError::Malformed(_) | StateDecodeError::UnsupportedVersion(_))
    ));
}

proptest! {
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = ConsumerGroup::decode("g", &bytes);
    }

    #[test]
    fn decode_of_mutated_state_never_panics(index in 0usize..4096, byte in any::<u8>()) {
        let mut sim = Sim::new(snapshot(&[("orders", 1, 4)]));
        sim.clients.push(Client::new("a", &["orders"]));
        sim.clients.push(Client::new("b", &["orders"]));
        sim.round();
        let mut bytes = sim.group.encode();
        let len = bytes.len();
        bytes[index % len] = byte;
        let _ = ConsumerGroup::decode("g", &bytes);
    }

    #[test]
    fn random_membership_changes_keep_invariants(seed in any::<u64>()) {
        let mut rng = seed;
        let mut next = move || { rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); rng >> 33 };
        let mut sim = Sim::new(snapshot(&[("orders", 1, 7), ("payments", 2, 4)]));
        let names = [&["orders"][..], &["payments"][..], &["orders", "payments"][..]];
        for round in 0..40 {
            match next() % 6 {
                0 if sim.clients.len() < 6 => {
                    let id = format!("m{round}");
                    let topics = names[(next() % 3) as usize];
                    sim.clients.push(Client::new(&id, topics));
                }
                1 => {
                    if let Some(client) = sim.clients.iter_mut().find(|c| c.alive && c.joined) {
                        client.alive = false;
                    }
                }
                _ => {}
            }
            sim.round();
        }
        let live = sim.clients.iter().filter(|c| c.alive).count();
        if live > 0 {
            sim.now += SESSION;
            sim.round();
            sim.run_until_stable(20);
        }
    }
}

#[test]
fn a_member_that_drops_a_topic_while_revoking_is_told_to_revoke_it_at_once() {
    let topics = snapshot(&[("t1", 1, 4), ("t2", 2, 2)]);
    let config = config();
    let mut group = ConsumerGroup::new("g");
    let everything = vec![(topic_id(1), vec![0, 1, 2, 3]), (topic_id(2), vec![0, 1])];
    let a = group.heartbeat(join("a", &["t1", "t2"]), &topics, &config, 0);
    assert_eq!(a.assignment.as_ref(), Some(&everything));
    let beat = |epoch: i32, names: Option<Vec<String>>| Heartbeat {
        member_id: "a".to_owned(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: names,
        owned: Some(everything.clone()),
        client_id: "client".to_owned(),
        client_host: "/127.0.0.1".to_owned(),
        api_version: 1,
        ..Heartbeat::default()
    };
    group.heartbeat(beat(a.member_epoch, None), &topics, &config, 10);
    group.heartbeat(join("b", &["t1", "t2"]), &topics, &config, 20);
    let revoking = group.heartbeat(beat(a.member_epoch, None), &topics, &config, 30);
    assert_eq!(
        revoking.member_epoch, a.member_epoch,
        "a keeps its epoch while revoking"
    );
    assert_eq!(
        group.member("a").map(|m| m.state),
        Some(MemberState::UnrevokedPartitions)
    );
    // a drops a topic it still has partitions of after the split.
    let dropped = *group
        .member("a")
        .and_then(|m| m.assigned.keys().next())
        .expect("the split leaves a some partitions");
    let remaining = if dropped == topic_id(1) { "t2" } else { "t1" };

    // a has not revoked yet (it still reports everything) and now subscribes to one topic.
    let result = group.heartbeat(
        beat(a.member_epoch, Some(vec![remaining.to_owned()])),
        &topics,
        &config,
        40,
    );
    assert_eq!(result.error, ErrorCode::None);
    assert_eq!(result.member_epoch, a.member_epoch);
    let assignment = result
        .assignment
        .expect("the shrunk assignment is sent at once");
    assert!(
        assignment.iter().all(|(topic, _)| *topic != dropped),
        "no partition of the dropped topic stays assigned: {assignment:?}"
    );
    let member = group.member("a").expect("still a member");
    assert_eq!(member.state, MemberState::UnrevokedPartitions);
    assert!(member.pending_revocation.contains_key(&dropped));

    // Once a reports them gone it moves on to the new target without the dropped topic.
    let next = group.heartbeat(
        Heartbeat {
            owned: Some(assignment),
            ..beat(a.member_epoch, None)
        },
        &topics,
        &config,
        50,
    );
    assert!(next.member_epoch > a.member_epoch);
    assert!(group
        .member("a")
        .is_some_and(|m| !m.assigned.contains_key(&dropped)));
}
