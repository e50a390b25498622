//! Offset retention (`offsets.retention.minutes`, KIP-211) as Kafka's group coordinator
//! applies it: which committed offsets of a group have expired at a given wall-clock time.
//!
//! - A classic group that never had members (a standalone consumer, an admin commit; no
//!   protocol type): each offset expires retention after its commit.
//! - A classic group that had members and is Empty: every offset expires retention after the
//!   group became Empty (after its commit when that time is unknown).
//! - A Stable classic consumer group: offsets of topics no member subscribes to expire
//!   retention after their commit; subscribed topics keep theirs.
//! - A KIP-848 consumer group: offsets of topics no member subscribes to expire retention
//!   after their commit (all of them once the group is empty).
//! - Any other group (rebalancing, unreadable subscriptions) keeps its offsets.
//!
//! When a group without members has no offsets left after a check, the coordinator removes
//! it, as Kafka does. Nothing here does I/O: the coordinator writes the removals to the
//! group store (durable tombstones) and runs the check every
//! `offsets.retention.check.interval.ms`.

use kaas_engine::group_store::CommittedOffset;

use crate::groups::classic::{ClassicGroup, ClassicState};
use crate::groups::consumer_group::ConsumerGroup;
use crate::groups::group::GroupState;

/// From when an offset's retention counts.
enum ExpiryBase {
    /// From the offset's commit.
    Commit,
    /// From when the group became Empty (or the commit when that is unknown).
    EmptySince(Option<i64>),
}

/// The (topic, partition) offsets of `offsets` that have expired at `now_ms` (wall clock)
/// under `retention_ms`.
pub fn expired_offsets(
    state: &GroupState,
    offsets: &[(String, i32, CommittedOffset)],
    now_ms: i64,
    retention_ms: i64,
) -> Vec<(String, i32)> {
    let (base, subscribed): (ExpiryBase, Subscribed<'_>) = match state {
        GroupState::Classic(classic) => match classic_condition(classic) {
            Some(condition) => condition,
            None => return Vec::new(),
        },
        GroupState::Consumer(consumer) => (ExpiryBase::Commit, consumer_subscriptions(consumer)),
    };
    offsets
        .iter()
        .filter(|(topic, _, _)| !subscribed(topic))
        .filter(|(_, _, committed)| {
            let since = match base {
                ExpiryBase::Commit => committed.commit_timestamp_ms,
                ExpiryBase::EmptySince(at) => at.unwrap_or(committed.commit_timestamp_ms),
            };
            now_ms.saturating_sub(since) >= retention_ms
        })
        .map(|(topic, partition, _)| (topic.clone(), *partition))
        .collect()
}

type Subscribed<'a> = Box<dyn Fn(&str) -> bool + 'a>;

/// Kafka's `ClassicGroup.offsetExpirationCondition` and its subscribed topics; `None` when
/// no offset of the group may expire now.
fn classic_condition(classic: &ClassicGroup) -> Option<(ExpiryBase, Subscribed<'_>)> {
    let nothing_subscribed: Subscribed<'_> = Box::new(|_| false);
    match (classic.protocol_type(), classic.state()) {
        (_, ClassicState::Dead) => None,
        (None, _) => Some((ExpiryBase::Commit, nothing_subscribed)),
        (Some(_), ClassicState::Empty) => Some((
            ExpiryBase::EmptySince(classic.empty_since_ms()),
            nothing_subscribed,
        )),
        (Some("consumer"), ClassicState::Stable) => {
            let topics = classic.subscribed_topics()?;
            Some((
                ExpiryBase::Commit,
                Box::new(move |topic| topics.iter().any(|t| t == topic)),
            ))
        }
        _ => None,
    }
}

