//! Idempotent de-duplication across a takeover: an idempotent producer's batches acknowledged
//! by the old leader, sent again to the new leader after the partition moved (a producer that
//! never saw the acknowledgements retries them), are answered with success at their original
//! offsets and not stored a second time, because the new leader rebuilt the producers' state
//! from the partition's files when it claimed the partition at its new epoch. The next
//! sequence continues at the next offset, and a sequence gap is refused. Two real `kaas`
//! processes on one data directory; the test writes the assignment.
//!
//! A batch whose flush finds the new leader's claim (the old leader's view lags) is answered
//! REQUEST_TIMED_OUT, not NOT_LEADER_OR_FOLLOWER: it may already be in the files the new leader
//! reads, so the producer must retry the same sequence there (librdkafka gives a batch it
//! counts as not persisted a new producer epoch, and the new leader cannot recognise it). The
//! retry is stored once.

mod support;

use std::time::{Duration, Instant};

use kaas_engine::batch::encode_batch_for_tests;
use kaas_net::protocol::messages::init_producer_id::InitProducerIdRequest;
use kaas_net::protocol::Response;
use support::cluster::{
    endpoints, file_brokers, lagging_view_dir, start_all, write_assignment, Broker,
};
use support::{fetch_batches, WireClient};

const TOPIC: &str = "payments";
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const REQUEST_TIMED_OUT: i16 = 7;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;

/// An idempotent batch of two records of `producer_id` (epoch 0) from `sequence`.
fn batch(producer_id: i64, sequence: i32) -> Vec<u8> {
    let first = format!("s{sequence}-a");
    let second = format!("s{sequence}-b");
    encode_batch_for_tests(
        &[
            (None, Some(first.as_bytes())),
            (None, Some(second.as_bytes())),
        ],
        1_700_000_000_000,
        producer_id,
        0,
        sequence,
    )
}

/// (error code, base offset) of producing `records` to partition 0 through `client`.
fn produce(client: &mut WireClient, records: Vec<u8>) -> (i16, i64) {
    let answer = client.produce(TOPIC, vec![(0, records)]);
    (answer[0].1, answer[0].2)
}

/// Like [`produce`], retrying while the leader is still opening the partition.
fn produce_when_open(client: &mut WireClient, records: Vec<u8>) -> (i16, i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let answer = produce(client, records.clone());
        if answer.0 != NOT_LEADER_OR_FOLLOWER || Instant::now() > deadline {
            return answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A new producer id from `client`'s broker (epoch 0).
fn init_producer(client: &mut WireClient) -> i64 {
    let Response::InitProducerId(init) = client.call(
        4,
        &InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            ..Default::default()
        },
    ) else {
        panic!("not an InitProducerId answer")
    };
    assert_eq!((init.error_code, init.producer_epoch), (0, 0));
    init.producer_id
}

#[test]
fn a_batch_refused_by_a_fenced_flush_is_possibly_written_and_its_retry_stored_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shared = dir.path().join("shared");
    let lagging = dir.path().join("lagging");
    lagging_view_dir(&shared, &lagging);
    let mut brokers = vec![Broker::new(0, &lagging), Broker::new(1, &shared)];
    let all = endpoints(&brokers);
    for data in [&shared, &lagging] {
        write_assignment(
            &kaas_volume::cluster_dir(data),
            1,
            &all,
            TOPIC,
            &[(0, 1)],
            &[],
        );
    }
    start_all(&mut brokers, 1);
    let mut old_leader = WireClient::connect(brokers[0].kafka);
    let producer_id = init_producer(&mut old_leader);
    assert_eq!(
        produce_when_open(&mut old_leader, batch(producer_id, 0)),
        (0, 0)
    );

    // Broker 1 takes the partition over at leader epoch 2; broker 0 never sees that file.
    write_assignment(
        &kaas_volume::cluster_dir(&shared),
        2,
        &all,
        TOPIC,
        &[(1, 2)],
        &[],
    );
    brokers[1].wait_for_version(2);
    let mut new_leader = WireClient::connect(brokers[1].kafka);
    let other = init_producer(&mut new_leader);
    assert_eq!(
        produce_when_open(&mut new_leader, batch(other, 0)).0,
        0,
        "the new leader has claimed and opened the partition"
    );
    // The old leader still believes it leads: its flush finds the claim.
    let (error, _) = produce(&mut old_leader, batch(producer_id, 2));
    assert_eq!(
        error, REQUEST_TIMED_OUT,
        "possibly written, never acknowledged"
    );
    // The producer retries the same sequence at the new leader: stored once.
    assert_eq!(produce(&mut new_leader, batch(producer_id, 2)).0, 0);
    assert_eq!(produce(&mut new_leader, batch(producer_id, 2)).0, 0);
    let stored = fetch_batches(&mut new_leader, TOPIC, 0);
    let sequences: Vec<(i64, i32)> = stored
        .iter()
        .filter(|h| h.producer_id == producer_id)
        .map(|h| (h.producer_id, h.base_sequence))
        .collect();
    assert_eq!(
        sequences,
        vec![(producer_id, 0), (producer_id, 2)],
        "each of the producer's batches once"
    );
    for broker in &mut brokers {
        broker.terminate();
    }
}

