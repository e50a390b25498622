//! Tests of shard.rs: which partitions [`Shard::log`] opens.

use std::path::Path;

use kaas_engine::{LogConfig, PartitionId};

use super::test_support::{self, run};
use super::*;
use crate::model::cluster_view::{ClusterView, TopicInfo};
use crate::model::topic_config::{TopicConfig, TopicDefaults};
use crate::protocol::Uuid;

const SHARDS: usize = 2;

fn topic(name: &str, partitions: i32) -> TopicInfo {
    let config = TopicConfig::default();
    TopicInfo {
        name: name.into(),
        id: Uuid([name.as_bytes()[0]; 16]),
        partitions,
        log_config: config.log_config(&TopicDefaults::default()),
        config,
    }
}

/// Shard 0 of a standalone broker on `root`, whose view holds `topics`.
fn shard_zero(root: &Path, topics: Vec<TopicInfo>) -> Rc<Shard> {
    test_support::shard_zero(root, ClusterView::new("c".into(), SHARDS, topics))
}

/// A partition of `topic` that shard 0 owns, and one that shard 1 owns.
fn owned_and_not(view: &ClusterView, topic: &str, partitions: i32) -> (i32, i32) {
    let owner = |partition: &i32| view.owner_shard(topic, *partition);
    let mine = (0..partitions)
        .find(|p| owner(p) == 0)
        .expect("one on shard 0");
    let theirs = (0..partitions)
        .find(|p| owner(p) == 1)
        .expect("one on shard 1");
    (mine, theirs)
}

#[test]
fn a_partition_opens_only_while_the_view_gives_it_to_this_shard() {
    run(|root| {
        Box::pin(async move {
            let shard = shard_zero(&root, vec![topic("t", 8)]);
            let (mine, theirs) = owned_and_not(&shard.view.load(), "t", 8);
            let config = LogConfig::default();
            assert!(shard
                .log(&PartitionId::new("t", mine), config.clone())
                .await
                .is_ok());
            for id in [
                PartitionId::new("t", theirs),
                PartitionId::new("t", 8),
                PartitionId::new("unknown", 0),
            ] {
                let opened = shard.log(&id, config.clone()).await;
                assert!(
                    matches!(opened, Err(PartitionError::NotServed)),
                    "{id:?}: {:?}",
                    opened.err()
                );
            }
            assert_eq!(
                shard.logs.open_partitions(),
                vec![PartitionId::new("t", mine)]
            );
            assert!(!root.join("topics").join("unknown").exists());
        })
    });
}

#[test]
fn a_request_that_outlives_its_topic_never_reopens_it() {
    run(|root| {
        Box::pin(async move {
            // A request resolved "gone" against the view that still had the topic; DeleteTopics
            // then published the view without it (and deleted what was open) before the
            // request reached this shard's log lookup.
            let shard = shard_zero(&root, vec![topic("gone", 8), topic("kept", 1)]);
            let (mine, _) = owned_and_not(&shard.view.load(), "gone", 8);
            let id = PartitionId::new("gone", mine);
            let config = shard
                .view
                .load()
                .topic("gone")
                .expect("topic")
                .log_config
                .clone();
            shard
                .view
                .publish(ClusterView::new("c".into(), SHARDS, vec![topic("kept", 1)]));

            let opened = shard.log(&id, config).await;
            assert!(
                matches!(opened, Err(PartitionError::NotServed)),
                "{:?}",
                opened.err()
            );
            assert!(shard.logs.get(&id).is_none());
            assert!(shard.logs.open_partitions().is_empty());
            assert!(
                !root.join("topics").join("gone").exists(),
                "the deleted topic's directory was created again"
            );
        })
    });
}
