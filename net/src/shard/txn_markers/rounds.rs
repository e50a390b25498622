//! What a coordinator does with the answers of one round of marker writes: the partitions
//! written, the ones to try again, and the answers that mean it is stale. Plain functions,
//! no I/O: Kafka 4.4's `TransactionMarkerRequestCompletionHandler` and
//! `TransactionMarkerChannelManager` rules.
//!
//! - NONE: written.
//! - UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
//!   REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR: retried (the next round finds the new leader,
//!   or sees the topic gone).
//! - INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: a newer producer epoch or
//!   coordinator wrote to the partition; this coordinator is stale and stops.
//! - UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION: the partition is dropped from the
//!   transaction, as written (its producer could not have written to it).
//! - No answer (connection refused or lost, timed out, an answer that does not decode or
//!   does not name the partition) and no leader in the view: retried, as Kafka retries a
//!   disconnected request and waits for a leader.
//! - A topic the view no longer has: written (Kafka drops the partitions of a deleted topic).
//! - Anything else (Kafka's "unexpected" errors, on which it throws and leaves the
//!   transaction to a coordinator reload; COORDINATOR_LOAD_IN_PROGRESS; a code unknown to
//!   this broker): retried, so no transaction completes without its markers; the coordinator
//!   stops the work once it is no longer current.

use crate::protocol::ErrorCode;
use crate::transactions::metadata::TopicPartition;

/// What became of one partition's marker in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerAnswer {
    /// The leader (this broker or another) answered this code.
    Answered(ErrorCode),
    /// The leader answered a code this broker does not know.
    UnknownCode(i16),
    /// No answer: the connection failed or timed out, or the answer did not decode or did not
    /// name the partition.
    NoAnswer,
    /// The view names no reachable leader (no assignment yet, or a leader without an
    /// endpoint).
    NoLeader,
    /// The view no longer has the partition's topic (deleted).
    TopicGone,
}

/// What to do about one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Done with it.
    Written,
    /// Try again next round.
    Retry,
    /// A newer producer epoch or coordinator wrote: this coordinator is stale.
    Stale,
}

/// What a round's answers mean for the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoundOutcome {
    /// Every partition is done.
    AllWritten,
    /// These partitions are to be written again (and none said stale).
    Retry(Vec<TopicPartition>),
    /// This partition's leader said the coordinator is stale: stop.
    Stale(TopicPartition),
}

/// The verdict on one answer (the module doc lists the rules).
pub fn verdict(answer: MarkerAnswer) -> Verdict {
    match answer {
        MarkerAnswer::TopicGone => Verdict::Written,
        MarkerAnswer::NoAnswer | MarkerAnswer::NoLeader | MarkerAnswer::UnknownCode(_) => {
            Verdict::Retry
        }
        MarkerAnswer::Answered(code) => match code {
            ErrorCode::None
            | ErrorCode::UnsupportedForMessageFormat
            | ErrorCode::UnsupportedVersion => Verdict::Written,
            ErrorCode::InvalidProducerEpoch | ErrorCode::TransactionCoordinatorFenced => {
                Verdict::Stale
            }
            _ => Verdict::Retry,
        },
    }
}

/// The outcome of a round: stale as soon as one answer is, else the partitions to retry (in
/// the order given), else all written.
pub fn after_round(answers: Vec<(TopicPartition, MarkerAnswer)>) -> RoundOutcome {
    let mut retry = Vec::new();
    for (partition, answer) in answers {
        match verdict(answer) {
            Verdict::Written => {}
            Verdict::Retry => retry.push(partition),
            Verdict::Stale => return RoundOutcome::Stale(partition),
        }
    }
    if retry.is_empty() {
        RoundOutcome::AllWritten
    } else {
        RoundOutcome::Retry(retry)
    }
}
