//! A fetch of many partitions reads no more than its response may carry: the partitions draw
//! on the request's `max_bytes` before they read, so a consumer catching up on 40 partitions
//! with 256 KiB allowed per response gets every record exactly once, in order, in responses
//! of at most 256 KiB (plus the first batch), and the broker reads about what it sends.

mod support;

use std::collections::BTreeMap;

use bytes::Bytes;
use kaas_engine::batch::{encode_batch_for_tests, scan_batches};
use kaas_net::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use kaas_net::protocol::Response;
use support::{http_get, Kaas, WireClient};

const TOPIC: &str = "wide";
const PARTITIONS: i32 = 40;
const BATCHES_PER_PARTITION: usize = 12;
/// About 8 KiB per batch.
const VALUE_BYTES: usize = 8_000;
const RESPONSE_MAX: i32 = 256 << 10;

fn value(partition: i32, index: usize) -> Vec<u8> {
    let mut value = format!("p{partition}-b{index}-").into_bytes();
    value.resize(VALUE_BYTES, b'a' + (index % 26) as u8);
    value
}

fn produce(client: &mut WireClient, partition: i32, index: usize) {
    let batch = encode_batch_for_tests(
        &[(None, Some(&value(partition, index)))],
        1_700_000_000_000,
        -1,
        0,
        -1,
    );
    let results = client.produce(TOPIC, vec![(partition, batch)]);
    assert_eq!(results, vec![(partition, 0, index as i64)]);
}

fn fetch(
    client: &mut WireClient,
    offsets: &BTreeMap<i32, i64>,
    max_bytes: i32,
) -> Vec<(i32, Bytes)> {
    let request = FetchRequest {
        max_wait_ms: 0,
        max_bytes,
        topics: vec![FetchTopic {
            topic: TOPIC.into(),
            partitions: offsets
                .iter()
                .map(|(&partition, &offset)| FetchPartition {
                    partition,
                    fetch_offset: offset,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::Fetch(response) = client.call(12, &request) else {
        panic!("not a fetch response")
    };
    assert_eq!(response.error_code, 0);
    response.responses[0]
        .partitions
        .iter()
        .map(|data| {
            assert_eq!(data.error_code, 0, "partition {}", data.partition_index);
            (
                data.partition_index,
                data.records.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn fetch_read_bytes(kaas: &Kaas) -> u64 {
    let (status, body) = http_get(kaas.admin, "/metrics").expect("metrics");
    assert_eq!(status, 200);
    body.lines()
        .find_map(|line| line.strip_prefix("kaas_fetch_read_bytes_total "))
        .and_then(|value| value.trim().parse().ok())
        .expect("kaas_fetch_read_bytes_total")
}

#[test]
fn a_consumer_of_many_partitions_reads_everything_within_the_response_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kaas = Kaas::start(Some(dir.path()), &[]);
    let mut client = kaas.client();
    client.create_topic(TOPIC, PARTITIONS, &[]);
    for index in 0..BATCHES_PER_PARTITION {
        for partition in 0..PARTITIONS {
            produce(&mut client, partition, index);
        }
    }

    let mut offsets: BTreeMap<i32, i64> = (0..PARTITIONS).map(|p| (p, 0)).collect();
    let total = PARTITIONS as usize * BATCHES_PER_PARTITION;
    let mut fetches = 0;
    let mut sent_bytes = 0u64;
    let read_before = fetch_read_bytes(&kaas);
    while offsets.values().sum::<i64>() < total as i64 {
        fetches += 1;
        assert!(
            fetches <= 100,
            "no progress after {fetches} fetches: {offsets:?}"
        );
        let responses = fetch(&mut client, &offsets, RESPONSE_MAX);
        let response_bytes: usize = responses.iter().map(|(_, bytes)| bytes.len()).sum();
        assert!(
            response_bytes > 0,
            "a fetch with data behind it returned none"
        );
        assert!(
            response_bytes <= RESPONSE_MAX as usize + VALUE_BYTES + 200,
            "a response of {response_bytes} bytes exceeds max_bytes {RESPONSE_MAX}"
        );
        sent_bytes += response_bytes as u64;
        for (partition, bytes) in responses {
            for batch in scan_batches(&bytes, 0) {
                let offset = offsets.get_mut(&partition).expect("a partition asked for");
                assert_eq!(batch.header.base_offset, *offset, "dense, in order");
                let start = batch.position as usize;
                let record = &bytes[start..start + batch.total_len];
                let expected = value(partition, *offset as usize);
                assert!(
                    record.windows(expected.len()).any(|w| w == &expected[..]),
                    "partition {partition} offset {offset} holds what was produced"
                );
                *offset = batch.header.next_offset();
            }
        }
    }
    // 40 partitions of ~96 KiB each in responses of at most 256 KiB.
    assert!(fetches >= 14, "only {fetches} fetches for {total} batches");
    // A partition whose share the budget cut short below one batch reads that batch and
    // leaves it for the next fetch: at most one such batch per shard per fetch.
    let read = fetch_read_bytes(&kaas) - read_before;
    let slack = fetches as u64 * 2 * (VALUE_BYTES as u64 + 200);
    assert!(
        read >= sent_bytes && read <= sent_bytes + slack,
        "the broker read {read} bytes of records to send {sent_bytes} in {fetches} fetches"
    );
}

#[test]
fn a_response_budget_of_zero_still_returns_the_first_batch() {
    let kaas = Kaas::start(None, &[]);
    let mut client = kaas.client();
    client.create_topic(TOPIC, 3, &[]);
    for partition in 0..3 {
        produce(&mut client, partition, 0);
    }
    let offsets: BTreeMap<i32, i64> = (0..3).map(|p| (p, 0)).collect();
    let responses = fetch(&mut client, &offsets, 0);
    let batches: usize = responses
        .iter()
        .map(|(_, bytes)| scan_batches(bytes, 0).count())
        .sum();
    assert_eq!(batches, 1, "exactly one batch when max_bytes is 0");
}