fn consumer_subscriptions(consumer: &ConsumerGroup) -> Subscribed<'_> {
    Box::new(move |topic| consumer.is_subscribed_to(topic))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::groups::classic::{ClassicGroupConfig, JoinRequest, LeavingMember, Reply};

    const RETENTION: i64 = 60_000;

    fn committed(at: i64) -> CommittedOffset {
        CommittedOffset {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp_ms: at,
        }
    }

    fn offsets(list: &[(&str, i32, i64)]) -> Vec<(String, i32, CommittedOffset)> {
        list.iter()
            .map(|(t, p, at)| (t.to_string(), *p, committed(*at)))
            .collect()
    }

    fn names(expired: Vec<(String, i32)>) -> Vec<String> {
        expired
            .into_iter()
            .map(|(t, p)| format!("{t}-{p}"))
            .collect()
    }

    /// Consumer protocol metadata (v0) subscribing to `topics`.
    fn subscription(topics: &[&str]) -> Bytes {
        let mut out = vec![0, 0];
        out.extend((topics.len() as i32).to_be_bytes());
        for topic in topics {
            out.extend((topic.len() as i16).to_be_bytes());
            out.extend(topic.as_bytes());
        }
        out.extend((-1i32).to_be_bytes());
        Bytes::from(out)
    }

    /// A classic group with one member subscribed to `topics`, Stable at generation 1.
    fn stable_classic(topics: &[&str]) -> (ClassicGroup, String) {
        let config = ClassicGroupConfig {
            initial_rebalance_delay_ms: 0,
            ..Default::default()
        };
        let mut group = ClassicGroup::new("g");
        let request = JoinRequest {
            member_id: String::new(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), subscription(topics))],
            require_known_member_id: false,
        };
        let Reply::Later(mut joined) = group.join(request, &config, 0) else {
            panic!("a join waits for the join phase")
        };
        let joined = joined.try_recv().expect("open").expect("alone");
        let member = joined.member_id.clone();
        let _ = group.sync(
            crate::groups::classic::SyncRequest {
                member_id: member.clone(),
                group_instance_id: None,
                generation_id: joined.generation_id,
                protocol_type: None,
                protocol_name: None,
                assignments: vec![(member.clone(), Bytes::new())],
            },
            10,
        );
        assert_eq!(group.state(), ClassicState::Stable);
        (group, member)
    }

    #[test]
    fn a_standalone_consumers_offsets_expire_retention_after_their_commit() {
        let state = GroupState::Classic(ClassicGroup::new("g"));
        let stored = offsets(&[("a", 0, 1_000), ("a", 1, 30_000)]);
        assert!(expired_offsets(&state, &stored, 60_999, RETENTION).is_empty());
        assert_eq!(
            names(expired_offsets(&state, &stored, 61_000, RETENTION)),
            ["a-0"]
        );
        assert_eq!(
            names(expired_offsets(&state, &stored, 90_000, RETENTION)),
            ["a-0", "a-1"]
        );
    }

    #[test]
    fn an_empty_groups_offsets_expire_retention_after_it_became_empty() {
        let (mut group, member) = stable_classic(&["a"]);
        let config = ClassicGroupConfig::default();
        let leaving = LeavingMember {
            member_id: member,
            group_instance_id: None,
        };
        group.leave(&[leaving], &config, 100);
        assert_eq!(group.state(), ClassicState::Empty);
        group.stamp_empty_since(500_000);
        let state = GroupState::Classic(group);
        let stored = offsets(&[("a", 0, 1_000), ("b", 0, 400_000)]);
        assert!(
            expired_offsets(&state, &stored, 559_999, RETENTION).is_empty(),
            "old commits wait for retention after the group emptied"
        );
        assert_eq!(
            names(expired_offsets(&state, &stored, 560_000, RETENTION)),
            ["a-0", "b-0"]
        );
    }

    #[test]
    fn an_empty_group_without_a_recorded_time_counts_from_each_commit() {
        let (mut group, member) = stable_classic(&["a"]);
        let leaving = LeavingMember {
            member_id: member,
            group_instance_id: None,
        };
        group.leave(&[leaving], &ClassicGroupConfig::default(), 100);
        let state = GroupState::Classic(group);
        let stored = offsets(&[("a", 0, 1_000), ("b", 0, 400_000)]);
        assert_eq!(
            names(expired_offsets(&state, &stored, 61_000, RETENTION)),
            ["a-0"]
        );
    }

    #[test]
    fn a_stable_group_keeps_subscribed_offsets_and_expires_the_others_by_commit() {
        let (group, _) = stable_classic(&["a"]);
        let state = GroupState::Classic(group);
        let stored = offsets(&[("a", 0, 1_000), ("old", 0, 1_000), ("old", 1, 50_000)]);
        assert_eq!(
            names(expired_offsets(&state, &stored, 100_000, RETENTION)),
            ["old-0"]
        );
        assert_eq!(
            names(expired_offsets(&state, &stored, 10_000_000, RETENTION)),
            ["old-0", "old-1"]
        );
    }

    #[test]
    fn a_rebalancing_group_keeps_every_offset() {
        let (mut group, member) = stable_classic(&["a"]);
        let config = ClassicGroupConfig::default();
        let second = JoinRequest {
            member_id: String::new(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), subscription(&["a"]))],
            require_known_member_id: false,
        };
        let _pending = group.join(second, &config, 200);
        assert_eq!(group.state(), ClassicState::PreparingRebalance);
        assert!(!member.is_empty());
        let state = GroupState::Classic(group);
        let stored = offsets(&[("old", 0, 1_000)]);
        assert!(expired_offsets(&state, &stored, 10_000_000, RETENTION).is_empty());
    }

    #[test]
    fn an_empty_consumer_groups_offsets_expire_by_commit() {
        let state = GroupState::Consumer(ConsumerGroup::new("g"));
        let stored = offsets(&[("a", 0, 1_000), ("a", 1, 50_000)]);
        assert_eq!(
            names(expired_offsets(&state, &stored, 61_000, RETENTION)),
            ["a-0"]
        );
    }
}
