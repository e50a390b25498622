//! One module per Kafka API: each turns a decoded request into a response.
//!
//! Partition-scoped APIs (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords,
//! DescribeLogDirs, DescribeProducers) go through one pipeline ([`partition_request`]):
//! resolve each partition against the view, hop once per owner shard, gather; topic
//! changes hop to shard 0, where the topic admin runs; group APIs hop to the group's
//! coordinator shard ([`group_hop`]).

pub mod acl_requests;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod api_versions;
pub mod authorized_operations;
pub mod cluster_metadata;
pub mod config_alteration;
pub mod config_changes;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_transactions;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod group_hop;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod partition_request;
pub mod produce;
pub mod sync_group;
pub mod transaction_hop;
pub mod transaction_verification;
pub mod txn_offset_commit;

use std::future::Future;
use std::rc::Rc;

use kaas_engine::batch::record_rules::RecordFault;
use kaas_engine::batch::BatchError;
use kaas_engine::compression::CompressionError;
use kaas_engine::producer_state::ProducerStateError;
use kaas_engine::EngineError;

use crate::protocol::ErrorCode;
use crate::shard::partition_error::PartitionError;
use crate::shard::Shard;
use crate::topics::checks::TopicError;
use crate::topics::topic_changes::{self, TopicChanges};

/// The Kafka error code for a partition a shard cannot serve.
pub fn partition_error_code(error: &PartitionError) -> ErrorCode {
    match error {
        PartitionError::NotLeader => ErrorCode::NotLeaderOrFollower,
        PartitionError::NotServed => ErrorCode::UnknownTopicOrPartition,
        PartitionError::Engine(error) => error_code(error),
    }
}

/// The Kafka error code for an engine failure.
pub fn error_code(error: &EngineError) -> ErrorCode {
    match error {
        EngineError::InvalidBatch(batch) => batch_error_code(batch),
        EngineError::ProducerState(ProducerStateError::ProducerFenced { .. }) => {
            ErrorCode::InvalidProducerEpoch
        }
        EngineError::ProducerState(ProducerStateError::InvalidTxnState { .. }) => {
            ErrorCode::InvalidTxnState
        }
        EngineError::ProducerState(ProducerStateError::CoordinatorFenced { .. }) => {
            ErrorCode::TransactionCoordinatorFenced
        }
        EngineError::ProducerState(_) => ErrorCode::OutOfOrderSequenceNumber,
        EngineError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        EngineError::Closed | EngineError::Fenced { .. } => ErrorCode::NotLeaderOrFollower,
        EngineError::Poisoned(_) | EngineError::Corrupt { .. } | EngineError::Io { .. } => {
            ErrorCode::KafkaStorageError
        }
    }
}

/// The Kafka error code for a refused batch: what Apache Kafka 4.4 answers for each case
/// (checked side by side with hand-built batches). Damage in transit (CRC, a `batchLength`
/// too small for a header) is CORRUPT_MESSAGE, which producers retry; a batch that breaks the
/// format's rules is INVALID_RECORD, which they do not. Kafka answers UNKNOWN_SERVER_ERROR
/// for an undefined codec id and for records that do not decompress (its decoders' exceptions
/// reach the produce path unmapped); kaas answers the same, with an error message naming
/// the cause. A batch that decompresses past the maximum batch size (a rule of kaas's: Kafka
/// does not cap decompression) is MESSAGE_TOO_LARGE, so a producer splits it and sends again.
pub fn batch_error_code(error: &BatchError) -> ErrorCode {
    match error {
        BatchError::CrcMismatch { .. } | BatchError::BadLength(_) => ErrorCode::CorruptMessage,
        BatchError::TooLarge { .. }
        | BatchError::Compression(CompressionError::TooLarge { .. }) => ErrorCode::MessageTooLarge,
        BatchError::InvalidCompression(_)
        | BatchError::Compression(CompressionError::Corrupt { .. })
        | BatchError::Compression(CompressionError::Encode { .. }) => ErrorCode::UnknownServerError,
        BatchError::Empty
        | BatchError::Truncated { .. }
        | BatchError::UnsupportedMagic(_)
        | BatchError::RecordCountMismatch { .. }
        | BatchError::InvalidRecords(_)
        | BatchError::OffsetDeltaMismatch { .. }
        | BatchError::ControlBatch
        | BatchError::RecordTooLarge { .. }
        | BatchError::MissingSequence { .. } => ErrorCode::InvalidRecord,
        BatchError::RecordsRefused(faults) => {
            let timestamps = faults
                .iter()
                .any(|at| matches!(at.fault, RecordFault::TimestampOutOfRange { .. }));
            if timestamps {
                ErrorCode::InvalidTimestamp
            } else {
                ErrorCode::InvalidRecord
            }
        }
    }
}

/// Runs a topic change on shard 0, where the topic changes live (the way to whoever keeps the
/// topic list: a standalone broker's own controller, or the cluster core's KafkaTopic
/// service).
pub async fn with_topic_changes<R, F, Fut>(shard: &Rc<Shard>, change: F) -> Result<R, TopicError>
where
    F: FnOnce(Rc<Shard>, Rc<TopicChanges>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, TopicError>> + 'static,
    R: Send + 'static,
{
    let result = shard
        .router
        .call(shard, 0, move |admin_shard| async move {
            let Some(changes) = topic_changes::on_this_shard() else {
                return Err(TopicError {
                    code: ErrorCode::NotController,
                    message: "topic changes run on shard 0".into(),
                });
            };
            change(admin_shard, changes).await
        })
        .await;
    result.unwrap_or_else(|| {
        Err(TopicError {
            code: ErrorCode::UnknownServerError,
            message: "broker is shutting down".into(),
        })
    })
}

/// Wall-clock milliseconds (Kafka timestamps).
pub fn now_ms() -> i64 {
    kaas_engine::log_manager::now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactional_producer_errors_get_kafkas_codes() {
        let open = EngineError::ProducerState(ProducerStateError::InvalidTxnState {
            producer_id: 7,
            first_offset: 3,
        });
        assert_eq!(error_code(&open), ErrorCode::InvalidTxnState);
        let stale = EngineError::ProducerState(ProducerStateError::CoordinatorFenced {
            producer_id: 7,
            coordinator_epoch: 1,
            current: 2,
        });
        assert_eq!(error_code(&stale), ErrorCode::TransactionCoordinatorFenced);
    }
}
