//! Tests of the marker writes: the round decisions (Kafka's completion-handler rules), the
//! routing by view, the wire form of an entry, and [`write_markers`] over a real shard —
//! partitions led here written durably, a stale coordinator stopped, and a partition led by
//! another broker sent there and retried until written.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Instant;

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::BrokerId;
use kaas_engine::PartitionId;

use super::*;
use crate::model::cluster_view::{ClusterView, STANDALONE_LEADER_EPOCH};
use crate::model::topic_config::TopicDefaults;
use crate::peers::test_server;
use crate::peers::Endpoint;
use crate::protocol::messages::write_txn_markers::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    WriteTxnMarkersResponse,
};
use crate::protocol::{encode_response, ErrorCode, Request};
use crate::shard::test_support::{
    append_durably, open_by_command, run, shard_zero, standalone_view, topic, transactional_batch,
};
use crate::transactions::state::TransactionVersion;

const PRODUCER: i64 = 42;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic, partition)
}

fn markers(partitions: Vec<TopicPartition>, coordinator_epoch: i32) -> TxnMarkers {
    TxnMarkers {
        transactional_id: "tx".into(),
        producer_id: PRODUCER,
        producer_epoch: 0,
        coordinator_epoch,
        result: TransactionResult::Commit,
        partitions,
        transaction_version: TransactionVersion::V1,
    }
}

/// A one-shard view of broker 0: `t` has partition 0 led here (epoch 3) and partition 1 led
/// by broker 1, listening on `port`.
fn cluster_view(port: u16) -> ClusterView {
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": 1,
            "brokers": [{{"id": 0, "host": "127.0.0.1", "port": 9092}},
                        {{"id": 1, "host": "127.0.0.1", "port": {port}}}],
            "topics": {{"t": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 2}}}},
            "partitions": {{"t": [{{"leader": 0, "leader_epoch": 3}},
                                 {{"leader": 1, "leader_epoch": 7}}]}},
            "consumerGroups": {{}}}}"#
    );
    let assignment = Assignment::from_json(text.as_bytes()).expect("valid");
    let view = kaas_cluster::view::ClusterView::new(&assignment, BrokerId(0), 1);
    ClusterView::of_assignment("c".into(), Arc::new(view), &TopicDefaults::default())
}

#[test]
fn answers_get_the_verdicts_of_kafkas_completion_handler() {
    use MarkerAnswer::*;
    for code in [
        ErrorCode::None,
        ErrorCode::UnsupportedForMessageFormat,
        ErrorCode::UnsupportedVersion,
    ] {
        assert_eq!(verdict(Answered(code)), Verdict::Written, "{code:?}");
    }
    for code in [
        ErrorCode::UnknownTopicOrPartition,
        ErrorCode::NotLeaderOrFollower,
        ErrorCode::NotEnoughReplicas,
        ErrorCode::NotEnoughReplicasAfterAppend,
        ErrorCode::RequestTimedOut,
        ErrorCode::KafkaStorageError,
        ErrorCode::CoordinatorLoadInProgress,
        ErrorCode::CorruptMessage,
    ] {
        assert_eq!(verdict(Answered(code)), Verdict::Retry, "{code:?}");
    }
    for code in [
        ErrorCode::InvalidProducerEpoch,
        ErrorCode::TransactionCoordinatorFenced,
    ] {
        assert_eq!(verdict(Answered(code)), Verdict::Stale, "{code:?}");
    }
    assert_eq!(verdict(NoAnswer), Verdict::Retry);
    assert_eq!(verdict(NoLeader), Verdict::Retry);
    assert_eq!(verdict(UnknownCode(999)), Verdict::Retry);
    assert_eq!(verdict(TopicGone), Verdict::Written);
}

#[test]
fn a_round_is_stale_if_any_answer_is_else_retries_what_is_left_in_order() {
    use MarkerAnswer::*;
    let none = Answered(ErrorCode::None);
    let moved = Answered(ErrorCode::NotLeaderOrFollower);
    assert_eq!(
        after_round(vec![(tp("a", 0), none), (tp("gone", 0), TopicGone)]),
        RoundOutcome::AllWritten
    );
    assert_eq!(after_round(Vec::new()), RoundOutcome::AllWritten);
    assert_eq!(
        after_round(vec![
            (tp("a", 1), NoAnswer),
            (tp("a", 0), none),
            (tp("b", 0), moved),
        ]),
        RoundOutcome::Retry(vec![tp("a", 1), tp("b", 0)])
    );
    assert_eq!(
        after_round(vec![
            (tp("a", 1), NoAnswer),
            (
                tp("b", 0),
                Answered(ErrorCode::TransactionCoordinatorFenced)
            ),
            (tp("b", 1), none),
        ]),
        RoundOutcome::Stale(tp("b", 0))
    );
}

