use bytes::Bytes;

use super::*;

fn config(delay: i32) -> ClassicGroupConfig {
    ClassicGroupConfig {
        initial_rebalance_delay_ms: delay,
        ..Default::default()
    }
}

fn request(member_id: &str, instance: Option<&str>) -> JoinRequest {
    JoinRequest {
        member_id: member_id.into(),
        group_instance_id: instance.map(Into::into),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 30_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        require_known_member_id: true,
    }
}

fn now<T: std::fmt::Debug>(reply: Reply<T>) -> T {
    match reply {
        Reply::Now(value) => value,
        Reply::Later(_) => panic!("expected an immediate answer"),
    }
}

fn later<T>(reply: Reply<T>) -> futures_channel::oneshot::Receiver<T> {
    match reply {
        Reply::Later(receiver) => receiver,
        Reply::Now(_) => panic!("expected a pending answer"),
    }
}

fn ready<T>(receiver: &mut futures_channel::oneshot::Receiver<T>) -> Option<T> {
    receiver.try_recv().expect("not cancelled")
}

/// A dynamic member's two-step join (MEMBER_ID_REQUIRED, then with the id).
fn join_new(
    group: &mut ClassicGroup,
    config: &ClassicGroupConfig,
    at: i64,
) -> (String, futures_channel::oneshot::Receiver<JoinResult>) {
    let first = now(group.join(request("", None), config, at));
    assert_eq!(first.error, ErrorCode::MemberIdRequired);
    assert!(first.member_id.starts_with("client-"));
    let pending = later(group.join(request(&first.member_id, None), config, at));
    (first.member_id, pending)
}

fn sync(
    group: &mut ClassicGroup,
    member_id: &str,
    generation: i32,
    assignments: Vec<(String, Bytes)>,
    at: i64,
) -> Reply<SyncResult> {
    group.sync(
        SyncRequest {
            member_id: member_id.into(),
            group_instance_id: None,
            generation_id: generation,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments,
        },
        at,
    )
}

/// Builds a stable group with two dynamic members `a` (leader) and `b`.
fn stable_pair(config: &ClassicGroupConfig) -> (ClassicGroup, String, String) {
    let mut group = ClassicGroup::new("g");
    let (a, mut a_join) = join_new(&mut group, config, 0);
    let first = ready(&mut a_join).expect("a single member completes the join at once");
    assert_eq!(
        (first.generation_id, first.leader.as_str()),
        (1, a.as_str())
    );
    let (b, mut b_join) = join_new(&mut group, config, 10);
    assert_eq!(group.state(), ClassicState::PreparingRebalance);
    assert!(ready(&mut b_join).is_none(), "waits for a to rejoin");
    assert_eq!(
        group.heartbeat(&a, None, 1, 20),
        ErrorCode::RebalanceInProgress
    );
    let mut a_join = later(group.join(request(&a, None), config, 30));
    let leader = ready(&mut a_join).expect("everyone rejoined");
    let follower = ready(&mut b_join).expect("everyone rejoined");
    assert_eq!(leader.generation_id, 2);
    assert_eq!(leader.members.len(), 2);
    assert!(follower.members.is_empty());
    assert_eq!(follower.leader, a);
    let mut b_sync = later(sync(&mut group, &b, 2, vec![], 40));
    assert!(ready(&mut b_sync).is_none(), "waits for the leader");
    let assignments = vec![
        (a.clone(), Bytes::from_static(b"for-a")),
        (b.clone(), Bytes::from_static(b"for-b")),
    ];
    let mut a_sync = later(sync(&mut group, &a, 2, assignments, 50));
    assert_eq!(
        ready(&mut a_sync).expect("answered").assignment,
        &b"for-a"[..]
    );
    assert_eq!(
        ready(&mut b_sync).expect("answered").assignment,
        &b"for-b"[..]
    );
    assert_eq!(group.state(), ClassicState::Stable);
    assert!(group.take_dirty());
    (group, a, b)
}

