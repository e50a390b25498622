//! A data directory written by the standalone broker of commit 6c9b0d1 opens unchanged in
//! today's build: its topics keep their ids, partition counts and config overrides, its group
//! config override stays, every record reads back at its offset with its timestamp, key and
//! value, the compacted topic has the latest value of every key, the groups' committed
//! offsets are returned by OffsetFetch, and the idempotent producer's state is there (a retry
//! of one of its batches is answered as a duplicate and not stored again, its next sequence
//! is accepted). Then today's build writes the directory (a new topic rewrites
//! `__cluster/topics.json`, a batch is appended) and is restarted on it, and all of it reads
//! again.
//!
//! The fixtures live in `tests/fixtures/standalone-6c9b0d1/`: `clean/` was stopped with
//! SIGTERM (flush and checkpoint), `killed/` with `kill -9` after the last acknowledged write.
//! Each holds `data/` (the data directory) and `written.txt` (what the wire gave back while
//! writing it: topic ids and the producer id). The fixture's README says how they were
//! written and how to write them again.
//!
//! The fixtures are frozen in time: their records carry fixed timestamps from 2023 and the
//! commits are as old as the fixture. So the broker runs with producer-id expiration and
//! offset retention long enough (and checked rarely enough) that no clock-driven expiry
//! happens while this test runs; the topic with time retention keeps its records for a
//! century, the other is compacted.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use kaas_engine::batch::encode_batch_for_tests;
use kaas_net::protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
use kaas_net::protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestGroup};
use kaas_net::protocol::{Response, Uuid};
use support::{describe_configs, fetch_at, Kaas, WireClient};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/standalone-6c9b0d1"
);

/// Time retention of a century, 1 MiB segments (the smallest allowed) so that partition 0
/// has a sealed segment beside its active one.
const ORDERS: &str = "orders";
const ORDERS_PARTITIONS: i32 = 3;
const ORDERS_CONFIGS: [(&str, &str); 2] = [
    ("retention.ms", "3155760000000"),
    ("segment.bytes", "1048576"),
];
/// Compacted, keyed records with repeated keys.
const LATEST: &str = "latest";
const LATEST_PARTITIONS: i32 = 2;
const LATEST_CONFIGS: [(&str, &str); 1] = [("cleanup.policy", "compact")];
/// A topic today's build creates on the old directory.
const ADDED: &str = "added-later";

const CLASSIC_GROUP: &str = "classic-readers";
const STANDALONE_GROUP: &str = "standalone-readers";
const KIP_848_GROUP: &str = "next-gen-readers";
/// The group config override set on the KIP-848 group.
const GROUP_CONFIG: (&str, &str) = ("consumer.session.timeout.ms", "50000");

const TOPIC_RESOURCE: i8 = 2;
const GROUP_RESOURCE: i8 = 32;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const GROUP_CONFIG_SOURCE: i8 = 8;

/// The idempotent producer's batches, all to `orders` partition 1: (base sequence, records).
const PRODUCER_PARTITION: i32 = 1;
const PRODUCER_BATCHES: [(i32, usize); 3] = [(0, 3), (3, 3), (6, 2)];

/// The broker flags that keep a frozen fixture from expiring while the test runs (the module
/// doc says why), and the flags the fixtures were written with.
const FROZEN_CLOCK_FLAGS: [&str; 8] = [
    "--producer-id-expiration-ms",
    "2147483647",
    "--producer-id-expiration-check-interval-ms",
    "2147483647",
    "--offsets-retention-minutes",
    "52560000",
    "--offsets-retention-check-interval-ms",
    "9223372036854775807",
];
const WRITER_FLAGS: [&str; 4] = ["--shards", "2", "--group-initial-rebalance-delay-ms", "0"];

/// One stored record as Fetch returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    offset: i64,
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

/// A record as sent: (key, value).
type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// A batch the writer produced without a producer id.
struct PlannedBatch {
    topic: &'static str,
    partition: i32,
    timestamp: i64,
    records: Vec<KeyValue>,
}

