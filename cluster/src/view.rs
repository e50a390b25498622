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
use crate::internal_topics::{offsets_partition, OFFSETS_TOPIC};
use crate::placement::{fallback_coordinator, group_shard, offsets_partition_shard, owner_shard};

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
    offsets_topic: Option<Arc<TopicInfo>>,
    offsets_partitions: Vec<PartitionPlacement>,
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
        let mut offsets_topic = None;
        let mut offsets_partitions = Vec::new();
        for (name, topic) in assignment.topics() {
            let info = Arc::new(TopicInfo {
                name: name.clone(),
                id: topic.id,
                partitions: topic.partitions.len() as i32,
                configs: topic.configs.clone(),
            });
            if name.as_str() == OFFSETS_TOPIC {
                offsets_partitions = topic
                    .partitions
                    .iter()
                    .enumerate()
                    .map(|(index, leader)| PartitionPlacement {
                        leader: leader.leader,
                        leader_epoch: leader.leader_epoch,
                        owner_shard: offsets_partition_shard(index as i32, shards),
                    })
                    .collect();
                offsets_topic = Some(info);
                continue;
            }
            topic_ids.insert(topic.id, name.clone());
            topics.insert(name.clone(), info);
        }
        // `Assignment::partitions` yields topic then partition order, so every `led_by` list
        // comes out sorted.
        for (partition, leader) in assignment.partitions() {
            if partition.topic.as_str() == OFFSETS_TOPIC {
                continue;
            }
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
            offsets_topic,
            offsets_partitions,
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

    /// `__consumer_offsets` when the assignment places it (the user topics never include it).
    pub fn offsets_topic(&self) -> Option<&Arc<TopicInfo>> {
        self.offsets_topic.as_ref()
    }

    /// Who leads partition `partition` of `__consumer_offsets`, when the assignment places it.
    pub fn offsets_leader(&self, partition: i32) -> Option<&PartitionPlacement> {
        usize::try_from(partition)
            .ok()
            .and_then(|index| self.offsets_partitions.get(index))
    }

    /// Where `group` is coordinated: the placement of its `__consumer_offsets` partition
    /// (leader and leader epoch), when the assignment places that topic.
    pub fn group_placement(&self, group: &GroupId) -> Option<&PartitionPlacement> {
        self.offsets_leader(offsets_partition(group.as_str()))
    }

    /// The broker coordinating `group`: the leader of its `__consumer_offsets` partition when
    /// the assignment places that topic (every controller's does), else the one the
    /// assignment names, or else the [`fallback_coordinator`] among the assignment's brokers;
    /// `None` only when the assignment has no brokers.
    pub fn coordinator_of(&self, group: &GroupId) -> Option<BrokerId> {
        if let Some(placement) = self.group_placement(group) {
            return Some(placement.leader);
        }
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
    fn groups_follow_their_offsets_partition_and_the_topic_is_kept_apart() {
        let leaders: Vec<String> = (0..50)
            .map(|p| format!(r#"{{"leader": {}, "leader_epoch": {}}}"#, p % 2, 65536 + p))
            .collect();
        let text = format!(
            r#"{{"format": 1, "controller_epoch": 1, "assignment_version": 2,
             "brokers": [{{"id": 0, "host": "h0", "port": 9092}}, {{"id": 1, "host": "h1", "port": 9092}}],
             "topics": {{"__consumer_offsets": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 50}}}},
             "partitions": {{"__consumer_offsets": [{}]}},
             "consumerGroups": {{"billing": 0}}}}"#,
            leaders.join(",")
        );
        let assignment = Assignment::from_json(text.as_bytes()).expect("valid");
        let view = ClusterView::new(&assignment, BrokerId(0), 4);
        assert!(view.topics().is_empty(), "not a user topic");
        assert!(
            view.partitions_led_by(BrokerId(0)).is_empty(),
            "never opened as a log"
        );
        assert_eq!(view.offsets_topic().map(|t| t.partitions), Some(50));
        for group in ["billing", "orders", "lag-tool", ""] {
            let group = GroupId::new(group);
            let partition = offsets_partition(group.as_str());
            let placement = view.group_placement(&group).expect("placed");
            assert_eq!(placement.leader, BrokerId(partition % 2));
            assert_eq!(placement.leader_epoch, LeaderEpoch(65536 + partition));
            assert_eq!(placement.owner_shard, view.group_shard(&group));
            // The partition's leader, even where the file names another broker.
            assert_eq!(view.coordinator_of(&group), Some(placement.leader));
        }
        assert!(view.offsets_leader(50).is_none());
        assert!(view.offsets_leader(-1).is_none());
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
