//! TxnOffsetCommit, transaction markers and OffsetFetch's `require_stable` on a coordinator
//! over in-memory storage.

use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use kaas_cluster::ids::TopicName;
use kaas_engine::Storage;

use super::*;
use crate::groups::classic::{
    ClassicGroup, ClassicGroupConfig, ClassicState, JoinRequest, Reply, SyncRequest,
};
use crate::groups::config::GroupConfig;
use crate::groups::consumer_group::{ConsumerGroup, Heartbeat};
use crate::groups::offsets::{
    commit, fetch, fetch_offsets, Committer, FetchedPartition, OffsetToCommit,
};
use crate::model::cluster_view::{TopicInfo, ViewHandle};
use crate::model::topic_config::{TopicConfig, TopicDefaults};

const GROUP: &str = "g";
const TOPIC_ID: Uuid = Uuid([7; 16]);

fn run<F: Future<Output = ()> + 'static>(test: impl FnOnce() -> F + Send + 'static) {
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { test().await })
        .expect("executor")
        .join()
        .expect("join");
}

/// A standalone view with topic `t` (2 partitions).
fn view() -> ClusterView {
    let topic = TopicInfo::of(
        TopicName::new("t").expect("legal"),
        TOPIC_ID,
        2,
        TopicConfig::default(),
        &TopicDefaults::default(),
    );
    ClusterView::new("c".into(), 1, vec![topic])
}

/// A loaded coordinator of shard `shard` out of `shards` on `storage`.
async fn coordinator_on(storage: &Storage, shard: usize, shards: usize) -> GroupCoordinator {
    let handle = Arc::new(ViewHandle::new(view()));
    let coordinator = GroupCoordinator::new(
        shard,
        shards,
        storage.clone(),
        GroupConfig::default(),
        handle,
    );
    coordinator.load().await;
    coordinator
}

fn producer(producer_id: i64, producer_epoch: i16) -> TxnCommitter {
    TxnCommitter {
        producer_id,
        producer_epoch,
        member_id: String::new(),
        group_instance_id: None,
        generation_or_epoch: -1,
        api_version: 5,
    }
}

fn member(producer: TxnCommitter, member_id: &str, generation_or_epoch: i32) -> TxnCommitter {
    TxnCommitter {
        member_id: member_id.into(),
        generation_or_epoch,
        ..producer
    }
}

fn to_commit(partition: i32, offset: i64) -> TxnOffsetToCommit {
    TxnOffsetToCommit {
        topic: TopicRef::Name("t".into()),
        partition,
        offset,
        leader_epoch: 3,
        metadata: Some(format!("m{offset}")),
    }
}

async fn txn_commit(
    coordinator: &GroupCoordinator,
    group: &str,
    committer: TxnCommitter,
    offsets: Vec<TxnOffsetToCommit>,
) -> Vec<ErrorCode> {
    commit_transactional(coordinator, &view(), group, committer, offsets, 1_000).await
}

async fn plain_commit(coordinator: &GroupCoordinator, group: &str, partition: i32, offset: i64) {
    let committer = Committer {
        member_id: String::new(),
        group_instance_id: None,
        generation_or_epoch: -1,
        api_version: 8,
    };
    let offsets = vec![OffsetToCommit {
        topic: "t".into(),
        partition,
        offset,
        leader_epoch: -1,
        metadata: None,
    }];
    let errors = commit(coordinator, &view(), group, committer, offsets, 1).await;
    assert_eq!(errors, vec![ErrorCode::None]);
}

/// OffsetFetch of partitions 0 and 1 of `t`: (offset or -1, error) each.
async fn fetched(
    coordinator: &GroupCoordinator,
    group: &str,
    require_stable: bool,
) -> Vec<(i64, ErrorCode)> {
    let topics = Some(vec![("t".to_owned(), vec![0, 1])]);
    let answer = fetch_offsets(coordinator, group, None, topics, require_stable)
        .await
        .expect("no group-level error");
    answer
        .into_iter()
        .flat_map(|(_, partitions)| partitions)
        .map(|p| (p.committed.map_or(-1, |c| c.offset), p.error))
        .collect()
}