/// Every plain batch the fixture holds, in the order they were produced.
fn planned_batches() -> Vec<PlannedBatch> {
    let mut batches = Vec::new();
    let mut timestamp = 1_700_000_000_000i64;
    let mut next_timestamp = || {
        timestamp += 1_000;
        timestamp
    };
    // orders-0: 36 records of 32 KiB, more than one 1 MiB segment.
    for i in 0..36 {
        let value = format!("orders-0-{i:02}|").repeat(32 * 1024 / 12);
        batches.push(PlannedBatch {
            topic: ORDERS,
            partition: 0,
            timestamp: next_timestamp(),
            records: vec![(None, Some(value.into_bytes()))],
        });
    }
    // orders-1 and orders-2: small batches, some records keyed, one value null.
    for partition in 1..ORDERS_PARTITIONS {
        for i in 0..5 {
            let records = (0..3)
                .map(|r| {
                    let key = (r != 1).then(|| format!("order-{partition}-{i}-{r}").into_bytes());
                    let value = (i != 2 || r != 2)
                        .then(|| format!("order body {partition}/{i}/{r}").into_bytes());
                    (key, value)
                })
                .collect();
            batches.push(PlannedBatch {
                topic: ORDERS,
                partition,
                timestamp: next_timestamp(),
                records,
            });
        }
    }
    // latest: keys k0..k5 over two partitions, four rounds, each round one batch per
    // partition, so every key has four values and the last one wins.
    for round in 0..4 {
        for partition in 0..LATEST_PARTITIONS {
            let records = (0..6)
                .filter(|k| k % LATEST_PARTITIONS == partition)
                .map(|k| {
                    (
                        Some(format!("k{k}").into_bytes()),
                        Some(format!("round {round} of k{k}").into_bytes()),
                    )
                })
                .collect();
            batches.push(PlannedBatch {
                topic: LATEST,
                partition,
                timestamp: next_timestamp(),
                records,
            });
        }
    }
    batches
}

fn encode(batch: &PlannedBatch) -> Vec<u8> {
    let records: Vec<_> = batch
        .records
        .iter()
        .map(|(k, v)| (k.as_deref(), v.as_deref()))
        .collect();
    encode_batch_for_tests(&records, batch.timestamp, -1, -1, -1)
}

/// The idempotent producer's batch at `sequence` of `count` records (the same bytes every
/// time it is built, so a rebuilt batch is a retry).
fn producer_batch(producer: (i64, i16), sequence: i32, count: usize) -> Vec<u8> {
    let values: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("idempotent {sequence}+{i}").into_bytes())
        .collect();
    let records: Vec<_> = values.iter().map(|v| (None, Some(v.as_slice()))).collect();
    let timestamp = 1_700_000_500_000 + i64::from(sequence);
    encode_batch_for_tests(&records, timestamp, producer.0, producer.1, sequence)
}

/// What the fixture's partitions hold, by (topic, partition).
fn expected_logs(producer: (i64, i16)) -> HashMap<(String, i32), Vec<Record>> {
    let mut logs: HashMap<(String, i32), Vec<Record>> = HashMap::new();
    for topic in [(ORDERS, ORDERS_PARTITIONS), (LATEST, LATEST_PARTITIONS)] {
        for partition in 0..topic.1 {
            logs.insert((topic.0.to_string(), partition), Vec::new());
        }
    }
    let mut append = |topic: &str, partition: i32, timestamp: i64, records: &[Record]| {
        let log = logs
            .get_mut(&(topic.to_string(), partition))
            .expect("a planned partition");
        for record in records {
            let offset = log.len() as i64;
            log.push(Record {
                offset,
                timestamp,
                ..record.clone()
            });
        }
    };
    for batch in planned_batches() {
        let records: Vec<Record> = batch
            .records
            .iter()
            .map(|(key, value)| Record {
                offset: 0,
                timestamp: 0,
                key: key.clone(),
                value: value.clone(),
            })
            .collect();
        append(batch.topic, batch.partition, batch.timestamp, &records);
    }
    for (sequence, count) in PRODUCER_BATCHES {
        let bytes = producer_batch(producer, sequence, count);
        append(
            ORDERS,
            PRODUCER_PARTITION,
            i64::from_be_bytes(bytes[27..35].try_into().expect("8 bytes")),
            &decode_records(&bytes),
        );
    }
    logs
}

/// The committed offsets of the three groups: group → (topic, partition, offset, metadata).
fn expected_commits() -> BTreeMap<&'static str, Vec<(String, i32, i64, String)>> {
    let commit = |topic: &str, partition: i32, offset: i64, metadata: &str| {
        (topic.to_string(), partition, offset, metadata.to_string())
    };
    BTreeMap::from([
        (
            CLASSIC_GROUP,
            vec![
                commit(ORDERS, 0, 30, "classic 0"),
                commit(ORDERS, 1, 12, "classic 1"),
                commit(ORDERS, 2, 7, "classic 2"),
            ],
        ),
        (STANDALONE_GROUP, vec![commit(ORDERS, 2, 15, "")]),
        (
            KIP_848_GROUP,
            vec![
                commit(LATEST, 0, 8, "next gen 0"),
                commit(LATEST, 1, 5, "next gen 1"),
            ],
        ),
    ])
}

