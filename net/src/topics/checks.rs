//! The rules a topic change is checked by before anything is changed, as Kafka checks them
//! (name, existence, partitions, manual assignment, replication factor, configs), and the
//! error a refused change answers with ([`TopicError`]). Every topic change runs them on the
//! broker that received it, against its view ([`crate::topics::topic_changes`]).

use crate::model::topic_config::{InvalidConfig, TopicConfig};
use crate::protocol::ErrorCode;
use crate::topics::replica_assignment::{check_replicas, check_topic_assignment};

/// A refused topic change: the Kafka error code and a message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicError {
    /// Error code to answer with.
    pub code: ErrorCode,
    /// Human-readable reason.
    pub message: String,
}

impl TopicError {
    /// A refusal with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        TopicError {
            code,
            message: message.into(),
        }
    }
}

impl From<InvalidConfig> for TopicError {
    fn from(error: InvalidConfig) -> Self {
        TopicError::new(ErrorCode::InvalidConfig, error.0)
    }
}

/// Largest partition count accepted for one topic.
pub const MAX_PARTITIONS: i32 = 100_000;

/// A topic as CreateTopics asks for it, checked in Kafka's order by
/// [`crate::topics::topic_changes::TopicChanges::create_topic`].
#[derive(Debug, Clone)]
pub struct NewTopic {
    /// Topic name.
    pub name: String,
    /// Partition count, -1 for the broker's default.
    pub num_partitions: i32,
    /// Replication factor, -1 for the default.
    pub replication_factor: i16,
    /// Manual assignment: (partition index, replica broker ids).
    pub assignments: Vec<(i32, Vec<i32>)>,
    /// Configs as (name, value).
    pub configs: Vec<(String, Option<String>)>,
}

/// Checks a topic name as Kafka does.
pub fn validate_name(name: &str) -> Result<(), TopicError> {
    if kaas_cluster::ids::TopicName::new(name).is_ok() {
        Ok(())
    } else {
        Err(TopicError::new(
            ErrorCode::InvalidTopicException,
            format!("Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-', is empty, '.', '..' or longer than 249 characters"),
        ))
    }
}

/// Checks a CreateTopics topic's partitions, assignment, replication factor and configs (after
/// its name and whether it exists), as Kafka does: its partition count and configs. `brokers`
/// are the broker ids a manual assignment may name. Standalone and cluster mode share it.
pub fn check_new_topic(
    topic: &NewTopic,
    default_partitions: i32,
    brokers: &[i32],
) -> Result<(i32, TopicConfig), TopicError> {
    let partitions = partition_count(topic, default_partitions, brokers)?;
    let config = TopicConfig::from_pairs(
        topic
            .configs
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_deref())),
    )?;
    Ok((partitions, config))
}

/// Refuses a partition count of a new topic outside 1..=[`MAX_PARTITIONS`].
pub fn check_partition_range(partitions: i32) -> Result<(), TopicError> {
    if (1..=MAX_PARTITIONS).contains(&partitions) {
        Ok(())
    } else {
        Err(TopicError::new(
            ErrorCode::InvalidPartitions,
            format!("Number of partitions must be between 1 and {MAX_PARTITIONS}."),
        ))
    }
}

/// Checks a CreatePartitions request raising a topic from `current` to `count` partitions,
/// with `assignments` (when given and not empty) naming the replicas of each new partition
/// among `brokers`. Standalone and cluster mode share it.
pub fn check_added_partitions(
    current: i32,
    count: i32,
    assignments: Option<&[Vec<i32>]>,
    brokers: &[i32],
) -> Result<(), TopicError> {
    if count <= current {
        return Err(TopicError::new(
            ErrorCode::InvalidPartitions,
            format!(
                "Topic currently has {current} partitions, which is higher than or equal to the requested {count}."
            ),
        ));
    }
    if count > MAX_PARTITIONS {
        return Err(TopicError::new(
            ErrorCode::InvalidPartitions,
            format!("Number of partitions must be at most {MAX_PARTITIONS}."),
        ));
    }
    if let Some(assignments) = assignments.filter(|a| !a.is_empty()) {
        let added = count - current;
        if usize::try_from(added).ok() != Some(assignments.len()) {
            return Err(TopicError::new(
                ErrorCode::InvalidReplicaAssignment,
                format!(
                    "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
                    assignments.len()
                ),
            ));
        }
        check_replicas(assignments.iter().map(Vec::as_slice), brokers)?;
    }
    Ok(())
}

/// The partition count a CreateTopics topic asks for, from its count or its manual
/// assignment. Any positive replication factor is accepted: kaas keeps the leader only.
fn partition_count(
    topic: &NewTopic,
    default_partitions: i32,
    brokers: &[i32],
) -> Result<i32, TopicError> {
    if !topic.assignments.is_empty() {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err(TopicError::new(
                ErrorCode::InvalidRequest,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
            ));
        }
        return check_topic_assignment(&topic.assignments, brokers);
    }
    if topic.replication_factor == 0 || topic.replication_factor < -1 {
        return Err(TopicError::new(
            ErrorCode::InvalidReplicationFactor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ));
    }
    match topic.num_partitions {
        -1 => Ok(default_partitions),
        n if n <= 0 => Err(TopicError::new(
            ErrorCode::InvalidPartitions,
            "Number of partitions was set to an invalid non-positive value.",
        )),
        n => Ok(n),
    }
}

/// TOPIC_ALREADY_EXISTS, with Kafka's message.
pub fn already_exists(name: &str) -> TopicError {
    TopicError::new(
        ErrorCode::TopicAlreadyExists,
        format!("Topic '{name}' already exists."),
    )
}

/// UNKNOWN_TOPIC_OR_PARTITION for a topic change, with kaas's message.
pub fn unknown_topic(name: &str) -> TopicError {
    TopicError::new(
        ErrorCode::UnknownTopicOrPartition,
        format!("This server does not host this topic: {name}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(
        num_partitions: i32,
        replication_factor: i16,
        assignments: Vec<(i32, Vec<i32>)>,
    ) -> NewTopic {
        NewTopic {
            name: "t".into(),
            num_partitions,
            replication_factor,
            assignments,
            configs: Vec::new(),
        }
    }

    #[test]
    fn any_positive_replication_factor_and_registered_assignments_are_accepted() {
        assert_eq!(partition_count(&topic(3, 3, vec![]), 1, &[0]), Ok(3));
        assert_eq!(partition_count(&topic(-1, -1, vec![]), 4, &[0]), Ok(4));
        assert_eq!(
            partition_count(&topic(-1, -1, vec![(0, vec![0]), (1, vec![0])]), 1, &[0]),
            Ok(2)
        );
        let code = |t: NewTopic| partition_count(&t, 1, &[0]).map_err(|e| e.code);
        assert_eq!(
            code(topic(1, 0, vec![])),
            Err(ErrorCode::InvalidReplicationFactor)
        );
        assert_eq!(
            code(topic(1, -2, vec![])),
            Err(ErrorCode::InvalidReplicationFactor)
        );
        assert_eq!(code(topic(0, 1, vec![])), Err(ErrorCode::InvalidPartitions));
        assert_eq!(
            code(topic(1, -1, vec![(0, vec![0])])),
            Err(ErrorCode::InvalidRequest)
        );
        assert_eq!(
            code(topic(-1, -1, vec![(0, vec![5])])),
            Err(ErrorCode::InvalidReplicaAssignment)
        );
    }
}
