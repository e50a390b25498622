//! A leading controller's decisions: when to compute an assignment, on what, and which floors
//! its leader epochs must rise above.
//!
//! It builds on its own last assignment (the first time, on the file it found on the
//! volume), and computes again whenever what it decides from changed: the alive set, the
//! topics, the groups, the floors. It writes only if the result differs from its last one,
//! except that it must write when it has just won (to stamp its epoch, which fences the
//! deposed controller at every broker that reads it), after a write that failed, and after
//! finding another controller's file on the volume.
//!
//! The floors (see [`crate::balancer`]) come from three places:
//! - the broker this controller wants to lead a partition reports that a claim at epoch `e`
//!   fenced it while the assignment says `e` or lower: the partition needs an epoch above
//!   `e` (reports from other brokers are about assignments they have not caught up with);
//! - the volume holds a file of a lower controller epoch that is not the one this controller
//!   started from: a deposed controller wrote it after this one won, and brokers that had
//!   not heard of this controller may have claimed its partitions at its epochs; every
//!   partition where that file's epoch is above this controller's needs a fresh one;
//! - a topic disappears: its partitions' last epochs (if chosen in this term) are kept, so a
//!   topic created again under that name starts above them, whatever claims its directory
//!   still holds.
//!
//! A floor is dropped once the partition's epoch is above it (the last two kinds are kept for
//! partitions the assignment no longer has, while they are within this term's range).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::assignment::{Assignment, BrokerEndpoint};
use crate::balancer::{balance, BalanceError, BalanceRequest, EpochRange};
use crate::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, GroupId, LeaderEpoch, TopicName, TopicPartition,
};
use crate::internal_topics::with_internal_topics;
use crate::view::TopicInfo;

use super::action::Action;
use super::input::MonotonicMillis;

/// Writes asked for and not answered that are remembered (to announce them once durable).
const MAX_IN_FLIGHT: usize = 16;

/// What the leader decides from, besides its own state.
pub(super) struct Context<'a> {
    pub epoch: ControllerEpoch,
    pub not_after: MonotonicMillis,
    pub alive: BTreeMap<BrokerId, BrokerEndpoint>,
    pub topics: &'a BTreeMap<TopicName, TopicInfo>,
    pub groups: Option<&'a BTreeSet<GroupId>>,
    /// A broker asked for `__transaction_state`.
    pub transaction_state_requested: bool,
    /// Raised whenever topics, groups, the internal topics or the ready set change.
    pub generation: u64,
    /// (reporting broker, partition, claim epoch) from heartbeats.
    pub fenced: Vec<(BrokerId, TopicPartition, LeaderEpoch)>,
    pub reported_version: Option<AssignmentVersion>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    generation: u64,
    alive: BTreeMap<BrokerId, BrokerEndpoint>,
    floors: BTreeMap<TopicPartition, LeaderEpoch>,
}

/// A leading controller's own state.
#[derive(Clone, Debug)]
pub(super) struct Leading {
    /// The file found on the volume when it won.
    started_from: Option<Arc<Assignment>>,
    /// The last assignment it asked to write (written or not: its epochs count as used).
    last: Option<Arc<Assignment>>,
    /// Asked to write, not yet answered.
    in_flight: Vec<Arc<Assignment>>,
    floors: BTreeMap<TopicPartition, LeaderEpoch>,
    /// The highest version seen in files on the volume.
    volume_version: Option<AssignmentVersion>,
    /// Write at the next chance even if nothing changed.
    must_write: bool,
    /// A write failed: set `must_write` at the next tick.
    retry_on_tick: bool,
    decided_on: Option<Fingerprint>,
}

impl Leading {
    pub(super) fn new(started_from: Option<Arc<Assignment>>) -> Self {
        Leading {
            volume_version: started_from.as_ref().map(|a| a.version()),
            started_from,
            last: None,
            in_flight: Vec::new(),
            floors: BTreeMap::new(),
            must_write: true,
            retry_on_tick: false,
            decided_on: None,
        }
    }

    /// The last assignment it asked to write.
    pub(super) fn last(&self) -> Option<&Arc<Assignment>> {
        self.last.as_ref()
    }

    fn base(&self) -> Option<&Arc<Assignment>> {
        self.last.as_ref().or(self.started_from.as_ref())
    }

    /// A file of controller epoch below this one's was read from the volume.
    pub(super) fn saw_older_file(&mut self, file: &Arc<Assignment>) {
        self.volume_version = self.volume_version.max(Some(file.version()));
        let same_as_start = self.started_from.as_ref().is_some_and(|start| {
            start.controller_epoch() == file.controller_epoch() && start.version() == file.version()
        });
        if same_as_start {
            return;
        }
        let base = self.base().cloned();
        for (partition, stale) in file.partitions() {
            let ours = base.as_ref().and_then(|b| b.leader(&partition));
            if ours.is_some_and(|ours| stale.leader_epoch > ours.leader_epoch) {
                raise(&mut self.floors, partition, stale.leader_epoch);
            }
        }
        self.must_write = true;
    }

