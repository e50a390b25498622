//! A standalone broker's own assignment: it is a cluster of one, and its topic store acts as
//! that cluster's controller. Every topic change (and the start) makes the one-broker
//! assignment of the topics in `topics.json` — this broker leads every partition at
//! [`STANDALONE_LEADER_EPOCH`], no group is named — whose view every shard reads, as a
//! cluster broker reads its controller's, and which the topic store applies with the same
//! takeover driver a cluster broker runs, so partitions open and close by command in both
//! modes. It is never written to the volume: `topics.json` is the record, and the assignment
//! follows from it.

use kaas_cluster::assignment::{
    Assignment, AssignmentError, AssignmentFile, BrokerFile, PartitionFile, TopicFile,
};

use crate::model::cluster_view::{TopicInfo, STANDALONE_LEADER_EPOCH};

/// Who this broker is in its own assignment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalBroker {
    /// Its node id.
    pub id: i32,
    /// Its advertised host.
    pub host: String,
    /// Its advertised port.
    pub port: i32,
}

/// Version `version` of the one-broker assignment of `topics`, led by `broker`.
pub fn local_assignment(
    topics: &[TopicInfo],
    broker: &LocalBroker,
    version: u64,
) -> Result<Assignment, AssignmentError> {
    let mut assignment = AssignmentFile {
        format: kaas_cluster::assignment::FORMAT,
        controller_epoch: 0,
        assignment_version: version,
        brokers: vec![BrokerFile {
            id: broker.id,
            // The endpoint only names the broker here: Metadata answers a standalone broker's
            // own settings.
            host: if broker.host.trim().is_empty() {
                "localhost".to_string()
            } else {
                broker.host.clone()
            },
            port: u16::try_from(broker.port).unwrap_or(u16::MAX).max(1),
        }],
        topics: Default::default(),
        partitions: Default::default(),
        consumer_groups: Default::default(),
    };
    for topic in topics {
        let configs = topic
            .config
            .overrides()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        assignment.topics.insert(
            topic.name().to_string(),
            TopicFile {
                id: topic.described.id.to_string(),
                partitions: topic.partitions(),
                configs,
            },
        );
        let leader = PartitionFile {
            leader: broker.id,
            leader_epoch: STANDALONE_LEADER_EPOCH,
        };
        let count = usize::try_from(topic.partitions()).unwrap_or(0);
        assignment
            .partitions
            .insert(topic.name().to_string(), vec![leader; count]);
    }
    Assignment::try_from(assignment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::topic_config::{TopicConfig, TopicDefaults};
    use crate::model::uuid_text::random_uuid;
    use kaas_cluster::ids::{BrokerId, LeaderEpoch, TopicName, TopicPartition};

    #[test]
    fn every_partition_is_led_here_at_the_standalone_epoch() {
        let uuid = random_uuid();
        let config = TopicConfig::from_pairs([("retention.ms", Some("1000"))]).expect("valid");
        let topics = vec![
            TopicInfo::of(
                TopicName::new("orders").expect("legal"),
                uuid,
                3,
                config,
                &TopicDefaults::default(),
            ),
            TopicInfo::of(
                TopicName::new("other").expect("legal"),
                random_uuid(),
                1,
                TopicConfig::default(),
                &TopicDefaults::default(),
            ),
        ];
        let broker = LocalBroker {
            id: 7,
            host: String::new(),
            port: 9092,
        };
        let assignment = local_assignment(&topics, &broker, 4).expect("valid");
        assert_eq!(assignment.version().0, 4);
        assert_eq!(assignment.brokers().len(), 1);
        let orders = TopicName::new("orders").expect("legal");
        let topic = &assignment.topics()[&orders];
        assert_eq!(crate::protocol::Uuid::from(topic.id), uuid);
        assert_eq!(
            topic.configs.get("retention.ms").map(String::as_str),
            Some("1000")
        );
        let leader = assignment
            .leader(&TopicPartition::new(orders, 2))
            .expect("led");
        assert_eq!(leader.leader, BrokerId(7));
        assert_eq!(leader.leader_epoch, LeaderEpoch(STANDALONE_LEADER_EPOCH));
        assert_eq!(assignment.partitions().count(), 4);
    }
}