#[test]
fn partitions_route_to_their_leader_and_a_deleted_topic_needs_no_marker() {
    let view = cluster_view(9093);
    assert_eq!(route(&view, &tp("t", 0)), Route::Here);
    assert_eq!(
        route(&view, &tp("t", 1)),
        Route::Leader(Endpoint::new("127.0.0.1", 9093))
    );
    assert_eq!(route(&view, &tp("t", 2)), Route::TopicGone);
    assert_eq!(route(&view, &tp("deleted", 0)), Route::TopicGone);
    // The assignment does not place `__consumer_offsets` yet: wait for it.
    assert_eq!(route(&view, &tp("__consumer_offsets", 3)), Route::NoLeader);
    assert_eq!(
        route(&view, &tp("__consumer_offsets", 50)),
        Route::TopicGone
    );
    // A cluster broker before its first assignment knows nothing yet.
    let unassigned = ClusterView {
        cluster_mode: true,
        ..ClusterView::default()
    };
    assert_eq!(route(&unassigned, &tp("t", 0)), Route::NoLeader);
    // A standalone broker leads everything, `__consumer_offsets` included.
    let standalone = standalone_view(1, &[topic("t", 1)]);
    assert_eq!(route(&standalone, &tp("t", 0)), Route::Here);
    assert_eq!(
        route(&standalone, &tp("__consumer_offsets", 3)),
        Route::Here
    );
}

#[test]
fn an_entry_goes_over_the_wire_grouped_by_topic_and_each_partition_is_answered() {
    let entry = MarkerEntry {
        producer_id: PRODUCER,
        producer_epoch: 4,
        coordinator_epoch: 9,
        commit: false,
        transaction_version: 2,
        partitions: vec![tp("a", 1), tp("b", 0), tp("a", 0)],
    };
    let wire = to_wire(&entry);
    assert_eq!(wire.topics.len(), 2);
    assert_eq!(wire.topics[0].partition_indexes, vec![1, 0]);
    assert_eq!(
        from_wire(&wire).partitions,
        vec![tp("a", 1), tp("a", 0), tp("b", 0)]
    );
    assert_eq!(from_wire(&wire).epoch_check(), entry.epoch_check());
    let mut repeated = wire.clone();
    repeated.topics[1].partition_indexes = vec![0, 0];
    assert_eq!(from_wire(&repeated).partitions.len(), 3);

    let response = WriteTxnMarkersResponse {
        markers: vec![WritableTxnMarkerResult {
            producer_id: PRODUCER,
            topics: vec![WritableTxnMarkerTopicResult {
                name: "a".into(),
                partitions: vec![
                    WritableTxnMarkerPartitionResult {
                        partition_index: 1,
                        error_code: ErrorCode::NotLeaderOrFollower.code(),
                    },
                    WritableTxnMarkerPartitionResult {
                        partition_index: 0,
                        error_code: 31_000,
                    },
                ],
            }],
        }],
    };
    assert_eq!(
        answer_for(&response, PRODUCER, &tp("a", 1)),
        MarkerAnswer::Answered(ErrorCode::NotLeaderOrFollower)
    );
    assert_eq!(
        answer_for(&response, PRODUCER, &tp("a", 0)),
        MarkerAnswer::UnknownCode(31_000)
    );
    assert_eq!(
        answer_for(&response, PRODUCER, &tp("b", 0)),
        MarkerAnswer::NoAnswer
    );
    assert_eq!(
        answer_for(&response, PRODUCER + 1, &tp("a", 1)),
        MarkerAnswer::NoAnswer
    );
}

#[test]
fn markers_led_here_are_written_durably_and_a_deleted_topic_counts_as_written() {
    run(|root| {
        Box::pin(async move {
            let shard = shard_zero(&root, standalone_view(1, &[topic("t", 2)]));
            open_by_command(&shard, "t", 0, STANDALONE_LEADER_EPOCH).await;
            let id = PartitionId::new("t", 0);
            append_durably(&shard, &id, &transactional_batch(PRODUCER, 0, 0)).await;
            let log = shard.log(&id).expect("served");
            assert_eq!(log.offsets().last_stable_offset, 0);

            let written = write_markers(
                &shard,
                markers(vec![tp("t", 0), tp("deleted", 0)], 1),
                || true,
            )
            .await;
            assert!(written);
            let offsets = log.offsets();
            assert_eq!(offsets.high_watermark, 2, "the marker is durable");
            assert_eq!(offsets.last_stable_offset, 2);
        })
    });
}

