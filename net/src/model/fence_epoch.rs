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
//! - **a group store** has no leader epoch in the assignment; it opens at fence epoch
//!   **V + 1**, where V is the `assignment_version` of the accepted assignment under which
//!   this broker adopted the group (or first loaded it, on its first request here). Versions
//!   only rise, and a group moves to another broker only with a new assignment, so every
//!   adoption by a new coordinator claims a higher epoch than the coordinator it replaces. A
//!   version whose V + 1 does not fit in a `u32` has no fence epoch: the group is refused
//!   (`NOT_COORDINATOR`) rather than opened at a truncated, possibly older, epoch.
//!
//! A broker that loads a group again under the same version (it released the group and a
//! request brings it back) reuses its own claim, which the engine reopens; one that finds a
//! newer claim fails to open with [`kaas_engine::EngineError::Fenced`].

use kaas_cluster::ids::{AssignmentVersion, LeaderEpoch};

/// The fence epoch of a partition led at `leader_epoch` (L + 1); `None` for a negative one.
pub fn partition_fence_epoch(leader_epoch: LeaderEpoch) -> Option<u32> {
    u32::try_from(leader_epoch.0).ok()?.checked_add(1)
}

/// The fence epoch of a group store adopted under assignment `version` (V + 1); `None` when
/// that does not fit in a `u32`.
pub fn group_fence_epoch(version: AssignmentVersion) -> Option<u32> {
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
    fn group_epochs_shift_by_one_and_refuse_what_does_not_fit() {
        assert_eq!(group_fence_epoch(AssignmentVersion(0)), Some(1));
        assert_eq!(group_fence_epoch(AssignmentVersion(17)), Some(18));
        assert_eq!(
            group_fence_epoch(AssignmentVersion(u64::from(u32::MAX) - 1)),
            Some(u32::MAX)
        );
        assert_eq!(
            group_fence_epoch(AssignmentVersion(u64::from(u32::MAX))),
            None
        );
        assert_eq!(group_fence_epoch(AssignmentVersion(u64::MAX)), None);
    }

    #[test]
    fn a_later_adoption_always_fences_an_earlier_one() {
        for (earlier, later) in [(0u64, 1u64), (5, 6), (1, 1 << 31)] {
            let earlier = group_fence_epoch(AssignmentVersion(earlier));
            let later = group_fence_epoch(AssignmentVersion(later));
            assert!(later > earlier && earlier.is_some());
        }
    }
}
