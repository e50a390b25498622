//! An idempotent producer's sequence numbers are checked as Apache Kafka 4.4 checks them
//! (`ProducerAppendInfo.checkSequence`): within a producer epoch the next batch must start
//! right after the last one, so a batch starting at sequence 0 again is
//! OUT_OF_ORDER_SEQUENCE_NUMBER unless it is a retry of a batch still remembered (then it is
//! answered with its original offset and stored once); sequence 0 starts over only with a new
//! epoch, or for a producer the partition does not know.
//!
//! Set `KAAS_TEST_BOOTSTRAP=host:port` to run the same requests against another broker (an
//! Apache Kafka 4.4 started with `tests/kafka/start-kafka.sh`) instead of a fresh kaas.

mod support;

use std::net::SocketAddr;

use kaas_engine::batch::encode_batch_for_tests;
use kaas_net::protocol::Response;
use support::{Kaas, WireClient};

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;

/// A batch of `count` records from producer `(id, epoch)` starting at sequence `base`.
fn batch(producer: (i64, i16), base: i32, count: usize) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("v{base}-{i}").into_bytes())
        .collect();
    let records: Vec<_> = values.iter().map(|v| (None, Some(v.as_slice()))).collect();
    encode_batch_for_tests(&records, 1_700_000_000_000, producer.0, producer.1, base)
}

/// Produces one batch to partition 0 of `topic`: (error code, base offset).
fn produce(client: &mut WireClient, topic: &str, batch: Vec<u8>) -> (i16, i64) {
    let answers = client.produce(topic, vec![(0, batch)]);
    (answers[0].1, answers[0].2)
}

fn broker() -> (Option<Kaas>, SocketAddr) {
    match std::env::var("KAAS_TEST_BOOTSTRAP") {
        Ok(address) => (
            None,
            address.parse().expect("KAAS_TEST_BOOTSTRAP is host:port"),
        ),
        Err(_) => {
            let kaas = Kaas::start(None, &[]);
            let address = kaas.kafka;
            (Some(kaas), address)
        }
    }
}

fn unique_topic(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{name}-{}-{nanos}", std::process::id())
}

#[test]
fn sequence_zero_after_sequences_of_the_same_epoch_is_out_of_order() {
    let (_kaas, address) = broker();
    let mut client = WireClient::connect(address);
    let topic = unique_topic("restart-at-zero");
    client.create_topic(&topic, 1, &[]);

    // A producer that began at 0: 0-122, 123-245, then a new batch starting at 0 again.
    let producer = client.init_producer();
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 0, 123)),
        (0, 0)
    );
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 123, 123)),
        (0, 123)
    );
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 0, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    // A retry of the first batch is still answered with its offset, and stored once.
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 0, 123)),
        (0, 0)
    );
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 246, 1)),
        (0, 246)
    );

    // A producer this partition first saw at 123: its first batch is accepted (the partition
    // does not know it), and from then on 0 is out of order.
    let producer = client.init_producer();
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 123, 123)),
        (0, 247)
    );
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 0, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 0, 123)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 246, 1)),
        (0, 370)
    );

    // A new epoch starts over at 0 (and only at 0).
    let bumped = (producer.0, producer.1 + 1);
    assert_eq!(
        produce(&mut client, &topic, batch(bumped, 5, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(produce(&mut client, &topic, batch(bumped, 0, 1)), (0, 371));
}

/// Deletes every record of partition 0 of `topic` (DeleteRecords to the high watermark).
fn delete_all_records(client: &mut WireClient, topic: &str) {
    use kaas_net::protocol::messages::delete_records::{
        DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
    };
    let request = DeleteRecordsRequest {
        topics: vec![DeleteRecordsTopic {
            name: topic.into(),
            partitions: vec![DeleteRecordsPartition {
                partition_index: 0,
                offset: -1,
            }],
        }],
        timeout_ms: 10_000,
    };
    match client.call(2, &request) {
        Response::DeleteRecords(r) => {
            assert_eq!(r.topics[0].partitions[0].error_code, 0, "{r:?}")
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn a_producer_is_remembered_after_its_records_are_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut kaas, address) = match std::env::var("KAAS_TEST_BOOTSTRAP") {
        Ok(_) => broker(),
        Err(_) => {
            let kaas = Kaas::start(Some(dir.path()), &[]);
            let address = kaas.kafka;
            (Some(kaas), address)
        }
    };
    let mut client = WireClient::connect(address);
    let topic = unique_topic("deleted-records");
    client.create_topic(&topic, 1, &[]);
    let producer = client.init_producer();
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 0, 123)),
        (0, 0)
    );
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 123, 123)),
        (0, 123)
    );
    delete_all_records(&mut client, &topic);
    // Kafka keeps the producer's state when the log start passes its batches: 0 is still out
    // of order, and the sequence goes on where it was.
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 0, 1)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 246, 1)),
        (0, 246)
    );
    delete_all_records(&mut client, &topic);

    // And across a restart, clean or not: the state comes back from the partition's files.
    let Some(kaas) = kaas.as_mut() else {
        return;
    };
    for (round, clean) in [(0, true), (1, false)] {
        if clean {
            assert!(kaas.terminate(), "clean shut-down");
        } else {
            kaas.kill9();
        }
        kaas.restart();
        let mut client = WireClient::connect(kaas.kafka);
        assert_eq!(
            produce(&mut client, &topic, batch(producer, 0, 1)).0,
            OUT_OF_ORDER_SEQUENCE_NUMBER,
            "after restart {round}"
        );
        let next = 247 + round;
        assert_eq!(
            produce(&mut client, &topic, batch(producer, next, 1)),
            (0, i64::from(next)),
            "after restart {round}"
        );
        // The batch just stored is a retry target now, and it is below nothing yet.
        assert_eq!(
            produce(&mut client, &topic, batch(producer, next, 1)),
            (0, i64::from(next))
        );
        delete_all_records(&mut client, &topic);
    }
}
