//! The shard context: an executor pinned to a core that owns a disjoint set of partitions and
//! serves the connections the kernel hands it ([`Shard`]); the router to other shards, the
//! commands the cluster core sends ([`shard_commands`]) and the takeover driver that plans
//! them, producer ids, metrics and the broker's settings.

pub mod append_turns;
pub mod config;
pub mod metrics;
pub mod partition_error;
pub mod producer_expiration;
pub mod producer_ids;
pub mod router;
pub mod shard_commands;
pub mod takeover_driver;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use kaas_engine::{LogConfig, LogManager, PartitionId, PartitionLog, Storage};

use crate::groups::coordinator::GroupCoordinator;
use crate::model::cluster_view::{Leadership, ViewHandle};
use crate::shard::append_turns::AppendTurns;
use crate::shard::config::BrokerConfig;
use crate::shard::metrics::ShardMetrics;
use crate::shard::partition_error::PartitionError;
use crate::shard::producer_ids::ProducerIdAllocator;
use crate::shard::router::{Inbox, Router};
use crate::shard::shard_commands::FencedClose;

/// Everything a shard's request handlers use. `!Send`: lives on its executor.
pub struct Shard {
    /// This shard's index (0-based).
    pub index: usize,
    /// Broker settings.
    pub config: Arc<BrokerConfig>,
    /// Where logs live.
    pub storage: Storage,
    /// The partitions this shard owns that are open (shared with the shard's log cleaner).
    pub logs: Rc<LogManager>,
    /// The cluster view.
    pub view: Arc<ViewHandle>,
    /// Hops to other shards.
    pub router: Arc<Router>,
    /// This shard's counters.
    pub metrics: Arc<ShardMetrics>,
    /// Producer id allocation (shard 0 only).
    pub producer_ids: Option<ProducerIdAllocator>,
    /// The consumer groups this shard coordinates.
    pub groups: Rc<GroupCoordinator>,
    /// The leader epoch each open partition was opened at by command (cluster mode).
    pub open_epochs: RefCell<HashMap<PartitionId, i32>>,
    /// Partitions some shard closed because the storage fence found a newer claim, not yet
    /// seen by the takeover driver (shard 0 only; see
    /// [`crate::shard::shard_commands::forget_fenced`]).
    pub fenced_closes: RefCell<Vec<FencedClose>>,
    /// Appends reach each partition in the order their requests arrived.
    pub append_turns: AppendTurns,
}

impl Shard {
    /// The open log of a partition this shard owns, opening (recovering) it on first use.
    ///
    /// A partition opens only while the current view has its topic and gives it to this
    /// shard. The check and the start of the open run without an await in between, and a
    /// topic deletion publishes the view without the topic before it deletes the partitions:
    /// so an open either started before the deletion (which then waits for it and deletes the
    /// log) or sees the topic gone. A request that outlives its topic never recreates it.
    ///
    /// In cluster mode a partition opens only by command ([`crate::shard::shard_commands`]):
    /// this returns the log only while the view gives the partition to this broker and shard at
    /// the epoch it was opened at, NOT_LEADER otherwise (led elsewhere, being given up, or not
    /// opened yet), so a misrouted request never opens, and so never claims, a partition. A
    /// log the storage fence has fenced (a newer epoch claimed it on the volume) is given up
    /// here too ([`Shard::give_up_if_fenced`]) and answered NOT_LEADER.
    pub async fn log(
        self: &Rc<Self>,
        id: &PartitionId,
        config: LogConfig,
    ) -> Result<PartitionLog, PartitionError> {
        let view = self.view.load();
        if view.is_cluster() {
            return match view.leadership(&id.topic, id.partition) {
                Leadership::Unknown => Err(PartitionError::NotServed),
                Leadership::Elsewhere => Err(PartitionError::NotLeader),
                Leadership::Here { leader_epoch } => match self.logs.get(id) {
                    Some(log)
                        if view.owner_shard(&id.topic, id.partition) == self.index
                            && self.open_epochs.borrow().get(id) == Some(&leader_epoch) =>
                    {
                        if log.is_fenced() {
                            self.give_up_if_fenced(id);
                            return Err(PartitionError::NotLeader);
                        }
                        Ok(log)
                    }
                    _ => Err(PartitionError::NotLeader),
                },
            };
        }
        drop(view);
        if let Some(log) = self.logs.get(id) {
            return Ok(log);
        }
        if !self.serves(id) {
            return Err(PartitionError::NotServed);
        }
        let log = self.logs.open(id, config).await?;
        self.metrics
            .set_partitions_open(self.logs.open_partitions().len());
        Ok(log)
    }

    /// The leader epoch batches appended to `id` are stamped with: the epoch it was opened at
    /// in cluster mode, the standalone epoch otherwise.
    pub fn open_epoch(&self, id: &PartitionId) -> i32 {
        self.open_epochs
            .borrow()
            .get(id)
            .copied()
            .unwrap_or(crate::model::cluster_view::STANDALONE_LEADER_EPOCH)
    }

    /// Whether the current view has `id`'s topic and partition and gives it to this shard.
    fn serves(&self, id: &PartitionId) -> bool {
        let view = self.view.load();
        view.topic(&id.topic)
            .is_some_and(|topic| (0..topic.partitions).contains(&id.partition))
            && view.owner_shard(&id.topic, id.partition) == self.index
    }

    /// Runs this shard's inbox: jobs other shards send.
    pub async fn serve_inbox(self: Rc<Self>, inbox: Inbox) {
        while let Ok(job) = inbox.recv().await {
            glommio::spawn_local(job(self.clone())).detach();
        }
    }

    /// Opens every partition this shard owns (so retention and recovery run without waiting
    /// for the first request).
    pub async fn open_owned_partitions(self: &Rc<Self>) {
        let view = self.view.load();
        if view.is_cluster() {
            // Cluster mode opens by command only.
            return;
        }
        for (id, config) in view.partitions_of_shard(self.index) {
            if let Err(error) = self.log(&id, config).await {
                tracing::error!(partition = %id, %error, "opening partition at start-up");
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
