//! What a broker has open right now, shard by shard: the partitions each shard serves (and at
//! which leader epoch) and the groups each coordinates. The takeover diff reads it; the caller
//! keeps it current by applying each command once the shard has confirmed it.

use std::collections::{BTreeMap, BTreeSet};

use crate::command::{AddressedCommand, ShardCommand};
use crate::ids::{GroupId, LeaderEpoch, ShardIndex, TopicPartition};

/// What one shard has open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShardHoldings {
    /// Open partitions and the epoch each was opened at.
    pub partitions: BTreeMap<TopicPartition, LeaderEpoch>,
    /// Groups the shard coordinates.
    pub groups: BTreeSet<GroupId>,
}

/// What every shard of a broker has open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenState {
    shards: BTreeMap<ShardIndex, ShardHoldings>,
}

/// A command that does not fit the state it was applied to: the sign of a caller that ran
/// commands out of order or lost track of a shard.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenStateError {
    /// Opening a partition that is open already (on this shard or another).
    #[error("{partition} is already open on shard {open_on:?}")]
    AlreadyOpen {
        /// The partition.
        partition: TopicPartition,
        /// Where it is open.
        open_on: ShardIndex,
    },
    /// Closing a partition the shard does not have open.
    #[error("{partition} is not open on shard {shard:?}")]
    NotOpen {
        /// The partition.
        partition: TopicPartition,
        /// The shard that was asked.
        shard: ShardIndex,
    },
    /// Adopting a group that some shard coordinates already.
    #[error("group {group} is already adopted on shard {adopted_on:?}")]
    AlreadyAdopted {
        /// The group.
        group: GroupId,
        /// Where it is adopted.
        adopted_on: ShardIndex,
    },
    /// Dropping a group the shard does not coordinate.
    #[error("group {group} is not adopted on shard {shard:?}")]
    NotAdopted {
        /// The group.
        group: GroupId,
        /// The shard that was asked.
        shard: ShardIndex,
    },
}

impl OpenState {
    /// Nothing open.
    pub fn new() -> Self {
        OpenState::default()
    }

    /// Every shard that has something open.
    pub fn shards(&self) -> impl Iterator<Item = (ShardIndex, &ShardHoldings)> {
        self.shards
            .iter()
            .map(|(shard, holdings)| (*shard, holdings))
    }

    /// What `shard` has open.
    pub fn shard(&self, shard: ShardIndex) -> Option<&ShardHoldings> {
        self.shards.get(&shard)
    }

    /// Every shard on which `partition` is open, with its epoch there (more than one entry
    /// only in a state no correct sequence of commands produces).
    pub fn where_open(&self, partition: &TopicPartition) -> Vec<(ShardIndex, LeaderEpoch)> {
        self.shards
            .iter()
            .filter_map(|(shard, h)| h.partitions.get(partition).map(|e| (*shard, *e)))
            .collect()
    }

    /// Every shard on which `group` is adopted.
    pub fn where_adopted(&self, group: &GroupId) -> Vec<ShardIndex> {
        self.shards
            .iter()
            .filter(|(_, h)| h.groups.contains(group))
            .map(|(shard, _)| *shard)
            .collect()
    }

    /// Records a command a shard has carried out; refuses one that does not fit (the state is
    /// then unchanged).
    pub fn apply(&mut self, command: &AddressedCommand) -> Result<(), OpenStateError> {
        let shard = command.shard;
        match &command.command {
            ShardCommand::OpenPartition {
                partition,
                leader_epoch,
            } => {
                if let Some((open_on, _)) = self.where_open(partition).first() {
                    return Err(OpenStateError::AlreadyOpen {
                        partition: partition.clone(),
                        open_on: *open_on,
                    });
                }
                self.holdings(shard)
                    .partitions
                    .insert(partition.clone(), *leader_epoch);
            }
            ShardCommand::ClosePartition { partition, .. } => {
                let removed = self
                    .shards
                    .get_mut(&shard)
                    .and_then(|h| h.partitions.remove(partition));
                if removed.is_none() {
                    return Err(OpenStateError::NotOpen {
                        partition: partition.clone(),
                        shard,
                    });
                }
            }
            ShardCommand::AdoptGroup { group } => {
                if let Some(adopted_on) = self.where_adopted(group).first() {
                    return Err(OpenStateError::AlreadyAdopted {
                        group: group.clone(),
                        adopted_on: *adopted_on,
                    });
                }
                self.holdings(shard).groups.insert(group.clone());
            }
            ShardCommand::DropGroup { group } => {
                let removed = self
                    .shards
                    .get_mut(&shard)
                    .is_some_and(|h| h.groups.remove(group));
                if !removed {
                    return Err(OpenStateError::NotAdopted {
                        group: group.clone(),
                        shard,
                    });
                }
            }
        }
        self.shards
            .retain(|_, h| !h.partitions.is_empty() || !h.groups.is_empty());
        Ok(())
    }

    /// Records `partition` open on `shard` without the checks of [`OpenState::apply`]: for
    /// callers rebuilding the state from what shards report.
    pub fn insert_partition(
        &mut self,
        shard: ShardIndex,
        partition: TopicPartition,
        epoch: LeaderEpoch,
    ) {
        self.holdings(shard).partitions.insert(partition, epoch);
    }

    /// Records `group` adopted on `shard` without checks (see [`OpenState::insert_partition`]).
    pub fn insert_group(&mut self, shard: ShardIndex, group: GroupId) {
        self.holdings(shard).groups.insert(group);
    }

    fn holdings(&mut self, shard: ShardIndex) -> &mut ShardHoldings {
        self.shards.entry(shard).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TopicName;

    #[test]
    fn refuses_commands_that_do_not_fit() {
        let partition = TopicPartition::new(TopicName::new("t").expect("legal"), 0);
        let open = |shard| AddressedCommand {
            shard: ShardIndex(shard),
            command: ShardCommand::OpenPartition {
                partition: partition.clone(),
                leader_epoch: LeaderEpoch(1),
            },
        };
        let close = |shard| AddressedCommand {
            shard: ShardIndex(shard),
            command: ShardCommand::ClosePartition {
                partition: partition.clone(),
                checkpoint: true,
            },
        };
        let mut state = OpenState::new();
        assert!(state.apply(&close(0)).is_err());
        assert!(state.apply(&open(0)).is_ok());
        assert!(matches!(
            state.apply(&open(1)),
            Err(OpenStateError::AlreadyOpen {
                open_on: ShardIndex(0),
                ..
            })
        ));
        assert!(state.apply(&close(1)).is_err());
        assert!(state.apply(&close(0)).is_ok());
        assert_eq!(state, OpenState::new());

        let group = GroupId::new("g");
        let adopt = AddressedCommand {
            shard: ShardIndex(2),
            command: ShardCommand::AdoptGroup {
                group: group.clone(),
            },
        };
        assert!(state.apply(&adopt).is_ok());
        assert!(state.apply(&adopt).is_err());
        assert_eq!(state.where_adopted(&group), vec![ShardIndex(2)]);
    }
}
