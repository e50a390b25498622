//! A transactional producer spoken on the wire, request by request, for tests that check
//! what the broker keeps of transactions (Kafka's request versions: V1 up to EndTxn v4 and
//! Produce v11, V2 from EndTxn v5 and Produce v12).

use std::time::{Duration, Instant};

use kaas_engine::batch::{self, BatchHeader};
use kaas_net::protocol::messages::add_partitions_to_txn::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,
};
use kaas_net::protocol::messages::describe_transactions::{
    DescribeTransactionsRequest, DescribedTransactionState,
};
use kaas_net::protocol::messages::end_txn::EndTxnRequest;
use kaas_net::protocol::messages::find_coordinator::FindCoordinatorRequest;
use kaas_net::protocol::messages::init_producer_id::InitProducerIdRequest;
use kaas_net::protocol::Response;

use super::{produce_request, WireClient};

/// Kafka's codes a coordinator answers while it cannot serve yet, NOT_ENOUGH_REPLICAS, which a
/// partition leader answers for them, and NOT_LEADER_OR_FOLLOWER of a topic just created
/// (retried here).
const RETRIABLE: [i16; 6] = [6, 14, 15, 16, 19, 51];
const RETRY_BOUND: Duration = Duration::from_secs(30);

/// An uncompressed batch of `values` from `producer_id` at `epoch`, sequences from
/// `sequence`, with the transactional bit set.
pub fn transactional_batch(
    values: &[&str],
    producer_id: i64,
    epoch: i16,
    sequence: i32,
) -> Vec<u8> {
    let records: Vec<batch::TestRecord<'_>> = values
        .iter()
        .map(|value| (None, Some(value.as_bytes())))
        .collect();
    let mut bytes =
        batch::encode_batch_for_tests(&records, 1_700_000_000_000, producer_id, epoch, sequence);
    let attributes =
        BatchHeader::parse(&bytes).expect("header").attributes | batch::TRANSACTIONAL_MASK;
    bytes[batch::ATTRIBUTES_POS..][..2].copy_from_slice(&attributes.to_be_bytes());
    let crc = batch::compute_crc(&bytes);
    bytes[batch::CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// Calls `call` until its code is not one a loading or moving coordinator answers; the last
/// code and answer.
fn retried<T>(what: &str, mut call: impl FnMut() -> (i16, T)) -> (i16, T) {
    let started = Instant::now();
    loop {
        let (code, answer) = call();
        if !RETRIABLE.contains(&code) || started.elapsed() > RETRY_BOUND {
            return (code, answer);
        }
        assert!(
            started.elapsed() < RETRY_BOUND,
            "{what}: still {code} after {RETRY_BOUND:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The node id coordinating `transactional_id`, once there is one.
pub fn find_coordinator(client: &mut WireClient, transactional_id: &str) -> i32 {
    let request = FindCoordinatorRequest {
        key: transactional_id.into(),
        key_type: 1,
        ..Default::default()
    };
    let (code, node) = retried("FindCoordinator", || match client.call(3, &request) {
        Response::FindCoordinator(r) => (r.error_code, r.node_id),
        other => panic!("unexpected {other:?}"),
    });
    assert_eq!(code, 0, "FindCoordinator for {transactional_id}");
    node
}

/// InitProducerId for `transactional_id` (retried while the coordinator loads or aborts an
/// open transaction): (code, producer id, epoch).
pub fn init(client: &mut WireClient, transactional_id: &str, timeout_ms: i32) -> (i16, i64, i16) {
    let request = InitProducerIdRequest {
        transactional_id: Some(transactional_id.into()),
        transaction_timeout_ms: timeout_ms,
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    };
    let (code, (id, epoch)) = retried("InitProducerId", || match client.call(4, &request) {
        Response::InitProducerId(r) => (r.error_code, (r.producer_id, r.producer_epoch)),
        other => panic!("unexpected {other:?}"),
    });
    (code, id, epoch)
}

/// AddPartitionsToTxn v3 (Transactions V1), retried while the last transaction completes:
/// every partition's code.
pub fn add_partitions(
    client: &mut WireClient,
    transactional_id: &str,
    producer: (i64, i16),
    topic: &str,
    partitions: &[i32],
) -> Vec<i16> {
    let request = AddPartitionsToTxnRequest {
        v3_and_below_transactional_id: transactional_id.into(),
        v3_and_below_producer_id: producer.0,
        v3_and_below_producer_epoch: producer.1,
        v3_and_below_topics: vec![AddPartitionsToTxnTopic {
            name: topic.into(),
            partitions: partitions.to_vec(),
        }],
        ..Default::default()
    };
    let (_, codes) = retried("AddPartitionsToTxn", || match client.call(3, &request) {
        Response::AddPartitionsToTxn(r) => {
            let codes: Vec<i16> = r.results_by_topic_v3_and_below[0]
                .results_by_partition
                .iter()
                .map(|p| p.partition_error_code)
                .collect();
            (codes[0], codes)
        }
        other => panic!("unexpected {other:?}"),
    });
    codes
}

/// A transactional Produce at `version` (v11: V1, v12+: V2), retried while the coordinator
/// is busy; each partition's code.
pub fn produce(
    client: &mut WireClient,
    version: i16,
    transactional_id: &str,
    topic: &str,
    batches: Vec<(i32, Vec<u8>)>,
) -> Vec<i16> {
    let mut request = produce_request(topic, batches);
    request.transactional_id = Some(transactional_id.into());
    let (_, codes) = retried("Produce", || match client.call(version, &request) {
        Response::Produce(r) => {
            let codes: Vec<i16> = r.responses[0]
                .partition_responses
                .iter()
                .map(|p| p.error_code)
                .collect();
            (codes[0], codes)
        }
        other => panic!("unexpected {other:?}"),
    });
    codes
}

/// EndTxn at `version`: (code, next producer id, next epoch) (-1 / -1 before v5).
pub fn end(
    client: &mut WireClient,
    version: i16,
    transactional_id: &str,
    producer: (i64, i16),
    commit: bool,
) -> (i16, i64, i16) {
    let request = EndTxnRequest {
        transactional_id: transactional_id.into(),
        producer_id: producer.0,
        producer_epoch: producer.1,
        committed: commit,
    };
    let (code, (id, epoch)) = retried("EndTxn", || match client.call(version, &request) {
        Response::EndTxn(r) => (r.error_code, (r.producer_id, r.producer_epoch)),
        other => panic!("unexpected {other:?}"),
    });
    (code, id, epoch)
}

/// DescribeTransactions for one id, once its coordinator has loaded.
pub fn describe(client: &mut WireClient, transactional_id: &str) -> DescribedTransactionState {
    let request = DescribeTransactionsRequest {
        transactional_ids: vec![transactional_id.into()],
    };
    let (_, state) = retried("DescribeTransactions", || match client.call(0, &request) {
        Response::DescribeTransactions(mut r) => {
            let state = r.transaction_states.swap_remove(0);
            (state.error_code, state)
        }
        other => panic!("unexpected {other:?}"),
    });
    state
}

/// Waits (30 s at most) until `transactional_id` is in `state` (its markers written, for a
/// Complete state).
pub fn wait_for_state(client: &mut WireClient, transactional_id: &str, state: &str) {
    let started = Instant::now();
    loop {
        let described = describe(client, transactional_id);
        if described.transaction_state == state {
            return;
        }
        assert!(
            started.elapsed() < RETRY_BOUND,
            "{transactional_id} still {described:?}, not {state}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