// ---- reading records (our own decoder: the fixture must not depend on the engine's) ----

fn read_varlong(bytes: &[u8], at: &mut usize) -> i64 {
    let mut value = 0u64;
    let mut shift = 0;
    loop {
        let byte = bytes[*at];
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    (value >> 1) as i64 ^ -((value & 1) as i64)
}

fn read_bytes(bytes: &[u8], at: &mut usize) -> Option<Vec<u8>> {
    let len = read_varlong(bytes, at);
    if len < 0 {
        return None;
    }
    let value = bytes[*at..*at + len as usize].to_vec();
    *at += len as usize;
    Some(value)
}

/// The records of every whole, uncompressed v2 batch in `bytes`.
fn decode_records(bytes: &[u8]) -> Vec<Record> {
    let mut records = Vec::new();
    let mut at = 0;
    while bytes.len() - at >= 61 {
        let batch_len = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
        let end = at + 12 + batch_len as usize;
        if end > bytes.len() {
            break;
        }
        let batch = &bytes[at..end];
        let base_offset = i64::from_be_bytes(batch[0..8].try_into().expect("8 bytes"));
        assert_eq!(batch[16], 2, "magic 2");
        let attributes = i16::from_be_bytes(batch[21..23].try_into().expect("2 bytes"));
        assert_eq!(attributes, 0, "uncompressed, CreateTime, not control");
        let base_timestamp = i64::from_be_bytes(batch[27..35].try_into().expect("8 bytes"));
        let count = i32::from_be_bytes(batch[57..61].try_into().expect("4 bytes"));
        let mut pos = 61;
        for _ in 0..count {
            let len = read_varlong(batch, &mut pos);
            let record_end = pos + len as usize;
            pos += 1; // attributes
            let timestamp_delta = read_varlong(batch, &mut pos);
            let offset_delta = read_varlong(batch, &mut pos);
            let key = read_bytes(batch, &mut pos);
            let value = read_bytes(batch, &mut pos);
            let headers = read_varlong(batch, &mut pos);
            assert_eq!(headers, 0, "no headers were written");
            assert_eq!(pos, record_end, "record length");
            records.push(Record {
                offset: base_offset + offset_delta,
                timestamp: base_timestamp + timestamp_delta,
                key,
                value,
            });
        }
        assert_eq!(pos, batch.len(), "batch length");
        at = end;
    }
    records
}

/// Every record of `topic`-`partition` from offset 0, and the partition's (log start, high
/// watermark).
fn read_log(client: &mut WireClient, topic: &str, partition: i32) -> (Vec<Record>, i64, i64) {
    let mut records: Vec<Record> = Vec::new();
    loop {
        let fetch_offset = records.last().map_or(0, |r| r.offset + 1);
        let data = fetch_at(client, topic, partition, fetch_offset);
        let before = records.len();
        records.extend(
            decode_records(data.records.as_deref().unwrap_or_default())
                .into_iter()
                .filter(|r| r.offset >= fetch_offset),
        );
        if records.len() == before
            || records.last().map(|r| r.offset + 1) >= Some(data.high_watermark)
        {
            return (records, data.log_start_offset, data.high_watermark);
        }
    }
}

// ---- requests ----

/// (topic id, partition indexes) of `topic` as Metadata gives them.
fn describe_topic(client: &mut WireClient, topic: &str) -> (Uuid, Vec<i32>) {
    let request = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: Some(topic.into()),
            ..Default::default()
        }]),
        allow_auto_topic_creation: false,
        ..Default::default()
    };
    let Response::Metadata(response) = client.call(12, &request) else {
        panic!("not Metadata")
    };
    let found = &response.topics[0];
    assert_eq!(found.error_code, 0, "{topic}: {found:?}");
    let mut partitions: Vec<i32> = found.partitions.iter().map(|p| p.partition_index).collect();
    partitions.sort();
    (found.topic_id, partitions)
}

/// The committed offsets of `group`, sorted: (topic, partition, offset, metadata).
fn committed(client: &mut WireClient, group: &str) -> Vec<(String, i32, i64, String)> {
    let request = OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup {
            group_id: group.into(),
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::OffsetFetch(response) = client.call(8, &request) else {
        panic!("not OffsetFetch")
    };
    let fetched = &response.groups[0];
    assert_eq!(fetched.error_code, 0, "{group}: {fetched:?}");
    let mut offsets: Vec<_> = fetched
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                assert_eq!(p.error_code, 0, "{group}: {fetched:?}");
                (
                    t.name.clone(),
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.clone().unwrap_or_default(),
                )
            })
        })
        .collect();
    offsets.sort();
    offsets
}

