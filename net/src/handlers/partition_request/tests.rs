//! Tests of partition_request.rs: what resolution answers, the owner's check, and the order
//! of the gathered outputs.

use kaas_cluster::assignment::Assignment;
use kaas_cluster::command::ShardCommand;
use kaas_cluster::ids::{BrokerId, LeaderEpoch, TopicName, TopicPartition};

use super::*;
use crate::model::topic_config::{TopicConfig, TopicDefaults};
use crate::protocol::Uuid;
use crate::shard::partition_error::PartitionError;
use crate::shard::test_support::{run, shard_zero};

/// A one-shard view of broker 0: `t` has partition 0 led here at `epoch_0` and partition 1
/// led by broker 1 at epoch 7.
fn cluster_view(version: u64, epoch_0: i32, leader_0: i32) -> ClusterView {
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
            "brokers": [{{"id": 0, "host": "127.0.0.1", "port": 9092}},
                        {{"id": 1, "host": "127.0.0.1", "port": 9093}}],
            "topics": {{"t": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 2}}}},
            "partitions": {{"t": [{{"leader": {leader_0}, "leader_epoch": {epoch_0}}},
                                 {{"leader": 1, "leader_epoch": 7}}]}},
            "consumerGroups": {{}}}}"#
    );
    let assignment = Assignment::from_json(text.as_bytes()).expect("valid");
    let view = kaas_cluster::view::ClusterView::new(&assignment, BrokerId(0), 1);
    ClusterView::of_assignment("c".into(), Arc::new(view), &TopicDefaults::default())
}

fn standalone_view() -> ClusterView {
    let topic = TopicInfo::of(
        TopicName::new("t").expect("legal"),
        Uuid([7; 16]),
        2,
        TopicConfig::default(),
        &TopicDefaults::default(),
    );
    crate::shard::test_support::standalone_view(1, &[topic])
}

fn at(topic: usize, partition: usize) -> Position {
    Position { topic, partition }
}

/// The answer `add` gives partition `partition` of `t` with `current_leader_epoch`.
fn resolved(view: &ClusterView, partition: i32, current_leader_epoch: i32) -> ErrorCode {
    let view = Arc::new(view.clone());
    let topic = view.topic("t").expect("topic").clone();
    let mut requests = PartitionRequests::new(view, 1);
    match requests.add(at(0, 0), &topic, partition, current_leader_epoch, ()) {
        Ok(()) => ErrorCode::None,
        Err(code) => code,
    }
}

#[test]
fn resolution_answers_as_kafka_for_what_this_broker_does_not_serve_at_that_epoch() {
    let view = cluster_view(1, 5, 0);
    assert_eq!(resolved(&view, 0, -1), ErrorCode::None);
    assert_eq!(resolved(&view, 0, 5), ErrorCode::None);
    assert_eq!(resolved(&view, 0, 4), ErrorCode::FencedLeaderEpoch);
    assert_eq!(resolved(&view, 0, 6), ErrorCode::UnknownLeaderEpoch);
    // Led elsewhere: NOT_LEADER_OR_FOLLOWER whatever epoch the client sent.
    for epoch in [-1, 6, 7, 8] {
        assert_eq!(resolved(&view, 1, epoch), ErrorCode::NotLeaderOrFollower);
    }
    assert_eq!(resolved(&view, 2, -1), ErrorCode::UnknownTopicOrPartition);
    assert_eq!(resolved(&view, -1, -1), ErrorCode::UnknownTopicOrPartition);

    let standalone = standalone_view();
    assert_eq!(resolved(&standalone, 1, -1), ErrorCode::None);
    assert_eq!(resolved(&standalone, 1, 0), ErrorCode::None);
    assert_eq!(resolved(&standalone, 1, 1), ErrorCode::UnknownLeaderEpoch);
    assert_eq!(
        resolved(&standalone, 2, -1),
        ErrorCode::UnknownTopicOrPartition
    );
}