#[test]
fn pending_offsets_show_only_once_their_transaction_commits() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = coordinator_on(&storage, 0, 1).await;
        plain_commit(&coordinator, GROUP, 0, 5).await;
        plain_commit(&coordinator, GROUP, 1, 6).await;
        let errors = txn_commit(&coordinator, GROUP, producer(9, 0), vec![to_commit(0, 10)]).await;
        assert_eq!(errors, vec![ErrorCode::None]);

        // Without require_stable: the last committed offsets.
        assert_eq!(
            fetched(&coordinator, GROUP, false).await,
            vec![(5, ErrorCode::None), (6, ErrorCode::None)]
        );
        let old_shape = fetch(&coordinator, GROUP, None, None).await.expect("fetch");
        assert_eq!(old_shape.len(), 1);
        assert_eq!(old_shape[0].1[0].1.as_ref().map(|c| c.offset), Some(5));
        // With it: the partition with a pending offset is unstable, the other is answered.
        assert_eq!(
            fetched(&coordinator, GROUP, true).await,
            vec![(-1, ErrorCode::UnstableOffsetCommit), (6, ErrorCode::None)]
        );
        let all = fetch_offsets(&coordinator, GROUP, None, None, true)
            .await
            .expect("fetch all");
        assert_eq!(
            all,
            vec![(
                "t".to_owned(),
                vec![
                    FetchedPartition {
                        partition: 0,
                        committed: None,
                        error: ErrorCode::UnstableOffsetCommit,
                    },
                    FetchedPartition {
                        partition: 1,
                        committed: coordinator
                            .find(GROUP)
                            .await
                            .expect("ready")
                            .expect("group")
                            .store
                            .offset("t", 1),
                        error: ErrorCode::None,
                    },
                ]
            )]
        );

        let partition = offsets_topic::partition_for(GROUP);
        assert_eq!(
            complete_transaction(&coordinator, partition, 9, 0, true).await,
            ErrorCode::None
        );
        assert_eq!(
            fetched(&coordinator, GROUP, true).await,
            vec![(10, ErrorCode::None), (6, ErrorCode::None)]
        );
        let group = coordinator
            .find(GROUP)
            .await
            .expect("ready")
            .expect("group");
        let committed = group.store.offset("t", 0).expect("committed");
        assert_eq!(
            (committed.leader_epoch, committed.metadata.as_str()),
            (3, "m10")
        );
    });
}

#[test]
fn an_aborted_transaction_leaves_the_committed_offsets() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = coordinator_on(&storage, 0, 1).await;
        plain_commit(&coordinator, GROUP, 0, 5).await;
        let errors = txn_commit(
            &coordinator,
            GROUP,
            producer(9, 0),
            vec![to_commit(0, 10), to_commit(1, 11)],
        )
        .await;
        assert_eq!(errors, vec![ErrorCode::None, ErrorCode::None]);
        let partition = offsets_topic::partition_for(GROUP);
        assert_eq!(
            complete_transaction(&coordinator, partition, 9, 0, false).await,
            ErrorCode::None
        );
        assert_eq!(
            fetched(&coordinator, GROUP, true).await,
            vec![(5, ErrorCode::None), (-1, ErrorCode::None)]
        );
        let group = coordinator
            .find(GROUP)
            .await
            .expect("ready")
            .expect("group");
        assert!(!group.store.has_pending_offsets());
        // The marker sent again changes nothing.
        assert_eq!(
            complete_transaction(&coordinator, partition, 9, 0, true).await,
            ErrorCode::None
        );
        assert_eq!(group.store.offset("t", 1), None);
    });
}

#[test]
fn pending_and_completed_transactions_survive_a_reload() {
    run(|| async {
        let storage = Storage::memory();
        let partition = offsets_topic::partition_for(GROUP);
        {
            let coordinator = coordinator_on(&storage, 0, 1).await;
            let committed =
                txn_commit(&coordinator, GROUP, producer(1, 0), vec![to_commit(0, 10)]).await;
            assert_eq!(committed, vec![ErrorCode::None]);
            assert_eq!(
                complete_transaction(&coordinator, partition, 1, 0, true).await,
                ErrorCode::None
            );
            let pending =
                txn_commit(&coordinator, GROUP, producer(2, 4), vec![to_commit(1, 20)]).await;
            assert_eq!(pending, vec![ErrorCode::None]);
        }
        // A new coordinator loads the group from its store alone.
        let coordinator = coordinator_on(&storage, 0, 1).await;
        assert_eq!(
            fetched(&coordinator, GROUP, true).await,
            vec![(10, ErrorCode::None), (-1, ErrorCode::UnstableOffsetCommit)]
        );
        assert_eq!(
            complete_transaction(&coordinator, partition, 2, 5, true).await,
            ErrorCode::None
        );
        assert_eq!(
            fetched(&coordinator, GROUP, true).await,
            vec![(10, ErrorCode::None), (20, ErrorCode::None)]
        );
        let reloaded = coordinator_on(&storage, 0, 1).await;
        assert_eq!(
            fetched(&reloaded, GROUP, true).await,
            vec![(10, ErrorCode::None), (20, ErrorCode::None)]
        );
    });
}