#[test]
fn two_members_join_sync_and_heartbeat() {
    let config = config(0);
    let (mut group, a, b) = stable_pair(&config);
    assert_eq!(group.heartbeat(&a, None, 2, 100), ErrorCode::None);
    assert_eq!(
        group.heartbeat(&b, None, 1, 100),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(
        group.heartbeat("nobody", None, 2, 100),
        ErrorCode::UnknownMemberId
    );
    let again = now(sync(&mut group, &b, 2, vec![], 100));
    assert_eq!(again.assignment, &b"for-b"[..]);
}

#[test]
fn initial_delay_waits_for_more_members_and_extends() {
    let config = config(3_000);
    let mut group = ClassicGroup::new("g");
    let (_a, mut a_join) = join_new(&mut group, &config, 0);
    let (_b, mut b_join) = join_new(&mut group, &config, 1_000);
    group.tick(&config, 2_999);
    assert!(ready(&mut a_join).is_none());
    group.tick(&config, 3_000);
    assert!(
        ready(&mut a_join).is_none(),
        "b arrived during the delay: extended"
    );
    group.tick(&config, 6_000);
    let a = ready(&mut a_join).expect("completed after the extension");
    let b = ready(&mut b_join).expect("completed after the extension");
    assert_eq!((a.generation_id, b.generation_id), (1, 1));
    assert_eq!(a.members.len(), 2);
}

#[test]
fn an_expired_session_rebalances_without_the_member() {
    let config = config(0);
    let (mut group, a, b) = stable_pair(&config);
    assert_eq!(group.heartbeat(&a, None, 2, 9_000), ErrorCode::None);
    group.tick(&config, 10_050);
    assert_eq!(group.state(), ClassicState::PreparingRebalance);
    assert_eq!(
        group.heartbeat(&b, None, 2, 10_060),
        ErrorCode::UnknownMemberId
    );
    let mut rejoin = later(group.join(request(&a, None), &config, 10_100));
    let result = ready(&mut rejoin).expect("a is the only member");
    assert_eq!((result.generation_id, result.members.len()), (3, 1));
}

#[test]
fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
    let config = config(0);
    let (mut group, a, b) = stable_pair(&config);
    let mut a_join = later(group.join(
        JoinRequest {
            protocols: vec![("range".into(), Bytes::from_static(b"changed"))],
            ..request(&a, None)
        },
        &config,
        100,
    ));
    for at in (200..30_000).step_by(5_000) {
        assert_eq!(
            group.heartbeat(&b, None, 2, at),
            ErrorCode::RebalanceInProgress
        );
        group.tick(&config, at);
    }
    group.tick(&config, 30_099);
    assert!(ready(&mut a_join).is_none());
    group.tick(&config, 30_100);
    let result = ready(&mut a_join).expect("join deadline");
    assert_eq!((result.generation_id, result.members.len()), (3, 1));
    assert_eq!(
        group.heartbeat(&b, None, 2, 30_200),
        ErrorCode::UnknownMemberId
    );
}

#[test]
fn leaving_rebalances_and_the_last_leave_empties_the_group() {
    let config = config(0);
    let (mut group, a, b) = stable_pair(&config);
    let leaving = |id: &str| LeavingMember {
        member_id: id.into(),
        group_instance_id: None,
    };
    let (error, errors) = group.leave(&[leaving(&b), leaving("ghost")], &config, 100);
    assert_eq!(error, ErrorCode::None);
    assert_eq!(errors, vec![ErrorCode::None, ErrorCode::UnknownMemberId]);
    assert_eq!(group.state(), ClassicState::PreparingRebalance);
    let (_, errors) = group.leave(&[leaving(&a)], &config, 200);
    assert_eq!(errors, vec![ErrorCode::None]);
    assert_eq!(group.state(), ClassicState::Empty);
    assert!(group.is_empty());
    assert_eq!(group.generation_id(), 3);
}

