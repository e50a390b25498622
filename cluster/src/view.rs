//! The cluster view: one broker's immutable, runtime-free picture of the cluster, built from
//! an accepted assignment plus this broker's id and shard count. Everything that answers "who
//! leads" (Metadata, the partition-request ownership check, FindCoordinator, `/healthz`) reads
//! one of these; a new one is built and published whole for every accepted assignment.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::assignment::{Assignment, BrokerEndpoint};
use crate::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, GroupId, LeaderEpoch, ShardIndex, TopicId,
    TopicName, TopicPartition,
};
use crate::placement::{fallback_coordinator, group_shard, owner_shard};

/// One topic as the cluster knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic name.
    pub name: TopicName,
    /// Topic id.
    pub id: TopicId,
    /// Number of partitions (≥ 1).
    pub partitions: i32,
    /// Config overrides (Kafka names and string values).
    pub configs: BTreeMap<String, String>,
}

/// Who leads a partition, at which epoch, and which shard of this broker owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PartitionPlacement {
    /// The leading broker.
    pub leader: BrokerId,
    /// The leader epoch.
    pub leader_epoch: LeaderEpoch,
    /// The shard of this broker that owns the partition (meaningful when this broker leads it).
    pub owner_shard: ShardIndex,
}

/// A snapshot of the cluster as this broker sees it.
#[derive(Clone, Debug)]
pub struct ClusterView {
    this_broker: BrokerId,
    shards: usize,
    controller_epoch: ControllerEpoch,
    version: AssignmentVersion,
    brokers: BTreeMap<BrokerId, BrokerEndpoint>,
    topics: BTreeMap<TopicName, Arc<TopicInfo>>,
    topic_ids: HashMap<TopicId, TopicName>,
    partitions: HashMap<TopicPartition, PartitionPlacement>,
    led_by: BTreeMap<BrokerId, Vec<TopicPartition>>,
    groups: BTreeMap<GroupId, BrokerId>,
}

impl ClusterView {
    /// The view of `assignment` from broker `this_broker`, whose partitions spread over
    /// `shards` shards (at least one). A broker the assignment does not list leads nothing.
    pub fn new(assignment: &Assignment, this_broker: BrokerId, shards: usize) -> Self {
        let shards = shards.max(1);
        let mut topics = BTreeMap::new();
        let mut topic_ids = HashMap::new();
        let mut partitions = HashMap::new();
        let mut led_by: BTreeMap<BrokerId, Vec<TopicPartition>> = BTreeMap::new();
        for (name, topic) in assignment.topics() {
            topic_ids.insert(topic.id, name.clone());
            topics.insert(
                name.clone(),
                Arc::new(TopicInfo {
                    name: name.clone(),
                    id: topic.id,
                    partitions: topic.partitions.len() as i32,
                    configs: topic.configs.clone(),
                }),
            );
        }
        // `Assignment::partitions` yields topic then partition order, so every `led_by` list
        // comes out sorted.
        for (partition, leader) in assignment.partitions() {
            let placement = PartitionPlacement {
                leader: leader.leader,
                leader_epoch: leader.leader_epoch,
                owner_shard: owner_shard(partition.topic.as_str(), partition.partition, shards),
            };
            led_by
                .entry(leader.leader)
                .or_default()
                .push(partition.clone());
            partitions.insert(partition, placement);
        }
        ClusterView {
            this_broker,
            shards,
            controller_epoch: assignment.controller_epoch(),
            version: assignment.version(),
            brokers: assignment.brokers().clone(),
            topics,
            topic_ids,
            partitions,
            led_by,
            groups: assignment.groups().clone(),
        }
    }

    /// The broker this view belongs to.
    pub fn this_broker(&self) -> BrokerId {
        self.this_broker
    }

    /// How many shards this broker has.
    pub fn shards(&self) -> usize {
        self.shards
    }

    /// Epoch of the controller that wrote the assignment.
    pub fn controller_epoch(&self) -> ControllerEpoch {
        self.controller_epoch
    }

    /// Version of the assignment.
    pub fn assignment_version(&self) -> AssignmentVersion {
        self.version
    }

    /// Every broker, by id.
    pub fn brokers(&self) -> &BTreeMap<BrokerId, BrokerEndpoint> {
        &self.brokers
    }

    /// Every topic, by name.
    pub fn topics(&self) -> &BTreeMap<TopicName, Arc<TopicInfo>> {
        &self.topics
    }

