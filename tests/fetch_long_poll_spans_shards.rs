//! A long-polling Fetch of partitions on two shards (each owner waits inside its one hop) is
//! answered as soon as enough data arrives on either shard, with that data, and a fetch whose
//! `min_bytes` needs data from both shards waits for both: the owners share one count of the
//! bytes found and the first to complete `min_bytes` ends the other's wait. The fetches allow
//! 60 s; a wake that never reached the waiting shard would hold the answer until then.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use kaas_engine::batch::{encode_batch_for_tests, scan_batches};
use kaas_net::model::cluster_view::owner_shard;
use kaas_net::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use kaas_net::protocol::Response;
use support::{Kaas, WireClient};

const TOPIC: &str = "polled";
const PARTITIONS: i32 = 8;
const MAX_WAIT_MS: i32 = 60_000;

/// One partition owned by shard 0 and one by shard 1.
fn partitions_on_both_shards() -> (i32, i32) {
    let on = |shard| {
        (0..PARTITIONS)
            .find(|p| owner_shard(TOPIC, *p, 2) == shard)
            .expect("a partition on each shard")
    };
    (on(0), on(1))
}

fn batch(value: &[u8]) -> Vec<u8> {
    encode_batch_for_tests(&[(None, Some(value))], 1_700_000_000_000, -1, 0, -1)
}

/// Fetches `partitions` from their `offsets` with `min_bytes`, waiting up to a minute; returns
/// each partition's records and how long the answer took.
fn long_poll(
    client: &mut WireClient,
    partitions: &[(i32, i64)],
    min_bytes: i32,
) -> (Vec<(i32, Bytes)>, Duration) {
    let request = FetchRequest {
        max_wait_ms: MAX_WAIT_MS,
        min_bytes,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            topic: TOPIC.into(),
            partitions: partitions
                .iter()
                .map(|&(partition, offset)| FetchPartition {
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
    let started = Instant::now();
    let Some(Response::Fetch(response)) = client.try_call(12, &request) else {
        panic!("no fetch response")
    };
    let took = started.elapsed();
    assert_eq!(response.error_code, 0);
    let records = response.responses[0]
        .partitions
        .iter()
        .map(|data| {
            assert_eq!(data.error_code, 0, "partition {}", data.partition_index);
            (
                data.partition_index,
                data.records.clone().unwrap_or_default(),
            )
        })
        .collect();
    (records, took)
}

fn batches_in(records: &Bytes) -> usize {
    scan_batches(records, 0).count()
}

#[test]
fn a_long_poll_over_two_shards_ends_when_either_shard_has_enough() {
    let kaas = Kaas::start(None, &["--shards", "2"]);
    let mut producer = kaas.client();
    producer.create_topic(TOPIC, PARTITIONS, &[]);
    let (first, second) = partitions_on_both_shards();
    let address = kaas.kafka;
    let mut offsets = [(first, 0i64), (second, 0i64)];

    // Data on either shard ends the wait, whichever shard the connection landed on.
    for (round, target) in [first, second].into_iter().enumerate() {
        let wanted = offsets;
        let fetcher = std::thread::spawn(move || {
            let mut consumer = WireClient::connect(address);
            long_poll(&mut consumer, &wanted, 1)
        });
        std::thread::sleep(Duration::from_millis(500));
        let answers = producer.produce(TOPIC, vec![(target, batch(b"woken"))]);
        assert_eq!(answers[0].1, 0, "{answers:?}");
        let (records, took) = fetcher.join().expect("fetcher");
        assert!(
            took < Duration::from_millis(MAX_WAIT_MS as u64 / 2),
            "round {round}: answered after {took:?}, not when the data arrived"
        );
        for (partition, bytes) in &records {
            let expected = usize::from(*partition == target);
            assert_eq!(
                batches_in(bytes),
                expected,
                "round {round}, partition {partition}"
            );
        }
        for entry in offsets.iter_mut().filter(|(p, _)| *p == target) {
            entry.1 += 1;
        }
    }

    // min_bytes more than one batch: the batch on the first shard alone does not end the
    // wait; the second shard's completes it, and the answer carries both.
    let one_batch = batch(b"half").len() as i32;
    let wanted = offsets;
    let fetcher = std::thread::spawn(move || {
        let mut consumer = WireClient::connect(address);
        long_poll(&mut consumer, &wanted, one_batch + 1)
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        producer.produce(TOPIC, vec![(first, batch(b"half"))])[0].1,
        0
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        producer.produce(TOPIC, vec![(second, batch(b"half"))])[0].1,
        0
    );
    let (records, took) = fetcher.join().expect("fetcher");
    assert!(
        took < Duration::from_millis(MAX_WAIT_MS as u64 / 2),
        "answered after {took:?}"
    );
    for (partition, bytes) in &records {
        assert_eq!(batches_in(bytes), 1, "partition {partition}: both batches");
    }
}