#[test]
fn a_stale_coordinator_stops_at_the_first_answer_that_says_so_or_before_any_round() {
    run(|root| {
        Box::pin(async move {
            let shard = shard_zero(&root, standalone_view(1, &[topic("t", 2)]));
            open_by_command(&shard, "t", 0, STANDALONE_LEADER_EPOCH).await;
            let id = PartitionId::new("t", 0);
            append_durably(&shard, &id, &transactional_batch(PRODUCER, 0, 0)).await;
            assert!(write_markers(&shard, markers(vec![tp("t", 0)], 5), || true).await);

            // A coordinator no longer current writes nothing.
            append_durably(&shard, &id, &transactional_batch(PRODUCER, 0, 1)).await;
            let log = shard.log(&id).expect("served");
            let before = log.offsets();
            assert!(!write_markers(&shard, markers(vec![tp("t", 0)], 5), || false).await);
            assert_eq!(log.offsets(), before);

            // An older coordinator is fenced by the partition: stale, not retried.
            let asked = Cell::new(0);
            let still_current = || {
                asked.set(asked.get() + 1);
                true
            };
            assert!(!write_markers(&shard, markers(vec![tp("t", 0)], 4), still_current).await);
            assert_eq!(asked.get(), 1, "one round only");
            assert_eq!(log.offsets().last_stable_offset, before.last_stable_offset);
        })
    });
}

#[test]
fn a_partition_led_by_another_broker_is_sent_there_and_retried_until_written() {
    // Broker 1 answers NOT_LEADER_OR_FOLLOWER once (a leader moving), then NONE.
    let server = test_server::start(Box::new(|request, _, header, body| {
        let Request::WriteTxnMarkers(body) = body else {
            panic!("not WriteTxnMarkers: {body:?}");
        };
        let marker = &body.markers[0];
        let only_t_1 = body.markers.len() == 1
            && marker.producer_id == PRODUCER
            && marker.transaction_result
            && marker.topics.len() == 1
            && marker.topics[0].name == "t"
            && marker.topics[0].partition_indexes == vec![1];
        if !only_t_1 {
            return None;
        }
        let code = if request == 0 {
            ErrorCode::NotLeaderOrFollower
        } else {
            ErrorCode::None
        };
        let response = WriteTxnMarkersResponse {
            markers: vec![WritableTxnMarkerResult {
                producer_id: marker.producer_id,
                topics: marker
                    .topics
                    .iter()
                    .map(|topic| WritableTxnMarkerTopicResult {
                        name: topic.name.clone(),
                        partitions: topic
                            .partition_indexes
                            .iter()
                            .map(|index| WritableTxnMarkerPartitionResult {
                                partition_index: *index,
                                error_code: code.code(),
                            })
                            .collect(),
                    })
                    .collect(),
            }],
        };
        Some(encode_response(
            header.correlation_id,
            header.api_version,
            &response,
        ))
    }));
    let port = server.port;
    run(move |root| {
        Box::pin(async move {
            let shard = shard_zero(&root, cluster_view(port));
            open_by_command(&shard, "t", 0, 3).await;
            let started = Instant::now();
            // At most five rounds: a request the server does not expect fails the test.
            let rounds = Cell::new(0);
            let still_current = || {
                rounds.set(rounds.get() + 1);
                rounds.get() <= 5
            };
            let written = write_markers(
                &shard,
                markers(vec![tp("t", 0), tp("t", 1)], 1),
                still_current,
            )
            .await;
            assert!(written);
            assert_eq!(rounds.get(), 2);
            assert!(
                started.elapsed() >= FIRST_BACKOFF,
                "retried after a backoff"
            );
            let log = shard.log(&PartitionId::new("t", 0)).expect("served");
            assert_eq!(log.offsets().high_watermark, 1, "t-0's marker written here");
        })
    });
    let headers = server.headers.lock().expect("lock").clone();
    assert_eq!(headers.len(), 2, "one request per round to broker 1");
    for header in headers {
        assert_eq!(
            (header.api_key, header.api_version),
            (27, MARKER_REQUEST_VERSION)
        );
        assert_eq!(header.client_id.as_deref(), Some("kaas-broker-0"));
    }
}

#[test]
fn an_unreachable_leader_is_retried_with_a_growing_backoff_until_the_coordinator_is_replaced() {
    run(|root| {
        Box::pin(async move {
            // Broker 1 listens nowhere: every round's connection is refused.
            let shard = shard_zero(&root, cluster_view(1));
            let rounds = Cell::new(0);
            let still_current = || {
                rounds.set(rounds.get() + 1);
                rounds.get() <= 3
            };
            let started = Instant::now();
            let written = write_markers(&shard, markers(vec![tp("t", 1)], 1), still_current).await;
            assert!(!written);
            assert_eq!(
                rounds.get(),
                4,
                "three rounds, then the coordinator was replaced"
            );
            // Waits of 100 ms, 200 ms and 400 ms between and after the rounds.
            assert!(
                started.elapsed() >= FIRST_BACKOFF * 7,
                "{:?}",
                started.elapsed()
            );
        })
    });
}
