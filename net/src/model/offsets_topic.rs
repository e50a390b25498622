//! The names of `__consumer_offsets` every floor needs: its name, partition count, configs,
//! derived topic id, the partition a group lives in and the shard serving a partition. What the
//! topic serves is `groups::offsets_topic`.

use std::sync::Arc;

use kaas_engine::LogConfig;

use crate::model::cluster_view::{ClusterView, Leadership, TopicInfo};
use crate::model::topic_config::TopicConfig;
use crate::protocol::Uuid;

/// The topic's name.
pub const NAME: &str = "__consumer_offsets";

/// Kafka's `offsets.topic.num.partitions` default.
pub const PARTITIONS: i32 = kaas_cluster::placement::OFFSETS_TOPIC_PARTITIONS;

/// The configs Kafka 4.4 sets on the topic (DescribeConfigs shows them as topic configs).
pub const CONFIGS: &[(&str, &str)] = &[
    ("cleanup.policy", "compact"),
    ("compression.type", "producer"),
    ("segment.bytes", "104857600"),
];

/// The leader epoch of every partition: a standalone broker's own group coordinators serve
/// them (the topic is in no assignment), at the standalone epoch.
pub const LEADER_EPOCH: i32 = crate::model::cluster_view::STANDALONE_LEADER_EPOCH;

/// Whether `name` is `__consumer_offsets`.
pub fn is_offsets_topic(name: &str) -> bool {
    name == NAME
}

/// The partition holding `group_id`: Kafka's `Utils.abs(groupId.hashCode()) % 50`.
pub fn partition_for(group_id: &str) -> i32 {
    kaas_cluster::placement::offsets_partition(group_id)
}

/// A standalone broker's topic id: derived from the cluster id, so it is the same after every
/// restart without being stored (Kafka's is random at creation and then fixed; clients only
/// need it stable). A cluster's is the one its assignment gives the topic.
pub fn topic_id(cluster_id: &str) -> Uuid {
    Uuid(kaas_cluster::internal_topics::derived_topic_id(cluster_id).0)
}

/// The topic as handlers describe it (it is not part of the cluster view's user topics).
pub fn topic_info(view: &ClusterView) -> Arc<TopicInfo> {
    let described = match view.cluster.as_ref().and_then(|c| c.offsets_topic()) {
        Some(placed) if view.cluster_mode => placed.clone(),
        _ => Arc::new(kaas_cluster::view::TopicInfo {
            name: kaas_cluster::internal_topics::offsets_topic_name(),
            id: kaas_cluster::ids::TopicId::from(topic_id(&view.cluster_id)),
            partitions: PARTITIONS,
            configs: Default::default(),
        }),
    };
    Arc::new(TopicInfo {
        described,
        config: TopicConfig::default(),
        log_config: LogConfig::default(),
    })
}

/// Whether the topic exists on this broker: always on a standalone broker; in a cluster once
/// the assignment places it (every controller's does: a group's coordinator is the leader of
/// its partition of the topic).
pub fn is_served(view: &ClusterView) -> bool {
    !view.cluster_mode
        || view
            .cluster
            .as_ref()
            .is_some_and(|cluster| cluster.offsets_topic().is_some())
}

/// Who serves partition `partition`: a standalone broker every partition, at
/// [`LEADER_EPOCH`]; a cluster broker the ones the assignment gives it, at their leader
/// epochs.
pub fn leadership(view: &ClusterView, partition: i32) -> Leadership {
    if !is_served(view) || !(0..PARTITIONS).contains(&partition) {
        return Leadership::Unknown;
    }
    if !view.cluster_mode {
        return Leadership::Here {
            leader_epoch: LEADER_EPOCH,
        };
    }
    match view
        .cluster
        .as_ref()
        .and_then(|c| Some((c.this_broker(), c.offsets_leader(partition)?)))
    {
        None => Leadership::Unknown,
        Some((me, placement)) if placement.leader == me => Leadership::Here {
            leader_epoch: placement.leader_epoch.0,
        },
        Some(_) => Leadership::Elsewhere,
    }
}

/// The leader and leader epoch Metadata names for partition `partition` (-1, -1 when none).
pub fn leader(view: &ClusterView, partition: i32) -> (i32, i32) {
    let Some(cluster) = view.cluster.as_ref() else {
        return (-1, -1);
    };
    if !view.cluster_mode {
        return (cluster.this_broker().0, LEADER_EPOCH);
    }
    cluster
        .offsets_leader(partition)
        .map_or((-1, -1), |p| (p.leader.0, p.leader_epoch.0))
}

/// The topic if `name` is it and it is served.
pub fn topic_by_name(view: &ClusterView, name: &str) -> Option<Arc<TopicInfo>> {
    (is_served(view) && is_offsets_topic(name)).then(|| topic_info(view))
}

/// The topic if `id` is its id and it is served.
pub fn topic_by_id(view: &ClusterView, id: &Uuid) -> Option<Arc<TopicInfo>> {
    let topic = topic_info(view);
    (is_served(view) && topic.id() == *id).then_some(topic)
}

/// The shard serving partition `partition` (and coordinating its groups).
pub fn shard_of_partition(partition: i32, shards: usize) -> usize {
    kaas_cluster::placement::offsets_partition_shard(partition, shards).0
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_cluster::placement::java_string_hash;

    #[test]
    fn partitions_match_kafka() {
        // Computed with Kafka 4.4's own `Utils.abs(id.hashCode()) % 50`.
        assert_eq!(partition_for("offsets-watchers"), 30);
        assert_eq!(partition_for("lag-tool"), 29);
        assert_eq!(partition_for("grüße"), 23);
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        // "polygenelubricants".hashCode() is Integer.MIN_VALUE: Utils.abs makes it 0.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(partition_for("polygenelubricants"), 0);
        // Non-BMP characters hash as two UTF-16 units.
        assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
        for id in ["", "g", "orders", "a-much-longer-group-id", "ümlaut"] {
            assert!((0..PARTITIONS).contains(&partition_for(id)));
        }
    }

    #[test]
    fn topic_id_is_stable_and_not_nil() {
        assert_eq!(topic_id("c1"), topic_id("c1"));
        assert_ne!(topic_id("c1"), topic_id("c2"));
        assert_ne!(topic_id("c1"), Uuid::NIL);
    }
}
