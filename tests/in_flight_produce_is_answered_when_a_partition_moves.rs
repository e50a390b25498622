//! Produce requests in flight on a partition that is being given up are answered, never
//! dropped: a client keeps a window of pipelined acks=all produces open on the leader while
//! the assignment moves the partition to another broker. Every request gets an answer, each
//! either a success, NOT_LEADER_OR_FOLLOWER or (a flush that found the new leader's claim:
//! possibly written) REQUEST_TIMED_OUT, both of which producers retry, and every success is
//! in the new leader's log at the offset it was given, offsets dense, nothing in it that was
//! never sent. Two real `kaas` processes on one data directory; the test writes the
//! assignment.

mod support;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use kaas_engine::batch::{encode_batch_for_tests, BatchHeader};
use kaas_net::protocol::messages::produce::ProduceRequest;
use kaas_net::protocol::{ApiMessage, Response};
use support::cluster::{endpoints, file_brokers, start_all, write_assignment, Broker};
use support::{fetch_batches, produce_request, WireClient};

const TOPIC: &str = "moving";
const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const REQUEST_TIMED_OUT: i16 = 7;
/// Produces in flight at once on the connection.
const WINDOW: usize = 16;
/// Requests sent before the move.
const BEFORE_MOVE: usize = 150;
/// Refusals to see after the move before the client stops producing (so the move surely
/// happened while requests were in flight), and the most requests it sends in all.
const REFUSALS: usize = 2 * WINDOW;
const MAX_REQUESTS: usize = 20_000;

fn batch(value: &str) -> Vec<u8> {
    encode_batch_for_tests(
        &[(None, Some(value.as_bytes()))],
        1_700_000_000_000,
        -1,
        -1,
        -1,
    )
}

fn crc_of(batch: &[u8]) -> u32 {
    BatchHeader::parse(batch).expect("a batch").crc
}

fn produce_answer(response: Response) -> (i16, i64) {
    match response {
        Response::Produce(r) => {
            let partition = &r.responses[0].partition_responses[0];
            (partition.error_code, partition.base_offset)
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// Produces `value` at `leader` until it is accepted (the leader may still be opening the
/// partition); its offset.
fn produce_acked(leader: &Broker, value: &str) -> i64 {
    let mut client = WireClient::connect(leader.kafka);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let request = produce_request(TOPIC, vec![(0, batch(value))]);
        let (error, offset) = produce_answer(client.call(9, &request));
        if error == 0 {
            return offset;
        }
        assert!(
            error == NOT_LEADER_OR_FOLLOWER && Instant::now() < deadline,
            "producing {value} at broker {}: error {error}",
            leader.id
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reads the answer to the oldest request in flight into `answers`.
fn receive_oldest(
    client: &mut WireClient,
    in_flight: &mut VecDeque<(i32, String)>,
    answers: &mut Vec<(String, i16, i64)>,
) {
    let (correlation_id, value) = in_flight.pop_front().expect("a request in flight");
    let response = client
        .receive(ProduceRequest::API_KEY, 9, correlation_id)
        .unwrap_or_else(|| panic!("no answer to the produce of {value}"));
    let (error, offset) = produce_answer(response);
    answers.push((value, error, offset));
}

#[test]
fn produce_requests_in_flight_on_a_partition_given_up_are_all_answered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let mut brokers = file_brokers(2, &data);
    let all = endpoints(&brokers);
    let cluster_dir = kaas_volume::cluster_dir(&data);
    write_assignment(&cluster_dir, 1, &all, TOPIC, &[(0, 1)], &[]);
    start_all(&mut brokers, 1);
    let mut sent: HashMap<u32, String> = HashMap::new();
    let first = "first".to_string();
    assert_eq!(produce_acked(&brokers[0], &first), 0);
    sent.insert(crc_of(&batch(&first)), first);

    // Pipelined produces on one connection to broker 0; the partition moves to broker 1
    // (leader epoch 2) after BEFORE_MOVE of them were sent.
    let mut client = WireClient::connect(brokers[0].kafka);
    let mut in_flight: VecDeque<(i32, String)> = VecDeque::new();
    let mut answers: Vec<(String, i16, i64)> = Vec::new();
    let refused =
        |answers: &[(String, i16, i64)]| answers.iter().filter(|(_, error, _)| *error != 0).count();
    let mut requests = 0;
    while requests < MAX_REQUESTS && refused(&answers) < REFUSALS {
        let i = requests;
        requests += 1;
        if i == BEFORE_MOVE {
            write_assignment(&cluster_dir, 2, &all, TOPIC, &[(1, 2)], &[]);
        }
        if in_flight.len() == WINDOW {
            receive_oldest(&mut client, &mut in_flight, &mut answers);
        }
        let value = format!("r{i:04}");
        let request = produce_request(TOPIC, vec![(0, batch(&value))]);
        let correlation_id = client.send(9, &request).expect("sent");
        sent.insert(crc_of(&batch(&value)), value.clone());
        in_flight.push_back((correlation_id, value));
    }
    while !in_flight.is_empty() {
        receive_oldest(&mut client, &mut in_flight, &mut answers);
    }
    assert_eq!(answers.len(), requests, "every request answered");
    for (value, error, _) in &answers {
        assert!(
            *error == 0 || *error == NOT_LEADER_OR_FOLLOWER || *error == REQUEST_TIMED_OUT,
            "{value}: error {error}"
        );
    }
    let acked: Vec<&(String, i16, i64)> = answers.iter().filter(|(_, e, _)| *e == 0).collect();
    assert!(!acked.is_empty(), "some produces succeeded before the move");
    assert!(
        refused(&answers) >= REFUSALS,
        "the move happened while the client was producing"
    );

    brokers[1].wait_for_version(2);
    let last = "after-the-move".to_string();
    let last_offset = produce_acked(&brokers[1], &last);
    sent.insert(crc_of(&batch(&last)), last.clone());

    let mut reader = WireClient::connect(brokers[1].kafka);
    let stored = fetch_batches(&mut reader, TOPIC, 0);
    let mut at_offset: HashMap<i64, String> = HashMap::new();
    for (position, header) in stored.iter().enumerate() {
        assert_eq!(header.base_offset, position as i64, "offsets dense");
        let value = sent
            .get(&header.crc)
            .unwrap_or_else(|| panic!("offset {position} holds a batch never sent"));
        assert!(
            at_offset
                .insert(header.base_offset, value.clone())
                .is_none(),
            "one batch per offset"
        );
    }
    let mut values: Vec<&String> = at_offset.values().collect();
    values.sort();
    values.dedup();
    assert_eq!(values.len(), stored.len(), "no batch stored twice");
    for (value, _, offset) in acked {
        assert_eq!(
            at_offset.get(offset),
            Some(value),
            "acknowledged {value} at offset {offset}"
        );
    }
    assert_eq!(at_offset.get(&last_offset), Some(&last));
    for broker in &mut brokers {
        broker.terminate();
    }
}
