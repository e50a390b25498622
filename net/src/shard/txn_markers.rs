//! Writing a transaction's markers to the partitions this broker leads.

use std::rc::Rc;
use std::time::Duration;

use kaas_engine::batch::txn_marker::TxnResult;
use kaas_engine::producer_state::MarkerEpochCheck;
use kaas_engine::{PartitionId, TxnMarker};

use crate::groups::offsets_topic;
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::transactions::coordinator::{TransactionResult, TxnMarkers};
use crate::transactions::metadata::TopicPartition;
use crate::transactions::state::TransactionVersion;

/// Writes `markers` to every partition they name; true once all are written, false once
/// `still_current` says the coordinator is no longer current.
pub async fn write_markers(
    shard: &Rc<Shard>,
    markers: TxnMarkers,
    still_current: impl Fn() -> bool,
) -> bool {
    let mut pending = markers.partitions.clone();
    let mut backoff = Duration::from_millis(50);
    loop {
        if !still_current() {
            return false;
        }
        let mut left = Vec::new();
        for partition in pending {
            let code = write_one(shard, &markers, &partition).await;
            match code {
                ErrorCode::None | ErrorCode::UnknownTopicOrPartition => {}
                ErrorCode::TransactionCoordinatorFenced | ErrorCode::InvalidProducerEpoch => {
                    return false
                }
                _ => left.push(partition),
            }
        }
        if left.is_empty() {
            return true;
        }
        pending = left;
        glommio::timer::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

async fn write_one(
    shard: &Rc<Shard>,
    markers: &TxnMarkers,
    partition: &TopicPartition,
) -> ErrorCode {
    let commit = markers.result == TransactionResult::Commit;
    let (producer_id, producer_epoch) = (markers.producer_id, markers.producer_epoch);
    let view = shard.view.load();
    if partition.topic == offsets_topic::NAME {
        let target = offsets_topic::shard_of_partition(partition.partition, shard.router.shards());
        let number = partition.partition;
        return shard
            .router
            .call(shard, target, move |target| async move {
                crate::groups::txn_offsets::complete_transaction(
                    &target.groups,
                    number,
                    producer_id,
                    producer_epoch,
                    commit,
                )
                .await
            })
            .await
            .unwrap_or(ErrorCode::NotLeaderOrFollower);
    }
    let Some(topic) = view.topic(&partition.topic) else {
        return ErrorCode::UnknownTopicOrPartition;
    };
    let id = PartitionId::new(topic.name().clone(), partition.partition);
    let target = view.owner_shard(&partition.topic, partition.partition);
    drop(view);
    let marker = TxnMarker {
        producer_id,
        producer_epoch,
        coordinator_epoch: markers.coordinator_epoch,
        result: if commit {
            TxnResult::Commit
        } else {
            TxnResult::Abort
        },
        epoch_check: if markers.transaction_version == TransactionVersion::V2 {
            MarkerEpochCheck::AboveCurrent
        } else {
            MarkerEpochCheck::AtLeastCurrent
        },
    };
    shard
        .router
        .call(shard, target, move |target| async move {
            let log = match target.log(&id) {
                Ok(log) => log,
                Err(_) => return ErrorCode::NotLeaderOrFollower,
            };
            let Some(epoch) = target.open_epoch(&id) else {
                return ErrorCode::NotLeaderOrFollower;
            };
            let appended = log
                .append_txn_marker(marker, epoch, kaas_engine::log_manager::now_ms())
                .await;
            match appended {
                Ok(offset) => match log.flush_to(offset + 1).await {
                    Ok(()) => ErrorCode::None,
                    Err(_) => ErrorCode::NotLeaderOrFollower,
                },
                Err(kaas_engine::EngineError::ProducerState(error)) => {
                    tracing::debug!(?error, "marker refused");
                    match error {
                        kaas_engine::producer_state::ProducerStateError::CoordinatorFenced {
                            ..
                        } => ErrorCode::TransactionCoordinatorFenced,
                        _ => ErrorCode::InvalidProducerEpoch,
                    }
                }
                Err(_) => ErrorCode::NotLeaderOrFollower,
            }
        })
        .await
        .unwrap_or(ErrorCode::NotLeaderOrFollower)
}
