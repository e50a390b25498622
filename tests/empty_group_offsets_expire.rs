//! Offsets of an Empty group expire `offsets.retention.minutes` after the group became Empty
//! (after their commit for a standalone consumer), the group goes once its last offset has,
//! and both are durable: a restart brings back neither the offsets nor the group. Until
//! then an Empty group stays, even when OffsetDelete removed its last offset, so that
//! DeleteGroups (`kafka-consumer-groups --delete`) still finds it.

mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use kaas_net::protocol::messages::delete_groups::DeleteGroupsRequest;
use kaas_net::protocol::messages::join_group::{JoinGroupRequest, JoinGroupRequestProtocol};
use kaas_net::protocol::messages::leave_group::{LeaveGroupRequest, MemberIdentity};
use kaas_net::protocol::messages::list_groups::ListGroupsRequest;
use kaas_net::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kaas_net::protocol::messages::offset_delete::{
    OffsetDeleteRequest, OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kaas_net::protocol::messages::offset_fetch::{OffsetFetchRequest, OffsetFetchRequestGroup};
use kaas_net::protocol::messages::sync_group::{SyncGroupRequest, SyncGroupRequestAssignment};
use kaas_net::protocol::Response;
use support::{wait_until, Kaas, WireClient};

const TOPIC: &str = "retained";
/// Short enough for a test, long enough that "not yet" checks have seconds to spare.
const RETENTION: Duration = Duration::from_secs(6);
const CHECK_INTERVAL_MS: &str = "200";

fn start(dir: &std::path::Path, retention_minutes: Option<f64>) -> Kaas {
    let minutes = retention_minutes.map(|m| m.to_string());
    let mut flags = vec!["--shards", "2", "--group-initial-rebalance-delay-ms", "0"];
    if let Some(minutes) = &minutes {
        flags.extend([
            "--offsets-retention-minutes",
            minutes.as_str(),
            "--offsets-retention-check-interval-ms",
            CHECK_INTERVAL_MS,
        ]);
    }
    let kaas = Kaas::start(Some(dir), &flags);
    kaas.client().create_topic(TOPIC, 2, &[]);
    kaas
}

fn retention_minutes() -> f64 {
    RETENTION.as_secs_f64() / 60.0
}

/// A classic consumer that joins alone and gets generation `n`; returns (member id, generation).
fn join_alone(client: &mut WireClient, group: &str) -> (String, i32) {
    let mut member_id = String::new();
    for _ in 0..2 {
        let request = JoinGroupRequest {
            group_id: group.into(),
            session_timeout_ms: 120_000,
            rebalance_timeout_ms: 30_000,
            member_id: member_id.clone(),
            protocol_type: "consumer".into(),
            protocols: vec![JoinGroupRequestProtocol {
                name: "range".into(),
                metadata: Bytes::from_static(b"\0\0\0\0\0\x01\0\x08retained\xff\xff\xff\xff"),
            }],
            ..Default::default()
        };
        let Response::JoinGroup(joined) = client.call(9, &request) else {
            panic!("not JoinGroup")
        };
        match joined.error_code {
            79 => member_id = joined.member_id,
            0 => {
                let sync = SyncGroupRequest {
                    group_id: group.into(),
                    generation_id: joined.generation_id,
                    member_id: joined.member_id.clone(),
                    assignments: vec![SyncGroupRequestAssignment {
                        member_id: joined.member_id.clone(),
                        assignment: Bytes::from_static(b"both partitions"),
                    }],
                    ..Default::default()
                };
                let Response::SyncGroup(synced) = client.call(5, &sync) else {
                    panic!("not SyncGroup")
                };
                assert_eq!(synced.error_code, 0);
                return (joined.member_id, joined.generation_id);
            }
            error => panic!("JoinGroup error {error}"),
        }
    }
    panic!("no member id after MEMBER_ID_REQUIRED")
}

fn leave(client: &mut WireClient, group: &str, member_id: &str) {
    let request = LeaveGroupRequest {
        group_id: group.into(),
        members: vec![MemberIdentity {
            member_id: member_id.into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::LeaveGroup(left) = client.call(5, &request) else {
        panic!("not LeaveGroup")
    };
    assert_eq!((left.error_code, left.members[0].error_code), (0, 0));
}

/// Commits offset 7 on both partitions; generation -1 and no member for a standalone consumer.
fn commit(client: &mut WireClient, group: &str, member_id: &str, generation: i32) {
    let request = OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: generation,
        member_id: member_id.into(),
        topics: vec![OffsetCommitRequestTopic {
            name: TOPIC.into(),
            partitions: (0..2)
                .map(|partition_index| OffsetCommitRequestPartition {
                    partition_index,
                    committed_offset: 7,
                    committed_leader_epoch: -1,
                    committed_metadata: None,
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::OffsetCommit(committed) = client.call(9, &request) else {
        panic!("not OffsetCommit")
    };
    for partition in &committed.topics[0].partitions {
        assert_eq!(partition.error_code, 0, "commit to {group}");
    }
}

/// Partitions of `TOPIC` with a committed offset.
fn committed(client: &mut WireClient, group: &str) -> Vec<i32> {
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
        .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
        .collect()
}

/// The state ListGroups reports for `group`, `None` when it is not listed.
fn listed_state(client: &mut WireClient, group: &str) -> Option<String> {
    let Response::ListGroups(listed) = client.call(4, &ListGroupsRequest::default()) else {
        panic!("not ListGroups")
    };
    assert_eq!(listed.error_code, 0);
    listed
        .groups
        .into_iter()
        .find(|g| g.group_id == group)
        .map(|g| g.group_state)
}

fn delete_group(client: &mut WireClient, group: &str) -> i16 {
    let request = DeleteGroupsRequest {
        groups_names: vec![group.into()],
    };
    let Response::DeleteGroups(deleted) = client.call(2, &request) else {
        panic!("not DeleteGroups")
    };
    deleted.results[0].error_code
}

#[test]
fn offset_delete_of_the_last_offset_keeps_the_empty_group_for_delete_groups() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kaas = start(dir.path(), None);
    let mut client = kaas.client();
    commit(&mut client, "tool-group", "", -1);
    let (member, generation) = join_alone(&mut client, "left-group");
    commit(&mut client, "left-group", &member, generation);
    leave(&mut client, "left-group", &member);
    for group in ["tool-group", "left-group"] {
        let request = OffsetDeleteRequest {
            group_id: group.into(),
            topics: vec![OffsetDeleteRequestTopic {
                name: TOPIC.into(),
                partitions: (0..2)
                    .map(|partition_index| OffsetDeleteRequestPartition { partition_index })
                    .collect(),
            }],
        };
        let Response::OffsetDelete(deleted) = client.call(0, &request) else {
            panic!("not OffsetDelete")
        };
        assert_eq!(deleted.error_code, 0, "OffsetDelete of {group}");
        assert!(committed(&mut client, group).is_empty());
    }
    // Several coordinator ticks (50 ms each) pass before the groups are looked at again.
    std::thread::sleep(Duration::from_millis(500));
    for group in ["tool-group", "left-group"] {
        assert_eq!(
            listed_state(&mut client, group).as_deref(),
            Some("Empty"),
            "{group} without offsets is still listed"
        );
        assert_eq!(delete_group(&mut client, group), 0, "DeleteGroups {group}");
        assert_eq!(
            delete_group(&mut client, group),
            69,
            "GROUP_ID_NOT_FOUND once deleted"
        );
    }
}

#[test]
fn offsets_of_an_empty_group_expire_after_retention_and_stay_gone_after_kill_9() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = start(dir.path(), Some(retention_minutes()));
    let mut client = kaas.client();
    let (member, generation) = join_alone(&mut client, "emptied");
    commit(&mut client, "emptied", &member, generation);
    let (stayer, stayer_generation) = join_alone(&mut client, "stable");
    commit(&mut client, "stable", &stayer, stayer_generation);
    commit(&mut client, "standalone", "", -1);
    let committed_at = Instant::now();

    // The emptied group's offsets are older than the retention when it empties: they expire
    // a retention after it emptied, not after their commit.
    std::thread::sleep(RETENTION / 2);
    leave(&mut client, "emptied", &member);
    let emptied_at = Instant::now();
    std::thread::sleep(RETENTION * 3 / 4);
    assert!(committed_at.elapsed() > RETENTION);
    assert!(emptied_at.elapsed() < RETENTION);
    assert_eq!(
        committed(&mut client, "emptied"),
        vec![0, 1],
        "a retention has not passed since the group became Empty"
    );
    assert_eq!(
        listed_state(&mut client, "emptied").as_deref(),
        Some("Empty")
    );
    assert!(
        committed(&mut client, "standalone").is_empty(),
        "a standalone consumer's offsets expire a retention after their commit"
    );
    wait_until(
        "the standalone group to go",
        Duration::from_secs(10),
        || listed_state(&mut client, "standalone").is_none(),
    );

    wait_until(
        "the emptied group's offsets to expire",
        RETENTION * 2,
        || committed(&mut client, "emptied").is_empty(),
    );
    wait_until("the emptied group to go", Duration::from_secs(10), || {
        listed_state(&mut client, "emptied").is_none()
    });
    assert_eq!(delete_group(&mut client, "emptied"), 69);
    assert_eq!(
        committed(&mut client, "stable"),
        vec![0, 1],
        "a Stable group keeps the offsets of the topic it subscribes to"
    );
    assert_eq!(
        listed_state(&mut client, "stable").as_deref(),
        Some("Stable")
    );

    kaas.kill9();
    kaas.restart();
    let mut client = kaas.client();
    for group in ["emptied", "standalone"] {
        assert!(
            committed(&mut client, group).is_empty(),
            "{group} after restart"
        );
        assert_eq!(
            listed_state(&mut client, group),
            None,
            "{group} after restart"
        );
    }
    assert_eq!(committed(&mut client, "stable"), vec![0, 1]);
}

#[test]
fn the_time_a_group_became_empty_survives_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = start(dir.path(), Some(retention_minutes()));
    let mut client = kaas.client();
    let (member, generation) = join_alone(&mut client, "restarted");
    commit(&mut client, "restarted", &member, generation);
    std::thread::sleep(RETENTION * 3 / 4);
    leave(&mut client, "restarted", &member);
    let emptied_at = Instant::now();
    kaas.kill9();
    kaas.restart();
    let mut client = kaas.client();
    // Past a retention after the commit, within one after the group emptied: counting from
    // the commit (a lost Empty time) would have expired them by now.
    std::thread::sleep(RETENTION / 2);
    assert!(emptied_at.elapsed() < RETENTION);
    assert_eq!(committed(&mut client, "restarted"), vec![0, 1]);
    assert_eq!(
        listed_state(&mut client, "restarted").as_deref(),
        Some("Empty")
    );
    wait_until("the offsets to expire", RETENTION * 2, || {
        committed(&mut client, "restarted").is_empty()
    });
    wait_until("the group to go", Duration::from_secs(10), || {
        listed_state(&mut client, "restarted").is_none()
    });
}
