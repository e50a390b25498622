//! What Metadata says about brokers and leaders: every broker of the assignment the broker
//! follows (a standalone broker's own lists it alone) and each partition's leader and leader
//! epoch (replicas = isr = [leader]: each partition has one copy, on the shared volume);
//! before a cluster broker's first assignment, this broker alone and no leaders.

use crate::model::cluster_view::ClusterView;
use crate::protocol::messages::metadata::MetadataResponseBroker;
use crate::shard::config::BrokerConfig;

/// The brokers Metadata lists.
pub fn brokers(config: &BrokerConfig, view: &ClusterView) -> Vec<MetadataResponseBroker> {
    match &view.cluster {
        Some(cluster) => cluster
            .brokers()
            .values()
            .map(|broker| MetadataResponseBroker {
                node_id: broker.id.0,
                host: broker.host.clone(),
                port: i32::from(broker.port),
                rack: None,
            })
            .collect(),
        None => vec![MetadataResponseBroker {
            node_id: config.node_id,
            host: config.advertised_host.clone(),
            port: config.advertised_port,
            rack: None,
        }],
    }
}

/// The leader and leader epoch of partition `partition` of `topic`.
pub fn leader(view: &ClusterView, topic: &str, partition: i32) -> (i32, i32) {
    let Some(cluster) = &view.cluster else {
        // A cluster broker before its first assignment knows no leader.
        return (-1, -1);
    };
    let Ok(name) = kaas_cluster::ids::TopicName::new(topic) else {
        return (-1, -1);
    };
    cluster
        .leader_of(&kaas_cluster::ids::TopicPartition::new(name, partition))
        .map_or((-1, -1), |placement| {
            (placement.leader.0, placement.leader_epoch.0)
        })
}