#[test]
fn a_static_member_rejoins_without_a_rebalance() {
    let config = config(0);
    let mut group = ClassicGroup::new("g");
    let mut join = later(group.join(request("", Some("instance-1")), &config, 0));
    let first = ready(&mut join).expect("answered");
    assert_eq!(first.generation_id, 1);
    let old_id = first.member_id.clone();
    let assignments = vec![(old_id.clone(), Bytes::from_static(b"p0-p5"))];
    let mut synced = later(group.sync(
        SyncRequest {
            member_id: old_id.clone(),
            group_instance_id: Some("instance-1".into()),
            generation_id: 1,
            protocol_type: None,
            protocol_name: None,
            assignments,
        },
        10,
    ));
    assert_eq!(ready(&mut synced).expect("answered").error, ErrorCode::None);
    group.take_dirty();

    let rejoined = now(group.join(request("", Some("instance-1")), &config, 5_000));
    assert_eq!(rejoined.error, ErrorCode::None);
    assert_eq!(rejoined.generation_id, 1, "no new generation");
    assert_ne!(rejoined.member_id, old_id);
    assert_ne!(
        rejoined.leader, rejoined.member_id,
        "must not reassign while stable"
    );
    assert_eq!(group.state(), ClassicState::Stable);
    let resumed = now(group.sync(
        SyncRequest {
            member_id: rejoined.member_id.clone(),
            group_instance_id: Some("instance-1".into()),
            generation_id: 1,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![],
        },
        5_010,
    ));
    assert_eq!(resumed.assignment, &b"p0-p5"[..]);
    assert_eq!(
        group.heartbeat(&old_id, Some("instance-1"), 1, 5_020),
        ErrorCode::FencedInstanceId
    );
    assert!(group.take_dirty(), "the new member id is persisted");
}

#[test]
fn bad_joins_get_kafka_errors() {
    let config = config(0);
    let (mut group, _a, _b) = stable_pair(&config);
    let short = JoinRequest {
        session_timeout_ms: 1_000,
        ..request("", None)
    };
    assert_eq!(
        now(group.join(short, &config, 0)).error,
        ErrorCode::InvalidSessionTimeout
    );
    let other = JoinRequest {
        protocols: vec![("roundrobin".into(), Bytes::new())],
        ..request("", None)
    };
    assert_eq!(
        now(group.join(other, &config, 0)).error,
        ErrorCode::InconsistentGroupProtocol
    );
    assert_eq!(
        now(group.join(request("unknown-id", None), &config, 0)).error,
        ErrorCode::UnknownMemberId
    );
    let full = ClassicGroupConfig {
        max_size: 2,
        ..config.clone()
    };
    assert_eq!(
        now(group.join(request("", None), &full, 0)).error,
        ErrorCode::GroupMaxSizeReached
    );
}

#[test]
fn offset_commits_are_validated_like_kafka() {
    let config = config(0);
    let (group, a, _b) = stable_pair(&config);
    assert_eq!(group.validate_offset_commit(&a, None, 2), ErrorCode::None);
    assert_eq!(
        group.validate_offset_commit(&a, None, 1),
        ErrorCode::IllegalGeneration
    );
    assert_eq!(
        group.validate_offset_commit("x", None, 2),
        ErrorCode::UnknownMemberId
    );
    assert_eq!(
        group.validate_offset_commit("", None, -1),
        ErrorCode::UnknownMemberId
    );
    let empty = ClassicGroup::new("g");
    assert_eq!(empty.validate_offset_commit("", None, -1), ErrorCode::None);
}

#[test]
fn a_persisted_group_resumes_stable_at_its_generation() {
    let config = config(0);
    let (group, a, b) = stable_pair(&config);
    let bytes = group.encode();
    let mut restored = ClassicGroup::decode("g", &bytes, 1_000).expect("decodes");
    assert_eq!(restored.state(), ClassicState::Stable);
    assert_eq!(restored.generation_id(), 2);
    assert_eq!(restored.leader(), Some(a.as_str()));
    assert_eq!(restored.heartbeat(&b, None, 2, 1_100), ErrorCode::None);
    let assignment = now(sync(&mut restored, &b, 2, vec![], 1_200)).assignment;
    assert_eq!(assignment, &b"for-b"[..]);
    assert!(ClassicGroup::decode("g", b"{\"kind\":\"x\"}", 0).is_err());
    assert!(ClassicGroup::decode("g", &[0xff; 10], 0).is_err());
}

/// A stable group whose only member is `a`, at generation 1.
fn stable_single(config: &ClassicGroupConfig) -> (ClassicGroup, String) {
    let mut group = ClassicGroup::new("g");
    let (a, mut a_join) = join_new(&mut group, config, 0);
    group.tick(config, i64::from(config.initial_rebalance_delay_ms));
    assert_eq!(ready(&mut a_join).expect("alone").generation_id, 1);
    let assignments = vec![(a.clone(), Bytes::from_static(b"topic-a"))];
    let mut a_sync = later(sync(&mut group, &a, 1, assignments, 10));
    assert_eq!(ready(&mut a_sync).expect("leader").error, ErrorCode::None);
    assert_eq!(group.state(), ClassicState::Stable);
    (group, a)
}

