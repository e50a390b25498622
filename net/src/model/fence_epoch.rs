//! The storage-fence epochs a cluster-mode broker opens partitions and group stores at.
//!
//! The engine's fence ([`kaas_engine::fence`]) orders writers by a `u32` epoch: a writer at
//! epoch E is fenced as soon as any claim above E exists, and epoch 0 is the unfenced
//! standalone layout (no claims, no checks, today's file names). Cluster mode therefore never
//! opens anything at 0, and derives the epoch from a number that rises every time leadership
//! changes hands:
//!
//! - **a partition** led at leader epoch L (`assignment.json`'s `leader_epoch`, an `i32` as in
//!   Kafka) opens at fence epoch **L + 1**. Leader epochs start at 0 for a new partition, as
//!   Kafka's do, and a leader at L = 0 must be fenced too, so the fence epoch is shifted by
//!   one; on disk a log led at leader epoch 2 writes `-e3` files. A negative L (refused by the
//!   assignment's checks already) has no fence epoch, and every non-negative `i32` plus one
//!   fits in a `u32`.
//! - **a group store** opens at the fence epoch of its `__consumer_offsets` partition: the
//!   group is coordinated by that partition's leader (as in Kafka), so a coordinator whose
//!   partition is led at L opens the group at **L + 1**. Leader epochs rise with every change
//!   of leader and come from disjoint ranges under different controller epochs
//!   (`kaas_cluster::balancer::leader_epochs`), so a deposed controller and its successor can
//!   never make two brokers coordinate one group at one fence epoch, whatever version numbers
//!   their files carry.
//! - An assignment without `__consumer_offsets` (written by hand, or by a controller older
//!   than that topic's placement) places groups one by one; a group store then opens at
//!   **V + 1**, V being the `assignment_version` under which this broker loaded it. That rule
//!   is weaker: two controllers can both write version V.
//!
//! A value that does not fit in a `u32` has no fence epoch: the group is refused
//! (`NOT_COORDINATOR`) rather than opened at a truncated, possibly older, epoch.
//!
//! A broker that loads a group again at the same fence epoch (it released the group and a
//! request brings it back) reuses its own claim, which the engine reopens; one that finds a
//! newer claim fails to open with [`kaas_engine::EngineError::Fenced`].

use kaas_cluster::ids::{AssignmentVersion, GroupId, LeaderEpoch};
use kaas_cluster::view::ClusterView;

/// The fence epoch of a partition led at `leader_epoch` (L + 1); `None` for a negative one.
pub fn partition_fence_epoch(leader_epoch: LeaderEpoch) -> Option<u32> {
    u32::try_from(leader_epoch.0).ok()?.checked_add(1)
}

/// The fence epoch `group`'s store opens at under `view`: its `__consumer_offsets`
/// partition's (L + 1) when the view places that topic, else the view's version plus one;
/// `None` when that does not fit in a `u32`.
pub fn group_fence_epoch(view: &ClusterView, group: &GroupId) -> Option<u32> {
    match view.group_placement(group) {
        Some(placement) => partition_fence_epoch(placement.leader_epoch),
        None => version_fence_epoch(view.assignment_version()),
    }
}

/// V + 1 for an assignment that does not place `__consumer_offsets`.
fn version_fence_epoch(version: AssignmentVersion) -> Option<u32> {
    u32::try_from(version.0).ok()?.checked_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_epochs_shift_by_one_and_refuse_negatives() {
        assert_eq!(partition_fence_epoch(LeaderEpoch(0)), Some(1));
        assert_eq!(partition_fence_epoch(LeaderEpoch(7)), Some(8));
        assert_eq!(
            partition_fence_epoch(LeaderEpoch(i32::MAX)),
            Some(i32::MAX as u32 + 1)
        );
        assert_eq!(partition_fence_epoch(LeaderEpoch(-1)), None);
        assert_eq!(partition_fence_epoch(LeaderEpoch(i32::MIN)), None);
    }

    #[test]
    fn version_epochs_shift_by_one_and_refuse_what_does_not_fit() {
        assert_eq!(version_fence_epoch(AssignmentVersion(0)), Some(1));
        assert_eq!(version_fence_epoch(AssignmentVersion(17)), Some(18));
        assert_eq!(
            version_fence_epoch(AssignmentVersion(u64::from(u32::MAX) - 1)),
            Some(u32::MAX)
        );
        assert_eq!(
            version_fence_epoch(AssignmentVersion(u64::from(u32::MAX))),
            None
        );
        assert_eq!(version_fence_epoch(AssignmentVersion(u64::MAX)), None);
    }

    #[test]
    fn a_later_version_always_fences_an_earlier_one() {
        for (earlier, later) in [(0u64, 1u64), (5, 6), (1, 1 << 31)] {
            let earlier = version_fence_epoch(AssignmentVersion(earlier));
            let later = version_fence_epoch(AssignmentVersion(later));
            assert!(later > earlier && earlier.is_some());
        }
    }

    #[test]
    fn a_group_opens_at_its_offsets_partition_epoch_whatever_the_version() {
        use kaas_cluster::assignment::Assignment;
        use kaas_cluster::ids::BrokerId;
        let view = |epoch: u64, version: u64, leader_epoch: i32| {
            let leaders = vec![format!(r#"{{"leader": 0, "leader_epoch": {leader_epoch}}}"#); 50];
            let text = format!(
                r#"{{"format": 1, "controller_epoch": {epoch}, "assignment_version": {version},
                 "brokers": [{{"id": 0, "host": "h", "port": 9092}}],
                 "topics": {{"__consumer_offsets": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 50}}}},
                 "partitions": {{"__consumer_offsets": [{}]}}}}"#,
                leaders.join(",")
            );
            let assignment = Assignment::from_json(text.as_bytes()).expect("valid");
            ClusterView::new(&assignment, BrokerId(0), 1)
        };
        let group = GroupId::new("billing");
        // A deposed controller (epoch 1) and its successor (epoch 2) both wrote version 9:
        // their leader epochs come from different ranges, and so do the groups' fence epochs.
        let stale = group_fence_epoch(&view(1, 9, 65_536), &group);
        let fresh = group_fence_epoch(&view(2, 9, 131_072), &group);
        assert_eq!(stale, Some(65_537));
        assert_eq!(fresh, Some(131_073));
        // Without the topic (an assignment written by hand), the version decides.
        let unplaced = Assignment::from_json(
            br#"{"format": 1, "controller_epoch": 2, "assignment_version": 9,
                 "brokers": [{"id": 0, "host": "h", "port": 9092}], "topics": {},
                 "partitions": {}}"#,
        )
        .expect("valid");
        let unplaced = ClusterView::new(&unplaced, BrokerId(0), 1);
        assert_eq!(group_fence_epoch(&unplaced, &group), Some(10));
    }
}
