//! The takeover diff: from the view before (if any), the view just accepted and what this
//! broker has open now, the shard commands that make what is open match what the new view
//! gives this broker, in two phases.
//!
//! 1. **Close phase**: close every open partition the new view does not give this broker at
//!    exactly that shard and epoch (lost to another broker, moving to another shard here,
//!    reopened at a new epoch, or an orphan no assignment gives this broker), and drop every
//!    group likewise. A partition the open phase reopens here is checkpointed as it closes;
//!    one another broker takes over is not (that broker inherits the files concurrently; see
//!    [`ShardCommand::ClosePartition`]).
//! 2. **Open phase**: open every partition the new view gives this broker that is not open at
//!    its shard and epoch, and adopt every group likewise.
//!
//! The caller runs the open phase only after every command of the close phase has been
//! carried out. That order is what keeps a partition (or group) from ever being open on two
//! shards at once: a move closes on the old shard before the new shard opens, and everything
//! opened in phase 2 was closed everywhere else in phase 1.
//!
//! A partition this broker keeps but whose leader epoch changed is closed and reopened rather
//! than re-stamped in place: another broker may have led it at an epoch in between (one this
//! broker never saw), so its files must be claimed and recovered again.
//!
//! Groups the assignment does not name are this broker's when the fallback coordinator
//! ([`crate::placement::fallback_coordinator`]) picks it. The diff keeps such a group only if
//! it is adopted already and never invents one: an unnamed group is adopted (with an
//! [`ShardCommand::AdoptGroup`] on its shard) when the first request for it reaches the
//! broker the view names as its coordinator, and dropped here once the fallback picks another
//! broker or the assignment names one.
//!
//! The orphan sweep is not a separate pass: "open but not given to this broker" is exactly
//! what the close phase closes, whether or not the old view knew about it. The old view only
//! tells the causes apart, for logs.

use std::collections::{BTreeMap, BTreeSet};

use crate::command::{AddressedCommand, ShardCommand};
use crate::ids::{GroupId, LeaderEpoch, ShardIndex, TopicPartition};
use crate::open_state::OpenState;
use crate::view::ClusterView;

/// Why a command is in the plan (for logs and tests; shards do not need it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// The old view gave it to this broker and the new one gives it to another (or drops it).
    Lost,
    /// The new view gives it to this broker and the old one did not.
    Gained,
    /// It stays on this broker but belongs to another shard now.
    Moved,
    /// It stays on this broker and shard, at a new leader epoch.
    EpochChanged,
    /// Open, although no view gives it to this broker (the orphan sweep).
    Orphan,
    /// Given to this broker by both views but not open (an earlier open failed, or this is
    /// the broker's first view after a restart).
    Missing,
}

/// A command of the plan, with its cause.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PlannedCommand {
    /// The command and its shard.
    pub command: AddressedCommand,
    /// Why it is there.
    pub cause: Cause,
}

/// One phase: commands that may run in any order and concurrently on their shards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Phase {
    commands: Vec<PlannedCommand>,
}

impl Phase {
    /// The commands, ordered by shard, then partitions (by topic, then number) before groups.
    pub fn commands(&self) -> &[PlannedCommand] {
        &self.commands
    }

    /// Whether the phase has nothing to do.
    pub fn is_empty(&self) -> bool {
        self.commands.is_empty()
    }

    /// The commands grouped by shard, so each shard gets its whole share in one message.
    pub fn by_shard(&self) -> BTreeMap<ShardIndex, Vec<ShardCommand>> {
        let mut grouped: BTreeMap<ShardIndex, Vec<ShardCommand>> = BTreeMap::new();
        for planned in &self.commands {
            grouped
                .entry(planned.command.shard)
                .or_default()
                .push(planned.command.command.clone());
        }
        grouped
    }

    fn push(&mut self, shard: ShardIndex, command: ShardCommand, cause: Cause) {
        self.commands.push(PlannedCommand {
            command: AddressedCommand { shard, command },
            cause,
        });
    }

    fn sort(&mut self) {
        fn key(
            planned: &PlannedCommand,
        ) -> (ShardIndex, Option<&TopicPartition>, Option<&GroupId>) {
            let shard = planned.command.shard;
            match &planned.command.command {
                ShardCommand::OpenPartition { partition, .. }
                | ShardCommand::ClosePartition { partition, .. } => (shard, Some(partition), None),
                ShardCommand::AdoptGroup { group } | ShardCommand::DropGroup { group } => {
                    (shard, None, Some(group))
                }
            }
        }
        self.commands.sort_by(|a, b| {
            let (a, b) = (key(a), key(b));
            // Partitions (Some) before groups (None) within a shard.
            (a.0, a.1.is_none(), a.1, a.2).cmp(&(b.0, b.1.is_none(), b.1, b.2))
        });
    }
}

