//! Transactional requests a broker must refuse get Apache Kafka 4.4's codes, and nothing is
//! stored for them (a real `kaas` process; requests on the wire).
//!
//! Each case is one request that breaks a rule: a transactional batch without a
//! transactional id, or of an id no coordinator knows, or to a partition a V1 producer did not
//! add (KIP-890 part 1: TRANSACTION_ABORTABLE from Produce v11, INVALID_TXN_STATE to the older
//! clients that do not know it); EndTxn and AddOffsetsToTxn of an unknown id; EndTxn with no
//! transaction open; AddPartitionsToTxn at a fenced epoch; InitProducerId with an empty id or a
//! timeout above `transaction.max.timeout.ms`; TxnOffsetCommit outside a transaction. The
//! expected codes are what Apache Kafka 4.4 answers: with `KAFKA_BOOTSTRAP=host:port` set (a
//! running Kafka 4.4, `tests/kafka/start-kafka.sh`) the test also sends every case there and
//! checks that both brokers answer alike.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use kaas_net::protocol::messages::add_offsets_to_txn::AddOffsetsToTxnRequest;
use kaas_net::protocol::messages::find_coordinator::FindCoordinatorRequest;
use kaas_net::protocol::messages::txn_offset_commit::{
    TxnOffsetCommitRequest, TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kaas_net::protocol::Response;
use support::transactions::{
    add_partitions, end, find_coordinator, init, produce, transactional_batch,
};
use support::{produce_request, Kaas, WireClient};

/// Kafka 4.4's answer to each case.
const EXPECTED: &[(&str, i16)] = &[
    ("transactional batch without a transactional id", 53),
    ("transactional batch of an unknown transactional id", 49),
    ("EndTxn of an unknown transactional id", 49),
    ("AddOffsetsToTxn of an unknown transactional id", 49),
    ("InitProducerId with an empty transactional id", 42),
    ("InitProducerId above transaction.max.timeout.ms", 50),
    ("AddPartitionsToTxn at a fenced epoch", 90),
    ("EndTxn with no transaction open", 48),
    ("V1 produce (v11) to a partition not added", 120),
    ("V1 produce (v10) to a partition not added", 48),
    ("TxnOffsetCommit (v3) without AddOffsetsToTxn", 48),
];

/// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
const COORDINATOR_MOVING: [i16; 3] = [14, 15, 16];

fn find_group_coordinator(client: &mut WireClient, group: &str) {
    let request = FindCoordinatorRequest {
        key: group.into(),
        key_type: 0,
        ..Default::default()
    };
    client.call(3, &request);
}

/// Every case's code from the broker at `addr`; `run` keeps names apart between runs.
fn answers(addr: SocketAddr, run: &str) -> Vec<(&'static str, i16)> {
    let mut client = WireClient::connect(addr);
    let topic = format!("bad-txn-{run}");
    client.create_topic(&topic, 1, &[]);
    let id = |name: &str| format!("{name}-{run}");
    let mut out = Vec::new();

    let mut request = produce_request(&topic, vec![(0, transactional_batch(&["v"], 4242, 0, 0))]);
    request.transactional_id = None;
    let Response::Produce(produced) = client.call(9, &request) else {
        panic!("not Produce")
    };
    out.push((
        EXPECTED[0].0,
        produced.responses[0].partition_responses[0].error_code,
    ));

    find_coordinator(&mut client, &id("ghost"));
    let ghost = vec![(0, transactional_batch(&["v"], 4242, 0, 0))];
    out.push((
        EXPECTED[1].0,
        produce(&mut client, 11, &id("ghost"), &topic, ghost)[0],
    ));
    out.push((
        EXPECTED[2].0,
        end(&mut client, 3, &id("ghost"), (4242, 0), true).0,
    ));
    let add_offsets = AddOffsetsToTxnRequest {
        transactional_id: id("ghost"),
        producer_id: 4242,
        producer_epoch: 0,
        group_id: "g".into(),
    };
    let Response::AddOffsetsToTxn(added) = client.call(3, &add_offsets) else {
        panic!("not AddOffsetsToTxn")
    };
    out.push((EXPECTED[3].0, added.error_code));
    out.push((EXPECTED[4].0, init(&mut client, "", 60_000).0));
    find_coordinator(&mut client, &id("long"));
    out.push((EXPECTED[5].0, init(&mut client, &id("long"), 900_001).0));

    // One producer, re-initialized once: its first epoch is fenced.
    let producer = id("p");
    find_coordinator(&mut client, &producer);
    let (_, pid, first_epoch) = init(&mut client, &producer, 60_000);
    let (_, _, epoch) = init(&mut client, &producer, 60_000);
    let codes = add_partitions(&mut client, &producer, (pid, first_epoch), &topic, &[0]);
    out.push((EXPECTED[6].0, codes[0]));
    out.push((
        EXPECTED[7].0,
        end(&mut client, 3, &producer, (pid, epoch), true).0,
    ));
    let batch = vec![(0, transactional_batch(&["v"], pid, epoch, 0))];
    out.push((
        EXPECTED[8].0,
        produce(&mut client, 11, &producer, &topic, batch)[0],
    ));
    let batch = vec![(0, transactional_batch(&["v"], pid, epoch, 0))];
    out.push((
        EXPECTED[9].0,
        produce(&mut client, 10, &producer, &topic, batch)[0],
    ));
    let commit = TxnOffsetCommitRequest {
        transactional_id: producer.clone(),
        group_id: id("g"),
        producer_id: pid,
        producer_epoch: epoch,
        topics: vec![TxnOffsetCommitRequestTopic {
            name: topic.clone(),
            partitions: vec![TxnOffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: 1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    // The group's coordinator must be up first (Kafka creates `__consumer_offsets` at the
    // first FindCoordinator for a group).
    let started = std::time::Instant::now();
    let code = loop {
        let Response::TxnOffsetCommit(committed) = client.call(3, &commit) else {
            panic!("not TxnOffsetCommit")
        };
        let code = committed.topics[0].partitions[0].error_code;
        if !COORDINATOR_MOVING.contains(&code) || started.elapsed() > Duration::from_secs(30) {
            break code;
        }
        find_group_coordinator(&mut client, &id("g"));
        std::thread::sleep(Duration::from_millis(100));
    };
    out.push((EXPECTED[10].0, code));
    out
}

#[test]
fn bad_transaction_input_gets_kafkas_codes_and_stores_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start(Some(dir.path()), &[]);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let run = format!("{}-{nanos}", std::process::id());
    let got = answers(kaas.kafka, &run);
    if let Ok(kafka) = std::env::var("KAFKA_BOOTSTRAP") {
        let addr = kafka.parse().expect("KAFKA_BOOTSTRAP is host:port");
        assert_eq!(answers(addr, &run), got, "Apache Kafka answers otherwise");
    }
    assert_eq!(got, EXPECTED);
    // Nothing of the refused batches was stored.
    let mut client = kaas.client();
    let data = support::fetch_at(&mut client, &format!("bad-txn-{run}"), 0, 0);
    assert_eq!(data.high_watermark, 0, "a refused batch was stored");
    kaas.terminate();
}
