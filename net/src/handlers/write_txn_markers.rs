//! WriteTxnMarkers (key 27): a transaction coordinator (or an admin's `abortTransaction`,
//! which Kafka's `kafka-transactions.sh abort` sends straight to a partition leader) has
//! this broker write commit or abort markers to the partitions it leads.
//!
//! Each marker is written in request order ([`crate::shard::txn_markers::write_here`]: the
//! owner shard's log, durable before the answer, or the group coordinator for
//! `__consumer_offsets`); the codes are Kafka 4.4's (see that module). As in Kafka, the
//! response has one result per producer id, the partitions of markers with the same producer
//! id merged (a later answer for a partition replaces an earlier one), topics in the order
//! first named.

use std::rc::Rc;

use crate::protocol::messages::write_txn_markers::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::txn_markers::{from_wire, write_here};
use crate::shard::Shard;
use crate::transactions::metadata::TopicPartition;

/// Answers WriteTxnMarkers.
pub async fn handle(shard: &Rc<Shard>, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let mut results: Vec<WritableTxnMarkerResult> = Vec::new();
    for marker in &request.markers {
        let entry = from_wire(marker);
        for (partition, code) in write_here(shard, &entry).await {
            record(&mut results, entry.producer_id, partition, code);
        }
    }
    WriteTxnMarkersResponse { markers: results }
}

/// Puts `partition`'s code under `producer_id`, replacing an earlier one for it. A producer
/// id gets a result with its first partition (a marker naming none has no result, as in
/// Kafka).
fn record(
    results: &mut Vec<WritableTxnMarkerResult>,
    producer_id: i64,
    partition: TopicPartition,
    code: ErrorCode,
) {
    let at = match results.iter().position(|r| r.producer_id == producer_id) {
        Some(at) => at,
        None => {
            results.push(WritableTxnMarkerResult {
                producer_id,
                topics: Vec::new(),
            });
            results.len() - 1
        }
    };
    let result = &mut results[at];
    let at = match result
        .topics
        .iter()
        .position(|topic| topic.name == partition.topic)
    {
        Some(at) => at,
        None => {
            result.topics.push(WritableTxnMarkerTopicResult {
                name: partition.topic.clone(),
                partitions: Vec::new(),
            });
            result.topics.len() - 1
        }
    };
    let partitions = &mut result.topics[at].partitions;
    match partitions
        .iter_mut()
        .find(|answer| answer.partition_index == partition.partition)
    {
        Some(answer) => answer.error_code = code.code(),
        None => partitions.push(WritableTxnMarkerPartitionResult {
            partition_index: partition.partition,
            error_code: code.code(),
        }),
    }
}

#[cfg(test)]
mod tests;
