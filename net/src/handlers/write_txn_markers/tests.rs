//! WriteTxnMarkers over a real shard (a standalone broker's shard 0 on a temporary
//! directory): a commit marker ends a transaction durably, the engine's fences answer Kafka's
//! codes, partitions this broker cannot write are answered as Kafka answers them, and a
//! `__consumer_offsets` marker completes a pending transactional offset commit.

use kaas_engine::PartitionId;

use super::*;
use crate::groups::offsets::fetch_offsets;
use crate::groups::offsets_topic;
use crate::groups::txn_offsets::{commit_transactional, TopicRef, TxnCommitter, TxnOffsetToCommit};
use crate::model::cluster_view::STANDALONE_LEADER_EPOCH;
use crate::protocol::messages::write_txn_markers::{WritableTxnMarker, WritableTxnMarkerTopic};
use crate::shard::test_support::{
    append_durably, open_by_command, run, shard_zero, standalone_view, topic, transactional_batch,
};

const PRODUCER: i64 = 42;

/// A marker of `PRODUCER` at `producer_epoch` from coordinator epoch `coordinator_epoch`.
fn marker(
    producer_epoch: i16,
    coordinator_epoch: i32,
    commit: bool,
    transaction_version: i8,
    partitions: &[(&str, i32)],
) -> WritableTxnMarker {
    let mut topics: Vec<WritableTxnMarkerTopic> = Vec::new();
    for (name, partition) in partitions {
        match topics.iter_mut().find(|t| t.name == *name) {
            Some(t) => t.partition_indexes.push(*partition),
            None => topics.push(WritableTxnMarkerTopic {
                name: (*name).into(),
                partition_indexes: vec![*partition],
            }),
        }
    }
    WritableTxnMarker {
        producer_id: PRODUCER,
        producer_epoch,
        transaction_result: commit,
        topics,
        coordinator_epoch,
        transaction_version,
    }
}

/// Every (producer id, topic, partition, code) of a response, in its order.
fn codes(response: &WriteTxnMarkersResponse) -> Vec<(i64, String, i32, ErrorCode)> {
    response
        .markers
        .iter()
        .flat_map(|marker| {
            marker.topics.iter().flat_map(move |topic| {
                topic.partitions.iter().map(move |p| {
                    let code = ErrorCode::from_code(p.error_code).expect("a known code");
                    (
                        marker.producer_id,
                        topic.name.clone(),
                        p.partition_index,
                        code,
                    )
                })
            })
        })
        .collect()
}

async fn write(shard: &Rc<Shard>, markers: Vec<WritableTxnMarker>) -> WriteTxnMarkersResponse {
    handle(shard, WriteTxnMarkersRequest { markers }).await
}

/// Shard 0 of a standalone one-shard broker holding `t` (2 partitions), `t-0` open, with an
/// open transaction of `PRODUCER` at epoch 0 in it.
async fn with_open_transaction(root: &std::path::Path) -> (Rc<Shard>, PartitionId) {
    let shard = shard_zero(root, standalone_view(1, &[topic("t", 2)]));
    open_by_command(&shard, "t", 0, STANDALONE_LEADER_EPOCH).await;
    let id = PartitionId::new("t", 0);
    append_durably(&shard, &id, &transactional_batch(PRODUCER, 0, 0)).await;
    let log = shard.log(&id).expect("served");
    assert_eq!(
        log.offsets().last_stable_offset,
        0,
        "the transaction is open"
    );
    (shard, id)
}

#[test]
fn a_commit_marker_ends_the_transaction_durably_and_moves_the_last_stable_offset() {
    run(|root| {
        Box::pin(async move {
            let (shard, id) = with_open_transaction(&root).await;
            let response = write(&shard, vec![marker(0, 3, true, 0, &[("t", 0)])]).await;
            assert_eq!(
                codes(&response),
                vec![(PRODUCER, "t".into(), 0, ErrorCode::None)]
            );
            let offsets = shard.log(&id).expect("served").offsets();
            assert_eq!(offsets.log_end_offset, 2);
            assert_eq!(offsets.high_watermark, 2, "durable before the answer");
            assert_eq!(offsets.last_stable_offset, 2);
        })
    });
}

#[test]
fn a_marker_from_an_older_coordinator_is_fenced_and_ends_nothing() {
    run(|root| {
        Box::pin(async move {
            let (shard, id) = with_open_transaction(&root).await;
            let ended = write(&shard, vec![marker(0, 3, true, 0, &[("t", 0)])]).await;
            assert_eq!(codes(&ended)[0].3, ErrorCode::None);
            append_durably(&shard, &id, &transactional_batch(PRODUCER, 0, 1)).await;
            let log = shard.log(&id).expect("served");
            let open = log.offsets();
            assert_eq!(open.last_stable_offset, 2);

            let stale = write(&shard, vec![marker(0, 2, false, 0, &[("t", 0)])]).await;
            assert_eq!(
                codes(&stale),
                vec![(
                    PRODUCER,
                    "t".into(),
                    0,
                    ErrorCode::TransactionCoordinatorFenced
                )]
            );
            assert_eq!(log.offsets(), open, "nothing written");
        })
    });
}