#[test]
fn a_batch_the_old_leader_acknowledged_is_not_stored_again_by_the_new_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let mut brokers = file_brokers(2, &data);
    let all = endpoints(&brokers);
    let cluster_dir = kaas_volume::cluster_dir(&data);
    write_assignment(&cluster_dir, 1, &all, TOPIC, &[(0, 1)], &[]);
    start_all(&mut brokers, 1);

    let mut old_leader = WireClient::connect(brokers[0].kafka);
    let Response::InitProducerId(init) = old_leader.call(
        4,
        &InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            ..Default::default()
        },
    ) else {
        panic!("not an InitProducerId answer")
    };
    assert_eq!(init.error_code, 0);
    let producer_id = init.producer_id;
    assert_eq!(init.producer_epoch, 0);
    // Sequences 0, 2, 4 (two records each) at offsets 0, 2, 4 on the old leader.
    for (sequence, offset) in [(0, 0), (2, 2), (4, 4)] {
        assert_eq!(
            produce_when_open(&mut old_leader, batch(producer_id, sequence)),
            (0, offset),
            "sequence {sequence} on the old leader"
        );
    }

    // The partition moves to broker 1 at leader epoch 2.
    write_assignment(&cluster_dir, 2, &all, TOPIC, &[(1, 2)], &[]);
    brokers[0].wait_for_version(2);
    brokers[1].wait_for_version(2);
    let mut new_leader = WireClient::connect(brokers[1].kafka);
    // The retries of what the old leader acknowledged: success, original offsets.
    assert_eq!(
        produce_when_open(&mut new_leader, batch(producer_id, 4)),
        (0, 4),
        "the last acknowledged batch, retried"
    );
    assert_eq!(
        produce(&mut new_leader, batch(producer_id, 2)),
        (0, 2),
        "an earlier acknowledged batch, retried"
    );
    // The producer carries on where it was; a gap is refused.
    assert_eq!(produce(&mut new_leader, batch(producer_id, 6)), (0, 6));
    assert_eq!(
        produce(&mut new_leader, batch(producer_id, 10)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );

    let stored = fetch_batches(&mut new_leader, TOPIC, 0);
    let layout: Vec<(i64, i32, i32)> = stored
        .iter()
        .map(|h| (h.base_offset, h.base_sequence, h.partition_leader_epoch))
        .collect();
    assert_eq!(
        layout,
        vec![(0, 0, 1), (2, 2, 1), (4, 4, 1), (6, 6, 2)],
        "each batch once: (offset, sequence, leader epoch)"
    );
    for broker in &mut brokers {
        broker.terminate();
    }
}
