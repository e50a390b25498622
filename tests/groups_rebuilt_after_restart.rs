//! A restarted broker rebuilds its groups from the data volume alone: a classic group resumes
//! Stable at its generation with its assignment, a KIP-848 group at its member epochs, and
//! committed offsets are where they were; deleting a group removes its offsets for good.

mod support;

use bytes::Bytes;
use kaas_net::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatRequest;
use kaas_net::protocol::messages::delete_groups::DeleteGroupsRequest;
use kaas_net::protocol::messages::describe_groups::DescribeGroupsRequest;
use kaas_net::protocol::messages::heartbeat::HeartbeatRequest;
use kaas_net::protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol};
use kaas_net::protocol::messages::leave_group::{LeaveGroupRequest, MemberIdentity};
use kaas_net::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kaas_net::protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestGroup};
use kaas_net::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupRequestAssignment};
use kaas_net::protocol::Response;
use support::{Kaas, WireClient};

const TOPIC: &str = "rebuilt";

fn start(dir: &std::path::Path) -> Kaas {
    let kaas = Kaas::start(
        Some(dir),
        &["--shards", "2", "--group-initial-rebalance-delay-ms", "0"],
    );
    kaas.client().create_topic(TOPIC, 3, &[]);
    kaas
}

fn join(client: &mut WireClient, group: &str, member_id: &str) -> (i16, String, i32) {
    let request = JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
        member_id: member_id.into(),
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(b"\0\x01\0\0\0\0\xff\xff\xff\xff"),
        }],
        ..Default::default()
    };
    let Response::JoinGroup(joined) = client.call(9, &request) else {
        panic!("not JoinGroup")
    };
    (joined.error_code, joined.member_id, joined.generation_id)
}

fn sync(
    client: &mut WireClient,
    group: &str,
    member_id: &str,
    generation: i32,
    give: &[u8],
) -> (i16, Bytes) {
    let request = SyncGroupRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        assignments: if give.is_empty() {
            Vec::new()
        } else {
            vec![SyncGroupRequestAssignment {
                member_id: member_id.into(),
                assignment: Bytes::copy_from_slice(give),
            }]
        },
        ..Default::default()
    };
    let Response::SyncGroup(synced) = client.call(5, &request) else {
        panic!("not SyncGroup")
    };
    (synced.error_code, synced.assignment)
}

fn heartbeat(client: &mut WireClient, group: &str, member_id: &str, generation: i32) -> i16 {
    let request = HeartbeatRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member_id.into(),
        ..Default::default()
    };
    let Response::Heartbeat(beat) = client.call(4, &request) else {
        panic!("not Heartbeat")
    };
    beat.error_code
}

fn commit(
    client: &mut WireClient,
    group: &str,
    member_id: &str,
    generation: i32,
    offset: i64,
) -> i16 {
    let request = OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: generation,
        member_id: member_id.into(),
        topics: vec![OffsetCommitRequestTopic {
            name: TOPIC.into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: 1,
                committed_offset: offset,
                committed_leader_epoch: 0,
                committed_metadata: Some("resume here".into()),
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::OffsetCommit(committed) = client.call(9, &request) else {
        panic!("not OffsetCommit")
    };
    committed.topics[0].partitions[0].error_code
}

/// Committed offsets of `group` as (partition, offset, metadata).
fn committed(client: &mut WireClient, group: &str) -> Vec<(i32, i64, String)> {
    let request = OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup {
            group_id: group.into(),
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::OffsetFetch(fetched) = client.call(8, &request) else {
        panic!("not OffsetFetch")
    };
    assert_eq!(fetched.groups[0].error_code, 0);
    fetched.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    p.partition_index,
                    p.committed_offset,
                    p.metadata.clone().unwrap_or_default(),
                )
            })
        })
        .collect()
}

#[test]
fn a_classic_group_resumes_stable_after_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = start(dir.path());
    let mut client = kaas.client();
    let (error, member, _) = join(&mut client, "classic", "");
    assert_eq!(error, 79, "MEMBER_ID_REQUIRED first");
    let (error, member_again, generation) = join(&mut client, "classic", &member);
    assert_eq!((error, member_again.as_str()), (0, member.as_str()));
    assert_eq!(
        sync(
            &mut client,
            "classic",
            &member,
            generation,
            b"partitions 0-2"
        ),
        (0, Bytes::from_static(b"partitions 0-2"))
    );
    assert_eq!(commit(&mut client, "classic", &member, generation, 42), 0);
    assert_eq!(
        commit(&mut client, "classic", &member, generation + 1, 43),
        22,
        "ILLEGAL_GENERATION"
    );

    kaas.kill9();
    kaas.restart();
    let mut client = kaas.client();
    assert_eq!(
        heartbeat(&mut client, "classic", &member, generation),
        0,
        "same member, same generation"
    );
    assert_eq!(
        heartbeat(&mut client, "classic", "someone-else", generation),
        25
    );
    assert_eq!(
        sync(&mut client, "classic", &member, generation, b""),
        (0, Bytes::from_static(b"partitions 0-2"))
    );
    assert_eq!(
        committed(&mut client, "classic"),
        vec![(1, 42, "resume here".to_string())]
    );
    let Response::DescribeGroups(described) = client.call(
        5,
        &DescribeGroupsRequest {
            groups: vec!["classic".into()],
            ..Default::default()
        },
    ) else {
        panic!("not DescribeGroups")
    };
    let group = &described.groups[0];
    assert_eq!(
        (group.group_state.as_str(), group.protocol_data.as_str()),
        ("Stable", "range")
    );
    assert_eq!(group.members.len(), 1);
    assert_eq!(group.members[0].member_id, member);
}

