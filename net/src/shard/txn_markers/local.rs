//! The leader's side: writing one marker entry to the partitions this broker leads, each on
//! its owner shard (one hop per shard), with the codes Kafka 4.4's
//! `KafkaApis.handleWriteTxnMarkersRequest` and `ReplicaManager.appendRecords` answer:
//!
//! - a partition the view does not have (unknown topic, partition out of range):
//!   UNKNOWN_TOPIC_OR_PARTITION; one another broker leads, or that its owner has not opened
//!   (or gave up, or was fenced): NOT_LEADER_OR_FOLLOWER (the coordinator retries both);
//! - a log partition: the marker is appended at the epoch the partition was opened at and
//!   flushed before the answer, so NONE means durable; the engine's refusals answer
//!   INVALID_PRODUCER_EPOCH (an older producer epoch), TRANSACTION_COORDINATOR_FENCED (an
//!   older coordinator epoch), KAFKA_STORAGE_ERROR (I/O), NOT_LEADER_OR_FOLLOWER (closed or
//!   fenced log) ([`crate::shard::error_codes`]);
//! - a `__consumer_offsets` partition: the group coordinator of its shard completes the
//!   producer's pending transactional offsets ([`complete_transaction`]), its "not available"
//!   answers turned into NOT_LEADER_OR_FOLLOWER as Kafka turns them.
//!
//! A shard that stopped (shut-down) answers NOT_LEADER_OR_FOLLOWER for its partitions.

use std::collections::BTreeMap;
use std::rc::Rc;

use kaas_engine::batch::txn_marker::TxnResult;
use kaas_engine::{PartitionId, TxnMarker};

use super::MarkerEntry;
use crate::groups::offsets_topic;
use crate::groups::txn_offsets::complete_transaction;
use crate::model::cluster_view::{ClusterView, Leadership};
use crate::protocol::ErrorCode;
use crate::shard::error_codes::{error_code, partition_error_code};
use crate::shard::Shard;
use crate::transactions::metadata::TopicPartition;

/// Where a partition's marker goes on its owner shard.
enum Target {
    /// A partition log.
    Log(PartitionId),
    /// A `__consumer_offsets` partition: its groups' pending offsets.
    Offsets(i32),
}

/// Writes `entry` to each of its partitions this broker leads and answers a code per
/// partition, in the entry's order (see the module doc).
pub async fn write_here(
    shard: &Rc<Shard>,
    entry: &MarkerEntry,
) -> Vec<(TopicPartition, ErrorCode)> {
    let view = shard.view.load();
    let shards = shard.router.shards().max(1);
    let mut codes = vec![ErrorCode::None; entry.partitions.len()];
    let mut by_shard: BTreeMap<usize, Vec<(usize, Target)>> = BTreeMap::new();
    for (index, partition) in entry.partitions.iter().enumerate() {
        match resolve(&view, partition, shards) {
            Ok((owner, target)) => by_shard.entry(owner).or_default().push((index, target)),
            Err(code) => codes[index] = code,
        }
    }
    let marker = TxnMarker {
        producer_id: entry.producer_id,
        producer_epoch: entry.producer_epoch,
        coordinator_epoch: entry.coordinator_epoch,
        result: if entry.commit {
            TxnResult::Commit
        } else {
            TxnResult::Abort
        },
        epoch_check: entry.epoch_check(),
    };
    let hops = by_shard.into_iter().map(|(owner, targets)| async move {
        let indexes: Vec<usize> = targets.iter().map(|(index, _)| *index).collect();
        let written = shard
            .router
            .call(shard, owner, move |owner| async move {
                let mut codes = Vec::with_capacity(targets.len());
                for (index, target) in targets {
                    codes.push((index, write_on_owner(&owner, target, marker).await));
                }
                codes
            })
            .await;
        written.unwrap_or_else(|| {
            indexes
                .into_iter()
                .map(|index| (index, ErrorCode::NotLeaderOrFollower))
                .collect()
        })
    });
    for (index, code) in futures_util::future::join_all(hops)
        .await
        .into_iter()
        .flatten()
    {
        codes[index] = code;
    }
    entry.partitions.iter().cloned().zip(codes).collect()
}

/// The owner shard of a partition this broker leads, or the code of one it does not.
fn resolve(
    view: &ClusterView,
    partition: &TopicPartition,
    shards: usize,
) -> Result<(usize, Target), ErrorCode> {
    let offsets = offsets_topic::is_offsets_topic(&partition.topic);
    let leadership = if offsets {
        offsets_topic::leadership(view, partition.partition)
    } else {
        view.leadership(&partition.topic, partition.partition)
    };
    match leadership {
        Leadership::Unknown => Err(ErrorCode::UnknownTopicOrPartition),
        Leadership::Elsewhere => Err(ErrorCode::NotLeaderOrFollower),
        Leadership::Here { .. } if offsets => Ok((
            offsets_topic::shard_of_partition(partition.partition, shards),
            Target::Offsets(partition.partition),
        )),
        Leadership::Here { .. } => Ok((
            view.owner_shard(&partition.topic, partition.partition)
                .min(shards - 1),
            Target::Log(PartitionId::new(
                partition.topic.as_str(),
                partition.partition,
            )),
        )),
    }
}

/// Writes the marker to one partition on its owner shard.
async fn write_on_owner(shard: &Rc<Shard>, target: Target, marker: TxnMarker) -> ErrorCode {
    match target {
        Target::Offsets(partition) => {
            complete_transaction(
                &shard.groups,
                partition,
                marker.producer_id,
                marker.producer_epoch,
                marker.result == TxnResult::Commit,
            )
            .await
        }
        Target::Log(id) => match append_durably(shard, &id, marker).await {
            Ok(()) => ErrorCode::None,
            Err(code) => code,
        },
    }
}

/// Appends the marker to `id`'s log at its open epoch and flushes it.
async fn append_durably(
    shard: &Rc<Shard>,
    id: &PartitionId,
    marker: TxnMarker,
) -> Result<(), ErrorCode> {
    let log = shard
        .log(id)
        .map_err(|error| partition_error_code(&error))?;
    let leader_epoch = shard.open_epoch(id).ok_or(ErrorCode::NotLeaderOrFollower)?;
    let now_ms = kaas_engine::log_manager::now_ms();
    let offset = log
        .append_txn_marker(marker, leader_epoch, now_ms)
        .await
        .map_err(|error| error_code(&error))?;
    log.flush_to(offset + 1)
        .await
        .map_err(|error| error_code(&error))
}
