//! Carrying out a [`ShardCommand`] on the shard it is addressed to, and giving up a partition
//! the storage fence took away.
//!
//! Commands arrive as data over the router (see [`crate::shard::takeover_driver`]); this is
//! the only place a partition is opened or closed. A standalone broker opens
//! `topics/<topic>/<partition>` unfenced (it is the only writer). In cluster mode, opening claims the partition
//! on the volume at the fence epoch of the command's leader epoch
//! ([`crate::model::fence_epoch`]) and recovers it from the shared files
//! (`LogManager::open_in_dir`, in the directory named after the topic's id,
//! `kaas_engine::topic_incarnation`); batches are stamped with the leader epoch itself. Closing
//! flushes it, checkpoints it when this broker reopens it next (not when another broker takes
//! it over: `PartitionLog::close_for_takeover`), and appends still in flight on the closed log
//! are answered NOT_LEADER_OR_FOLLOWER by the engine's closed-partition error.
//!
//! **Fenced partitions.** A leader checks for a newer claim after every fdatasync; once one
//! exists (another broker took the partition over at a higher epoch while this one was paused
//! or cut off), the flush fails with `EngineError::Fenced`, the request is answered
//! NOT_LEADER_OR_FOLLOWER and nothing it wrote is acknowledged. [`Shard::give_up_if_fenced`]
//! then stops serving the partition at once (every later request answers NOT_LEADER), closes
//! the log and tells shard 0, whose takeover driver drops it from its open state
//! ([`forget_fenced`]) so that its next plan knows the partition is closed.

use std::rc::Rc;

use kaas_cluster::command::{AddressedCommand, ShardCommand};
use kaas_cluster::ids::{LeaderEpoch, ShardIndex, TopicName, TopicPartition};
use kaas_cluster::open_state::OpenState;
use kaas_engine::{topic_incarnation, EngineError, PartitionId};

use crate::model::fence_epoch::partition_fence_epoch;
use crate::shard::partition_error::PartitionError;
use crate::shard::{shard_zero, transaction_coordinators, Shard};
use crate::transactions::TRANSACTION_STATE_TOPIC;

/// A partition a shard closed because the fence found a newer claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedClose {
    /// The shard that closed it.
    pub shard: ShardIndex,
    /// The partition.
    pub partition: TopicPartition,
    /// The leader epoch it had been opened at.
    pub leader_epoch: LeaderEpoch,
}

