//! Topic changes as plain data: what a broker asks whoever keeps the cluster's topic list to
//! do (in cluster mode the KafkaTopic resources, served on the cluster core's runtime; a
//! standalone broker's own `topics.json`, served on its shard 0), and the answer, a Kafka
//! error code and message.
//!
//! The broker validates a change completely before it sends it (names, partition counts,
//! configs: the same rules as a standalone broker), makes the topic id of a new topic, and
//! never sends a validate-only request; the server only checks what the topic list alone
//! knows (does the topic exist, how many partitions does it have now). The reply travels in a
//! callback so this crate needs no channel type: the broker's callback completes a oneshot
//! its request handler awaits, and a request dropped unanswered (the server stopped) drops
//! that oneshot's sender, which the handler sees as an error.

use std::collections::BTreeMap;
use std::fmt;

use crate::ids::{TopicId, TopicName};

/// The Kafka error codes a topic change can be refused with (wire numbers, Kafka's `Errors`).
pub mod codes {
    /// UNKNOWN_SERVER_ERROR.
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    /// UNKNOWN_TOPIC_OR_PARTITION.
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    /// REQUEST_TIMED_OUT.
    pub const REQUEST_TIMED_OUT: i16 = 7;
    /// TOPIC_ALREADY_EXISTS.
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    /// INVALID_PARTITIONS.
    pub const INVALID_PARTITIONS: i16 = 37;
    /// INVALID_CONFIG.
    pub const INVALID_CONFIG: i16 = 40;
    /// INVALID_REQUEST.
    pub const INVALID_REQUEST: i16 = 42;
    /// KAFKA_STORAGE_ERROR.
    pub const KAFKA_STORAGE_ERROR: i16 = 56;
}

/// One topic change, validated by the broker that sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopicChange {
    /// Create a topic (CreateTopics, or auto-creation on Metadata).
    Create {
        /// The topic.
        topic: TopicName,
        /// Its partition count (at least 1).
        partitions: i32,
        /// The id the broker made for it.
        topic_id: TopicId,
        /// Config overrides (Kafka names, validated values).
        configs: BTreeMap<String, String>,
    },
    /// Delete a topic (DeleteTopics).
    Delete {
        /// The topic.
        topic: TopicName,
    },
    /// Raise a topic's partition count (CreatePartitions).
    AddPartitions {
        /// The topic.
        topic: TopicName,
        /// The new partition count, which must be above the current one.
        count: i32,
    },
    /// Change a topic's config overrides (IncrementalAlterConfigs): the keys the request
    /// changed, each set (`Some`) or removed (`None`); keys not named stay as they are.
    AlterConfigs {
        /// The topic.
        topic: TopicName,
        /// The changed keys.
        configs: BTreeMap<String, Option<String>>,
    },
    /// Replace a topic's config overrides as a whole (legacy AlterConfigs): `configs` is the
    /// new full set, and a key it does not name goes back to its default, whoever set it.
    /// The server replaces the stored set itself, so no diff against the sending broker's
    /// (possibly stale) view is involved.
    ReplaceConfigs {
        /// The topic.
        topic: TopicName,
        /// Every override the topic has afterwards.
        configs: BTreeMap<String, String>,
    },
    /// Replace a consumer group's config overrides as a whole (AlterConfigs and
    /// IncrementalAlterConfigs on a GROUP resource, after the broker applied them): the
    /// group's full set afterwards; an empty set removes them.
    ReplaceGroupConfigs {
        /// The group id.
        group: String,
        /// Every override the group has afterwards.
        configs: BTreeMap<String, String>,
    },
}

impl TopicChange {
    /// The topic the change is about (`None` for a group's configs).
    pub fn topic(&self) -> Option<&TopicName> {
        match self {
            TopicChange::Create { topic, .. }
            | TopicChange::Delete { topic }
            | TopicChange::AddPartitions { topic, .. }
            | TopicChange::AlterConfigs { topic, .. }
            | TopicChange::ReplaceConfigs { topic, .. } => Some(topic),
            TopicChange::ReplaceGroupConfigs { .. } => None,
        }
    }
}

/// Why a topic change was refused: the Kafka error code to answer with and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicChangeRefusal {
    /// A Kafka error code ([`codes`]).
    pub code: i16,
    /// For the client.
    pub message: String,
}

impl TopicChangeRefusal {
    /// A refusal with `code` and `message`.
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        TopicChangeRefusal {
            code,
            message: message.into(),
        }
    }
}

/// The answer to a topic change: done, or refused.
pub type TopicChangeAnswer = Result<(), TopicChangeRefusal>;

/// The callback that carries the answer back to the broker.
type Reply = Box<dyn FnOnce(TopicChangeAnswer) + Send>;

/// A topic change and the way back for its answer.
pub struct TopicChangeRequest {
    /// What to change.
    pub change: TopicChange,
    reply: Reply,
}

impl TopicChangeRequest {
    /// A request whose answer goes to `reply` (called at most once; dropped unanswered when
    /// the request is).
    pub fn new(
        change: TopicChange,
        reply: impl FnOnce(TopicChangeAnswer) + Send + 'static,
    ) -> Self {
        TopicChangeRequest {
            change,
            reply: Box::new(reply),
        }
    }

    /// Answers the request.
    pub fn answer(self, answer: TopicChangeAnswer) {
        (self.reply)(answer);
    }
}

impl fmt::Debug for TopicChangeRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TopicChangeRequest")
            .field("change", &self.change)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn the_answer_reaches_the_reply_once() {
        let (sender, answers) = mpsc::channel();
        let topic = TopicName::new("orders").expect("legal");
        let request = TopicChangeRequest::new(TopicChange::Delete { topic }, move |answer| {
            let _ = sender.send(answer);
        });
        assert_eq!(
            request.change.topic().map(TopicName::as_str),
            Some("orders")
        );
        request.answer(Err(TopicChangeRefusal::new(
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            "gone",
        )));
        assert_eq!(
            answers.recv().expect("answered"),
            Err(TopicChangeRefusal::new(3, "gone"))
        );
        assert!(answers.recv().is_err(), "the reply is called once");
    }

    #[test]
    fn a_dropped_request_drops_its_reply() {
        let (sender, answers) = mpsc::channel::<TopicChangeAnswer>();
        let topic = TopicName::new("orders").expect("legal");
        drop(TopicChangeRequest::new(
            TopicChange::Delete { topic },
            move |answer| {
                let _ = sender.send(answer);
            },
        ));
        assert!(answers.recv().is_err(), "nobody will answer");
    }
}
