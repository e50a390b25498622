//! Tests of shard.rs: which partitions [`Shard::log`] serves: those opened by command only.

use std::path::Path;

use kaas_engine::PartitionId;

use super::test_support::{self, run, topic};
use super::*;
use crate::model::cluster_view::{ClusterView, TopicInfo};

const SHARDS: usize = 2;

/// The view of a standalone broker of `SHARDS` shards holding `topics`.
fn standalone(topics: &[TopicInfo]) -> ClusterView {
    test_support::standalone_view(SHARDS, topics)
}

/// Shard 0 of a standalone broker on `root`, whose view holds `topics`.
fn shard_zero(root: &Path, topics: Vec<TopicInfo>) -> Rc<Shard> {
    test_support::shard_zero(root, standalone(&topics))
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

/// Opens `id` on `shard` by command, at the standalone epoch.
async fn open_by_command(shard: &Rc<Shard>, id: &PartitionId) {
    let epoch = crate::model::cluster_view::STANDALONE_LEADER_EPOCH;
    test_support::open_by_command(shard, &id.topic, id.partition, epoch).await;
}

#[test]
fn a_partition_is_served_only_once_opened_by_command_on_its_shard() {
    run(|root| {
        Box::pin(async move {
            let shard = shard_zero(&root, vec![topic("t", 8)]);
            let (mine, theirs) = owned_and_not(&shard.view.load(), "t", 8);
            let id = PartitionId::new("t", mine);
            // A request never opens a partition, not even one this shard owns.
            assert!(matches!(shard.log(&id), Err(PartitionError::NotLeader)));
            assert!(shard.logs.open_partitions().is_empty());
            open_by_command(&shard, &id).await;
            assert!(shard.log(&id).is_ok());
            assert!(root
                .join("topics")
                .join("t")
                .join(mine.to_string())
                .exists());
            assert!(matches!(
                shard.log(&PartitionId::new("t", theirs)),
                Err(PartitionError::NotLeader)
            ));
            for id in [PartitionId::new("t", 8), PartitionId::new("unknown", 0)] {
                let opened = shard.log(&id);
                assert!(
                    matches!(opened, Err(PartitionError::NotServed)),
                    "{id:?}: {:?}",
                    opened.err()
                );
            }
            assert_eq!(shard.logs.open_partitions(), vec![id]);
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
            shard.view.publish(standalone(&[topic("kept", 1)]));

            let opened = shard.log(&id);
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