impl Shard {
    /// Carries out `command` on this shard.
    pub async fn run_command(self: &Rc<Self>, command: ShardCommand) -> Result<(), PartitionError> {
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
                    .ok_or(PartitionError::NotServed)?;
                let (dir, fence_epoch) = if view.is_cluster() {
                    // Refused by the assignment's checks already; never opened unfenced.
                    let fence_epoch =
                        partition_fence_epoch(leader_epoch).ok_or(PartitionError::NotLeader)?;
                    // The directory names the topic id: a topic created again under a deleted
                    // one's name never opens the old files (`kaas_engine::topic_incarnation`).
                    let topic_id = view
                        .cluster
                        .as_ref()
                        .and_then(|cluster| cluster.topic(&id.topic))
                        .map(|topic| topic.id.to_string())
                        .ok_or(PartitionError::NotServed)?;
                    let dir = topic_incarnation::partition_dir(&id.topic, &topic_id, id.partition)?;
                    (dir, fence_epoch)
                } else {
                    // A standalone broker is the only writer of its directory (the data
                    // directory's lock): `topics/<topic>/<partition>`, unfenced (epoch 0).
                    (id.dir()?, 0)
                };
                drop(view);
                // The epoch is recorded first: a request arriving during recovery still gets
                // NOT_LEADER (the log is not in the manager until it is open).
                self.open_epochs
                    .borrow_mut()
                    .insert(id.clone(), leader_epoch.0);
                // The manager hands back a log that is open already, whatever its epoch: one
                // left open at another epoch, or fenced and not closed yet, is closed first so
                // this open claims and recovers at `fence_epoch`.
                if let Some(log) = self.logs.get(&id) {
                    if log.is_fenced() || log.fence_epoch() != fence_epoch {
                        if let Err(error) = self.logs.close(&id).await {
                            tracing::warn!(partition = %id, %error, "closing a stale log before reopening it");
                        }
                    }
                }
                if let Err(error) = self.logs.open_in_dir(&id, &dir, config, fence_epoch).await {
                    self.open_epochs.borrow_mut().remove(&id);
                    return Err(error.into());
                }
                self.metrics
                    .set_partitions_open(self.logs.open_partitions().len());
                if *id.topic == *TRANSACTION_STATE_TOPIC {
                    transaction_coordinators::gain(self, id.partition, leader_epoch.0);
                }
                Ok(())
            }
            ShardCommand::ClosePartition {
                partition,
                checkpoint,
            } => {
                let id = PartitionId::new(partition.topic.as_arc().clone(), partition.partition);
                if *id.topic == *TRANSACTION_STATE_TOPIC {
                    self.transactions.lose(id.partition);
                }
                self.open_epochs.borrow_mut().remove(&id);
                let closed = if checkpoint {
                    self.logs.close(&id).await
                } else {
                    self.logs.close_for_takeover(&id).await
                };
                self.metrics
                    .set_partitions_open(self.logs.open_partitions().len());
                match closed {
                    // Closed all the same: another epoch had taken it over, nothing to flush.
                    Err(EngineError::Fenced { .. }) => Ok(()),
                    other => Ok(other?),
                }
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

    /// Gives up `id` if its open log has been fenced: from now on requests for it answer
    /// NOT_LEADER_OR_FOLLOWER; the log is closed in the background and shard 0's takeover
    /// driver is told. Does nothing for a log that is not fenced (or not open).
    pub fn give_up_if_fenced(self: &Rc<Self>, id: &PartitionId) {
        if !self.logs.get(id).is_some_and(|log| log.is_fenced()) {
            return;
        }
        let Some(leader_epoch) = self.open_epochs.borrow_mut().remove(id) else {
            // Given up already (or never opened by command).
            return;
        };
        tracing::warn!(partition = %id, leader_epoch, "fenced by a newer claim: giving the partition up");
        if *id.topic == *TRANSACTION_STATE_TOPIC {
            self.transactions.lose(id.partition);
        }
        let shard = self.clone();
        let id = id.clone();
        // Spawned detached with its handle dropped at once: it waits on shard 0 (see the
        // glommio note in net's README).
        glommio::spawn_local(async move {
            // Checked again right before the close (no await in between, and the manager's
            // close takes the slot before it awaits): an open at a new epoch that started
            // meanwhile closes the fenced log itself and must not lose its own.
            if shard.logs.get(&id).is_some_and(|log| log.is_fenced()) {
                match shard.logs.close(&id).await {
                    Ok(()) | Err(EngineError::Fenced { .. }) => {}
                    Err(error) => {
                        tracing::warn!(partition = %id, %error, "closing a fenced partition")
                    }
                }
            }
            shard
                .metrics
                .set_partitions_open(shard.logs.open_partitions().len());
            let Ok(topic) = TopicName::new(&id.topic) else {
                return;
            };
            let closed = FencedClose {
                shard: ShardIndex(shard.index),
                partition: TopicPartition::new(topic, id.partition),
                leader_epoch: LeaderEpoch(leader_epoch),
            };
            let _ = shard
                .router
                .call(&shard, 0, move |_| async move {
                    if let Some(zero) = shard_zero::on_this_shard() {
                        zero.report_fenced_close(closed);
                    }
                })
                .await;
        })
        .detach();
    }
}

/// Records `closes` in the takeover driver's `open` state: each partition is closed on its
/// shard, if `open` still has it there at the epoch that was fenced (a later open at another
/// epoch is kept).
pub fn forget_fenced(open: &mut OpenState, closes: Vec<FencedClose>) {
    for closed in closes {
        let still_open = open
            .shard(closed.shard)
            .and_then(|holdings| holdings.partitions.get(&closed.partition))
            == Some(&closed.leader_epoch);
        if still_open {
            let close = AddressedCommand {
                shard: closed.shard,
                command: ShardCommand::ClosePartition {
                    partition: closed.partition,
                    checkpoint: false,
                },
            };
            if let Err(error) = open.apply(&close) {
                tracing::warn!(%error, "open state disagrees with a fenced close");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partition(number: i32) -> TopicPartition {
        TopicPartition::new(TopicName::new("t").expect("legal"), number)
    }

    fn opened(open: &mut OpenState, shard: usize, number: i32, epoch: i32) {
        let command = AddressedCommand {
            shard: ShardIndex(shard),
            command: ShardCommand::OpenPartition {
                partition: partition(number),
                leader_epoch: LeaderEpoch(epoch),
            },
        };
        open.apply(&command).expect("fits");
    }

    fn fenced(shard: usize, number: i32, epoch: i32) -> FencedClose {
        FencedClose {
            shard: ShardIndex(shard),
            partition: partition(number),
            leader_epoch: LeaderEpoch(epoch),
        }
    }

    #[test]
    fn a_fenced_close_leaves_the_open_state_only_at_its_shard_and_epoch() {
        let mut open = OpenState::new();
        opened(&mut open, 0, 0, 3);
        opened(&mut open, 1, 1, 3);
        opened(&mut open, 1, 2, 5);
        forget_fenced(
            &mut open,
            vec![
                fenced(0, 0, 3),
                // Reopened at epoch 5 since the fence hit epoch 4: keep it.
                fenced(1, 2, 4),
                // On another shard than the one that reported it: keep it.
                fenced(0, 1, 3),
                // Not open at all.
                fenced(1, 9, 1),
            ],
        );
        assert!(open.where_open(&partition(0)).is_empty());
        assert_eq!(
            open.where_open(&partition(1)),
            vec![(ShardIndex(1), LeaderEpoch(3))]
        );
        assert_eq!(
            open.where_open(&partition(2)),
            vec![(ShardIndex(1), LeaderEpoch(5))]
        );
    }
}
