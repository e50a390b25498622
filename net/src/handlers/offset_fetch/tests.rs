//! Tests of offset_fetch.rs: `require_stable` reaches the group side in both request forms.

use super::*;
use crate::groups::offsets::{Committer, OffsetToCommit};
use crate::groups::txn_offsets::{commit_transactional, TopicRef, TxnCommitter, TxnOffsetToCommit};
use crate::protocol::messages::offset_fetch::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use crate::shard::test_support::{run, shard_zero, standalone_view, topic};

const GROUP: &str = "g";

/// Group `g` has offset 5 committed on `t`-0 and offset 8 pending in producer 1's open
/// transaction.
async fn commit_then_commit_transactionally(shard: &Rc<Shard>) {
    let view = shard.view.load();
    let committer = Committer {
        member_id: String::new(),
        group_instance_id: None,
        generation_or_epoch: -1,
        api_version: 8,
    };
    let plain = OffsetToCommit {
        topic: "t".into(),
        partition: 0,
        offset: 5,
        leader_epoch: -1,
        metadata: None,
    };
    let errors = offsets::commit(&shard.groups, &view, GROUP, committer, vec![plain], 1).await;
    assert_eq!(errors, vec![ErrorCode::None]);
    let producer = TxnCommitter {
        producer_id: 1,
        producer_epoch: 0,
        member_id: String::new(),
        group_instance_id: None,
        generation_or_epoch: -1,
        api_version: 5,
    };
    let pending = TxnOffsetToCommit {
        topic: TopicRef::Name("t".into()),
        partition: 0,
        offset: 8,
        leader_epoch: -1,
        metadata: None,
    };
    let errors =
        commit_transactional(&shard.groups, &view, GROUP, producer, vec![pending], 2).await;
    assert_eq!(errors, vec![ErrorCode::None]);
}

/// OffsetFetch v7 of `t`-0: (offset, error).
async fn fetch_v7(shard: &Rc<Shard>, require_stable: bool) -> (i64, i16) {
    let request = OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: Some(vec![OffsetFetchRequestTopic {
            name: "t".into(),
            partition_indexes: vec![0],
        }]),
        require_stable,
        ..Default::default()
    };
    let response = handle(shard, request, 7).await;
    assert_eq!(response.error_code, 0);
    let partition = &response.topics[0].partitions[0];
    (partition.committed_offset, partition.error_code)
}

/// OffsetFetch v8 of `t`-0 in the groups form: (offset, error).
async fn fetch_v8(shard: &Rc<Shard>, require_stable: bool) -> (i64, i16) {
    let request = OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup {
            group_id: GROUP.into(),
            topics: Some(vec![OffsetFetchRequestTopics {
                name: "t".into(),
                partition_indexes: vec![0],
                ..Default::default()
            }]),
            ..Default::default()
        }],
        require_stable,
        ..Default::default()
    };
    let response = handle(shard, request, 8).await;
    let group = &response.groups[0];
    assert_eq!(group.error_code, 0);
    let partition = &group.topics[0].partitions[0];
    (partition.committed_offset, partition.error_code)
}

#[test]
fn require_stable_answers_unstable_offset_commit_while_a_transaction_is_pending() {
    run(|root| {
        Box::pin(async move {
            let topic = topic("t", 1);
            let shard = shard_zero(&root, standalone_view(1, &[topic]));
            shard.groups.load().await;
            commit_then_commit_transactionally(&shard).await;
            let unstable = ErrorCode::UnstableOffsetCommit.code();
            assert_eq!(fetch_v7(&shard, true).await, (-1, unstable));
            assert_eq!(fetch_v7(&shard, false).await, (5, 0));
            assert_eq!(fetch_v8(&shard, true).await, (-1, unstable));
            assert_eq!(fetch_v8(&shard, false).await, (5, 0));
        })
    });
}
