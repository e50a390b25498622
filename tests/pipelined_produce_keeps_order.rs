//! Produce requests pipelined on one connection append to each partition in the order they
//! were sent, as Kafka (which handles a connection's requests one at a time) appends them,
//! even while an earlier request is still waiting on another partition (here: the first
//! open of a new partition). An idempotent producer with several requests in flight relies
//! on it; MirrorMaker 2's copies and any keyed stream depend on it.

mod support;

use std::io::Write;

use kaas_engine::batch::{encode_batch_for_tests, scan_batches};
use kaas_net::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use kaas_net::protocol::{decode_response, encode_request, RequestHeader, Response};
use support::{Kaas, WireClient};

const ROUNDS: usize = 12;

fn batch(value: &str) -> Vec<u8> {
    encode_batch_for_tests(
        &[(Some(b"key"), Some(value.as_bytes()))],
        1_700_000_000_000,
        -1,
        0,
        -1,
    )
}

/// The record values of `partition` of `topic`, in offset order.
fn values(client: &mut WireClient, topic: &str, partition: i32) -> Vec<String> {
    let request = FetchRequest {
        max_wait_ms: 0,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            topic: topic.into(),
            partitions: vec![FetchPartition {
                partition,
                fetch_offset: 0,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::Fetch(response) = client.call(12, &request) else {
        panic!("not a fetch response")
    };
    let data = &response.responses[0].partitions[0];
    assert_eq!(data.error_code, 0, "fetch {topic}/{partition}");
    let bytes = data.records.clone().unwrap_or_default();
    scan_batches(&bytes, 0)
        .map(|b| {
            let start = b.position as usize;
            // One uncompressed record with key "key" after the 61-byte batch header: length,
            // attributes, timestamp and offset deltas, key length, key, value length (one
            // byte each but the key), then the value and a zero header count.
            String::from_utf8_lossy(&bytes[start + 70..start + b.total_len - 1]).into_owned()
        })
        .collect()
}

fn pipelined_requests_append_in_order(shards: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let kaas = Kaas::start(Some(dir.path()), &["--shards", shards]);
    let mut client = kaas.client();
    for round in 0..ROUNDS {
        let topic = format!("ordered-{round}");
        client.create_topic(&topic, 4, &[]);
        // Request 1 writes partitions 0..=2, request 2 only partition 2: request 2 must not
        // land in partition 2 before request 1, however long request 1 waits on 0 and 1.
        let first = support::produce_request(
            &topic,
            vec![
                (0, batch("first-0")),
                (1, batch("first-1")),
                (2, batch("first-2")),
            ],
        );
        let second = support::produce_request(&topic, vec![(2, batch("second-2"))]);
        for (correlation_id, request) in [(1, &first), (2, &second)] {
            let header = RequestHeader {
                api_key: 0,
                api_version: 9,
                correlation_id,
                client_id: Some("pipelined".into()),
            };
            for chunk in encode_request(&header, request) {
                client.stream.write_all(&chunk).expect("send");
            }
        }
        for expected in [1, 2] {
            let frame = client.read_frame().expect("a produce response");
            let (correlation_id, response) = decode_response(0, 9, frame).expect("decodable");
            assert_eq!(
                correlation_id, expected,
                "responses come back in request order"
            );
            let Response::Produce(response) = response else {
                panic!("not a produce response")
            };
            for partition in &response.responses[0].partition_responses {
                assert_eq!(partition.error_code, 0, "{partition:?}");
            }
        }
        assert_eq!(
            values(&mut client, &topic, 2),
            ["first-2", "second-2"],
            "round {round}: partition 2 holds the pipelined requests' batches out of order"
        );
    }
}

#[test]
fn pipelined_produce_requests_append_in_order_on_one_shard() {
    pipelined_requests_append_in_order("1");
}

#[test]
fn pipelined_produce_requests_append_in_order_across_shards() {
    pipelined_requests_append_in_order("2");
}
