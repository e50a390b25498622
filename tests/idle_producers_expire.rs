//! `producer.id.expiration.ms` is applied as Apache Kafka 4.4 applies it
//! (`ProducerStateManager.removeExpiredProducers`): a producer whose last batch is older than
//! the expiration is forgotten at the next check, so a batch it sends after a gap in its
//! sequence is then accepted (a producer the partition does not know) where before the
//! expiration it was OUT_OF_ORDER_SEQUENCE_NUMBER; DescribeConfigs shows both settings.
//!
//! Set `KAAS_TEST_BOOTSTRAP=host:port` to run the same requests against an Apache Kafka 4.4
//! started with `KAFKA_EXTRA_PROPS=$'producer.id.expiration.ms=2000\nproducer.id.expiration.check.interval.ms=200'
//! tests/kafka/start-kafka.sh <dir> <port>` instead of a fresh kaas.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kaas_engine::batch::encode_batch_for_tests;
use kaas_net::protocol::messages::metadata::MetadataRequest;
use kaas_net::protocol::Response;
use support::{describe_configs, Kaas, WireClient};

const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const EXPIRATION_MS: u64 = 2_000;
const CHECK_INTERVAL_MS: u64 = 200;
const RESOURCE_BROKER: i8 = 4;
/// UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER.
const RETRIABLE: [i16; 2] = [3, 6];

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A batch of one record from producer `(id, epoch)` at sequence `sequence`, stamped now.
fn batch(producer: (i64, i16), sequence: i32) -> Vec<u8> {
    let value = format!("v{sequence}").into_bytes();
    encode_batch_for_tests(
        &[(None, Some(value.as_slice()))],
        now_ms(),
        producer.0,
        producer.1,
        sequence,
    )
}

/// Produces one batch to partition 0: (error code, base offset).
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
            let expiration = EXPIRATION_MS.to_string();
            let interval = CHECK_INTERVAL_MS.to_string();
            let kaas = Kaas::start(
                None,
                &[
                    "--producer-id-expiration-ms",
                    &expiration,
                    "--producer-id-expiration-check-interval-ms",
                    &interval,
                ],
            );
            let address = kaas.kafka;
            (Some(kaas), address)
        }
    }
}

/// The broker's value of each named setting (DescribeConfigs on the broker resource).
fn broker_settings(client: &mut WireClient, keys: &[&str]) -> Vec<String> {
    let Response::Metadata(metadata) = client.call(
        12,
        &MetadataRequest {
            topics: Some(Vec::new()),
            ..Default::default()
        },
    ) else {
        panic!("not Metadata")
    };
    let node_id = metadata.brokers[0].node_id.to_string();
    describe_configs(client, RESOURCE_BROKER, &node_id, keys)
        .into_iter()
        .map(|(value, _source)| value)
        .collect()
}

#[test]
fn an_idle_producer_is_forgotten_after_the_expiration() {
    let (_kaas, address) = broker();
    let mut client = WireClient::connect(address);
    assert_eq!(
        broker_settings(
            &mut client,
            &[
                "producer.id.expiration.ms",
                "producer.id.expiration.check.interval.ms"
            ]
        ),
        vec![EXPIRATION_MS.to_string(), CHECK_INTERVAL_MS.to_string()],
    );

    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let topic = format!("idle-producer-{}-{nanos}", std::process::id());
    client.create_topic(&topic, 1, &[]);
    let producer = client.init_producer();

    // A topic just created may not have its leader yet (Kafka 4.4: NOT_LEADER_OR_FOLLOWER
    // for a moment); the retry of sequence 0 is the same batch.
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        let answer = produce(&mut client, &topic, batch(producer, 0));
        if !RETRIABLE.contains(&answer.0) || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(first, (0, 0));
    assert_eq!(produce(&mut client, &topic, batch(producer, 1)), (0, 1));
    // Known: a batch after a gap in the sequence is refused.
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 5)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER,
        "a producer the partition remembers may not skip sequences"
    );

    // Idle past the expiration and at least one check later.
    std::thread::sleep(Duration::from_millis(
        EXPIRATION_MS + 3 * CHECK_INTERVAL_MS + 500,
    ));
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 5)),
        (0, 2),
        "a forgotten producer is one the partition does not know: any sequence is taken"
    );
    // Known again from that batch on: its sequence must continue from 5.
    assert_eq!(
        produce(&mut client, &topic, batch(producer, 7)).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    assert_eq!(produce(&mut client, &topic, batch(producer, 6)), (0, 3));
}