/// A JoinGroup request for a consumer.
fn join_request(instance: Option<&str>) -> JoinRequest {
    JoinRequest {
        member_id: String::new(),
        group_instance_id: instance.map(Into::into),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        require_known_member_id: false,
    }
}

/// A Stable classic group with one static member (instance `i`) at generation 1; its id.
fn stable_classic_group() -> (ClassicGroup, String) {
    let config = ClassicGroupConfig {
        initial_rebalance_delay_ms: 0,
        ..ClassicGroupConfig::default()
    };
    let mut group = ClassicGroup::new(GROUP);
    let joined = match group.join(join_request(Some("i")), &config, 0) {
        Reply::Now(result) => result,
        Reply::Later(mut receiver) => receiver
            .try_recv()
            .expect("not cancelled")
            .expect("a lone member completes the join at once"),
    };
    assert_eq!(joined.error, ErrorCode::None);
    assert_eq!(joined.generation_id, 1);
    let member_id = joined.member_id;
    let sync = SyncRequest {
        member_id: member_id.clone(),
        group_instance_id: Some("i".into()),
        generation_id: 1,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: vec![(member_id.clone(), Bytes::from_static(b"assignment"))],
    };
    let synced = match group.sync(sync, 1) {
        Reply::Now(result) => result,
        Reply::Later(mut receiver) => receiver
            .try_recv()
            .expect("not cancelled")
            .expect("the leader's sync completes the generation"),
    };
    assert_eq!(synced.error, ErrorCode::None);
    assert_eq!(group.state(), ClassicState::Stable);
    (group, member_id)
}

#[test]
fn classic_members_are_checked_as_kafka_checks_transactional_commits() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = coordinator_on(&storage, 0, 1).await;

        // No group: a member's generation is ILLEGAL_GENERATION (nothing is created), an
        // anonymous producer creates a simple group.
        let refused = txn_commit(
            &coordinator,
            GROUP,
            member(producer(1, 0), "m", 1),
            vec![to_commit(0, 1)],
        )
        .await;
        assert_eq!(refused, vec![ErrorCode::IllegalGeneration]);
        assert!(coordinator.find(GROUP).await.expect("ready").is_none());
        let accepted = txn_commit(&coordinator, GROUP, producer(1, 0), vec![to_commit(0, 1)]).await;
        assert_eq!(accepted, vec![ErrorCode::None]);

        let group = coordinator
            .find(GROUP)
            .await
            .expect("ready")
            .expect("group");
        let (classic, member_id) = stable_classic_group();
        *group.state.borrow_mut() = GroupState::Classic(classic);
        let with_instance = |instance: &str, id: &str, generation: i32| TxnCommitter {
            group_instance_id: Some(instance.into()),
            ..member(producer(1, 0), id, generation)
        };
        let cases = [
            (member(producer(1, 0), &member_id, 1), ErrorCode::None),
            (
                member(producer(1, 0), &member_id, 0),
                ErrorCode::IllegalGeneration,
            ),
            (
                member(producer(1, 0), "other", 1),
                ErrorCode::UnknownMemberId,
            ),
            (with_instance("i", &member_id, 1), ErrorCode::None),
            (with_instance("i", "other", 1), ErrorCode::FencedInstanceId),
            (
                with_instance("j", &member_id, 1),
                ErrorCode::UnknownMemberId,
            ),
            // No member named (TxnOffsetCommit v0–v2): accepted although the group has
            // members, where an OffsetCommit would be UNKNOWN_MEMBER_ID.
            (producer(1, 0), ErrorCode::None),
        ];
        for (committer, expected) in cases {
            let what = format!("{committer:?}");
            let errors = txn_commit(&coordinator, GROUP, committer, vec![to_commit(1, 2)]).await;
            assert_eq!(errors, vec![expected], "{what}");
        }
    });
}

