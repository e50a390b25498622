//! Tests of fetch.rs at both isolation levels, on a real shard 0 whose partition holds
//! aborted, committed and open transactions.

use std::cell::Cell;

use kaas_engine::batch::txn_marker::TxnResult;

use super::*;
use crate::protocol::messages::fetch::{FetchPartition, FetchTopic};
use crate::shard::test_support::{
    append_batch, end_transaction, open_log, producer_batch, run, shard_zero, standalone_view,
    topic, TEST_NOW_MS,
};

const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;

/// Shard 0 of a standalone broker holding topic `t` (one partition), and that partition.
async fn shard_with_partition(root: &std::path::Path) -> (Rc<Shard>, PartitionLog) {
    let topic = topic("t", 1);
    let shard = shard_zero(root, standalone_view(1, &[topic]));
    let log = open_log(&shard, root, "t", 0).await;
    (shard, log)
}

/// Writes, all durable: producer 1's transaction at 0-1 aborted at 2, producer 2's at 3-4
/// committed at 5, producer 4's at 6-7 aborted at 8, producer 3's at 9 left open, and a
/// plain batch at 10. Last stable offset 9, high watermark 11.
async fn write_transactions(log: &PartitionLog) {
    let at = TEST_NOW_MS;
    assert_eq!(
        append_batch(log, &producer_batch(2, at, 1, 0, true)).await,
        0
    );
    assert_eq!(end_transaction(log, 1, TxnResult::Abort, 7).await, 2);
    assert_eq!(
        append_batch(log, &producer_batch(2, at, 2, 0, true)).await,
        3
    );
    assert_eq!(end_transaction(log, 2, TxnResult::Commit, 7).await, 5);
    assert_eq!(
        append_batch(log, &producer_batch(2, at, 4, 0, true)).await,
        6
    );
    assert_eq!(end_transaction(log, 4, TxnResult::Abort, 7).await, 8);
    assert_eq!(
        append_batch(log, &producer_batch(1, at, 3, 0, true)).await,
        9
    );
    assert_eq!(
        append_batch(log, &producer_batch(1, at, -1, -1, false)).await,
        10
    );
    log.flush_to(11).await.expect("flushed");
    assert_eq!(log.last_stable_offset(), 9);
}