/// Produces one batch: (error code, base offset).
fn produce_one(client: &mut WireClient, topic: &str, partition: i32, batch: Vec<u8>) -> (i16, i64) {
    let answers = client.produce(topic, vec![(partition, batch)]);
    assert_eq!(answers.len(), 1);
    (answers[0].1, answers[0].2)
}

// ---- the fixture's record of what the wire gave back ----

/// What `written.txt` holds: topic ids (32 hex digits of the wire's 16 bytes) and the
/// idempotent producer.
struct Written {
    topic_ids: BTreeMap<String, Uuid>,
    producer: (i64, i16),
}

fn parse_hex(text: &str) -> Uuid {
    assert_eq!(text.len(), 32, "{text}");
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex digits");
    }
    Uuid(bytes)
}

impl Written {
    fn read(path: &Path) -> Written {
        let text = std::fs::read_to_string(path).expect("written.txt");
        let mut written = Written {
            topic_ids: BTreeMap::new(),
            producer: (-1, -1),
        };
        for line in text.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["topic", name, id] => {
                    written.topic_ids.insert(name.to_string(), parse_hex(id));
                }
                ["producer", id, epoch] => {
                    written.producer = (
                        id.parse().expect("producer id"),
                        epoch.parse().expect("epoch"),
                    )
                }
                _ => panic!("unexpected line {line:?} in {}", path.display()),
            }
        }
        assert_eq!(written.topic_ids.len(), 2, "{text}");
        assert!(written.producer.0 >= 0, "{text}");
        written
    }
}

// ---- the checks ----

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read fixture dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Topic ids and partition counts, topic and group config overrides.
fn check_topics_and_configs(client: &mut WireClient, topic_ids: &BTreeMap<String, Uuid>) {
    for (topic, partitions) in [
        (ORDERS, ORDERS_PARTITIONS),
        (LATEST, LATEST_PARTITIONS),
        (ADDED, 1),
    ] {
        let Some(id) = topic_ids.get(topic) else {
            continue;
        };
        assert_eq!(
            describe_topic(client, topic),
            (*id, (0..partitions).collect::<Vec<_>>()),
            "{topic}: id and partitions"
        );
    }
    for (topic, configs) in [(ORDERS, &ORDERS_CONFIGS[..]), (LATEST, &LATEST_CONFIGS[..])] {
        let keys: Vec<&str> = configs.iter().map(|(k, _)| *k).collect();
        let wanted: Vec<(String, i8)> = configs
            .iter()
            .map(|(_, v)| (v.to_string(), DYNAMIC_TOPIC_CONFIG))
            .collect();
        assert_eq!(
            describe_configs(client, TOPIC_RESOURCE, topic, &keys),
            wanted,
            "{topic}: config overrides"
        );
    }
    assert_eq!(
        describe_configs(client, TOPIC_RESOURCE, ORDERS, &["cleanup.policy"])[0].0,
        "delete",
        "orders is not compacted"
    );
    assert_eq!(
        describe_configs(client, GROUP_RESOURCE, KIP_848_GROUP, &[GROUP_CONFIG.0]),
        vec![(GROUP_CONFIG.1.to_string(), GROUP_CONFIG_SOURCE)],
        "the group config override"
    );
}

/// Every partition reads back exactly `logs`; the compacted topic has every key's last value.
fn check_records(client: &mut WireClient, logs: &HashMap<(String, i32), Vec<Record>>) {
    let mut latest_values: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for ((topic, partition), expected) in logs {
        let (records, log_start, high_watermark) = read_log(client, topic, *partition);
        assert_eq!(log_start, 0, "{topic}-{partition}: log start");
        assert_eq!(
            high_watermark,
            expected.len() as i64,
            "{topic}-{partition}: high watermark"
        );
        assert_eq!(records.len(), expected.len(), "{topic}-{partition}: count");
        for (read, wanted) in records.iter().zip(expected) {
            assert_eq!(read, wanted, "{topic}-{partition}");
        }
        if topic == LATEST {
            for record in &records {
                latest_values.insert(
                    record.key.clone().expect("keyed"),
                    record.value.clone().expect("a value"),
                );
            }
        }
    }
    let wanted: BTreeMap<Vec<u8>, Vec<u8>> = (0..6)
        .map(|k| {
            (
                format!("k{k}").into_bytes(),
                format!("round 3 of k{k}").into_bytes(),
            )
        })
        .collect();
    assert_eq!(latest_values, wanted, "the latest value of every key");
}