#[test]
fn a_resolved_partition_carries_the_epoch_it_was_resolved_at() {
    let view = Arc::new(cluster_view(1, 5, 0));
    let topic = view.topic("t").expect("topic").clone();
    let mut requests = PartitionRequests::new(view, 1);
    requests.add(at(0, 0), &topic, 0, 5, "x").expect("led here");
    let owned = &requests.by_shard[0][0];
    assert_eq!(owned.partition.leader_epoch, 5);
    assert_eq!(owned.partition.id, PartitionId::new("t", 0));
    assert_eq!(owned.input, "x");
}

fn partition_of_t(number: i32, epoch: i32) -> ResolvedPartition {
    ResolvedPartition {
        id: PartitionId::new("t", number),
        leader_epoch: epoch,
        config: LogConfig::default(),
    }
}

#[test]
fn the_owner_serves_a_partition_only_at_the_epoch_it_was_resolved_at() {
    run(|root| {
        Box::pin(async move {
            let shard = shard_zero(&root, cluster_view(1, 5, 0));
            let open = ShardCommand::OpenPartition {
                partition: TopicPartition::new(TopicName::new("t").expect("legal"), 0),
                leader_epoch: LeaderEpoch(5),
            };
            shard.run_command(open).await.expect("opens");
            assert!(partition_of_t(0, 5).log(&shard).await.is_ok());
            // Resolved against an older view than the one the shard opened it under.
            let stale = partition_of_t(0, 4).log(&shard).await;
            assert!(
                matches!(stale, Err(PartitionError::NotLeader)),
                "{:?}",
                stale.err()
            );
            // Led elsewhere, never opened here.
            let elsewhere = partition_of_t(1, 7).log(&shard).await;
            assert!(
                matches!(elsewhere, Err(PartitionError::NotLeader)),
                "{:?}",
                elsewhere.err()
            );
            // The partition moved to broker 1 after the request was resolved here.
            shard.view.publish(cluster_view(2, 6, 1));
            let moved = partition_of_t(0, 5).log(&shard).await;
            assert!(
                matches!(moved, Err(PartitionError::NotLeader)),
                "{:?}",
                moved.err()
            );
            assert!(shard.logs.get(&PartitionId::new("t", 1)).is_none());
        })
    });
}

#[test]
fn outputs_are_gathered_in_request_order() {
    run(|root| {
        Box::pin(async move {
            let shard = shard_zero(&root, standalone_view());
            for partition in [0, 1] {
                let open = ShardCommand::OpenPartition {
                    partition: TopicPartition::new(TopicName::new("t").expect("legal"), partition),
                    leader_epoch: LeaderEpoch(0),
                };
                shard.run_command(open).await.expect("opens");
            }
            let view = shard.view.load();
            let topic = view.topic("t").expect("topic").clone();
            let mut requests = PartitionRequests::new(view, 1);
            // Added out of order; the work answers in yet another order.
            for (position, partition) in [(at(1, 0), 1), (at(0, 1), 0), (at(0, 0), 1)] {
                requests
                    .add(
                        position,
                        &topic,
                        partition,
                        -1,
                        position.topic * 10 + position.partition,
                    )
                    .expect("served");
            }
            let gathered = requests
                .run(&shard, |owner, owned: Vec<Owned<usize>>| async move {
                    let mut answers = Vec::new();
                    for item in owned.into_iter().rev() {
                        let log = item.partition.log(&owner).await.map(|_| item.input);
                        answers.push((item.position, log));
                    }
                    answers
                })
                .await;
            let answers: Vec<(Position, usize)> = gathered
                .into_iter()
                .map(|(position, output)| {
                    let input = output.expect("shard ran").expect("log is open");
                    (position, input)
                })
                .collect();
            assert_eq!(answers, vec![(at(0, 0), 0), (at(0, 1), 1), (at(1, 0), 10)]);
        })
    });
}