fn resubscribed(member_id: &str) -> JoinRequest {
    JoinRequest {
        protocols: vec![("range".into(), Bytes::from_static(b"topics a and b"))],
        ..request(member_id, None)
    }
}

#[test]
fn a_lone_member_that_changes_its_subscription_gets_the_next_generation_at_once() {
    let config = config(3_000);
    let (mut group, a) = stable_single(&config);
    let mut rejoin = later(group.join(resubscribed(&a), &config, 100));
    let result = ready(&mut rejoin).expect("no member is left to wait for");
    assert_eq!(result.error, ErrorCode::None);
    assert_eq!(result.generation_id, 2);
    assert_eq!(result.leader, a);
    assert_eq!(result.members.len(), 1);
    assert_eq!(result.members[0].metadata, &b"topics a and b"[..]);
    assert_eq!(group.state(), ClassicState::CompletingRebalance);
}

#[test]
fn a_lone_leader_rejoining_unchanged_while_stable_gets_the_next_generation_at_once() {
    let config = config(0);
    let (mut group, a) = stable_single(&config);
    let mut rejoin = later(group.join(request(&a, None), &config, 100));
    assert_eq!(ready(&mut rejoin).expect("at once").generation_id, 2);
}

#[test]
fn a_lone_member_that_changes_its_subscription_before_syncing_gets_the_next_generation_at_once() {
    let config = config(0);
    let mut group = ClassicGroup::new("g");
    let (a, mut a_join) = join_new(&mut group, &config, 0);
    assert_eq!(ready(&mut a_join).expect("alone").generation_id, 1);
    assert_eq!(group.state(), ClassicState::CompletingRebalance);
    let mut rejoin = later(group.join(resubscribed(&a), &config, 50));
    assert_eq!(ready(&mut rejoin).expect("at once").generation_id, 2);
}

#[test]
fn the_last_of_several_members_to_rejoin_completes_the_join_at_once() {
    let config = config(0);
    let (mut group, a, b) = stable_pair(&config);
    let mut a_join = later(group.join(resubscribed(&a), &config, 100));
    assert!(ready(&mut a_join).is_none(), "b has not rejoined yet");
    assert_eq!(
        group.heartbeat(&b, None, 2, 150),
        ErrorCode::RebalanceInProgress
    );
    let mut b_join = later(group.join(resubscribed(&b), &config, 200));
    let leader = ready(&mut a_join).expect("everyone rejoined");
    let follower = ready(&mut b_join).expect("everyone rejoined");
    assert_eq!((leader.generation_id, follower.generation_id), (3, 3));
    assert_eq!(leader.members.len(), 2);
}

#[test]
fn a_static_member_replaced_with_a_new_subscription_gets_the_next_generation_at_once() {
    let config = config(0);
    let mut group = ClassicGroup::new("g");
    let mut join = later(group.join(request("", Some("instance-1")), &config, 0));
    let first = ready(&mut join).expect("answered");
    let assignments = vec![(first.member_id.clone(), Bytes::from_static(b"p0"))];
    let mut synced = later(group.sync(
        SyncRequest {
            member_id: first.member_id.clone(),
            group_instance_id: Some("instance-1".into()),
            generation_id: 1,
            protocol_type: None,
            protocol_name: None,
            assignments,
        },
        10,
    ));
    assert_eq!(ready(&mut synced).expect("answered").error, ErrorCode::None);
    let changed = JoinRequest {
        protocols: vec![
            ("roundrobin".into(), Bytes::new()),
            ("range".into(), Bytes::from_static(b"meta")),
        ],
        ..request("", Some("instance-1"))
    };
    let mut rejoin = later(group.join(changed, &config, 100));
    let result = ready(&mut rejoin).expect("no member is left to wait for");
    assert_eq!(result.generation_id, 2);
    assert_eq!(result.protocol_name.as_deref(), Some("roundrobin"));
}