fn check_commits(client: &mut WireClient) {
    for (group, offsets) in expected_commits() {
        assert_eq!(
            committed(client, group),
            offsets,
            "{group}: committed offsets"
        );
    }
}

/// Today's binary with the flags the fixtures need.
fn start_today(data_dir: &Path) -> Kaas {
    let mut flags: Vec<&str> = WRITER_FLAGS.to_vec();
    flags.extend(FROZEN_CLOCK_FLAGS);
    Kaas::start(Some(data_dir), &flags)
}

fn opens_unchanged(variant: &str) {
    let fixture = Path::new(FIXTURES).join(variant);
    let written = Written::read(&fixture.join("written.txt"));
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().join("data");
    copy_dir(&fixture.join("data"), &data_dir);
    let topics_file = kaas_volume::cluster_dir(&data_dir).join(kaas_volume::TOPICS_FILE);
    let old_topics_file = std::fs::read(&topics_file).expect("the fixture has topics.json");

    let mut kaas = start_today(&data_dir);
    let mut client = kaas.client();
    let mut topic_ids = written.topic_ids.clone();
    let mut logs = expected_logs(written.producer);
    check_topics_and_configs(&mut client, &topic_ids);
    check_records(&mut client, &logs);
    check_commits(&mut client);

    // The producer's state came back: each of its batches still remembered is a duplicate,
    // answered with its first offset and not stored again, and the next sequence follows.
    let producer_log = (ORDERS.to_string(), PRODUCER_PARTITION);
    let end = logs[&producer_log].len() as i64;
    let mut first_offset = end;
    for (sequence, count) in PRODUCER_BATCHES.iter().rev() {
        first_offset -= *count as i64;
        assert_eq!(
            produce_one(
                &mut client,
                ORDERS,
                PRODUCER_PARTITION,
                producer_batch(written.producer, *sequence, *count)
            ),
            (0, first_offset),
            "a retry of sequence {sequence} is a duplicate"
        );
    }
    assert_eq!(
        read_log(&mut client, ORDERS, PRODUCER_PARTITION).2,
        end,
        "retries were not stored"
    );
    let next = producer_batch(written.producer, 8, 2);
    assert_eq!(
        produce_one(&mut client, ORDERS, PRODUCER_PARTITION, next.clone()),
        (0, end),
        "the next sequence is accepted"
    );
    logs.get_mut(&producer_log)
        .expect("planned")
        .extend(decode_records(&next).into_iter().map(|r| Record {
            offset: end + r.offset,
            ..r
        }));

    // Today's build writes the directory: a new topic rewrites topics.json.
    client.create_topic(ADDED, 1, &[]);
    topic_ids.insert(ADDED.to_string(), describe_topic(&mut client, ADDED).0);
    assert_ne!(
        std::fs::read(&topics_file).expect("topics.json"),
        old_topics_file,
        "topics.json rewritten by today's build"
    );
    let added = PlannedBatch {
        topic: ADDED,
        partition: 0,
        timestamp: 1_700_000_900_000,
        records: vec![(Some(b"new".to_vec()), Some(b"written today".to_vec()))],
    };
    assert_eq!(produce_one(&mut client, ADDED, 0, encode(&added)), (0, 0));
    logs.insert(
        (ADDED.to_string(), 0),
        vec![Record {
            offset: 0,
            timestamp: added.timestamp,
            key: Some(b"new".to_vec()),
            value: Some(b"written today".to_vec()),
        }],
    );
    check_records(&mut client, &logs);
    drop(client);

    assert!(kaas.terminate(), "clean exit on SIGTERM");
    kaas.restart();
    let mut client = kaas.client();
    check_topics_and_configs(&mut client, &topic_ids);
    check_records(&mut client, &logs);
    check_commits(&mut client);
    assert_eq!(
        produce_one(
            &mut client,
            ORDERS,
            PRODUCER_PARTITION,
            producer_batch(written.producer, 10, 1)
        ),
        (0, end + 2),
        "the producer goes on after today's restart"
    );
    drop(client);
    assert!(kaas.terminate(), "clean exit on SIGTERM");
}

#[test]
fn a_data_dir_stopped_with_sigterm_opens_unchanged() {
    opens_unchanged("clean");
}

#[test]
fn a_data_dir_stopped_with_kill_9_opens_unchanged() {
    opens_unchanged("killed");
}