#[test]
fn a_transactions_v2_marker_must_carry_a_bumped_producer_epoch() {
    run(|root| {
        Box::pin(async move {
            let (shard, id) = with_open_transaction(&root).await;
            // The transaction's own epoch: a V2 coordinator always bumps it, so this one is stale.
            let stale = write(&shard, vec![marker(0, 1, true, 2, &[("t", 0)])]).await;
            assert_eq!(codes(&stale)[0].3, ErrorCode::InvalidProducerEpoch);
            // With the epoch bumped it ends the transaction.
            let bumped = write(&shard, vec![marker(1, 1, true, 2, &[("t", 0)])]).await;
            assert_eq!(codes(&bumped)[0].3, ErrorCode::None);
            assert_eq!(
                shard.log(&id).expect("served").offsets().last_stable_offset,
                2
            );
        })
    });
}

#[test]
fn partitions_this_broker_cannot_write_get_kafkas_codes_per_producer() {
    run(|root| {
        Box::pin(async move {
            let shard = shard_zero(&root, standalone_view(1, &[topic("t", 2)]));
            assert_eq!(write(&shard, Vec::new()).await.markers, Vec::new());
            // A marker naming no partition has no result.
            let empty = write(&shard, vec![marker(0, 1, false, 0, &[])]).await;
            assert_eq!(empty.markers, Vec::new());
            // Two markers of one producer are answered as one result, topics merged.
            let response = write(
                &shard,
                vec![
                    marker(0, 1, false, 0, &[("unknown", 0), ("t", 9), ("t", -1)]),
                    marker(0, 1, false, 0, &[("t", 1), ("", 0)]),
                ],
            )
            .await;
            assert_eq!(response.markers.len(), 1);
            assert_eq!(
                codes(&response),
                vec![
                    (
                        PRODUCER,
                        "unknown".into(),
                        0,
                        ErrorCode::UnknownTopicOrPartition
                    ),
                    (PRODUCER, "t".into(), 9, ErrorCode::UnknownTopicOrPartition),
                    (PRODUCER, "t".into(), -1, ErrorCode::UnknownTopicOrPartition),
                    // Not opened here (a partition being handed over): the leader moved.
                    (PRODUCER, "t".into(), 1, ErrorCode::NotLeaderOrFollower),
                    (PRODUCER, "".into(), 0, ErrorCode::UnknownTopicOrPartition),
                ]
            );
        })
    });
}

#[test]
fn a_consumer_offsets_marker_completes_a_pending_transactional_offset_commit() {
    run(|root| {
        Box::pin(async move {
            let shard = shard_zero(&root, standalone_view(1, &[topic("t", 2)]));
            shard.groups.load().await;
            let committer = TxnCommitter {
                producer_id: PRODUCER,
                producer_epoch: 0,
                member_id: String::new(),
                group_instance_id: None,
                generation_or_epoch: -1,
                api_version: 3,
            };
            let offset = TxnOffsetToCommit {
                topic: TopicRef::Name("t".into()),
                partition: 0,
                offset: 10,
                leader_epoch: -1,
                metadata: None,
            };
            let view = shard.view.load();
            let committed =
                commit_transactional(&shard.groups, &view, "g", committer, vec![offset], 1_000)
                    .await;
            assert_eq!(committed, vec![ErrorCode::None]);
            let stable = || async {
                let topics = Some(vec![("t".to_owned(), vec![0])]);
                let fetched = fetch_offsets(&shard.groups, "g", None, topics, true)
                    .await
                    .expect("fetched");
                let partition = &fetched[0].1[0];
                (
                    partition.committed.as_ref().map(|c| c.offset),
                    partition.error,
                )
            };
            assert_eq!(stable().await, (None, ErrorCode::UnstableOffsetCommit));

            let partition = offsets_topic::partition_for("g");
            let response = write(
                &shard,
                vec![marker(0, 1, true, 0, &[("__consumer_offsets", partition)])],
            )
            .await;
            assert_eq!(
                codes(&response),
                vec![(
                    PRODUCER,
                    "__consumer_offsets".into(),
                    partition,
                    ErrorCode::None
                )]
            );
            assert_eq!(stable().await, (Some(10), ErrorCode::None));
        })
    });
}
