//! Reconciliation of one member towards its target assignment (Kafka's
//! `CurrentAssignmentBuilder`).
//!
//! A member never gains a partition another member still owns, and it only moves to a new
//! epoch once it has revoked what it must give up: this is what keeps a partition from being
//! consumed by two members at once.

use std::collections::{BTreeMap, BTreeSet};

use super::member::{Assignment, Member, MemberState};
use crate::protocol::Uuid;

/// What the reconciliation needs besides the member.
pub struct ReconcileInput<'a, F: Fn(Uuid, i32) -> bool> {
    /// Epoch of the target assignment.
    pub target_epoch: i32,
    /// The member's target assignment.
    pub target: &'a Assignment,
    /// Topic ids the member subscribes to and that exist; other topics are revoked.
    pub subscribed_topic_ids: &'a BTreeSet<Uuid>,
    /// Partitions the member reported owning in this heartbeat (`None` when not sent).
    pub owned: Option<&'a Assignment>,
    /// Whether a partition is owned by another member.
    pub owned_by_other: F,
    /// The member's subscription changed in this heartbeat: partitions of topics it no longer
    /// subscribes to are revoked even while it cannot move on yet (Kafka's
    /// `enforceSubscriptionConsistency`).
    pub subscription_changed: bool,
}

/// The member's next state, or an unchanged copy when it cannot progress yet.
pub fn reconcile<F: Fn(Uuid, i32) -> bool>(
    member: &Member,
    input: &ReconcileInput<'_, F>,
) -> Member {
    let cannot_move_on = match member.state {
        MemberState::Stable => member.member_epoch == input.target_epoch,
        MemberState::UnrevokedPartitions => owns_any(input.owned, &member.pending_revocation),
        MemberState::UnreleasedPartitions => false,
    };
    if !cannot_move_on {
        compute_next(member, input)
    } else if input.subscription_changed {
        drop_unsubscribed(member, input)
    } else {
        member.clone()
    }
}

/// Kafka's `updateCurrentAssignment`: the member stays at its epoch, and its partitions of
/// topics it no longer subscribes to join those pending revocation at once, so that a member
/// that changes its subscription while it is still revoking hears about all of it in one
/// answer instead of after the revocation under way.
fn drop_unsubscribed<F: Fn(Uuid, i32) -> bool>(
    member: &Member,
    input: &ReconcileInput<'_, F>,
) -> Member {
    let mut next = member.clone();
    let unsubscribed: Vec<Uuid> = member
        .assigned
        .keys()
        .filter(|topic| !input.subscribed_topic_ids.contains(topic))
        .copied()
        .collect();
    if unsubscribed.is_empty() {
        return next;
    }
    for topic in unsubscribed {
        if let Some(partitions) = next.assigned.remove(&topic) {
            next.pending_revocation
                .entry(topic)
                .or_default()
                .extend(partitions);
        }
    }
    if owns_any(input.owned, &next.pending_revocation) {
        next.state = MemberState::UnrevokedPartitions;
    } else {
        // Already gone from the client: nothing to wait for.
        next.pending_revocation = Assignment::new();
        next.prune_assignment_epochs();
    }
    next
}

/// Whether the reported owned partitions still hold any of `revoking`; a heartbeat that
/// does not report owned partitions proves nothing.
fn owns_any(owned: Option<&Assignment>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(topic, partitions)| {
        revoking
            .get(topic)
            .is_some_and(|revoked| !revoked.is_disjoint(partitions))
    })
}

fn compute_next<F: Fn(Uuid, i32) -> bool>(
    member: &Member,
    input: &ReconcileInput<'_, F>,
) -> Member {
    let mut assigned = Assignment::new();
    let mut revoking = Assignment::new();
    let mut pending_assignment = Assignment::new();
    let mut has_unreleased = false;

    let topics: BTreeSet<Uuid> = input
        .target
        .keys()
        .chain(member.assigned.keys())
        .copied()
        .collect();
    let empty = BTreeSet::new();
    for topic in topics {
        let target = if input.subscribed_topic_ids.contains(&topic) {
            input.target.get(&topic).unwrap_or(&empty)
        } else {
            &empty
        };
        let current = member.assigned.get(&topic).unwrap_or(&empty);
        let kept: BTreeSet<i32> = current.intersection(target).copied().collect();
        let revoked: BTreeSet<i32> = current.difference(&kept).copied().collect();
        let own_pending = member.pending_revocation.get(&topic);
        let mut to_assign = BTreeSet::new();
        for &partition in target.difference(&kept) {
            let pending_here = own_pending.is_some_and(|p| p.contains(&partition));
            if (input.owned_by_other)(topic, partition) && !pending_here {
                has_unreleased = true;
            } else {
                to_assign.insert(partition);
            }
        }
        if !kept.is_empty() {
            assigned.insert(topic, kept);
        }
        if !revoked.is_empty() {
            revoking.insert(topic, revoked);
        }
        if !to_assign.is_empty() {
            pending_assignment.insert(topic, to_assign);
        }
    }

    let mut next = member.clone();
    if !revoking.is_empty() && owns_any(input.owned, &revoking) {
        next.state = MemberState::UnrevokedPartitions;
        next.assigned = assigned;
        next.pending_revocation = revoking;
        next.prune_assignment_epochs();
        return next;
    }
    for (topic, partitions) in pending_assignment {
        assigned.entry(topic).or_default().extend(partitions);
    }
    next.state = if has_unreleased {
        MemberState::UnreleasedPartitions
    } else {
        MemberState::Stable
    };
    next.update_epoch(input.target_epoch);
    next.assigned = assigned;
    next.pending_revocation = Assignment::new();
    next.assignment_epochs = carried_assignment_epochs(member, &next);
    next
}

/// The assignment epochs after `before` moved to `after`'s epoch: a partition owned
/// throughout keeps the epoch it was given at; one it gains now is at the new epoch.
fn carried_assignment_epochs(before: &Member, after: &Member) -> BTreeMap<(Uuid, i32), i32> {
    after
        .owned_partitions()
        .filter_map(|partition| {
            let epoch = before.assignment_epoch_of(partition)?;
            (epoch != after.member_epoch).then_some((partition, epoch))
        })
        .collect()
}