#[test]
fn consumer_group_members_are_checked_as_kafka_checks_transactional_commits() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = coordinator_on(&storage, 0, 1).await;
        plain_commit(&coordinator, GROUP, 0, 1).await;
        let group = coordinator
            .find(GROUP)
            .await
            .expect("ready")
            .expect("group");
        let mut consumer = ConsumerGroup::new(GROUP);
        let join = Heartbeat {
            member_id: "m".into(),
            member_epoch: 0,
            rebalance_timeout_ms: 30_000,
            subscribed_topic_names: Some(vec!["t".into()]),
            owned: Some(vec![]),
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            api_version: 1,
            ..Heartbeat::default()
        };
        let topics = coordinator.topics();
        let config = coordinator.consumer_config(GROUP);
        let joined = consumer.heartbeat(join, &topics, &config, 0);
        assert_eq!((joined.error, joined.member_epoch), (ErrorCode::None, 1));
        *group.state.borrow_mut() = GroupState::Consumer(consumer);

        let cases = [
            (member(producer(1, 0), "m", 1), ErrorCode::None),
            // A newer epoch: STALE_MEMBER_EPOCH, which Kafka answers ILLEGAL_GENERATION here.
            (member(producer(1, 0), "m", 2), ErrorCode::IllegalGeneration),
            (
                member(producer(1, 0), "m", -2),
                ErrorCode::IllegalGeneration,
            ),
            (member(producer(1, 0), "x", 1), ErrorCode::UnknownMemberId),
            (producer(1, 0), ErrorCode::None),
        ];
        for (committer, expected) in cases {
            let what = format!("{committer:?}");
            let errors = txn_commit(&coordinator, GROUP, committer, vec![to_commit(1, 2)]).await;
            assert_eq!(errors, vec![expected], "{what}");
        }
        // An older epoch, for a partition not owned since then: the whole request fails
        // (ILLEGAL_GENERATION), the unknown partition keeps its own error, nothing is written.
        let before = group.store.pending_offsets(5);
        let errors = txn_commit(
            &coordinator,
            GROUP,
            member(producer(5, 0), "m", 0),
            vec![to_commit(0, 3), to_commit(9, 3)],
        )
        .await;
        assert_eq!(
            errors,
            vec![
                ErrorCode::IllegalGeneration,
                ErrorCode::UnknownTopicOrPartition
            ]
        );
        assert_eq!(group.store.pending_offsets(5), before);
    });
}

#[test]
fn unknown_topics_and_partitions_are_refused_per_offset() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = coordinator_on(&storage, 0, 1).await;
        let by_id = |id: Uuid, partition: i32| TxnOffsetToCommit {
            topic: TopicRef::Id(id),
            ..to_commit(partition, 4)
        };
        let unknown_name = TxnOffsetToCommit {
            topic: TopicRef::Name("nope".into()),
            ..to_commit(0, 4)
        };
        // Nothing known: the group is not looked at, and not created.
        let errors = txn_commit(
            &coordinator,
            "other",
            member(producer(1, 0), "m", 7),
            vec![
                unknown_name.clone(),
                to_commit(2, 4),
                by_id(Uuid([9; 16]), 0),
            ],
        )
        .await;
        assert_eq!(
            errors,
            vec![
                ErrorCode::UnknownTopicOrPartition,
                ErrorCode::UnknownTopicOrPartition,
                ErrorCode::UnknownTopicId,
            ]
        );
        assert!(coordinator.find("other").await.expect("ready").is_none());
        // Known ones go on: by name, by id (v6), and `__consumer_offsets` itself.
        let offsets_topic_id = offsets_topic::topic_id("c");
        let errors = txn_commit(
            &coordinator,
            GROUP,
            producer(1, 0),
            vec![
                unknown_name,
                by_id(TOPIC_ID, 1),
                TxnOffsetToCommit {
                    topic: TopicRef::Name(offsets_topic::NAME.into()),
                    ..to_commit(49, 4)
                },
                by_id(offsets_topic_id, 3),
            ],
        )
        .await;
        assert_eq!(
            errors,
            vec![
                ErrorCode::UnknownTopicOrPartition,
                ErrorCode::None,
                ErrorCode::None,
                ErrorCode::None,
            ]
        );
        let group = coordinator
            .find(GROUP)
            .await
            .expect("ready")
            .expect("group");
        let pending: Vec<(String, i32)> = group
            .store
            .pending_offsets(1)
            .into_iter()
            .map(|(topic, partition, _)| (topic, partition))
            .collect();
        assert_eq!(
            pending,
            vec![
                (offsets_topic::NAME.to_owned(), 3),
                (offsets_topic::NAME.to_owned(), 49),
                ("t".to_owned(), 1),
            ]
        );
        // A group-level error goes to the known offsets only; the group id is checked.
        let errors = txn_commit(
            &coordinator,
            "",
            producer(1, 0),
            vec![to_commit(0, 1), to_commit(5, 1)],
        )
        .await;
        assert_eq!(
            errors,
            vec![
                ErrorCode::InvalidGroupId,
                ErrorCode::UnknownTopicOrPartition
            ]
        );
    });
}

