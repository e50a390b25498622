//! The partitions this broker was given but cannot lead because the storage fence holds a
//! newer claim, for the heartbeat's `fenced` report: the controller gives such a partition a
//! leader epoch above the claim (`kaas_cluster::controller`, "fence report"), which is the
//! only way out when a deposed controller's file made another broker claim it higher.
//!
//! Shard 0's takeover driver keeps it ([`crate::shard::shard_zero::ShardZero`]): an open
//! that fails with `EngineError::Fenced` records the claim found (its fence epoch F is leader
//! epoch F − 1); a partition a shard gave up because a flush found a newer claim records the
//! leader epoch it was open at (the claim is above it: the controller needs only that); a
//! later successful open of the partition, or an assignment that gives it to another broker,
//! clears it. The cluster core reads it from another thread ([`FenceReports::list`]) for every
//! ping.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use kaas_cluster::ids::{LeaderEpoch, TopicPartition};

/// Fenced partitions and the leader epoch of the claim above this broker's (at least);
/// cheap to clone, `Send` and `Sync`.
#[derive(Clone, Debug, Default)]
pub struct FenceReports {
    fenced: Arc<Mutex<BTreeMap<TopicPartition, LeaderEpoch>>>,
}

impl FenceReports {
    /// Nothing fenced.
    pub fn new() -> Self {
        FenceReports::default()
    }

    /// `partition` is fenced by a claim at leader epoch `claim` or above (the highest
    /// reported is kept).
    pub fn record(&self, partition: TopicPartition, claim: LeaderEpoch) {
        let mut fenced = self.lock();
        let entry = fenced.entry(partition).or_insert(claim);
        *entry = (*entry).max(claim);
    }

    /// `partition` opened: no claim above it.
    pub fn clear(&self, partition: &TopicPartition) {
        self.lock().remove(partition);
    }

    /// Keeps only the partitions `keep` says yes to (those the assignment still gives this
    /// broker).
    pub fn retain(&self, keep: impl Fn(&TopicPartition) -> bool) {
        self.lock().retain(|partition, _| keep(partition));
    }

    /// What is fenced now, in partition order.
    pub fn list(&self) -> Vec<(TopicPartition, LeaderEpoch)> {
        self.lock()
            .iter()
            .map(|(partition, claim)| (partition.clone(), *claim))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<TopicPartition, LeaderEpoch>> {
        // A map of plain values: a panic elsewhere leaves it consistent.
        self.fenced.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The leader epoch of a claim at fence epoch `fence_epoch` (`crate::model::fence_epoch`:
/// fence epoch = leader epoch + 1).
pub fn claim_leader_epoch(fence_epoch: u32) -> LeaderEpoch {
    LeaderEpoch(i32::try_from(fence_epoch.saturating_sub(1)).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_cluster::ids::TopicName;

    fn partition(number: i32) -> TopicPartition {
        TopicPartition::new(TopicName::new("t").expect("legal"), number)
    }

    #[test]
    fn keeps_the_highest_claim_until_cleared_or_moved() {
        let reports = FenceReports::new();
        reports.record(partition(0), LeaderEpoch(4));
        reports.record(partition(0), LeaderEpoch(2));
        reports.record(partition(1), claim_leader_epoch(9));
        assert_eq!(
            reports.list(),
            [
                (partition(0), LeaderEpoch(4)),
                (partition(1), LeaderEpoch(8))
            ]
        );
        reports.clear(&partition(0));
        reports.retain(|p| p.partition != 1);
        assert!(reports.list().is_empty());
        assert_eq!(claim_leader_epoch(0), LeaderEpoch(0));
    }
}
