//! The internal topics a controller places like every other topic: `__consumer_offsets`,
//! whose partition leaders are the consumer groups' coordinators, as in Kafka.
//!
//! A group lives in partition [`offsets_partition`]`(group)` of `__consumer_offsets` and is
//! coordinated by that partition's leader, at that partition's leader epoch: the coordinator
//! claims the group's store at the partition's fence epoch, so two controllers (whose leader
//! epochs come from disjoint ranges, `balancer::leader_epochs`) can never give one group one
//! fence epoch on two brokers.
//!
//! The topic is not a KafkaTopic: the controller adds it to the topics it balances
//! ([`with_internal_topics`]). Its id is kept from the assignment it builds on; the first
//! assignment that has the topic derives one ([`derived_topic_id`]) from the controller epoch
//! that created it. The view keeps it apart from the user topics
//! (`ClusterView::offsets_topic`): brokers never open it as a log (the group stores are its
//! contents), and it is never deleted or changed through the topic APIs.

use std::collections::BTreeMap;

use crate::assignment::Assignment;
use crate::ids::{ControllerEpoch, TopicId, TopicName};
use crate::placement::{fnv1a, OFFSETS_TOPIC_PARTITIONS};
use crate::view::TopicInfo;

pub use crate::placement::offsets_partition;

/// The name of Kafka's topic of committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// `__consumer_offsets` as a [`TopicName`].
pub fn offsets_topic_name() -> TopicName {
    TopicName::new(OFFSETS_TOPIC)
        .unwrap_or_else(|_| unreachable!("__consumer_offsets is a legal topic name"))
}

/// Whether `name` is an internal topic.
pub fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC
}

/// `topics` (the KafkaTopics) with the internal topics added: `__consumer_offsets` with
/// [`OFFSETS_TOPIC_PARTITIONS`] partitions and no overrides, under the id `previous` gave it,
/// or one derived from `epoch` when `previous` has none (so every assignment one controller
/// builds before its first is on the volume agrees on it). A user topic of an
/// internal topic's name (the topic APIs refuse to create one) is replaced.
pub fn with_internal_topics(
    topics: &BTreeMap<TopicName, TopicInfo>,
    previous: Option<&Assignment>,
    epoch: ControllerEpoch,
) -> BTreeMap<TopicName, TopicInfo> {
    let name = offsets_topic_name();
    let id = previous
        .and_then(|p| p.topics().get(&name))
        .map(|t| t.id)
        .unwrap_or_else(|| derived_topic_id(&format!("controller-epoch-{}", epoch.0)));
    let mut all = topics.clone();
    all.insert(
        name.clone(),
        TopicInfo {
            name,
            id,
            partitions: OFFSETS_TOPIC_PARTITIONS,
            configs: BTreeMap::new(),
        },
    );
    all
}

/// A version-4-style topic id derived from `seed` and the topic's name: the same seed always
/// gives the same id. (A standalone broker derives its `__consumer_offsets` id from its
/// cluster id this way, so the id survives restarts without being stored.)
pub fn derived_topic_id(seed: &str) -> TopicId {
    let seed = format!("{seed}/{OFFSETS_TOPIC}");
    let high = fnv1a(seed.as_bytes());
    let low = fnv1a(format!("{seed}/low").as_bytes());
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high.to_be_bytes());
    bytes[8..].copy_from_slice(&low.to_be_bytes());
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    TopicId(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offsets_topic_is_added_with_a_derived_id() {
        let first = with_internal_topics(&BTreeMap::new(), None, ControllerEpoch(3));
        let offsets = &first[&offsets_topic_name()];
        assert_eq!(offsets.partitions, 50);
        assert_eq!(offsets.id, derived_topic_id("controller-epoch-3"));
        assert_ne!(offsets.id, TopicId([0; 16]));
    }

    #[test]
    fn derived_ids_depend_on_the_seed_only() {
        assert_eq!(derived_topic_id("c1"), derived_topic_id("c1"));
        assert_ne!(derived_topic_id("c1"), derived_topic_id("c2"));
    }
}
