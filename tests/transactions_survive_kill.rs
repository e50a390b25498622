//! A transaction's state is on the volume before it is acknowledged, and comes back after
//! `kill -9` (a real `kaas` process, requests on the wire as Kafka clients send them).
//!
//! Checked, with Transactions V1 (AddPartitionsToTxn v3, Produce v11, EndTxn v4): a
//! committed transaction's COMMIT marker and an open transaction survive the kill; after the
//! restart the coordinator still knows the open transaction (DescribeTransactions: Ongoing,
//! its partitions) and each partition's last stable offset is that transaction's first
//! offset; a new producer with the same transactional id fences the old one, whose
//! open transaction is aborted (an ABORT marker in each of its partitions) and whose later
//! calls are refused. With Transactions V2 (Produce v12, EndTxn v5): a first produce adds its
//! partition without AddPartitionsToTxn, every end bumps the epoch, and a produce at the old
//! epoch is refused.

mod support;

use kaas_engine::batch::BatchHeader;
use support::transactions::{
    add_partitions, describe, end, find_coordinator, init, produce, transactional_batch,
    wait_for_state,
};
use support::{fetch_at, fetch_batches, Kaas};

const TOPIC: &str = "payments";
/// PRODUCER_FENCED and INVALID_PRODUCER_EPOCH: what a fenced producer hears.
const FENCED: [i16; 2] = [90, 47];

fn control_batches(batches: &[BatchHeader]) -> usize {
    batches.iter().filter(|b| b.is_control()).count()
}

#[test]
fn transactions_survive_kill_and_a_new_producer_aborts_the_open_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start(Some(dir.path()), &["--shards", "2"]);
    let mut client = kaas.client();
    client.create_topic(TOPIC, 2, &[]);
    find_coordinator(&mut client, "pay-1");
    let (code, id, epoch) = init(&mut client, "pay-1", 60_000);
    assert_eq!(code, 0, "InitProducerId");
    let producer = (id, epoch);

    assert_eq!(
        add_partitions(&mut client, "pay-1", producer, TOPIC, &[0, 1]),
        [0, 0]
    );
    let committed = vec![
        (0, transactional_batch(&["a", "b"], id, epoch, 0)),
        (1, transactional_batch(&["c"], id, epoch, 0)),
    ];
    assert_eq!(produce(&mut client, 11, "pay-1", TOPIC, committed), [0, 0]);
    assert_eq!(end(&mut client, 4, "pay-1", producer, true).0, 0, "commit");
    wait_for_state(&mut client, "pay-1", "CompleteCommit");

    assert_eq!(
        add_partitions(&mut client, "pay-1", producer, TOPIC, &[0, 1]),
        [0, 0]
    );
    let open = vec![
        (0, transactional_batch(&["d"], id, epoch, 2)),
        (1, transactional_batch(&["e"], id, epoch, 1)),
    ];
    assert_eq!(produce(&mut client, 11, "pay-1", TOPIC, open), [0, 0]);

    kaas.kill9();
    kaas.restart();
    let mut client = kaas.client();
    let state = describe(&mut client, "pay-1");
    assert_eq!(state.error_code, 0);
    assert_eq!(state.transaction_state, "Ongoing", "{state:?}");
    assert_eq!((state.producer_id, state.producer_epoch), producer);
    let partitions: Vec<(String, Vec<i32>)> = state
        .topics
        .iter()
        .map(|t| (t.topic.clone(), t.partitions.clone()))
        .collect();
    assert_eq!(partitions, [(TOPIC.to_string(), vec![0, 1])]);
    for partition in 0..2 {
        let batches = fetch_batches(&mut client, TOPIC, partition);
        assert_eq!(batches.len(), 3, "data, COMMIT, open data in {partition}");
        assert_eq!(control_batches(&batches), 1);
        // The last stable offset is recovered: the open transaction's first offset.
        let open_at = batches[2].base_offset;
        assert_eq!(
            fetch_at(&mut client, TOPIC, partition, 0).last_stable_offset,
            open_at
        );
    }

    // A new instance of the producer: the open transaction is aborted, the old one fenced.
    let (code, new_id, new_epoch) = init(&mut client, "pay-1", 60_000);
    assert_eq!(code, 0, "InitProducerId of the new instance");
    assert_eq!(new_id, id);
    assert!(new_epoch > epoch, "a new epoch: {new_epoch} after {epoch}");
    for partition in 0..2 {
        let batches = fetch_batches(&mut client, TOPIC, partition);
        assert_eq!(
            control_batches(&batches),
            2,
            "COMMIT and ABORT in {partition}"
        );
        let fetched = fetch_at(&mut client, TOPIC, partition, 0);
        assert_eq!(
            fetched.last_stable_offset, fetched.high_watermark,
            "all settled"
        );
    }
    let state = describe(&mut client, "pay-1");
    assert_eq!(state.transaction_state, "Empty", "{state:?}");
    assert!(FENCED.contains(&end(&mut client, 4, "pay-1", producer, true).0));
    let late = vec![(0, transactional_batch(&["f"], id, epoch, 3))];
    assert!(FENCED.contains(&produce(&mut client, 11, "pay-1", TOPIC, late)[0]));
    kaas.terminate();
}

#[test]
fn v2_producers_add_partitions_by_producing_and_bump_the_epoch_at_every_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start(Some(dir.path()), &["--shards", "2"]);
    let mut client = kaas.client();
    client.create_topic(TOPIC, 1, &[]);
    find_coordinator(&mut client, "pay-2");
    let (code, id, epoch) = init(&mut client, "pay-2", 60_000);
    assert_eq!(code, 0);

    let batch = vec![(0, transactional_batch(&["a"], id, epoch, 0))];
    assert_eq!(produce(&mut client, 12, "pay-2", TOPIC, batch), [0]);
    let state = describe(&mut client, "pay-2");
    assert_eq!(state.transaction_state, "Ongoing", "added by the produce");
    let (code, next_id, next_epoch) = end(&mut client, 5, "pay-2", (id, epoch), true);
    assert_eq!(code, 0);
    assert_eq!(
        (next_id, next_epoch),
        (id, epoch + 1),
        "EndTxn v5 bumps the epoch"
    );

    // The old epoch is fenced; the new one writes the next transaction.
    let stale = vec![(0, transactional_batch(&["b"], id, epoch, 1))];
    let code = produce(&mut client, 12, "pay-2", TOPIC, stale)[0];
    assert!(FENCED.contains(&code), "a stale produce got {code}");
    let fresh = vec![(0, transactional_batch(&["c"], id, next_epoch, 0))];
    assert_eq!(produce(&mut client, 12, "pay-2", TOPIC, fresh), [0]);
    let (code, _, last_epoch) = end(&mut client, 5, "pay-2", (id, next_epoch), false);
    assert_eq!((code, last_epoch), (0, next_epoch + 1));
    wait_for_state(&mut client, "pay-2", "CompleteAbort");
    let batches = fetch_batches(&mut client, TOPIC, 0);
    assert_eq!(control_batches(&batches), 2, "COMMIT then ABORT");
    kaas.terminate();
}
