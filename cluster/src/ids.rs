//! The small ids the cluster logic speaks in. Each is a newtype so that a broker id cannot be
//! passed where a leader epoch is meant; all are plain data (`Send`, no runtime).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use crate::topic_id::TOPIC_ID_TEXT_LEN;
pub use crate::topic_id::{cluster_id_of, url_safe_base64, TopicId, TopicIdError};
pub use crate::topic_name::{TopicName, TopicNameError, MAX_TOPIC_NAME_LEN};

/// A broker's id (Kafka's node id; in a StatefulSet the pod's ordinal). Never negative in a
/// valid assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BrokerId(pub i32);

/// A partition: topic plus partition number (≥ 0).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// The topic.
    pub topic: TopicName,
    /// The partition number within the topic.
    pub partition: i32,
}

impl TopicPartition {
    /// Partition `partition` of `topic`.
    pub fn new(topic: TopicName, partition: i32) -> Self {
        TopicPartition { topic, partition }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// A partition's leader epoch (Kafka's `partitionLeaderEpoch`, stamped into every batch the
/// leader writes); it rises every time leadership of the partition changes hands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaderEpoch(pub i32);

/// The epoch of the controller that wrote an assignment (the Lease's `leaseTransitions`); it
/// rises every time the controller changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ControllerEpoch(pub u64);

/// An assignment's version; every assignment a controller writes has a higher one than the
/// last assignment on the volume, across controllers too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AssignmentVersion(pub u64);

/// A consumer group's id (any string, as Kafka allows).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(Arc<str>);

impl GroupId {
    /// The group called `id`.
    pub fn new(id: &str) -> Self {
        GroupId(Arc::from(id))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::borrow::Borrow<str> for GroupId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// A shard of this broker (0-based; the project's own index, not glommio's executor id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ShardIndex(pub usize);