#[test]
fn too_large_metadata_is_refused_per_offset() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = coordinator_on(&storage, 0, 1).await;
        let large = TxnOffsetToCommit {
            metadata: Some("x".repeat(coordinator.config.offset_metadata_max_bytes + 1)),
            ..to_commit(0, 1)
        };
        let errors = txn_commit(
            &coordinator,
            GROUP,
            producer(1, 0),
            vec![large, to_commit(1, 2)],
        )
        .await;
        assert_eq!(
            errors,
            vec![ErrorCode::OffsetMetadataTooLarge, ErrorCode::None]
        );
        let group = coordinator
            .find(GROUP)
            .await
            .expect("ready")
            .expect("group");
        assert_eq!(group.store.pending_offsets(1).len(), 1);
    });
}

#[test]
fn a_stale_producer_epoch_is_refused() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = coordinator_on(&storage, 0, 1).await;
        let partition = offsets_topic::partition_for(GROUP);
        let first = txn_commit(&coordinator, GROUP, producer(1, 3), vec![to_commit(0, 10)]).await;
        assert_eq!(first, vec![ErrorCode::None]);
        let stale = txn_commit(&coordinator, GROUP, producer(1, 2), vec![to_commit(0, 99)]).await;
        assert_eq!(stale, vec![ErrorCode::InvalidProducerEpoch]);
        assert_eq!(
            complete_transaction(&coordinator, partition, 1, 2, true).await,
            ErrorCode::InvalidProducerEpoch
        );
        let group = coordinator
            .find(GROUP)
            .await
            .expect("ready")
            .expect("group");
        assert!(
            group.store.has_pending_offset("t", 0),
            "the stale marker wrote nothing"
        );
        // Transactions v2 markers carry the bumped epoch.
        assert_eq!(
            complete_transaction(&coordinator, partition, 1, 4, true).await,
            ErrorCode::None
        );
        assert_eq!(group.store.offset("t", 0).map(|c| c.offset), Some(10));
    });
}

#[test]
fn a_marker_completes_every_group_of_its_partition_and_no_other() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = coordinator_on(&storage, 0, 1).await;
        // Kafka's `abs(hashCode) % 50` puts both in partition 29; "g" is elsewhere.
        let (first, second) = ("lag-tool", "g55");
        assert_eq!(offsets_topic::partition_for(first), 29);
        assert_eq!(offsets_topic::partition_for(second), 29);
        assert_ne!(offsets_topic::partition_for(GROUP), 29);
        for group in [first, second, GROUP] {
            let errors =
                txn_commit(&coordinator, group, producer(1, 0), vec![to_commit(0, 10)]).await;
            assert_eq!(errors, vec![ErrorCode::None], "{group}");
        }
        let other_producer =
            txn_commit(&coordinator, first, producer(2, 0), vec![to_commit(1, 20)]).await;
        assert_eq!(other_producer, vec![ErrorCode::None]);

        assert_eq!(
            complete_transaction(&coordinator, 29, 1, 0, true).await,
            ErrorCode::None
        );
        for group in [first, second] {
            assert_eq!(
                fetched(&coordinator, group, true).await[0],
                (10, ErrorCode::None),
                "{group}"
            );
        }
        assert_eq!(
            fetched(&coordinator, first, true).await[1],
            (-1, ErrorCode::UnstableOffsetCommit),
            "another producer's offset stays pending"
        );
        assert_eq!(
            fetched(&coordinator, GROUP, true).await[0],
            (-1, ErrorCode::UnstableOffsetCommit),
            "a group of another partition is not touched"
        );
        assert_eq!(
            complete_transaction(&coordinator, 50, 1, 0, true).await,
            ErrorCode::UnknownTopicOrPartition
        );
    });
}

