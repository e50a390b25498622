//! Shard commands: what the cluster core asks one shard to do, as plain data (never a closure
//! over the shard's internals), so it can cross threads, be logged and be checked in tests.

use crate::ids::{GroupId, LeaderEpoch, ShardIndex, TopicPartition};

/// One thing for one shard to do.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ShardCommand {
    /// Claim the partition for `leader_epoch`, open it and recover it from the files, then
    /// serve it.
    OpenPartition {
        /// The partition.
        partition: TopicPartition,
        /// The epoch to lead at.
        leader_epoch: LeaderEpoch,
    },
    /// Stop serving the partition (in-flight requests are answered, not dropped), flush it
    /// and close its files.
    ClosePartition {
        /// The partition.
        partition: TopicPartition,
        /// Whether the close writes a checkpoint (recovery point, producer snapshot, leader
        /// epochs) first. Worth it when this broker opens the partition again right after
        /// (on another shard, or at a new epoch: the open phase follows the close phase, so
        /// it recovers from where the log ended). Not when another broker takes it over:
        /// that broker claims and inherits the files at the same moment, so the checkpoint
        /// would arrive too late to be read and would only compete with that takeover for
        /// the shared volume (its recovery starts at the last periodic checkpoint, as after
        /// a failover).
        checkpoint: bool,
    },
    /// Start coordinating the group, loading its state from the files.
    AdoptGroup {
        /// The group.
        group: GroupId,
    },
    /// Stop coordinating the group and close its files.
    DropGroup {
        /// The group.
        group: GroupId,
    },
}

/// A command and the shard it is for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AddressedCommand {
    /// The shard that runs it.
    pub shard: ShardIndex,
    /// What to do.
    pub command: ShardCommand,
}