/// A Fetch (v12) of `t`-0 from `offset`.
fn request(
    offset: i64,
    partition_max_bytes: i32,
    isolation_level: i8,
    max_wait_ms: i32,
) -> FetchRequest {
    FetchRequest {
        max_wait_ms,
        min_bytes: 1,
        max_bytes: 1 << 20,
        isolation_level,
        topics: vec![FetchTopic {
            topic: "t".into(),
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: offset,
                partition_max_bytes,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

async fn fetch(shard: &Rc<Shard>, request: FetchRequest) -> PartitionData {
    let mut response = handle(shard, request, 12).await;
    assert_eq!(response.error_code, 0);
    response.responses.remove(0).partitions.remove(0)
}

/// The base offsets of the batches in a partition's records.
fn batch_bases(data: &PartitionData) -> Vec<i64> {
    let records = data.records.clone().unwrap_or_default();
    let mut bases = Vec::new();
    let mut position = 0;
    while position + 12 <= records.len() {
        let base = i64::from_be_bytes(records[position..position + 8].try_into().expect("8"));
        let length =
            i32::from_be_bytes(records[position + 8..position + 12].try_into().expect("4"));
        bases.push(base);
        position += 12 + length as usize;
    }
    bases
}

/// A partition's aborted transactions as (producer id, first offset), or `None` for null.
fn aborted(data: &PartitionData) -> Option<Vec<(i64, i64)>> {
    data.aborted_transactions.as_ref().map(|list| {
        list.iter()
            .map(|a| (a.producer_id, a.first_offset))
            .collect()
    })
}

#[test]
fn read_committed_stops_at_the_last_stable_offset_and_lists_the_aborted_transactions() {
    run(|root| {
        Box::pin(async move {
            let (shard, log) = shard_with_partition(&root).await;
            write_transactions(&log).await;
            let data = fetch(&shard, request(0, 1 << 20, READ_COMMITTED, 0)).await;
            assert_eq!(data.error_code, 0);
            assert_eq!(batch_bases(&data), vec![0, 2, 3, 5, 6, 8]);
            assert_eq!(data.high_watermark, 11);
            assert_eq!(data.last_stable_offset, 9);
            assert_eq!(aborted(&data), Some(vec![(1, 0), (4, 6)]));

            // At the last stable offset: nothing yet, and an empty (not null) list.
            let data = fetch(&shard, request(9, 1 << 20, READ_COMMITTED, 0)).await;
            assert_eq!(batch_bases(&data), Vec::<i64>::new());
            assert_eq!(data.last_stable_offset, 9);
            assert_eq!(aborted(&data), Some(Vec::new()));
        })
    });
}

#[test]
fn read_uncommitted_returns_everything_and_reports_the_last_stable_offset() {
    run(|root| {
        Box::pin(async move {
            let (shard, log) = shard_with_partition(&root).await;
            write_transactions(&log).await;
            let data = fetch(&shard, request(0, 1 << 20, READ_UNCOMMITTED, 0)).await;
            assert_eq!(data.error_code, 0, "{data:?}");
            assert_eq!(batch_bases(&data), vec![0, 2, 3, 5, 6, 8, 9, 10]);
            assert_eq!(data.high_watermark, 11);
            assert_eq!(data.last_stable_offset, 9);
            assert_eq!(aborted(&data), None, "Kafka sends null to READ_UNCOMMITTED");
        })
    });
}

#[test]
fn only_the_aborted_transactions_of_the_batches_returned_are_listed() {
    run(|root| {
        Box::pin(async move {
            let (shard, log) = shard_with_partition(&root).await;
            write_transactions(&log).await;
            // One byte per partition still returns one whole batch.
            let data = fetch(&shard, request(0, 1, READ_COMMITTED, 0)).await;
            assert_eq!(batch_bases(&data), vec![0]);
            assert_eq!(aborted(&data), Some(vec![(1, 0)]));
            // From 3: producer 1's abort is behind, producer 4's beyond the batch returned.
            let data = fetch(&shard, request(3, 1, READ_COMMITTED, 0)).await;
            assert_eq!(batch_bases(&data), vec![3]);
            assert_eq!(aborted(&data), Some(Vec::new()));
        })
    });
}

#[test]
fn a_read_committed_long_poll_wakes_for_a_commit_not_for_appends() {
    run(|root| {
        Box::pin(async move {
            let (shard, log) = shard_with_partition(&root).await;
            write_transactions(&log).await;
            let answered = Rc::new(Cell::new(false));
            let poll = glommio::spawn_local({
                let shard = shard.clone();
                let answered = answered.clone();
                async move {
                    let data = fetch(&shard, request(9, 1 << 20, READ_COMMITTED, 60_000)).await;
                    answered.set(true);
                    data
                }
            });
            // Data past the open transaction moves the high watermark, not the last
            // stable offset: nothing for a READ_COMMITTED consumer to read yet.
            let plain = producer_batch(1, TEST_NOW_MS, -1, -1, false);
            assert_eq!(append_batch(&log, &plain).await, 11);
            log.flush_to(12).await.expect("flushed");
            glommio::timer::sleep(Duration::from_millis(300)).await;
            assert!(!answered.get(), "woke without stable data");

            assert_eq!(end_transaction(&log, 3, TxnResult::Commit, 7).await, 12);
            log.flush_to(13).await.expect("flushed");
            let timeout = glommio::timer::sleep(Duration::from_secs(30));
            let data = match select(poll.boxed_local(), timeout.boxed_local()).await {
                Either::Left((data, _)) => data,
                Either::Right(_) => panic!("the commit did not end the wait"),
            };
            assert_eq!(batch_bases(&data), vec![9, 10, 11, 12]);
            assert_eq!(data.last_stable_offset, 13);
            assert_eq!(data.high_watermark, 13);
            assert_eq!(aborted(&data), Some(Vec::new()));
        })
    });
}

#[test]
fn an_unknown_isolation_level_fails_the_fetch_as_kafka_does() {
    run(|root| {
        Box::pin(async move {
            let (shard, _log) = shard_with_partition(&root).await;
            let response = handle(&shard, request(0, 1 << 20, 2, 0), 12).await;
            let unknown = ErrorCode::UnknownServerError.code();
            assert_eq!(response.error_code, unknown);
            let data = &response.responses[0].partitions[0];
            assert_eq!(data.error_code, unknown);
            assert_eq!(data.aborted_transactions, None);
            // From v13 the top-level error alone.
            let response = handle(&shard, request(0, 1 << 20, 2, 0), 13).await;
            assert_eq!(response.error_code, unknown);
            assert!(response.responses.is_empty());
        })
    });
}
