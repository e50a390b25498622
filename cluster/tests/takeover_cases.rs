//! The takeover diff on small, readable cases: what is closed, what is opened, in which phase
//! and why.

use kaas_cluster::assignment::Assignment;
use kaas_cluster::command::ShardCommand;
use kaas_cluster::ids::{BrokerId, GroupId, LeaderEpoch, ShardIndex, TopicName, TopicPartition};
use kaas_cluster::open_state::OpenState;
use kaas_cluster::placement::owner_shard;
use kaas_cluster::takeover::{plan_takeover, Cause, TakeoverPlan};
use kaas_cluster::view::ClusterView;

const SHARDS: usize = 2;

/// A view for broker 0 of topic `t` whose partitions have these (leader, epoch) pairs, with
/// groups named as given.
fn view(leaders: &[(i32, i32)], groups: &[(&str, i32)], version: u64) -> ClusterView {
    let partitions: Vec<String> = leaders
        .iter()
        .map(|(l, e)| format!("{{\"leader\": {l}, \"leader_epoch\": {e}}}"))
        .collect();
    let groups: Vec<String> = groups
        .iter()
        .map(|(g, b)| format!("\"{g}\": {b}"))
        .collect();
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
        "brokers": [{{"id": 0, "host": "a", "port": 1}}, {{"id": 1, "host": "b", "port": 1}}],
        "topics": {{"t": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": {}}}}},
        "partitions": {{"t": [{}]}}, "consumerGroups": {{{}}}}}"#,
        leaders.len(),
        partitions.join(","),
        groups.join(",")
    );
    let assignment = Assignment::from_json(text.as_bytes()).expect("valid");
    ClusterView::new(&assignment, BrokerId(0), SHARDS)
}

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new(TopicName::new("t").expect("legal"), partition)
}

fn shard_of(partition: i32) -> ShardIndex {
    owner_shard("t", partition, SHARDS)
}

/// The phases as (shard, command, cause) triples.
fn listed(plan: &TakeoverPlan) -> [Vec<(ShardIndex, ShardCommand, Cause)>; 2] {
    plan.phases().map(|phase| {
        phase
            .commands()
            .iter()
            .map(|p| (p.command.shard, p.command.command.clone(), p.cause))
            .collect()
    })
}

fn open_cmd(partition: i32, epoch: i32) -> ShardCommand {
    ShardCommand::OpenPartition {
        partition: tp(partition),
        leader_epoch: LeaderEpoch(epoch),
    }
}

/// A close that checkpoints first (`reopened_here`) or hands the files over as they are.
fn close_cmd(partition: i32, reopened_here: bool) -> ShardCommand {
    ShardCommand::ClosePartition {
        partition: tp(partition),
        checkpoint: reopened_here,
    }
}

#[test]
fn first_view_opens_what_this_broker_leads() {
    let new = view(&[(0, 0), (1, 0)], &[], 1);
    let plan = plan_takeover(None, &new, &OpenState::new());
    let [close, open] = listed(&plan);
    assert!(close.is_empty());
    assert_eq!(open, vec![(shard_of(0), open_cmd(0, 0), Cause::Gained)]);
}

#[test]
fn a_lost_partition_closes_and_a_gained_one_opens() {
    let old = view(&[(0, 3), (1, 3)], &[], 1);
    let new = view(&[(1, 4), (0, 4)], &[], 2);
    let mut open = OpenState::new();
    open.insert_partition(shard_of(0), tp(0), LeaderEpoch(3));
    let [close, opened] = listed(&plan_takeover(Some(&old), &new, &open));
    assert_eq!(close, vec![(shard_of(0), close_cmd(0, false), Cause::Lost)]);
    assert_eq!(opened, vec![(shard_of(1), open_cmd(1, 4), Cause::Gained)]);
}

#[test]
fn a_risen_leader_epoch_closes_and_reopens_on_the_same_shard() {
    let old = view(&[(0, 3)], &[], 1);
    let new = view(&[(0, 5)], &[], 2);
    let mut open = OpenState::new();
    open.insert_partition(shard_of(0), tp(0), LeaderEpoch(3));
    let [close, opened] = listed(&plan_takeover(Some(&old), &new, &open));
    assert_eq!(
        close,
        vec![(shard_of(0), close_cmd(0, true), Cause::EpochChanged)]
    );
    assert_eq!(
        opened,
        vec![(shard_of(0), open_cmd(0, 5), Cause::EpochChanged)]
    );
}

