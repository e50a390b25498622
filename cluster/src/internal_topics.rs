//! The internal topics a controller places like every other topic: `__consumer_offsets`,
//! whose partition leaders are the consumer groups' coordinators, and `__transaction_state`,
//! whose partition leaders are the transaction coordinators, as in Kafka.
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
//!
//! `__transaction_state` ([`TRANSACTION_STATE_TOPIC`], [`TRANSACTION_STATE_PARTITIONS`]
//! partitions, compacted) is a log like any other: brokers open its partitions and the
//! transaction coordinators write their state there. As Kafka creates it only when the first
//! transactional client comes, the controller adds it once a broker asked for it (the
//! volume's `transaction-state-requested` file, fed as `Input::TransactionStateRequested`)
//! or when the assignment it builds on has it; then it stays. Its id is kept or derived the
//! same way.

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

/// The name of Kafka's topic of transaction state.
pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";

/// Partitions of `__transaction_state` (Kafka's `transaction.state.log.num.partitions`).
pub const TRANSACTION_STATE_PARTITIONS: i32 = 50;

/// `__transaction_state` as a [`TopicName`].
pub fn transaction_state_topic_name() -> TopicName {
    TopicName::new(TRANSACTION_STATE_TOPIC)
        .unwrap_or_else(|_| unreachable!("__transaction_state is a legal topic name"))
}

/// The configs Kafka gives `__transaction_state` (`TransactionLog`'s topic configs, with
/// `transaction.state.log.segment.bytes`' default).
pub fn transaction_state_configs() -> BTreeMap<String, String> {
    [
        ("cleanup.policy", "compact"),
        ("compression.type", "uncompressed"),
        ("segment.bytes", "104857600"),
        ("unclean.leader.election.enable", "false"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value.to_owned()))
    .collect()
}

/// Whether `name` is an internal topic.
pub fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC || name == TRANSACTION_STATE_TOPIC
}

/// `topics` (the KafkaTopics) with the internal topics added: `__consumer_offsets` with
/// [`OFFSETS_TOPIC_PARTITIONS`] partitions and no overrides, and `__transaction_state` when
/// `transaction_state_requested` or `previous` has it, each under the id `previous` gave it,
/// or one derived from `epoch` when `previous` has none (so every assignment one controller
/// builds before its first is on the volume agrees on it). A user topic of an internal
/// topic's name (the topic APIs refuse to create one) is replaced.
pub fn with_internal_topics(
    topics: &BTreeMap<TopicName, TopicInfo>,
    previous: Option<&Assignment>,
    epoch: ControllerEpoch,
    transaction_state_requested: bool,
) -> BTreeMap<TopicName, TopicInfo> {
    let seed = format!("controller-epoch-{}", epoch.0);
    let placed = |name: TopicName, partitions: i32, configs: BTreeMap<String, String>| {
        let id = previous
            .and_then(|p| p.topics().get(&name))
            .map(|t| t.id)
            .unwrap_or_else(|| derived_topic_id_of(&seed, name.as_str()));
        (
            name.clone(),
            TopicInfo {
                name,
                id,
                partitions,
                configs,
            },
        )
    };
    let mut all = topics.clone();
    let (name, offsets) = placed(
        offsets_topic_name(),
        OFFSETS_TOPIC_PARTITIONS,
        BTreeMap::new(),
    );
    all.insert(name, offsets);
    let transaction_state = transaction_state_topic_name();
    let had_it = previous.is_some_and(|p| p.topics().contains_key(&transaction_state));
    if transaction_state_requested || had_it {
        let (name, info) = placed(
            transaction_state,
            TRANSACTION_STATE_PARTITIONS,
            transaction_state_configs(),
        );
        all.insert(name, info);
    } else {
        all.remove(&transaction_state);
    }
    all
}

/// A version-4-style topic id derived from `seed` and the topic's name: the same seed always
/// gives the same id. (A standalone broker derives its `__consumer_offsets` id from its
/// cluster id this way, so the id survives restarts without being stored.)
pub fn derived_topic_id(seed: &str) -> TopicId {
    derived_topic_id_of(seed, OFFSETS_TOPIC)
}

/// [`derived_topic_id`] for the internal topic `name`.
pub fn derived_topic_id_of(seed: &str, name: &str) -> TopicId {
    let seed = format!("{seed}/{name}");
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
        let first = with_internal_topics(&BTreeMap::new(), None, ControllerEpoch(3), false);
        let offsets = &first[&offsets_topic_name()];
        assert_eq!(offsets.partitions, 50);
        assert_eq!(offsets.id, derived_topic_id("controller-epoch-3"));
        assert_ne!(offsets.id, TopicId([0; 16]));
        assert!(!first.contains_key(&transaction_state_topic_name()));
    }

    #[test]
    fn the_transaction_state_topic_comes_when_requested_and_stays() {
        let requested = with_internal_topics(&BTreeMap::new(), None, ControllerEpoch(3), true);
        let topic = &requested[&transaction_state_topic_name()];
        assert_eq!(topic.partitions, TRANSACTION_STATE_PARTITIONS);
        assert_eq!(topic.configs["cleanup.policy"], "compact");
        assert_eq!(
            topic.id,
            derived_topic_id_of("controller-epoch-3", TRANSACTION_STATE_TOPIC)
        );
        assert_ne!(topic.id, requested[&offsets_topic_name()].id);
        // Built on an assignment that has it, a later controller keeps it and its id.
        let text = format!(
            r#"{{"format": 1, "controller_epoch": 3, "assignment_version": 1,
                "brokers": [{{"id": 0, "host": "a", "port": 9092}}],
                "topics": {{"__transaction_state": {{"id": "{}", "partitions": 1}}}},
                "partitions": {{"__transaction_state": [{{"leader": 0, "leader_epoch": 1}}]}}}}"#,
            topic.id
        );
        let previous = Assignment::from_json(text.as_bytes()).expect("valid");
        let later =
            with_internal_topics(&BTreeMap::new(), Some(&previous), ControllerEpoch(9), false);
        assert_eq!(later[&transaction_state_topic_name()].id, topic.id);
    }

    #[test]
    fn derived_ids_depend_on_the_seed_only() {
        assert_eq!(derived_topic_id("c1"), derived_topic_id("c1"));
        assert_ne!(derived_topic_id("c1"), derived_topic_id("c2"));
    }
}
