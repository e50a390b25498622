//! The immutable view of the cluster every shard reads: this broker, the topics, and which
//! shard owns each partition. A new view is published whole (an `Arc` swap); shards never
//! mutate it, so no locking is needed to read it.
//!
//! The view carries the runtime-free [`kaas_cluster::view::ClusterView`] of the assignment
//! the broker follows (brokers, each partition's leader and leader epoch, group → broker):
//! the controller's in cluster mode, a standalone broker's own one-broker assignment
//! otherwise ([`ClusterView::standalone`]); every "who leads" answer comes from it. This
//! module adds only what `net` needs beside it (Kafka topic ids, parsed topic configs, group
//! config overrides).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arc_swap::ArcSwap;
use kaas_engine::LogConfig;

use crate::model::local_assignment::{local_assignment, LocalBroker};
use crate::model::topic_config::TopicConfig;
use crate::protocol::Uuid;

/// The leader epoch of every partition of a standalone broker.
pub const STANDALONE_LEADER_EPOCH: i32 = 0;

/// One topic as the cluster knows it: the assignment's description of it (name, id,
/// partition count, config overrides as text), with the overrides parsed.
#[derive(Clone, Debug)]
pub struct TopicInfo {
    /// The topic as the followed assignment describes it (the same `Arc` its view holds).
    pub described: Arc<kaas_cluster::view::TopicInfo>,
    /// Its config overrides, parsed (an override kaas refuses is left out, logged).
    pub config: TopicConfig,
    /// The engine settings the configs mean.
    pub log_config: LogConfig,
}

impl TopicInfo {
    /// `described`, its overrides parsed over `defaults`. An override kaas does not know or
    /// refuses is left out (logged), so the topic is still served with the default.
    pub fn new(
        described: Arc<kaas_cluster::view::TopicInfo>,
        defaults: &crate::model::topic_config::TopicDefaults,
    ) -> Self {
        let mut config = TopicConfig::default();
        for (name, value) in &described.configs {
            if let Err(error) = config.set(name, value) {
                tracing::warn!(topic = described.name.as_str(), %name, %error, "ignoring a topic config of the assignment");
            }
        }
        TopicInfo {
            log_config: config.log_config(defaults),
            config,
            described,
        }
    }

    /// A topic described by its parts: `config` is checked already.
    pub fn of(
        name: kaas_cluster::ids::TopicName,
        id: Uuid,
        partitions: i32,
        config: TopicConfig,
        defaults: &crate::model::topic_config::TopicDefaults,
    ) -> Self {
        let described = kaas_cluster::view::TopicInfo {
            name,
            id: kaas_cluster::ids::TopicId::from(id),
            partitions,
            configs: config
                .overrides()
                .map(|(key, value)| (key.to_string(), value.to_string()))
                .collect(),
        };
        TopicInfo {
            described: Arc::new(described),
            log_config: config.log_config(defaults),
            config,
        }
    }

    /// Topic name.
    pub fn name(&self) -> &Arc<str> {
        self.described.name.as_arc()
    }

    /// Topic id (random, fixed at creation).
    pub fn id(&self) -> Uuid {
        Uuid::from(self.described.id)
    }

    /// Number of partitions.
    pub fn partitions(&self) -> i32 {
        self.described.partitions
    }
}

/// A snapshot of the cluster.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    /// Cluster id (fixed at first start).
    pub cluster_id: String,
    /// Topics by name.
    pub topics: BTreeMap<Arc<str>, Arc<TopicInfo>>,
    /// Topic names by id.
    pub topic_ids: HashMap<Uuid, Arc<str>>,
    /// Number of shards partitions are spread over.
    pub shards: usize,
    /// Config overrides of consumer groups, by group id.
    pub group_configs: Arc<BTreeMap<String, crate::model::group_configs::GroupConfigOverrides>>,
    /// Whether the broker runs in cluster mode (even before its first assignment).
    pub cluster_mode: bool,
    /// The assignment this view follows (cluster mode, once one is accepted).
    pub cluster: Option<Arc<kaas_cluster::view::ClusterView>>,
}

/// Who serves a partition, as the view says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// The view has no such topic or partition.
    Unknown,
    /// This broker leads it at this leader epoch (a standalone broker leads everything at
    /// [`STANDALONE_LEADER_EPOCH`]).
    Here {
        /// The leader epoch.
        leader_epoch: i32,
    },
    /// Another broker of the cluster leads it.
    Elsewhere,
}

impl ClusterView {
    /// A view of `topics`.
    pub fn new(cluster_id: String, shards: usize, topics: Vec<TopicInfo>) -> Self {
        let mut view = ClusterView {
            cluster_id,
            shards: shards.max(1),
            ..ClusterView::default()
        };
        for topic in topics {
            view.topic_ids.insert(topic.id(), topic.name().clone());
            view.topics.insert(topic.name().clone(), Arc::new(topic));
        }
        view
    }