fn consumer_heartbeat(
    client: &mut WireClient,
    member_id: &str,
    epoch: i32,
    owned: Option<Vec<i32>>,
    topic_id: kaas_net::protocol::Uuid,
) -> (i16, i32, Option<Vec<i32>>) {
    use kaas_net::protocol::messages::consumer_group_heartbeat::TopicPartitions;
    let request = ConsumerGroupHeartbeatRequest {
        group_id: "next-gen".into(),
        member_id: member_id.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: if epoch == 0 { 30_000 } else { -1 },
        subscribed_topic_names: (epoch == 0).then(|| vec![TOPIC.to_string()]),
        topic_partitions: owned.map(|partitions| {
            if partitions.is_empty() {
                Vec::new()
            } else {
                vec![TopicPartitions {
                    topic_id,
                    partitions,
                }]
            }
        }),
        ..Default::default()
    };
    let Response::ConsumerGroupHeartbeat(beat) = client.call(1, &request) else {
        panic!("not ConsumerGroupHeartbeat")
    };
    let assigned = beat.assignment.map(|a| {
        let mut partitions: Vec<i32> = a
            .topic_partitions
            .into_iter()
            .flat_map(|t| t.partitions)
            .collect();
        partitions.sort();
        partitions
    });
    (beat.error_code, beat.member_epoch, assigned)
}

#[test]
fn a_kip_848_group_resumes_at_its_epochs_after_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = start(dir.path());
    let mut client = kaas.client();
    let topic_id = {
        use kaas_net::protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
        let request = MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                name: Some(TOPIC.into()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let Response::Metadata(metadata) = client.call(12, &request) else {
            panic!("not Metadata")
        };
        metadata.topics[0].topic_id
    };
    let member = "5Yb3VxXfS1aTRrO2kGfFhQ";
    let (error, epoch, assigned) =
        consumer_heartbeat(&mut client, member, 0, Some(vec![]), topic_id);
    assert_eq!(error, 0);
    assert!(epoch > 0);
    assert_eq!(
        assigned,
        Some(vec![0, 1, 2]),
        "the only member gets every partition"
    );
    assert_eq!(
        consumer_heartbeat(&mut client, member, epoch, Some(vec![0, 1, 2]), topic_id).0,
        0
    );

    kaas.kill9();
    kaas.restart();
    let mut client = kaas.client();
    let (error, resumed_epoch, _) =
        consumer_heartbeat(&mut client, member, epoch, Some(vec![0, 1, 2]), topic_id);
    assert_eq!(
        (error, resumed_epoch),
        (0, epoch),
        "the member keeps its epoch"
    );
    let (error, _, _) = consumer_heartbeat(&mut client, member, epoch + 1, None, topic_id);
    assert_eq!(
        error, 110,
        "FENCED_MEMBER_EPOCH for an epoch the group never gave"
    );
}

#[test]
fn a_deleted_group_comes_back_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kaas = start(dir.path());
    let mut client = kaas.client();
    let (_, member, _) = join(&mut client, "doomed", "");
    let (_, _, generation) = join(&mut client, "doomed", &member);
    sync(&mut client, "doomed", &member, generation, b"x");
    assert_eq!(commit(&mut client, "doomed", &member, generation, 7), 0);
    let delete = DeleteGroupsRequest {
        groups_names: vec!["doomed".into(), "never-existed".into()],
    };
    let Response::DeleteGroups(deleted) = client.call(2, &delete) else {
        panic!("not DeleteGroups")
    };
    let codes: Vec<i16> = deleted.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![68, 69], "NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND");

    let leave = LeaveGroupRequest {
        group_id: "doomed".into(),
        members: vec![MemberIdentity {
            member_id: member.clone(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::LeaveGroup(left) = client.call(5, &leave) else {
        panic!("not LeaveGroup")
    };
    assert_eq!((left.error_code, left.members[0].error_code), (0, 0));
    let Response::DeleteGroups(deleted) = client.call(2, &delete) else {
        panic!("not DeleteGroups")
    };
    assert_eq!(deleted.results[0].error_code, 0);
    assert!(
        committed(&mut client, "doomed").is_empty(),
        "offsets went with the group"
    );
    assert_eq!(
        commit(&mut client, "doomed", "", -1, 9),
        0,
        "the id can be used again"
    );
    assert_eq!(
        committed(&mut client, "doomed"),
        vec![(1, 9, "resume here".to_string())]
    );
}
