//! The answer to records that break their topic's per-record rules
//! ([`kaas_engine::batch::record_rules`]), worded as Apache Kafka 4.4 words it (checked side by
//! side): one `record_errors` entry per refused record (KIP-467), and a partition error that
//! is INVALID_TIMESTAMP when any record's timestamp is out of range, INVALID_RECORD otherwise.

use kaas_engine::batch::record_rules::{RecordFault, RecordFaultAt};
use kaas_engine::PartitionId;

use crate::protocol::messages::produce::BatchIndexAndErrorMessage;
use crate::protocol::ErrorCode;

/// How many record errors Kafka quotes in the partition's error message.
const QUOTED_RECORD_ERRORS: usize = 3;

/// The partition's error code, error message and record errors for `faults`.
pub fn refusal(
    partition: &PartitionId,
    faults: &[RecordFaultAt],
) -> (ErrorCode, String, Vec<BatchIndexAndErrorMessage>) {
    let record_errors: Vec<BatchIndexAndErrorMessage> = faults
        .iter()
        .map(|at| BatchIndexAndErrorMessage {
            batch_index: i32::try_from(at.index).unwrap_or(i32::MAX),
            batch_index_error_message: Some(fault_message(partition, &at.fault)),
        })
        .collect();
    let timestamps = faults
        .iter()
        .any(|at| matches!(at.fault, RecordFault::TimestampOutOfRange { .. }));
    if timestamps {
        let message = "One or more records have been rejected due to invalid timestamp";
        return (ErrorCode::InvalidTimestamp, message.into(), record_errors);
    }
    let quoted: Vec<String> = record_errors
        .iter()
        .take(QUOTED_RECORD_ERRORS)
        .map(|error| {
            format!(
                "RecordError(batchIndex={}, message='{}')",
                error.batch_index,
                error.batch_index_error_message.as_deref().unwrap_or("")
            )
        })
        .collect();
    let message = format!(
        "One or more records have been rejected due to {} record errors in total, and only \
         showing the first three errors at most: [{}]",
        record_errors.len(),
        quoted.join(", ")
    );
    (ErrorCode::InvalidRecord, message, record_errors)
}

fn fault_message(partition: &PartitionId, fault: &RecordFault) -> String {
    match fault {
        RecordFault::MissingKey => format!(
            "Compacted topic cannot accept message without key in topic partition {}-{}",
            partition.topic, partition.partition
        ),
        RecordFault::TimestampOutOfRange {
            timestamp,
            offset,
            earliest,
            latest,
        } => format!(
            "Timestamp {timestamp} of message with offset {offset} is out of range. The \
             timestamp should be within [{earliest}, {latest}]"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyless_records_are_invalid_record_in_kafkas_words() {
        let partition = PartitionId::new("compacted", 0);
        let faults = [1, 3].map(|index| RecordFaultAt {
            index,
            fault: RecordFault::MissingKey,
        });
        let (code, message, errors) = refusal(&partition, &faults);
        assert_eq!(code, ErrorCode::InvalidRecord);
        // Apache Kafka 4.4's answer to the same batch, byte for byte.
        assert_eq!(
            message,
            "One or more records have been rejected due to 2 record errors in total, and only \
             showing the first three errors at most: [RecordError(batchIndex=1, \
             message='Compacted topic cannot accept message without key in topic partition \
             compacted-0'), RecordError(batchIndex=3, message='Compacted topic cannot accept \
             message without key in topic partition compacted-0')]"
        );
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[1].batch_index, 3);
    }

    #[test]
    fn any_timestamp_fault_makes_it_invalid_timestamp() {
        let partition = PartitionId::new("both", 0);
        let faults = [
            RecordFaultAt {
                index: 0,
                fault: RecordFault::MissingKey,
            },
            RecordFaultAt {
                index: 1,
                fault: RecordFault::TimestampOutOfRange {
                    timestamp: 1796129112040,
                    offset: 1,
                    earliest: 1796132718231,
                    latest: 1796139918231,
                },
            },
        ];
        let (code, message, errors) = refusal(&partition, &faults);
        assert_eq!(code, ErrorCode::InvalidTimestamp);
        assert_eq!(
            message,
            "One or more records have been rejected due to invalid timestamp"
        );
        assert_eq!(
            errors[1].batch_index_error_message.as_deref(),
            Some(
                "Timestamp 1796129112040 of message with offset 1 is out of range. The \
                 timestamp should be within [1796132718231, 1796139918231]"
            )
        );
    }
}
