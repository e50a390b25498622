//! The assignment: which broker leads every partition and coordinates every named consumer
//! group, as decided by the controller and stored in `<data>/__cluster/assignment.json`.
//!
//! # `assignment.json`, format 1
//!
//! Operators and tools read this file too, so its shape is a contract:
//!
//! ```json
//! {"format": 1, "controller_epoch": 3, "assignment_version": 17,
//!  "brokers": [{"id": 0, "host": "127.0.0.1", "port": 19092}],
//!  "topics": {"orders": {"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 2,
//!                        "configs": {"retention.ms": "86400000"}}},
//!  "partitions": {"orders": [{"leader": 0, "leader_epoch": 3}, {"leader": 0, "leader_epoch": 3}]},
//!  "consumerGroups": {"billing": 0}}
//! ```
//!
//! - `format` — the file format, `1`. A reader refuses a format it does not know rather than
//!   guess at it.
//! - `controller_epoch` — the epoch (≥ 0) of the controller that wrote the file: the Lease's
//!   `leaseTransitions`. A broker never applies a file whose epoch is below the highest it has
//!   seen (see [`crate::follower`]), so a deposed controller cannot roll the cluster back.
//! - `assignment_version` — the version (≥ 0) of this assignment. Every file written has a
//!   higher version than the one it replaces, also when the controller changes: a new
//!   controller reads the current file and continues from its version.
//! - `brokers` — every broker of the cluster: `id` (Kafka's node id, ≥ 0, unique), `host` and
//!   `port` (what Metadata tells clients; host not empty, port not 0). Order carries no meaning.
//! - `topics` — every topic by name (Kafka's topic name rules): `id` (the topic id as Kafka
//!   prints it, 22 characters of URL-safe base64, unique, not one of Kafka's two reserved
//!   ids), `partitions` (≥ 1) and `configs` (topic config overrides, Kafka's names and
//!   string values; may be omitted when empty).
//! - `partitions` — for every topic of `topics` and no other, exactly `partitions` entries;
//!   entry `i` is partition `i`: `leader` (a broker of `brokers`) and `leader_epoch` (≥ 0, the
//!   epoch the leader stamps into what it writes; it rises whenever the partition changes
//!   hands).
//! - `consumerGroups` — group id → the broker (of `brokers`) coordinating it. A group not
//!   named here is placed by [`crate::placement::fallback_coordinator`]. May be omitted when
//!   empty.
//!
//! Readers ignore fields they do not know, so later formats may add fields without a new
//! `format`; a key that appears twice in one object is refused.
//!
//! # Writing and reading
//!
//! The writer serialises the whole assignment ([`Assignment::to_json`]), writes it to a new
//! temporary file in `__cluster/`, `fsync`s that file, renames it over `assignment.json` and
//! `fsync`s the directory. A crash at any point leaves either the old file or the new one in
//! place, never a mix; a leftover temporary file is garbage that readers never open.
//!
//! A reader reads the whole file and parses it with [`Assignment::from_json`]. A file that is
//! torn, not JSON, of an unknown format or inconsistent (any rule above broken) is refused
//! with an [`AssignmentError`] naming why; the reader then keeps the last good assignment it
//! has and logs the error. A good file is then offered to [`crate::follower`], which applies
//! it only if it is newer.

mod error;
mod file_form;
mod validate;

use std::collections::BTreeMap;

pub use error::AssignmentError;
pub use file_form::{AssignmentFile, BrokerFile, PartitionFile, TopicFile};

use crate::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, GroupId, LeaderEpoch, TopicId, TopicName,
    TopicPartition,
};

/// The file format this build reads and writes.
pub const FORMAT: u32 = 1;

/// A checked assignment: every cross-reference of the file holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    controller_epoch: ControllerEpoch,
    version: AssignmentVersion,
    brokers: BTreeMap<BrokerId, BrokerEndpoint>,
    topics: BTreeMap<TopicName, TopicAssignment>,
    groups: BTreeMap<GroupId, BrokerId>,
}

/// A broker and where clients reach it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BrokerEndpoint {
    /// Broker id.
    pub id: BrokerId,
    /// Advertised host.
    pub host: String,
    /// Advertised Kafka port.
    pub port: u16,
}

