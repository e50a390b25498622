//! Produce with acks=all while the broker is stopped (SIGTERM, and separately `kill -9`);
//! after a restart every acknowledged record is read back exactly once, in order, at the
//! offset it was acknowledged with.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kaas_engine::batch::{encode_batch_for_tests, scan_batches};
use kaas_net::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use kaas_net::protocol::Response;
use support::{Kaas, WireClient};

const PARTITIONS: i32 = 3;

/// (partition, offset, value) of every acknowledged batch (one record each).
type Acked = Arc<Mutex<Vec<(i32, i64, Vec<u8>)>>>;

fn produce_until_stopped(
    kaas_addr: std::net::SocketAddr,
    writer: usize,
    acked: Acked,
    stop: Arc<AtomicBool>,
) {
    let mut client = WireClient::connect(kaas_addr);
    let mut sequence = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let partition = (sequence % PARTITIONS as u64) as i32;
        let value = format!(
            "writer-{writer}-record-{sequence}-{}",
            "x".repeat((sequence % 300) as usize)
        );
        let batch = encode_batch_for_tests(
            &[(Some(b"key"), Some(value.as_bytes()))],
            1_700_000_000_000,
            -1,
            0,
            -1,
        );
        let request = support::produce_request("durable", vec![(partition, batch)]);
        // The broker may die at any moment: a failed send or read ends this writer.
        let response = client.try_call(9, &request);
        match response {
            Some(Response::Produce(r)) => {
                let p = &r.responses[0].partition_responses[0];
                assert_eq!(p.error_code, 0, "produce failed: {p:?}");
                acked
                    .lock()
                    .expect("lock")
                    .push((partition, p.base_offset, value.into_bytes()));
            }
            _ => return,
        }
        sequence += 1;
    }
}

fn read_partition(client: &mut WireClient, partition: i32) -> Vec<(i64, Vec<u8>)> {
    let mut records = Vec::new();
    let mut offset = 0i64;
    loop {
        let request = FetchRequest {
            max_wait_ms: 0,
            max_bytes: 1 << 20,
            topics: vec![FetchTopic {
                topic: "durable".into(),
                partitions: vec![FetchPartition {
                    partition,
                    fetch_offset: offset,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let Response::Fetch(response) = client.call(12, &request) else {
            panic!("not a fetch")
        };
        let data = &response.responses[0].partitions[0];
        assert_eq!(data.error_code, 0);
        let bytes = data.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            assert_eq!(offset, data.high_watermark, "read up to the high watermark");
            return records;
        }
        for batch in scan_batches(&bytes, 0) {
            assert_eq!(batch.header.base_offset, offset, "offsets are dense");
            let start = batch.position as usize;
            // One uncompressed record; it ends with its value and a zero header count.
            records.push((offset, bytes[start + 61..start + batch.total_len].to_vec()));
            offset = batch.header.next_offset();
        }
    }
}

fn run(stop_broker: impl FnOnce(&mut Kaas)) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start(Some(dir.path()), &["--shards", "2"]);
    let mut admin = kaas.client();
    admin.create_topic("durable", PARTITIONS, &[]);

    let acked: Acked = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|writer| {
            let (acked, stop, addr) = (acked.clone(), stop.clone(), kaas.kafka);
            std::thread::spawn(move || produce_until_stopped(addr, writer, acked, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    stop_broker(&mut kaas);
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        let _ = writer.join();
    }
    let acked = acked.lock().expect("lock").clone();
    assert!(
        acked.len() > 50,
        "the writers made progress ({} acked)",
        acked.len()
    );

    kaas.restart();
    let mut client = kaas.client();
    for partition in 0..PARTITIONS {
        let stored = read_partition(&mut client, partition);
        let mut seen = std::collections::HashSet::new();
        for (_, value) in &stored {
            assert!(seen.insert(value.clone()), "a record is stored twice");
        }
        let mut expected: Vec<(i64, Vec<u8>)> = acked
            .iter()
            .filter(|(p, _, _)| *p == partition)
            .map(|(_, offset, value)| (*offset, value.clone()))
            .collect();
        expected.sort();
        for (offset, value) in &expected {
            let mut tail = value.clone();
            tail.push(0);
            let found = stored
                .get(*offset as usize)
                .map(|(_, record)| record.ends_with(&tail));
            assert_eq!(
                found,
                Some(true),
                "acked record at offset {offset} of partition {partition}"
            );
        }
    }
}

#[test]
fn acked_writes_survive_sigterm() {
    run(|kaas| assert!(kaas.terminate(), "clean exit on SIGTERM"));
}

#[test]
fn acked_writes_survive_kill_9() {
    run(|kaas| kaas.kill9());
}
