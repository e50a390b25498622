//! Tests of list_offsets.rs at both isolation levels, on a real shard 0 whose partition holds
//! an open transaction.

use super::*;
use crate::protocol::messages::list_offsets::{ListOffsetsPartition, ListOffsetsTopic};
use crate::shard::test_support::{
    append_batch, open_log, producer_batch, run, shard_zero, standalone_view, topic, TEST_NOW_MS,
};

/// ListOffsets of `t`-0 for `timestamp`: (error, offset, timestamp).
async fn list(shard: &Rc<Shard>, timestamp: i64, isolation_level: i8) -> (i16, i64, i64) {
    let request = ListOffsetsRequest {
        replica_id: -1,
        isolation_level,
        topics: vec![ListOffsetsTopic {
            name: "t".into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                timestamp,
                ..Default::default()
            }],
        }],
        ..Default::default()
    };
    let response = handle(shard, request).await;
    let answer = &response.topics[0].partitions[0];
    (answer.error_code, answer.offset, answer.timestamp)
}

#[test]
fn read_committed_lookups_stop_at_the_last_stable_offset() {
    run(|root| {
        Box::pin(async move {
            let topic = topic("t", 1);
            let shard = shard_zero(&root, standalone_view(1, &[topic]));
            let log = open_log(&shard, &root, "t", 0).await;
            // A plain batch at 0, producer 3's open transaction at 1, a plain batch at 2,
            // stamped 1, 2 and 3 seconds after the first.
            let t0 = TEST_NOW_MS - 10_000;
            append_batch(&log, &producer_batch(1, t0 + 1_000, -1, -1, false)).await;
            append_batch(&log, &producer_batch(1, t0 + 2_000, 3, 0, true)).await;
            append_batch(&log, &producer_batch(1, t0 + 3_000, -1, -1, false)).await;
            log.flush_to(3).await.expect("flushed");
            let none = (0, -1, -1);

            // LATEST: the high watermark, or the last stable offset.
            assert_eq!(list(&shard, LATEST, 0).await, (0, 3, -1));
            assert_eq!(list(&shard, LATEST, 1).await, (0, 1, -1));
            // EARLIEST is not bounded.
            assert_eq!(list(&shard, EARLIEST, 1).await, (0, 0, -1));
            // A timestamp found at or past the last stable offset is no offset.
            assert_eq!(list(&shard, t0 + 1_000, 1).await, (0, 0, t0 + 1_000));
            assert_eq!(list(&shard, t0 + 2_000, 0).await, (0, 1, t0 + 2_000));
            assert_eq!(list(&shard, t0 + 2_000, 1).await, none);
            assert_eq!(list(&shard, MAX_TIMESTAMP, 0).await, (0, 2, t0 + 3_000));
            assert_eq!(list(&shard, MAX_TIMESTAMP, 1).await, none);
            // Kafka without remote storage.
            assert_eq!(list(&shard, LATEST_TIERED, 0).await, none);
            // A level Kafka does not know.
            let unknown = ErrorCode::UnknownServerError.code();
            assert_eq!(list(&shard, LATEST, 2).await, (unknown, -1, -1));
        })
    });
}
