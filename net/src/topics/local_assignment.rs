//! A standalone broker's own assignment: it is a cluster of one, and its topic store acts as
//! that cluster's controller. Every topic change (and the start) makes the one-broker
//! assignment of the topics in `topics.json` — this broker leads every partition at
//! [`STANDALONE_LEADER_EPOCH`], no group is named — which the store applies with the same
//! [`AssignmentFollower`](crate::shard::takeover_driver::AssignmentFollower) a cluster
//! broker runs, so partitions open and close by command in both modes. It is never written
//! to the volume: `topics.json` is the record, and the assignment follows from it.

use kaas_cluster::assignment::{
    Assignment, AssignmentError, AssignmentFile, BrokerFile, PartitionFile, TopicFile,
};
use kaas_cluster::ids::TopicId;

use crate::model::cluster_view::STANDALONE_LEADER_EPOCH;
use crate::model::uuid_text::parse_topic_id;
use crate::topics::topic_store::TopicsFile;

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

/// Version `version` of the one-broker assignment of `file`'s topics, led by `broker`.
pub fn local_assignment(
    file: &TopicsFile,
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
    for topic in &file.topics {
        let id = parse_topic_id(&topic.id)
            .map_or_else(|| topic.id.clone(), |uuid| TopicId::from(uuid).to_string());
        let configs = topic
            .configs
            .overrides()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        assignment.topics.insert(
            topic.name.clone(),
            TopicFile {
                id,
                partitions: topic.partitions,
                configs,
            },
        );
        let leader = PartitionFile {
            leader: broker.id,
            leader_epoch: STANDALONE_LEADER_EPOCH,
        };
        let count = usize::try_from(topic.partitions).unwrap_or(0);
        assignment
            .partitions
            .insert(topic.name.clone(), vec![leader; count]);
    }
    Assignment::try_from(assignment)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::topic_config::TopicConfig;
    use crate::model::uuid_text::{random_uuid, topic_id_text};
    use crate::topics::topic_store::TopicRecord;
    use kaas_cluster::ids::{BrokerId, LeaderEpoch, TopicName, TopicPartition};

    #[test]
    fn every_partition_is_led_here_at_the_standalone_epoch() {
        let uuid = random_uuid();
        let file = TopicsFile {
            version: 1,
            cluster_id: "c".into(),
            topics: vec![
                TopicRecord {
                    name: "orders".into(),
                    id: topic_id_text(&uuid),
                    partitions: 3,
                    configs: TopicConfig::from_pairs([("retention.ms", Some("1000"))])
                        .expect("valid"),
                },
                TopicRecord {
                    name: "legacy".into(),
                    // Files written before the base64 form hold hex ids.
                    id: "0123456789abcdef0123456789abcdef".into(),
                    partitions: 1,
                    configs: TopicConfig::default(),
                },
            ],
            group_configs: Default::default(),
        };
        let broker = LocalBroker {
            id: 7,
            host: String::new(),
            port: 9092,
        };
        let assignment = local_assignment(&file, &broker, 4).expect("valid");
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
