//! A classic group that moves to another broker keeps its state there (cluster mode, two real
//! `kaas` processes on one data directory): the same member, at the same generation, commits
//! and heartbeats on the new coordinator and reads back what it committed on the old one.
//! Kafka's new coordinator loads the group from `__consumer_offsets` before it answers for it
//! (COORDINATOR_LOAD_IN_PROGRESS meanwhile), so a group with offsets and members is never
//! GROUP_ID_NOT_FOUND there. Two moves: one the assignment names (`consumerGroups` changes,
//! checked from the first request the new coordinator answers), and one it stops naming, whose
//! fallback coordinator is the other broker (never adopted by a command: the first request
//! loads it).

mod support;

use bytes::Bytes;
use kaas_net::protocol::messages::heartbeat::HeartbeatRequest;
use kaas_net::protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol};
use kaas_net::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kaas_net::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupRequestAssignment};
use kaas_net::protocol::Response;
use std::time::{Duration, Instant};
use support::cluster::{
    endpoints, file_brokers, group_whose_fallback_is_broker_1, start_all, write_assignment,
};
use support::WireClient;

const TOPIC: &str = "moves";
const NAMED: &str = "named-mover";
const NOT_COORDINATOR: i16 = 16;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

/// A member of a classic group: its id and generation.
struct Member {
    group: String,
    id: String,
    generation: i32,
}

fn join_request(group: &str, member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 30_000,
        member_id: member_id.into(),
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from_static(b"\0\0\0\0\0\x01\0\x05moves\xff\xff\xff\xff"),
        }],
        ..Default::default()
    }
}

/// Joins `group` (MEMBER_ID_REQUIRED, then the join proper) and syncs as its leader.
fn join_and_sync(client: &mut WireClient, group: &str) -> Member {
    let Response::JoinGroup(first) = client.call(9, &join_request(group, "")) else {
        panic!("not JoinGroup")
    };
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED first");
    let Response::JoinGroup(joined) = client.call(9, &join_request(group, &first.member_id)) else {
        panic!("not JoinGroup")
    };
    assert_eq!(joined.error_code, 0, "joined {group}");
    let sync = SyncGroupRequest {
        group_id: group.into(),
        generation_id: joined.generation_id,
        member_id: joined.member_id.clone(),
        assignments: vec![SyncGroupRequestAssignment {
            member_id: joined.member_id.clone(),
            assignment: Bytes::from_static(b"partition 0"),
        }],
        ..Default::default()
    };
    let Response::SyncGroup(synced) = client.call(5, &sync) else {
        panic!("not SyncGroup")
    };
    assert_eq!(synced.error_code, 0, "synced {group}");
    Member {
        group: group.into(),
        id: joined.member_id,
        generation: joined.generation_id,
    }
}

/// OffsetCommit v9 (the version franz-go and the Java client send) of `offset` on partition 0.
fn commit(client: &mut WireClient, member: &Member, offset: i64) -> i16 {
    let request = OffsetCommitRequest {
        group_id: member.group.clone(),
        generation_id_or_member_epoch: member.generation,
        member_id: member.id.clone(),
        topics: vec![OffsetCommitRequestTopic {
            name: TOPIC.into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: offset,
                committed_leader_epoch: 0,
                committed_metadata: None,
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

fn heartbeat(client: &mut WireClient, member: &Member) -> i16 {
    let request = HeartbeatRequest {
        group_id: member.group.clone(),
        generation_id: member.generation,
        member_id: member.id.clone(),
        ..Default::default()
    };
    let Response::Heartbeat(beat) = client.call(4, &request) else {
        panic!("not Heartbeat")
    };
    beat.error_code
}

/// The first answer other than "ask again" (NOT_COORDINATOR while the broker has not taken
/// the group over yet, COORDINATOR_LOAD_IN_PROGRESS while it loads), within 30 s.
fn first_real_answer(mut attempt: impl FnMut() -> i16) -> i16 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let code = attempt();
        if code != NOT_COORDINATOR && code != COORDINATOR_LOAD_IN_PROGRESS {
            return code;
        }
        assert!(Instant::now() < deadline, "still {code} after 30 s");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_classic_group_keeps_its_members_and_offsets_on_its_new_coordinator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().to_path_buf();
    let cluster = kaas_volume::cluster_dir(&data);
    let unnamed = group_whose_fallback_is_broker_1("unnamed-mover");
    let mut brokers = file_brokers(2, &data);
    let endpoints = endpoints(&brokers);
    write_assignment(
        &cluster,
        1,
        &endpoints,
        TOPIC,
        &[(0, 0)],
        &[(NAMED, 0), (&unnamed, 0)],
    );
    start_all(&mut brokers, 1);

    let mut old = WireClient::connect(brokers[0].kafka);
    let mut other = WireClient::connect(brokers[0].kafka);
    // Both joins wait out the initial rebalance delay: at once, on two connections.
    let joining = std::thread::spawn(move || {
        let member = join_and_sync(&mut other, NAMED);
        (other, member)
    });
    let unnamed_member = join_and_sync(&mut old, &unnamed);
    let (mut other, named_member) = joining.join().expect("join thread");
    assert_eq!(commit(&mut old, &unnamed_member, 42), 0);
    assert_eq!(commit(&mut other, &named_member, 17), 0);

    // The named group moves to broker 1; the other is no longer named, and the fallback
    // rule gives it to broker 1 too.
    write_assignment(&cluster, 2, &endpoints, TOPIC, &[(0, 0)], &[(NAMED, 1)]);
    let mut new = WireClient::connect(brokers[1].kafka);
    assert_eq!(
        first_real_answer(|| commit(&mut new, &named_member, 18)),
        0,
        "the same member and generation commit on the new coordinator from its first answer"
    );
    for broker in &mut brokers {
        broker.wait_for_version(2);
    }
    assert_eq!(new.committed_offset(NAMED, TOPIC, 0), (0, Some(18)));
    assert_eq!(heartbeat(&mut new, &named_member), 0);

    assert_eq!(
        commit(&mut new, &unnamed_member, 43),
        0,
        "a group moved by the fallback rule is loaded by its first request, not GROUP_ID_NOT_FOUND"
    );
    assert_eq!(new.committed_offset(&unnamed, TOPIC, 0), (0, Some(43)));
    assert_eq!(heartbeat(&mut new, &unnamed_member), 0);
    let stranger = Member {
        group: unnamed.clone(),
        id: "someone-else".into(),
        generation: unnamed_member.generation,
    };
    assert_eq!(
        commit(&mut new, &stranger, 44),
        25,
        "UNKNOWN_MEMBER_ID: the group's members came along"
    );
    assert_eq!(new.committed_offset("never-seen", TOPIC, 0), (0, None));

    // The old coordinator sends its members on.
    assert_eq!(commit(&mut old, &unnamed_member, 45), NOT_COORDINATOR);
    for broker in &mut brokers {
        broker.terminate();
    }
}