    pub(super) fn tick(&mut self) {
        if std::mem::take(&mut self.retry_on_tick) {
            self.must_write = true;
        }
    }

    /// The write of `version` is durable: announce it.
    pub(super) fn written(&mut self, version: AssignmentVersion, actions: &mut Vec<Action>) {
        if let Some(at) = self.in_flight.iter().position(|a| a.version() == version) {
            let assignment = self.in_flight.remove(at);
            actions.push(Action::PushAssignmentChanged {
                epoch: assignment.controller_epoch(),
                version,
            });
            actions.push(Action::MirrorAssignment(assignment));
        }
    }

    /// The write of `version` did not happen (or may not have).
    pub(super) fn not_written(&mut self, version: AssignmentVersion) {
        self.in_flight.retain(|a| a.version() != version);
        self.retry_on_tick = true;
    }

    /// Computes and writes the next assignment if anything calls for one.
    pub(super) fn reconcile(&mut self, context: Context<'_>, actions: &mut Vec<Action>) {
        if context.alive.is_empty() {
            return;
        }
        let range = match EpochRange::of(context.epoch) {
            Ok(range) => range,
            Err(error) => {
                actions.push(Action::BalanceFailed(error));
                return;
            }
        };
        let base = self.base().cloned();
        let topics = with_internal_topics(
            context.topics,
            base.as_deref(),
            context.epoch,
            context.transaction_state_requested,
        );
        if let Some(base) = &base {
            for (broker, partition, claim) in &context.fenced {
                // Only the leader this controller wants matters: another broker's report
                // is about an assignment it has not caught up with yet.
                let ours = base.leader(partition);
                if ours.is_some_and(|ours| ours.leader == *broker && ours.leader_epoch <= *claim) {
                    raise(&mut self.floors, partition.clone(), *claim);
                }
            }
            for (partition, leader) in base.partitions() {
                let kept = topics
                    .get(&partition.topic)
                    .is_some_and(|t| partition.partition < t.partitions);
                if !kept && range.contains(leader.leader_epoch) {
                    raise(&mut self.floors, partition, leader.leader_epoch);
                }
            }
        }
        let fingerprint = Fingerprint {
            generation: context.generation,
            alive: context.alive,
            floors: self.floors.clone(),
        };
        if !self.must_write && self.decided_on.as_ref() == Some(&fingerprint) {
            return;
        }
        let highest = [
            self.last.as_ref().map(|a| a.version()),
            self.volume_version,
            context.reported_version,
        ]
        .into_iter()
        .flatten()
        .max();
        let version = match highest {
            None => AssignmentVersion(1),
            Some(v) => match v.0.checked_add(1) {
                Some(next) => AssignmentVersion(next),
                None => {
                    actions.push(Action::BalanceFailed(BalanceError::VersionExhausted(v)));
                    self.decided_on = Some(fingerprint);
                    return;
                }
            },
        };
        let named: BTreeSet<GroupId>;
        let groups = match context.groups {
            Some(groups) => groups,
            None => {
                named = base
                    .as_ref()
                    .map(|b| b.groups().keys().cloned().collect())
                    .unwrap_or_default();
                &named
            }
        };
        let outcome = balance(&BalanceRequest {
            previous: base.as_deref(),
            controller_epoch: context.epoch,
            version,
            brokers: &fingerprint.alive,
            topics: &topics,
            groups,
            epoch_floors: &self.floors,
        });
        self.decided_on = Some(fingerprint);
        let next = match outcome {
            Ok(next) => next,
            Err(error) => {
                actions.push(Action::BalanceFailed(error));
                return;
            }
        };
        let unchanged = self
            .last
            .as_ref()
            .is_some_and(|last| same_content(last, &next));
        if unchanged && !self.must_write {
            return;
        }
        let next = Arc::new(next);
        self.floors
            .retain(|partition, floor| next.leader(partition).is_none() && range.contains(*floor));
        self.must_write = false;
        self.last = Some(next.clone());
        // An adapter answers every write; if one never did, keep only the newest few.
        if self.in_flight.len() >= MAX_IN_FLIGHT {
            self.in_flight.remove(0);
        }
        self.in_flight.push(next.clone());
        actions.push(Action::WriteAssignment {
            assignment: next,
            not_after: context.not_after,
        });
    }
}

fn raise(
    floors: &mut BTreeMap<TopicPartition, LeaderEpoch>,
    partition: TopicPartition,
    epoch: LeaderEpoch,
) {
    let floor = floors.entry(partition).or_insert(epoch);
    *floor = (*floor).max(epoch);
}

/// Whether two assignments say the same apart from epoch and version.
fn same_content(a: &Assignment, b: &Assignment) -> bool {
    a.brokers() == b.brokers() && a.topics() == b.topics() && a.groups() == b.groups()
}