/// The two phases of a takeover. Run [`TakeoverPlan::close_phase`] to completion (every
/// command carried out) before starting [`TakeoverPlan::open_phase`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TakeoverPlan {
    close: Phase,
    open: Phase,
}

impl TakeoverPlan {
    /// Phase 1: closes and drops.
    pub fn close_phase(&self) -> &Phase {
        &self.close
    }

    /// Phase 2: opens and adoptions; only after phase 1 is done.
    pub fn open_phase(&self) -> &Phase {
        &self.open
    }

    /// Both phases, in the order they must run.
    pub fn phases(&self) -> [&Phase; 2] {
        [&self.close, &self.open]
    }

    /// Whether nothing needs doing.
    pub fn is_empty(&self) -> bool {
        self.close.is_empty() && self.open.is_empty()
    }
}

/// The plan that takes this broker (`new.this_broker()`) from `open` to what `new` gives it.
/// `old` is the view the broker followed before, if any.
pub fn plan_takeover(
    old: Option<&ClusterView>,
    new: &ClusterView,
    open: &OpenState,
) -> TakeoverPlan {
    let me = new.this_broker();
    let had = |partition: &TopicPartition| old.is_some_and(|view| view.leads(partition));

    // What the new view gives this broker: partition → (shard, epoch), group → shard.
    let mut wanted_partitions: BTreeMap<&TopicPartition, (ShardIndex, LeaderEpoch)> =
        BTreeMap::new();
    for partition in new.partitions_led_by(me) {
        if let Some(placement) = new.leader_of(partition) {
            wanted_partitions.insert(partition, (placement.owner_shard, placement.leader_epoch));
        }
    }
    let mut wanted_groups: BTreeMap<GroupId, ShardIndex> = new
        .named_groups()
        .keys()
        .filter(|group| new.coordinator_of(group) == Some(me))
        .map(|group| (group.clone(), new.group_shard(group)))
        .collect();
    for (_, holdings) in open.shards() {
        for group in &holdings.groups {
            if !new.named_groups().contains_key(group) && new.coordinator_of(group) == Some(me) {
                wanted_groups.insert(group.clone(), new.group_shard(group));
            }
        }
    }
    let old_groups: BTreeSet<&GroupId> = old.map_or_else(BTreeSet::new, |view| {
        view.named_groups()
            .keys()
            .filter(|group| view.coordinator_of(group) == Some(view.this_broker()))
            .collect()
    });

    let mut plan = TakeoverPlan::default();
    for (shard, holdings) in open.shards() {
        for (partition, epoch) in &holdings.partitions {
            let cause = match wanted_partitions.get(partition) {
                Some(&(want_shard, want_epoch)) if want_shard == shard && want_epoch == *epoch => {
                    continue
                }
                Some(&(want_shard, _)) if want_shard != shard => Cause::Moved,
                Some(_) => Cause::EpochChanged,
                None if had(partition) => Cause::Lost,
                None => Cause::Orphan,
            };
            let command = ShardCommand::ClosePartition {
                partition: partition.clone(),
                // Reopened here (next phase) or taken over elsewhere (concurrently).
                checkpoint: wanted_partitions.contains_key(partition),
            };
            plan.close.push(shard, command, cause);
        }
        for group in &holdings.groups {
            let cause = match wanted_groups.get(group) {
                Some(want_shard) if *want_shard == shard => continue,
                Some(_) => Cause::Moved,
                None if old_groups.contains(group) => Cause::Lost,
                None => Cause::Orphan,
            };
            let command = ShardCommand::DropGroup {
                group: group.clone(),
            };
            plan.close.push(shard, command, cause);
        }
    }
    for (partition, (shard, epoch)) in &wanted_partitions {
        let open_here = open
            .shard(*shard)
            .and_then(|h| h.partitions.get(*partition))
            .copied();
        if open_here == Some(*epoch) {
            continue;
        }
        let cause = if open_here.is_some() {
            Cause::EpochChanged
        } else if !open.where_open(partition).is_empty() {
            Cause::Moved
        } else if had(partition) {
            Cause::Missing
        } else {
            Cause::Gained
        };
        let command = ShardCommand::OpenPartition {
            partition: (*partition).clone(),
            leader_epoch: *epoch,
        };
        plan.open.push(*shard, command, cause);
    }
    for (group, shard) in &wanted_groups {
        let adopted = open.where_adopted(group);
        if adopted.contains(shard) {
            continue;
        }
        let cause = if !adopted.is_empty() {
            Cause::Moved
        } else if old_groups.contains(group) {
            Cause::Missing
        } else {
            Cause::Gained
        };
        let command = ShardCommand::AdoptGroup {
            group: group.clone(),
        };
        plan.open.push(*shard, command, cause);
    }
    plan.close.sort();
    plan.open.sort();
    plan
}
