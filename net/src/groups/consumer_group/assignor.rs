//! Server-side assignors: `uniform` (Kafka's default) and `range`.
//!
//! Both are deterministic: members are taken in member id order and partitions in topic id
//! then partition order, so the same input always gives the same target assignment.

use std::collections::{BTreeMap, BTreeSet};

use super::member::Assignment;
use crate::protocol::Uuid;

/// The uniform assignor's name.
pub const UNIFORM: &str = "uniform";
/// The range assignor's name.
pub const RANGE: &str = "range";
/// The assignors the group supports.
pub const SUPPORTED: &[&str] = &[UNIFORM, RANGE];

/// One member as the assignor sees it.
pub struct MemberSpec<'a> {
    /// Member id.
    pub member_id: &'a str,
    /// Subscribed topic ids that exist.
    pub subscribed: BTreeSet<Uuid>,
    /// The member's previous target assignment, for stickiness.
    pub current: Option<&'a Assignment>,
}

/// Computes a target assignment for every member (members without partitions map to an
/// empty assignment). `partitions` gives the partition count of every assignable topic.
pub fn assign(
    assignor: &str,
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.to_owned(), Assignment::new()))
        .collect();
    if assignor == RANGE {
        range(members, partitions, &mut out);
    } else {
        uniform(members, partitions, &mut out);
    }
    out.values_mut()
        .for_each(|a| a.retain(|_, partitions| !partitions.is_empty()));
    out
}

fn is_valid(partitions: &BTreeMap<Uuid, i32>, topic: Uuid, partition: i32) -> bool {
    partitions
        .get(&topic)
        .is_some_and(|count| (0..*count).contains(&partition))
}

/// Uniform: every partition of a subscribed topic goes to one of its subscribers, members
/// keep what they had when that keeps the balance, and no partition can move to another
/// subscriber whose count is two or more below its owner's.
fn uniform(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<Uuid, i32>,
    out: &mut BTreeMap<String, Assignment>,
) {
    let mut counts: BTreeMap<&str, usize> = members.iter().map(|m| (m.member_id, 0)).collect();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    let homogeneous = members
        .windows(2)
        .all(|w| w[0].subscribed == w[1].subscribed);
    let total: usize = if homogeneous {
        members.first().map_or(0, |m| {
            m.subscribed
                .iter()
                .map(|t| {
                    partitions
                        .get(t)
                        .map_or(0, |c| usize::try_from(*c).unwrap_or(0))
                })
                .sum()
        })
    } else {
        0
    };
    // With one subscription the quota is known up front: keep at most min quota, plus one
    // for as many members as there are extra partitions.
    let (min_quota, mut extras) = if homogeneous && !members.is_empty() {
        (total / members.len(), total % members.len())
    } else {
        (usize::MAX, 0)
    };

    // 1. Stickiness.
    for member in members {
        let Some(current) = member.current else {
            continue;
        };
        let assigned = out.entry(member.member_id.to_owned()).or_default();
        let mut kept = 0usize;
        for (topic, parts) in current {
            if !member.subscribed.contains(topic) {
                continue;
            }
            for &partition in parts {
                if !is_valid(partitions, *topic, partition) || taken.contains(&(*topic, partition))
                {
                    continue;
                }
                if kept >= min_quota && (kept > min_quota || extras == 0) {
                    continue;
                }
                if kept == min_quota {
                    extras -= 1;
                }
                kept += 1;
                taken.insert((*topic, partition));
                assigned.entry(*topic).or_default().insert(partition);
            }
        }
        counts.insert(member.member_id, kept);
    }

    // 2. Unassigned partitions, topics with the fewest subscribers first, each partition to
    //    the least loaded subscriber.
    let mut topics: Vec<(usize, Uuid)> = partitions
        .keys()
        .map(|t| {
            (
                members.iter().filter(|m| m.subscribed.contains(t)).count(),
                *t,
            )
        })
        .filter(|(subscribers, _)| *subscribers > 0)
        .collect();
    topics.sort();
    for (_, topic) in topics {
        let count = partitions.get(&topic).copied().unwrap_or(0);
        for partition in 0..count {
            if taken.contains(&(topic, partition)) {
                continue;
            }
            let receiver = members
                .iter()
                .filter(|m| m.subscribed.contains(&topic))
                .min_by_key(|m| (counts.get(m.member_id).copied().unwrap_or(0), m.member_id));
            if let Some(receiver) = receiver {
                taken.insert((topic, partition));
                *counts.entry(receiver.member_id).or_default() += 1;
                out.entry(receiver.member_id.to_owned())
                    .or_default()
                    .entry(topic)
                    .or_default()
                    .insert(partition);
            }
        }
    }

    // 3. Balance: move partitions from a member to a subscriber with at least two fewer.
    let mut budget = partitions
        .values()
        .map(|c| usize::try_from(*c).unwrap_or(0))
        .sum::<usize>()
        * 4
        + 16;
    while budget > 0 {
        budget -= 1;
        if !move_one(members, &mut counts, out) {
            break;
        }
    }
}