    /// A topic by name.
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicInfo>> {
        self.topics.get(name)
    }

    /// A topic by id.
    pub fn topic_by_id(&self, id: &TopicId) -> Option<&Arc<TopicInfo>> {
        self.topics.get(self.topic_ids.get(id)?)
    }

    /// Who leads `partition`, at which epoch, on which shard; `None` for a partition the
    /// assignment does not have.
    pub fn leader_of(&self, partition: &TopicPartition) -> Option<&PartitionPlacement> {
        self.partitions.get(partition)
    }

    /// Whether this broker leads `partition`.
    pub fn leads(&self, partition: &TopicPartition) -> bool {
        self.leader_of(partition)
            .is_some_and(|p| p.leader == self.this_broker)
    }

    /// The partitions `broker` leads, in topic then partition order.
    pub fn partitions_led_by(&self, broker: BrokerId) -> &[TopicPartition] {
        self.led_by.get(&broker).map_or(&[], Vec::as_slice)
    }

    /// The groups the assignment names, with their brokers.
    pub fn named_groups(&self) -> &BTreeMap<GroupId, BrokerId> {
        &self.groups
    }

    /// The broker coordinating `group`: the one the assignment names, or else the
    /// [`fallback_coordinator`] among the assignment's brokers; `None` only when the
    /// assignment has no brokers.
    pub fn coordinator_of(&self, group: &GroupId) -> Option<BrokerId> {
        match self.groups.get(group) {
            Some(broker) => Some(*broker),
            None => fallback_coordinator(group, self.brokers.keys().copied()),
        }
    }

    /// The shard of this broker that coordinates `group` when this broker does.
    pub fn group_shard(&self, group: &GroupId) -> ShardIndex {
        group_shard(group, self.shards)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"{"format": 1, "controller_epoch": 3, "assignment_version": 17,
     "brokers": [{"id": 0, "host": "h0", "port": 9092}, {"id": 1, "host": "h1", "port": 9092}],
     "topics": {"orders": {"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 3},
                "audit": {"id": "_____________________w", "partitions": 1}},
     "partitions": {"orders": [{"leader": 0, "leader_epoch": 3}, {"leader": 1, "leader_epoch": 4},
                               {"leader": 0, "leader_epoch": 5}],
                    "audit": [{"leader": 1, "leader_epoch": 0}]},
     "consumerGroups": {"billing": 1}}"#;

    fn view(broker: i32) -> ClusterView {
        let assignment = Assignment::from_json(TEXT.as_bytes()).expect("valid");
        ClusterView::new(&assignment, BrokerId(broker), 4)
    }

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(TopicName::new(topic).expect("legal"), partition)
    }

    #[test]
    fn lookups_answer_from_the_assignment() {
        let view = view(0);
        let placement = view.leader_of(&tp("orders", 1)).expect("exists");
        assert_eq!(placement.leader, BrokerId(1));
        assert_eq!(placement.leader_epoch, LeaderEpoch(4));
        assert_eq!(placement.owner_shard, owner_shard("orders", 1, 4));
        assert!(view.leads(&tp("orders", 0)));
        assert!(!view.leads(&tp("orders", 1)));
        assert!(view.leader_of(&tp("orders", 3)).is_none());
        assert_eq!(
            view.partitions_led_by(BrokerId(0)),
            &[tp("orders", 0), tp("orders", 2)]
        );
        assert_eq!(
            view.partitions_led_by(BrokerId(1)),
            &[tp("audit", 0), tp("orders", 1)]
        );
        assert!(view.partitions_led_by(BrokerId(9)).is_empty());
        let id = TopicId::parse("_____________________w").expect("valid");
        assert_eq!(
            view.topic_by_id(&id).map(|t| t.name.as_str()),
            Some("audit")
        );
        assert_eq!(view.topic("orders").map(|t| t.partitions), Some(3));
        assert_eq!(view.controller_epoch(), ControllerEpoch(3));
        assert_eq!(view.assignment_version(), AssignmentVersion(17));
    }

    #[test]
    fn coordinators_are_named_or_fall_back_among_the_brokers() {
        let view = view(0);
        assert_eq!(
            view.coordinator_of(&GroupId::new("billing")),
            Some(BrokerId(1))
        );
        let unnamed = GroupId::new("shipping");
        assert_eq!(
            view.coordinator_of(&unnamed),
            fallback_coordinator(&unnamed, [BrokerId(0), BrokerId(1)])
        );
    }
}
