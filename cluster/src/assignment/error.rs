//! Why an `assignment.json` was refused. The caller keeps its last good assignment and logs
//! the error, which names the offending topic, partition, broker or group.

use crate::ids::{BrokerId, TopicIdError, TopicNameError};

/// A refused assignment file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    /// The bytes end before the JSON does: a torn or half-written file.
    #[error("assignment ends early (torn or half-written file): {0}")]
    Truncated(String),
    /// The bytes are not JSON (or not UTF-8).
    #[error("assignment is not valid JSON: {0}")]
    Syntax(String),
    /// JSON, but not the assignment's shape (a missing field, a wrong type, a duplicate key,
    /// a negative epoch or version).
    #[error("assignment does not have the expected shape: {0}")]
    Shape(String),
    /// A `format` this build does not know.
    #[error("assignment format {0} is not known (this build reads format 1)")]
    UnknownFormat(u32),
    /// A broker id below zero.
    #[error("broker id {0} is negative")]
    NegativeBrokerId(i32),
    /// Two brokers with one id.
    #[error("broker {0:?} is listed twice")]
    DuplicateBroker(BrokerId),
    /// A broker clients could not reach.
    #[error("broker {broker:?} has an unusable endpoint: {reason}")]
    BadEndpoint {
        /// The broker.
        broker: BrokerId,
        /// What is wrong (empty host, port 0).
        reason: &'static str,
    },
    /// A topic name Kafka would refuse.
    #[error("topic {name:?}: {reason}")]
    BadTopicName {
        /// The name as written.
        name: String,
        /// Which rule it breaks.
        reason: TopicNameError,
    },
    /// A topic id that is not Kafka's text form of a usable id.
    #[error("topic {topic:?} has id {id:?}: {reason}")]
    BadTopicId {
        /// The topic.
        topic: String,
        /// The id as written.
        id: String,
        /// Why it is refused.
        reason: TopicIdError,
    },
    /// Two topics with one id.
    #[error("topics {first:?} and {second:?} have the same id {id}")]
    DuplicateTopicId {
        /// The id.
        id: String,
        /// One topic holding it.
        first: String,
        /// The other.
        second: String,
    },
    /// A partition count below one.
    #[error("topic {topic:?} has {count} partitions; a topic has at least one")]
    BadPartitionCount {
        /// The topic.
        topic: String,
        /// The count as written.
        count: i32,
    },
    /// A topic with no entry in `partitions`.
    #[error("topic {0:?} is in \"topics\" but not in \"partitions\"")]
    TopicWithoutLeaders(String),
    /// Leaders listed for a topic that `topics` does not have.
    #[error("\"partitions\" lists topic {0:?}, which is not in \"topics\"")]
    LeadersOfUnknownTopic(String),
    /// `partitions[topic]` has a different length than the topic's partition count.
    #[error("topic {topic:?} has {declared} partitions but {listed} leaders are listed")]
    PartitionCountMismatch {
        /// The topic.
        topic: String,
        /// Its `partitions` count.
        declared: i32,
        /// Entries in `partitions[topic]`.
        listed: usize,
    },
    /// A leader that is not in `brokers`.
    #[error(
        "partition {topic}-{partition} is led by broker {leader}, which is not in \"brokers\""
    )]
    UnknownLeader {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The broker named.
        leader: i32,
    },
    /// A leader epoch below zero.
    #[error("partition {topic}-{partition} has leader epoch {epoch}; epochs start at 0")]
    NegativeLeaderEpoch {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The epoch as written.
        epoch: i32,
    },
    /// A group placed on a broker that is not in `brokers`.
    #[error("group {group:?} is placed on broker {broker}, which is not in \"brokers\"")]
    UnknownGroupBroker {
        /// The group.
        group: String,
        /// The broker named.
        broker: i32,
    },
}

impl AssignmentError {
    /// Sorts a JSON parse error into torn, not-JSON or wrong-shape.
    pub(crate) fn from_json(error: &serde_json::Error) -> Self {
        let message = error.to_string();
        match error.classify() {
            serde_json::error::Category::Eof => AssignmentError::Truncated(message),
            serde_json::error::Category::Data => AssignmentError::Shape(message),
            serde_json::error::Category::Syntax | serde_json::error::Category::Io => {
                AssignmentError::Syntax(message)
            }
        }
    }
}