/// Moves one partition from the most loaded member that can give one to the least loaded
/// subscriber that can take it; false when the assignment is balanced.
fn move_one<'a>(
    members: &[MemberSpec<'a>],
    counts: &mut BTreeMap<&'a str, usize>,
    out: &mut BTreeMap<String, Assignment>,
) -> bool {
    let mut givers: Vec<&MemberSpec<'a>> = members.iter().collect();
    givers.sort_by_key(|m| {
        (
            std::cmp::Reverse(counts.get(m.member_id).copied().unwrap_or(0)),
            m.member_id,
        )
    });
    for giver in givers {
        let giver_count = counts.get(giver.member_id).copied().unwrap_or(0);
        let owned: Vec<(Uuid, i32)> = out
            .get(giver.member_id)
            .map(|a| super::member::flatten(a).collect())
            .unwrap_or_default();
        for (topic, partition) in owned.into_iter().rev() {
            let receiver = members
                .iter()
                .filter(|m| m.subscribed.contains(&topic))
                .min_by_key(|m| (counts.get(m.member_id).copied().unwrap_or(0), m.member_id));
            let Some(receiver) = receiver else { continue };
            if counts.get(receiver.member_id).copied().unwrap_or(0) + 2 > giver_count {
                continue;
            }
            if let Some(parts) = out.get_mut(giver.member_id).and_then(|a| a.get_mut(&topic)) {
                parts.remove(&partition);
            }
            out.entry(receiver.member_id.to_owned())
                .or_default()
                .entry(topic)
                .or_default()
                .insert(partition);
            *counts.entry(giver.member_id).or_default() -= 1;
            *counts.entry(receiver.member_id).or_default() += 1;
            return true;
        }
    }
    false
}

/// Range, as Kafka's server-side range assignor: per topic, each subscriber gets a quota of
/// `partitions / subscribers` (plus one for the first `partitions % subscribers` that need
/// it), keeps the lowest partitions it had up to that quota, and the rest is handed out in
/// ascending ranges in member order, so co-partitioned topics line up.
fn range(
    members: &[MemberSpec<'_>],
    partitions: &BTreeMap<Uuid, i32>,
    out: &mut BTreeMap<String, Assignment>,
) {
    for (&topic, &count) in partitions {
        let subscribers: Vec<&MemberSpec<'_>> = members
            .iter()
            .filter(|m| m.subscribed.contains(&topic))
            .collect();
        if subscribers.is_empty() || count <= 0 {
            continue;
        }
        let count_usize = usize::try_from(count).unwrap_or(0);
        let min_quota = count_usize / subscribers.len();
        let mut extras = count_usize % subscribers.len();
        let mut sticky: BTreeSet<i32> = BTreeSet::new();
        let mut unfilled: Vec<(&str, isize)> = Vec::new();
        for member in &subscribers {
            let current: Vec<i32> = member
                .current
                .and_then(|a| a.get(&topic))
                .map(|p| {
                    p.iter()
                        .copied()
                        .filter(|p| (0..count).contains(p))
                        .collect()
                })
                .unwrap_or_default();
            let assigned = out.entry(member.member_id.to_owned()).or_default();
            for &partition in current.iter().take(min_quota) {
                sticky.insert(partition);
                assigned.entry(topic).or_default().insert(partition);
            }
            let remaining = min_quota as isize - current.len() as isize;
            if remaining < 0 && extras > 0 {
                extras -= 1;
                if let Some(&partition) = current.get(min_quota) {
                    sticky.insert(partition);
                    assigned.entry(topic).or_default().insert(partition);
                }
            } else {
                unfilled.push((member.member_id, remaining));
            }
        }
        let mut free = (0..count).filter(|p| !sticky.contains(p));
        for (member_id, mut remaining) in unfilled {
            if extras > 0 {
                remaining += 1;
                extras -= 1;
            }
            let assigned = out.entry(member_id.to_owned()).or_default();
            while remaining > 0 {
                remaining -= 1;
                if let Some(partition) = free.next() {
                    assigned.entry(topic).or_default().insert(partition);
                }
            }
        }
    }
}
