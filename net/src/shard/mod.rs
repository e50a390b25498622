//! The shard context: an executor pinned to a core that owns a disjoint set of partitions and
//! serves the connections the kernel hands it ([`Shard`]); the router to other shards, the
//! commands the cluster core sends ([`shard_commands`]) and the takeover driver that plans
//! them, producer ids, metrics and the broker's settings, and the transaction markers a
//! leader writes and a coordinator sends ([`txn_markers`]).

pub mod append_turns;
pub mod config;
pub mod error_codes;
pub mod fence_reports;
pub mod metrics;
pub mod partition_error;
pub mod producer_expiration;
pub mod producer_ids;
pub mod router;
pub mod shard_commands;
pub mod shard_zero;
pub mod takeover_driver;
pub mod transaction_coordinators;
pub mod txn_markers;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use kaas_engine::{LogManager, PartitionId, PartitionLog, Storage};

use crate::groups::coordinator::GroupCoordinator;
use crate::model::cluster_view::{Leadership, ViewHandle};
use crate::peers::PeerClient;
use crate::shard::append_turns::AppendTurns;
use crate::shard::config::BrokerConfig;
use crate::shard::metrics::ShardMetrics;
use crate::shard::partition_error::PartitionError;
use crate::shard::router::{Inbox, Router};
use crate::shard::transaction_coordinators::TransactionCoordinators;

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
    /// The consumer groups this shard coordinates.
    pub groups: Rc<GroupCoordinator>,
    /// The leader epoch each open partition was opened at by command (cluster mode).
    pub open_epochs: RefCell<HashMap<PartitionId, i32>>,
    /// Appends reach each partition in the order their requests arrived.
    pub append_turns: AppendTurns,
    /// The transaction coordinators of the `__transaction_state` partitions this shard leads.
    pub transactions: TransactionCoordinators,
    /// This shard's connections to the other brokers.
    pub peers: PeerClient,
}

impl Shard {
    /// The open log of a partition this shard serves, the one ownership check: the log is
    /// returned only while the current view gives the partition to this broker and shard at
    /// the leader epoch it was opened at by command ([`crate::shard::shard_commands`]; a
    /// standalone broker leads everything at [`STANDALONE_LEADER_EPOCH`]), NOT_LEADER
    /// otherwise (led elsewhere, being given up, or not opened yet) and NOT_SERVED for a
    /// partition the view does not have. A request never opens a partition, so a misrouted
    /// one never claims it and one that outlives its topic never recreates it. A log the
    /// storage fence has fenced (a newer epoch claimed it on the volume) is given up here too
    /// ([`Shard::give_up_if_fenced`]) and answered NOT_LEADER.
    ///
    /// [`STANDALONE_LEADER_EPOCH`]: crate::model::cluster_view::STANDALONE_LEADER_EPOCH
    pub fn log(self: &Rc<Self>, id: &PartitionId) -> Result<PartitionLog, PartitionError> {
        let view = self.view.load();
        match view.leadership(&id.topic, id.partition) {
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
        }
    }

    /// The leader epoch batches appended to `id` are stamped with: the epoch it was opened at
    /// by command (`None` when it is not open here).
    pub fn open_epoch(&self, id: &PartitionId) -> Option<i32> {
        self.open_epochs.borrow().get(id).copied()
    }

    /// Runs this shard's inbox: jobs other shards send.
    pub async fn serve_inbox(self: Rc<Self>, inbox: Inbox) {
        while let Ok(job) = inbox.recv().await {
            glommio::spawn_local(job(self.clone())).detach();
        }
    }
}

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;
