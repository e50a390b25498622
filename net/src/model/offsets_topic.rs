//! The names of `__consumer_offsets` every floor needs: its name, partition count, configs,
//! derived topic id, the partition a group lives in and the shard serving a partition. What the
//! topic serves is `groups::offsets_topic`.

use std::sync::Arc;

use kaas_engine::LogConfig;

use crate::model::cluster_view::{ClusterView, TopicInfo};
use crate::model::topic_config::TopicConfig;
use crate::protocol::Uuid;
use kaas_cluster::placement::fnv1a;

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

/// The topic id: derived from the cluster id, so it is the same after every restart without
/// being stored (Kafka's is random at creation and then fixed; clients only need it stable).
pub fn topic_id(cluster_id: &str) -> Uuid {
    let seed = format!("{cluster_id}/{NAME}");
    let high = fnv1a(seed.as_bytes());
    let low = fnv1a(format!("{seed}/low").as_bytes());
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    // A version-4-style UUID, as Kafka's are.
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid(bytes)
}

/// The topic as handlers describe it (it is not part of the cluster view's user topics).
pub fn topic_info(view: &ClusterView) -> Arc<TopicInfo> {
    let described = kaas_cluster::view::TopicInfo {
        name: kaas_cluster::ids::TopicName::new(NAME)
            .unwrap_or_else(|_| unreachable!("__consumer_offsets is a legal topic name")),
        id: kaas_cluster::ids::TopicId::from(topic_id(&view.cluster_id)),
        partitions: PARTITIONS,
        configs: Default::default(),
    };
    Arc::new(TopicInfo {
        described: Arc::new(described),
        config: TopicConfig::default(),
        log_config: LogConfig::default(),
    })
}

/// Whether the topic exists on this broker: standalone only (the module's doc says why).
pub fn is_served(view: &ClusterView) -> bool {
    !view.cluster_mode
}

/// The topic if `name` is it and it is served.
pub fn topic_by_name(view: &ClusterView, name: &str) -> Option<Arc<TopicInfo>> {
    (is_served(view) && is_offsets_topic(name)).then(|| topic_info(view))
}

/// The topic if `id` is its id and it is served.
pub fn topic_by_id(view: &ClusterView, id: &Uuid) -> Option<Arc<TopicInfo>> {
    (is_served(view) && *id == topic_id(&view.cluster_id)).then(|| topic_info(view))
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
