//! The Kafka error codes of a partition's failures: the routing answers of the shard
//! ([`PartitionError`]) and the engine's own errors, as Apache Kafka 4.4 answers each. The
//! handlers and the shard's own partition work (transaction markers) answer with these.

use kaas_engine::batch::record_rules::RecordFault;
use kaas_engine::batch::BatchError;
use kaas_engine::compression::CompressionError;
use kaas_engine::producer_state::ProducerStateError;
use kaas_engine::EngineError;

use crate::protocol::ErrorCode;
use crate::shard::partition_error::PartitionError;

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