/// One topic: its id, configs and every partition's leader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicAssignment {
    /// Topic id.
    pub id: TopicId,
    /// Config overrides (Kafka names and string values).
    pub configs: BTreeMap<String, String>,
    /// Entry `i` is partition `i`; never empty.
    pub partitions: Vec<PartitionLeader>,
}

/// Who leads a partition, and at which epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PartitionLeader {
    /// The leading broker (one of the assignment's brokers).
    pub leader: BrokerId,
    /// The epoch it leads at.
    pub leader_epoch: LeaderEpoch,
}

impl Assignment {
    /// Parses and checks the bytes of an `assignment.json`.
    pub fn from_json(bytes: &[u8]) -> Result<Self, AssignmentError> {
        let file: AssignmentFile =
            serde_json::from_slice(bytes).map_err(|e| AssignmentError::from_json(&e))?;
        Assignment::try_from(file)
    }

    /// The file's bytes: pretty-printed JSON (operators read it) ending in a newline.
    pub fn to_json(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(&self.to_file())
            .unwrap_or_else(|_| unreachable!("plain maps, strings and numbers always serialise"));
        bytes.push(b'\n');
        bytes
    }

    /// The plain form of the file (what [`Assignment::to_json`] writes).
    pub fn to_file(&self) -> AssignmentFile {
        AssignmentFile {
            format: FORMAT,
            controller_epoch: self.controller_epoch.0,
            assignment_version: self.version.0,
            brokers: self
                .brokers
                .values()
                .map(|b| BrokerFile {
                    id: b.id.0,
                    host: b.host.clone(),
                    port: b.port,
                })
                .collect(),
            topics: self
                .topics
                .iter()
                .map(|(name, topic)| {
                    let file = TopicFile {
                        id: topic.id.to_string(),
                        partitions: topic.partitions.len() as i32,
                        configs: topic.configs.clone(),
                    };
                    (name.to_string(), file)
                })
                .collect(),
            partitions: self
                .topics
                .iter()
                .map(|(name, topic)| {
                    let leaders = topic
                        .partitions
                        .iter()
                        .map(|p| PartitionFile {
                            leader: p.leader.0,
                            leader_epoch: p.leader_epoch.0,
                        })
                        .collect();
                    (name.to_string(), leaders)
                })
                .collect(),
            consumer_groups: self
                .groups
                .iter()
                .map(|(group, broker)| (group.to_string(), broker.0))
                .collect(),
        }
    }

    /// Epoch of the controller that wrote it.
    pub fn controller_epoch(&self) -> ControllerEpoch {
        self.controller_epoch
    }

    /// Its version.
    pub fn version(&self) -> AssignmentVersion {
        self.version
    }

    /// Every broker, by id.
    pub fn brokers(&self) -> &BTreeMap<BrokerId, BrokerEndpoint> {
        &self.brokers
    }

    /// Every topic, by name.
    pub fn topics(&self) -> &BTreeMap<TopicName, TopicAssignment> {
        &self.topics
    }

    /// The named consumer groups and their brokers.
    pub fn groups(&self) -> &BTreeMap<GroupId, BrokerId> {
        &self.groups
    }

    /// Who leads `partition`, if the assignment has it.
    pub fn leader(&self, partition: &TopicPartition) -> Option<PartitionLeader> {
        let index = usize::try_from(partition.partition).ok()?;
        self.topics
            .get(&partition.topic)?
            .partitions
            .get(index)
            .copied()
    }

    /// Every partition with its leader, in topic then partition order.
    pub fn partitions(&self) -> impl Iterator<Item = (TopicPartition, PartitionLeader)> + '_ {
        self.topics.iter().flat_map(|(name, topic)| {
            topic
                .partitions
                .iter()
                .enumerate()
                .map(move |(i, leader)| (TopicPartition::new(name.clone(), i as i32), *leader))
        })
    }
}

impl TryFrom<AssignmentFile> for Assignment {
    type Error = AssignmentError;

    fn try_from(file: AssignmentFile) -> Result<Self, AssignmentError> {
        validate::validate(file)
    }
}

#[cfg(test)]
mod tests;
