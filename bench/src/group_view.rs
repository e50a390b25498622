//! When a consumer group counts as settled, decided from its members' current assignments.
//!
//! A group of one subscribed topic is settled when every member holds at least one
//! partition, the members' assignments together hold every partition exactly once, and the
//! assignment sizes differ by at most one. The last condition matters for incremental
//! protocols: under KIP-848 a joining member receives partitions one at a time as their old
//! owners release them, so "every partition owned once, nobody empty" can hold while
//! partitions are still moving. Every assignor kaas-bench can ask for (range,
//! cooperative-sticky, and the brokers' uniform and range) spreads one topic evenly, so only
//! the final assignment is balanced.

use std::collections::BTreeSet;
use std::time::Instant;

/// One member's assignment as its rebalance callbacks left it.
#[derive(Clone, Debug, Default)]
pub struct AssignmentView {
    /// Partitions the member holds now.
    pub partitions: BTreeSet<i32>,
    /// When the last rebalance callback changed (or confirmed) the assignment.
    pub last_change: Option<Instant>,
    /// Rebalance callbacks served so far.
    pub callbacks: u32,
}

impl AssignmentView {
    /// Partitions were assigned: added to the current set (an eager protocol revokes
    /// everything first, so adding is right for both eager and incremental protocols).
    pub fn assign(&mut self, partitions: impl IntoIterator<Item = i32>, at: Instant) {
        self.partitions.extend(partitions);
        self.touch(at);
    }

    /// Partitions were revoked (or lost).
    pub fn revoke(&mut self, partitions: impl IntoIterator<Item = i32>, at: Instant) {
        for partition in partitions {
            self.partitions.remove(&partition);
        }
        self.touch(at);
    }

    /// A rebalance failed: librdkafka drops the assignment.
    pub fn clear(&mut self, at: Instant) {
        self.partitions.clear();
        self.touch(at);
    }

    fn touch(&mut self, at: Instant) {
        self.last_change = Some(at);
        self.callbacks += 1;
    }
}

/// Whether `members` hold `0..partitions` exactly once between them, each at least one, with
/// sizes differing by at most one.
pub fn is_settled(members: &[AssignmentView], partitions: i32) -> bool {
    if members.is_empty() || partitions <= 0 {
        return false;
    }
    let sizes = members.iter().map(|member| member.partitions.len());
    let (smallest, largest) = sizes.fold((usize::MAX, 0), |(low, high), size| {
        (low.min(size), high.max(size))
    });
    if smallest == 0 || largest - smallest > 1 {
        return false;
    }
    let mut seen = vec![false; partitions as usize];
    for member in members {
        for &partition in &member.partitions {
            match seen.get_mut(partition as usize) {
                Some(slot) if partition >= 0 && !*slot => *slot = true,
                _ => return false,
            }
        }
    }
    seen.iter().all(|owned| *owned)
}

/// The latest rebalance callback among `members`: when their current state came about.
pub fn last_change(members: &[AssignmentView]) -> Option<Instant> {
    members.iter().filter_map(|member| member.last_change).max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn views(assignments: &[&[i32]]) -> Vec<AssignmentView> {
        let now = Instant::now();
        assignments
            .iter()
            .map(|partitions| {
                let mut view = AssignmentView::default();
                view.assign(partitions.iter().copied(), now);
                view
            })
            .collect()
    }

    #[test]
    fn an_exact_balanced_cover_is_settled() {
        assert!(is_settled(&views(&[&[0, 1], &[2, 3], &[4]]), 5));
        assert!(is_settled(&views(&[&[4, 0], &[3, 2], &[1]]), 5));
    }

    #[test]
    fn gaps_overlaps_and_idle_members_are_not() {
        assert!(!is_settled(&views(&[&[0, 1], &[2]]), 4));
        assert!(!is_settled(&views(&[&[0, 1], &[1, 2]]), 3));
        assert!(!is_settled(&views(&[&[0, 1], &[]]), 2));
        assert!(!is_settled(&views(&[&[0, 7]]), 2));
        assert!(!is_settled(&views(&[&[-1, 0]]), 1));
        assert!(!is_settled(&[], 3));
    }

    #[test]
    fn a_hand_over_in_progress_is_not_settled() {
        // Three members had 3 each; a fourth has received the one partition released so far.
        assert!(!is_settled(
            &views(&[&[0, 1], &[3, 4, 5], &[6, 7, 8], &[2]]),
            9
        ));
        assert!(!is_settled(&views(&[&[0, 1, 2], &[3]]), 4));
    }

    #[test]
    fn incremental_callbacks_track_the_current_set() {
        let now = Instant::now();
        let mut view = AssignmentView::default();
        view.assign([0, 1, 2], now);
        view.revoke([1], now);
        view.assign([5], now);
        assert_eq!(view.partitions, BTreeSet::from([0, 2, 5]));
        assert_eq!(view.callbacks, 3);
        view.clear(now);
        assert!(view.partitions.is_empty());
        assert_eq!(last_change(&[view]), Some(now));
    }
}