    /// The view of an accepted assignment for this broker, whose partitions spread over
    /// `assignment.shards()` shards. A topic config the assignment gives that kaas does not
    /// know or refuses is left out (logged), so the topic is still served with the defaults.
    pub fn of_assignment(
        cluster_id: String,
        assignment: Arc<kaas_cluster::view::ClusterView>,
        defaults: &crate::model::topic_config::TopicDefaults,
    ) -> Self {
        let topics = assignment
            .topics()
            .values()
            .map(|topic| TopicInfo::new(topic.clone(), defaults))
            .collect();
        let mut view = ClusterView::new(cluster_id, assignment.shards(), topics);
        view.cluster = Some(assignment);
        view.cluster_mode = true;
        view
    }

    /// The view of a standalone broker: the one-broker assignment (version `version`) of
    /// `topics`, led by `broker`, spread over `shards` shards. Every partition is led here at
    /// [`STANDALONE_LEADER_EPOCH`].
    pub fn standalone(
        cluster_id: String,
        shards: usize,
        topics: &[TopicInfo],
        broker: &LocalBroker,
        version: u64,
        defaults: &crate::model::topic_config::TopicDefaults,
    ) -> Result<Self, kaas_cluster::assignment::AssignmentError> {
        let assignment = local_assignment(topics, broker, version)?;
        let assignment = Arc::new(kaas_cluster::view::ClusterView::new(
            &assignment,
            kaas_cluster::ids::BrokerId(broker.id),
            shards,
        ));
        let mut view = ClusterView::of_assignment(cluster_id, assignment, defaults);
        view.cluster_mode = false;
        Ok(view)
    }

    /// Whether this broker follows an assignment (cluster mode).
    pub fn is_cluster(&self) -> bool {
        self.cluster_mode
    }

    /// Who serves partition `partition` of `topic`.
    pub fn leadership(&self, topic: &str, partition: i32) -> Leadership {
        let Some(info) = self.topic(topic) else {
            return Leadership::Unknown;
        };
        if !(0..info.partitions()).contains(&partition) {
            return Leadership::Unknown;
        }
        let Some(cluster) = &self.cluster else {
            // A cluster broker before its first assignment.
            return Leadership::Unknown;
        };
        let Ok(name) = kaas_cluster::ids::TopicName::new(topic) else {
            return Leadership::Unknown;
        };
        let id = kaas_cluster::ids::TopicPartition::new(name, partition);
        match cluster.leader_of(&id) {
            None => Leadership::Unknown,
            Some(placement) if placement.leader == cluster.this_broker() => Leadership::Here {
                leader_epoch: placement.leader_epoch.0,
            },
            Some(_) => Leadership::Elsewhere,
        }
    }

    /// A topic by name.
    pub fn topic(&self, name: &str) -> Option<&Arc<TopicInfo>> {
        self.topics.get(name)
    }

    /// A topic by id.
    pub fn topic_by_id(&self, id: &Uuid) -> Option<&Arc<TopicInfo>> {
        self.topic_ids
            .get(id)
            .and_then(|name| self.topics.get(name))
    }

    /// The shard that owns a partition: a stable hash of the topic plus the partition number,
    /// so a topic's partitions spread over all shards.
    pub fn owner_shard(&self, topic: &str, partition: i32) -> usize {
        owner_shard(topic, partition, self.shards)
    }
}

/// FNV-1a (64-bit): the stable hash that places partitions on shards (kaas-cluster's).
pub use kaas_cluster::placement::fnv1a;

/// FNV-1a of the topic name plus the partition, modulo the shard count; a
/// `__consumer_offsets` partition belongs to the shard coordinating its groups.
pub fn owner_shard(topic: &str, partition: i32, shards: usize) -> usize {
    if crate::model::offsets_topic::is_offsets_topic(topic) {
        return crate::model::offsets_topic::shard_of_partition(partition, shards);
    }
    kaas_cluster::placement::owner_shard(topic, partition, shards).0
}

/// Where shards read the current view from and where a new one is published.
#[derive(Debug)]
pub struct ViewHandle {
    current: ArcSwap<ClusterView>,
}

impl ViewHandle {
    /// A handle holding `view`.
    pub fn new(view: ClusterView) -> Self {
        ViewHandle {
            current: ArcSwap::from_pointee(view),
        }
    }

    /// The current view.
    pub fn load(&self) -> Arc<ClusterView> {
        self.current.load_full()
    }

    /// Replaces the view.
    pub fn publish(&self, view: ClusterView) {
        self.current.store(Arc::new(view));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_of_a_topic_spread_over_shards() {
        let shards: Vec<usize> = (0..8).map(|p| owner_shard("orders", p, 4)).collect();
        for shard in 0..4 {
            assert_eq!(shards.iter().filter(|s| **s == shard).count(), 2);
        }
        assert_eq!(owner_shard("orders", 3, 1), 0);
    }
}
