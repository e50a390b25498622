//! Group requests with hostile or out-of-range values get Kafka's error codes, store nothing
//! they should not, and leave the broker serving.

mod support;

use bytes::Bytes;
use kaas_net::protocol::messages::consumer_group_heartbeat::ConsumerGroupHeartbeatRequest;
use kaas_net::protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol};
use kaas_net::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kaas_net::protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestGroup};
use kaas_net::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupRequestAssignment};
use kaas_net::protocol::{ErrorCode, Response};
use support::{Kaas, WireClient};

fn join(client: &mut WireClient, request: &JoinGroupRequest) -> (i16, String, i32) {
    let Response::JoinGroup(joined) = client.call(9, request) else {
        panic!("not JoinGroup")
    };
    (joined.error_code, joined.member_id, joined.generation_id)
}

fn join_request(group: &str, member_id: &str, session_timeout_ms: i32) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.into(),
        session_timeout_ms,
        rebalance_timeout_ms: -7,
        member_id: member_id.into(),
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: Bytes::from(vec![0xff; 1000]),
        }],
        ..Default::default()
    }
}

fn commit(
    client: &mut WireClient,
    group: &str,
    topic: &str,
    partition: i32,
    metadata: String,
) -> i16 {
    let request = OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        topics: vec![OffsetCommitRequestTopic {
            name: topic.into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: partition,
                committed_offset: 5,
                committed_leader_epoch: -1,
                committed_metadata: Some(metadata),
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

#[test]
fn hostile_group_requests_get_kafka_errors() {
    let kaas = Kaas::start(None, &["--group-initial-rebalance-delay-ms", "0"]);
    let mut client = kaas.client();
    client.create_topic("t", 2, &[]);

    let code = |e: ErrorCode| e.code();
    assert_eq!(
        join(&mut client, &join_request("g", "", -1)).0,
        code(ErrorCode::InvalidSessionTimeout)
    );
    assert_eq!(
        join(&mut client, &join_request("g", "", i32::MAX)).0,
        code(ErrorCode::InvalidSessionTimeout)
    );
    assert_eq!(
        join(&mut client, &join_request("", "", 10_000)).0,
        code(ErrorCode::InvalidGroupId)
    );
    let mut no_protocols = join_request("g", "", 10_000);
    no_protocols.protocols.clear();
    assert_eq!(
        join(&mut client, &no_protocols).0,
        code(ErrorCode::InconsistentGroupProtocol)
    );

    // A negative rebalance timeout ends the join phase at once instead of hanging.
    let (error, member, _) = join(&mut client, &join_request("g", "", 10_000));
    assert_eq!(error, code(ErrorCode::MemberIdRequired));
    let (error, _, generation) = join(&mut client, &join_request("g", &member, 10_000));
    assert_eq!((error, generation), (0, 1));
    // The leader assigns to members that do not exist: ignored, its own part arrives.
    let assignments = (0..10_000)
        .map(|i| SyncGroupRequestAssignment {
            member_id: format!("ghost-{i}"),
            assignment: Bytes::from_static(b"nothing"),
        })
        .chain(std::iter::once(SyncGroupRequestAssignment {
            member_id: member.clone(),
            assignment: Bytes::from_static(b"mine"),
        }))
        .collect();
    let sync = SyncGroupRequest {
        group_id: "g".into(),
        generation_id: 1,
        member_id: member.clone(),
        assignments,
        ..Default::default()
    };
    let Response::SyncGroup(synced) = client.call(5, &sync) else {
        panic!("not SyncGroup")
    };
    assert_eq!(
        (synced.error_code, synced.assignment.as_ref()),
        (0, &b"mine"[..])
    );

    assert_eq!(
        commit(&mut client, "h", "t", 0, "m".repeat(1 << 20)),
        code(ErrorCode::OffsetMetadataTooLarge)
    );
    assert_eq!(
        commit(&mut client, "h", "t", 2, String::new()),
        code(ErrorCode::UnknownTopicOrPartition)
    );
    assert_eq!(
        commit(&mut client, "h", "t", -1, String::new()),
        code(ErrorCode::UnknownTopicOrPartition)
    );
    assert_eq!(
        commit(&mut client, "h", "missing", 0, String::new()),
        code(ErrorCode::UnknownTopicOrPartition)
    );
    let fetch = OffsetFetchRequest {
        groups: vec![OffsetFetchRequestGroup {
            group_id: "h".into(),
            topics: None,
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::OffsetFetch(fetched) = client.call(8, &fetch) else {
        panic!("not OffsetFetch")
    };
    assert!(
        fetched.groups[0].topics.is_empty(),
        "nothing refused was stored"
    );

    for regex in ["(unclosed", "(a{1000}){1000}", &"(x+x+)+y".repeat(30)] {
        let heartbeat = ConsumerGroupHeartbeatRequest {
            group_id: "next".into(),
            member_id: "m1-aaaaaaaaaaaaaaaaaaaa".into(),
            member_epoch: 0,
            rebalance_timeout_ms: 10_000,
            subscribed_topic_regex: Some(regex.to_string()),
            topic_partitions: Some(Vec::new()),
            ..Default::default()
        };
        let Response::ConsumerGroupHeartbeat(beat) = client.call(1, &heartbeat) else {
            panic!("not ConsumerGroupHeartbeat")
        };
        assert!(
            beat.error_code == 0 || beat.error_code == code(ErrorCode::InvalidRequest),
            "regex {regex}: {beat:?}"
        );
    }
    let epoch_far_ahead = ConsumerGroupHeartbeatRequest {
        group_id: "next".into(),
        member_id: "m1-aaaaaaaaaaaaaaaaaaaa".into(),
        member_epoch: i32::MAX,
        ..Default::default()
    };
    let Response::ConsumerGroupHeartbeat(beat) = client.call(1, &epoch_far_ahead) else {
        panic!("not ConsumerGroupHeartbeat")
    };
    assert_ne!(
        beat.error_code, 0,
        "an epoch the group never gave is refused"
    );
}