#[test]
fn a_partition_on_the_wrong_shard_closes_there_before_opening_on_its_owner() {
    let new = view(&[(0, 2)], &[], 1);
    let wrong = ShardIndex((shard_of(0).0 + 1) % SHARDS);
    let mut open = OpenState::new();
    open.insert_partition(wrong, tp(0), LeaderEpoch(2));
    let [close, opened] = listed(&plan_takeover(Some(&new), &new, &open));
    assert_eq!(close, vec![(wrong, close_cmd(0, true), Cause::Moved)]);
    assert_eq!(opened, vec![(shard_of(0), open_cmd(0, 2), Cause::Moved)]);
}

#[test]
fn the_orphan_sweep_closes_what_no_view_gives_this_broker() {
    let new = view(&[(0, 1)], &[], 1);
    let mut open = OpenState::new();
    open.insert_partition(shard_of(0), tp(0), LeaderEpoch(1));
    let stray = TopicPartition::new(TopicName::new("gone").expect("legal"), 7);
    open.insert_partition(ShardIndex(1), stray.clone(), LeaderEpoch(9));
    open.insert_group(ShardIndex(0), GroupId::new("named-elsewhere"));
    let new_with_group = view(&[(0, 1)], &[("named-elsewhere", 1)], 2);
    let [close, opened] = listed(&plan_takeover(Some(&new), &new_with_group, &open));
    assert_eq!(
        close,
        vec![
            (
                ShardIndex(0),
                ShardCommand::DropGroup {
                    group: GroupId::new("named-elsewhere")
                },
                Cause::Orphan
            ),
            (
                ShardIndex(1),
                ShardCommand::ClosePartition {
                    partition: stray,
                    checkpoint: false
                },
                Cause::Orphan
            ),
        ]
    );
    assert!(opened.is_empty());
}

#[test]
fn named_groups_are_adopted_and_dropped_on_their_shard() {
    let old = view(&[(0, 0)], &[("billing", 0)], 1);
    let new = view(&[(0, 0)], &[("billing", 1), ("audit", 0)], 2);
    let mut open = OpenState::new();
    open.insert_partition(shard_of(0), tp(0), LeaderEpoch(0));
    let billing = GroupId::new("billing");
    let audit = GroupId::new("audit");
    open.insert_group(old.group_shard(&billing), billing.clone());
    let [close, opened] = listed(&plan_takeover(Some(&old), &new, &open));
    assert_eq!(
        close,
        vec![(
            old.group_shard(&billing),
            ShardCommand::DropGroup { group: billing },
            Cause::Lost
        )]
    );
    assert_eq!(
        opened,
        vec![(
            new.group_shard(&audit),
            ShardCommand::AdoptGroup { group: audit },
            Cause::Gained
        )]
    );
}

#[test]
fn an_unnamed_group_stays_while_the_fallback_picks_this_broker() {
    let new = view(&[(0, 0)], &[], 1);
    // Find an unnamed group the fallback gives to broker 0 and one it gives to broker 1.
    let mine = (0..)
        .map(|i| GroupId::new(&format!("g{i}")))
        .find(|g| new.coordinator_of(g) == Some(BrokerId(0)))
        .expect("some group hashes to broker 0");
    let theirs = (0..)
        .map(|i| GroupId::new(&format!("g{i}")))
        .find(|g| new.coordinator_of(g) == Some(BrokerId(1)))
        .expect("some group hashes to broker 1");
    let mut open = OpenState::new();
    open.insert_partition(shard_of(0), tp(0), LeaderEpoch(0));
    open.insert_group(new.group_shard(&mine), mine);
    open.insert_group(new.group_shard(&theirs), theirs.clone());
    let [close, opened] = listed(&plan_takeover(Some(&new), &new, &open));
    assert_eq!(
        close,
        vec![(
            new.group_shard(&theirs),
            ShardCommand::DropGroup { group: theirs },
            Cause::Orphan
        )]
    );
    assert!(opened.is_empty());
}

#[test]
fn by_shard_carries_each_shards_whole_share_together() {
    let new = view(&[(0, 0), (0, 0), (0, 0), (0, 0)], &[], 1);
    let plan = plan_takeover(None, &new, &OpenState::new());
    let grouped = plan.open_phase().by_shard();
    let total: usize = grouped.values().map(Vec::len).sum();
    assert_eq!(total, 4);
    for (shard, commands) in grouped {
        for command in commands {
            let ShardCommand::OpenPartition { partition, .. } = command else {
                panic!("only opens expected");
            };
            assert_eq!(shard_of(partition.partition), shard);
        }
    }
}
