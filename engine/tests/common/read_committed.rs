//! Transactional batches for tests, and what a read-committed consumer makes of fetched
//! batches and the aborted transactions a fetch lists (Kafka's consumer `Fetcher`).

use std::collections::{BTreeSet, HashSet};

use kaas_engine::batch::txn_marker::{parse_marker, TxnResult};
use kaas_engine::batch::{self, BatchHeader};
use kaas_engine::AbortedTransaction;

use super::{ProducerSpec, ReadBatch};

/// [`super::batch`] with the transactional bit set (CRC recomputed).
pub fn transactional_batch(
    seed: u64,
    records: usize,
    value_len: usize,
    timestamp: i64,
    producer: ProducerSpec,
) -> Vec<u8> {
    let mut bytes = super::batch(seed, records, value_len, timestamp, Some(producer));
    batch::set_transactional_for_tests(&mut bytes);
    bytes
}

/// The base offsets of the data batches a read-committed consumer keeps of `batches`
/// (consecutive, as fetched) given the fetch's aborted transactions, as Kafka's consumer
/// reads them: at each batch with a producer id, the aborted transactions beginning at or
/// before its last offset mark their producers aborting; a transactional batch of an
/// aborting producer is dropped; its ABORT marker ends that; control batches are never
/// records.
pub fn visible_batches(batches: &[ReadBatch], aborted: &[AbortedTransaction]) -> Vec<u64> {
    let mut pending: BTreeSet<(u64, i64)> = aborted
        .iter()
        .map(|a| (a.first_offset, a.producer_id))
        .collect();
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut visible = Vec::new();
    for found in batches {
        let header = BatchHeader::parse(&found.bytes).expect("header");
        if header.has_producer_id() {
            while let Some(&(first, producer_id)) = pending.first() {
                if first as i64 > header.last_offset() {
                    break;
                }
                pending.pop_first();
                aborting.insert(producer_id);
            }
        }
        if header.is_control() {
            let records = &found.bytes[batch::BATCH_HEADER_LEN..];
            if let Some(marker) = parse_marker(&header, records) {
                if marker.result == TxnResult::Abort {
                    aborting.remove(&header.producer_id);
                }
            }
            continue;
        }
        if header.is_transactional() && aborting.contains(&header.producer_id) {
            continue;
        }
        visible.push(found.base_offset);
    }
    visible
}
