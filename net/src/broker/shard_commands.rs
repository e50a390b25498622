//! Carrying out a [`ShardCommand`] on the shard it is addressed to (cluster mode).
//!
//! Commands arrive as data over the router (see [`crate::broker::takeover_driver`]); this is
//! the only place a cluster-mode partition is opened or closed. Opening recovers the partition
//! from the shared files at the command's leader epoch (the epoch its batches are stamped with
//! and the place a storage-level claim of the epoch plugs in); closing flushes and checkpoints
//! it, and appends still in flight on the closed log are answered NOT_LEADER_OR_FOLLOWER by the
//! engine's closed-partition error.

use kaas_cluster::command::ShardCommand;
use kaas_engine::{EngineError, PartitionId};

use crate::broker::shard::Shard;

impl Shard {
    /// Carries out `command` on this shard.
    pub async fn run_command(&self, command: ShardCommand) -> Result<(), EngineError> {
        match command {
            ShardCommand::OpenPartition {
                partition,
                leader_epoch,
            } => {
                let id = PartitionId::new(partition.topic.as_arc().clone(), partition.partition);
                let view = self.view.load();
                let config = view
                    .topic(&id.topic)
                    .map(|topic| topic.log_config.clone())
                    .ok_or(EngineError::NotServed)?;
                drop(view);
                // The epoch is recorded first: a request arriving during recovery still gets
                // NOT_LEADER (the log is not in the manager until it is open).
                self.open_epochs
                    .borrow_mut()
                    .insert(id.clone(), leader_epoch.0);
                if let Err(error) = self.logs.open(&id, config).await {
                    self.open_epochs.borrow_mut().remove(&id);
                    return Err(error);
                }
                self.metrics
                    .set_partitions_open(self.logs.open_partitions().len());
                Ok(())
            }
            ShardCommand::ClosePartition { partition } => {
                let id = PartitionId::new(partition.topic.as_arc().clone(), partition.partition);
                self.open_epochs.borrow_mut().remove(&id);
                let closed = self.logs.close(&id).await;
                self.metrics
                    .set_partitions_open(self.logs.open_partitions().len());
                closed
            }
            ShardCommand::AdoptGroup { group } => {
                // A group loads from its store on its first request here (the view routes it
                // here); adopting it now just makes that happen before the first request.
                // Requests go to the shard of the group's `__consumer_offsets` partition: a
                // command addressed elsewhere leaves the load to that shard's first request,
                // so a group is never loaded on two shards.
                let home = crate::groups::placement::coordinator_shard(
                    group.as_str(),
                    self.router.shards(),
                );
                if home != self.index {
                    return Ok(());
                }
                if let Err(code) = self.groups.find_or_create(group.as_str()).await {
                    tracing::warn!(group = group.as_str(), ?code, "adopting group");
                }
                Ok(())
            }
            ShardCommand::DropGroup { group } => {
                self.groups.release(group.as_str()).await;
                Ok(())
            }
        }
    }
}
