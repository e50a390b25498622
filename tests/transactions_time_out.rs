//! A transaction open past its timeout is aborted by its coordinator, and a producer cannot
//! ask for a timeout above `transaction.max.timeout.ms` (a real `kaas` process with short
//! clean-up intervals; requests on the wire as Kafka clients send them).
//!
//! Checked: InitProducerId with a timeout above the maximum is refused
//! INVALID_TRANSACTION_TIMEOUT; a transaction left open past its 1 s timeout is aborted
//! (its partition gets an ABORT marker, its last stable offset reaches the high watermark,
//! DescribeTransactions shows CompleteAbort) and its producer, fenced by the abort's epoch
//! bump, can no longer commit it.

mod support;

use support::transactions::{
    add_partitions, end, find_coordinator, init, produce, transactional_batch, wait_for_state,
};
use support::{fetch_at, fetch_batches, Kaas};

const TOPIC: &str = "orders";
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
/// PRODUCER_FENCED and INVALID_PRODUCER_EPOCH: what a fenced producer hears.
const FENCED: [i16; 2] = [90, 47];

#[test]
fn an_open_transaction_is_aborted_once_past_its_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flags = [
        "--transaction-max-timeout-ms",
        "60000",
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "200",
    ];
    let mut kaas = Kaas::start(Some(dir.path()), &flags);
    let mut client = kaas.client();
    client.create_topic(TOPIC, 1, &[]);
    find_coordinator(&mut client, "slow");
    assert_eq!(
        init(&mut client, "slow", 60_001).0,
        INVALID_TRANSACTION_TIMEOUT
    );

    let (code, id, epoch) = init(&mut client, "slow", 1_000);
    assert_eq!(code, 0);
    assert_eq!(
        add_partitions(&mut client, "slow", (id, epoch), TOPIC, &[0]),
        [0]
    );
    let batch = vec![(0, transactional_batch(&["x", "y"], id, epoch, 0))];
    assert_eq!(produce(&mut client, 11, "slow", TOPIC, batch), [0]);
    assert_eq!(fetch_at(&mut client, TOPIC, 0, 0).last_stable_offset, 0);

    wait_for_state(&mut client, "slow", "CompleteAbort");
    let batches = fetch_batches(&mut client, TOPIC, 0);
    assert_eq!(
        batches.iter().filter(|b| b.is_control()).count(),
        1,
        "ABORT"
    );
    let fetched = fetch_at(&mut client, TOPIC, 0, 0);
    assert_eq!(fetched.last_stable_offset, fetched.high_watermark);
    let code = end(&mut client, 4, "slow", (id, epoch), true).0;
    assert!(FENCED.contains(&code), "committing after the abort: {code}");
    kaas.terminate();
}