#[test]
fn a_marker_for_a_partition_of_another_shard_is_not_leader_or_follower() {
    run(|| async {
        let storage = Storage::memory();
        let shards = 2;
        let partition = offsets_topic::partition_for(GROUP);
        let mine = offsets_topic::shard_of_partition(partition, shards);
        let other = coordinator_on(&storage, 1 - mine, shards).await;
        assert_eq!(
            complete_transaction(&other, partition, 1, 0, true).await,
            ErrorCode::NotLeaderOrFollower
        );
        let handle = Arc::new(ViewHandle::new(view()));
        let loading = GroupCoordinator::new(mine, shards, storage, GroupConfig::default(), handle);
        assert_eq!(
            complete_transaction(&loading, partition, 1, 0, true).await,
            ErrorCode::NotLeaderOrFollower,
            "COORDINATOR_LOAD_IN_PROGRESS, translated for the transaction coordinator"
        );
        let errors = commit_transactional(
            &loading,
            &view(),
            GROUP,
            TxnCommitter {
                api_version: 1,
                ..producer(1, 0)
            },
            vec![to_commit(0, 1)],
            0,
        )
        .await;
        assert_eq!(
            errors,
            vec![ErrorCode::CoordinatorNotAvailable],
            "v0 and v1 get COORDINATOR_NOT_AVAILABLE while loading"
        );
    });
}

#[test]
fn offsets_with_pending_transactions_are_not_expired_and_keep_the_group() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = coordinator_on(&storage, 0, 1).await;
        plain_commit(&coordinator, GROUP, 0, 5).await;
        let errors = txn_commit(
            &coordinator,
            GROUP,
            producer(1, 0),
            vec![to_commit(0, 6), to_commit(1, 7)],
        )
        .await;
        assert_eq!(errors, vec![ErrorCode::None, ErrorCode::None]);
        // Long after any retention: nothing expires while the transaction is open.
        let later = i64::MAX / 2;
        assert_eq!(coordinator.expire_offsets(later).await, (0, 0));
        assert!(coordinator.find(GROUP).await.expect("ready").is_some());
        let partition = offsets_topic::partition_for(GROUP);
        assert_eq!(
            complete_transaction(&coordinator, partition, 1, 0, false).await,
            ErrorCode::None
        );
        assert_eq!(coordinator.expire_offsets(later).await, (1, 1));
        assert!(coordinator.find(GROUP).await.expect("ready").is_none());
    });
}

#[test]
fn a_completed_transaction_shows_in_consumer_offsets() {
    run(|| async {
        let storage = Storage::memory();
        let coordinator = Rc::new(coordinator_on(&storage, 0, 1).await);
        let partition = offsets_topic::partition_for(GROUP);
        let view = view();
        coordinator
            .offsets_topic()
            .sync(&coordinator.groups(), &view)
            .await;
        let start = coordinator
            .offsets_topic()
            .high_watermark(partition)
            .expect("served");
        let errors = txn_commit(&coordinator, GROUP, producer(1, 0), vec![to_commit(0, 10)]).await;
        assert_eq!(errors, vec![ErrorCode::None]);
        coordinator
            .offsets_topic()
            .sync(&coordinator.groups(), &view)
            .await;
        let before = coordinator
            .offsets_topic()
            .high_watermark(partition)
            .expect("served");
        assert_eq!(
            before, start,
            "a pending offset is no committed one: no record yet"
        );
        assert_eq!(
            complete_transaction(&coordinator, partition, 1, 0, true).await,
            ErrorCode::None
        );
        coordinator
            .offsets_topic()
            .sync(&coordinator.groups(), &view)
            .await;
        let read = coordinator
            .offsets_topic()
            .read(partition, before, usize::MAX)
            .expect("read");
        let key = offsets_topic::record_format::offset_commit_key(GROUP, "t", 0);
        let group = coordinator
            .find(GROUP)
            .await
            .expect("ready")
            .expect("group");
        let committed = group.store.offset("t", 0).expect("committed");
        let value = offsets_topic::record_format::offset_commit_value(&committed, Some(TOPIC_ID));
        assert!(
            read.batches.iter().any(|batch| {
                contains(batch, &key) && contains(batch, &value) && !is_transactional(batch)
            }),
            "the committed offset is a plain OffsetCommit record after the marker"
        );
    });
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// Whether a RecordBatch v2 has its transactional attribute (bit 4) set.
fn is_transactional(batch: &[u8]) -> bool {
    batch.len() > 22 && (i16::from_be_bytes([batch[21], batch[22]]) & 0x10) != 0
}
