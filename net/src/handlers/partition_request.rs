//! The partition-request pipeline every partition-scoped API shares (Produce, Fetch,
//! ListOffsets, OffsetForLeaderEpoch, DeleteRecords, and DescribeLogDirs /
//! DescribeProducers), so that where a partition is served, and at which leader epoch, is
//! decided in one place:
//!
//! 1. **Resolve** each requested partition once against the view the request started with
//!    ([`PartitionRequests::add`]): a partition its topic does not have is
//!    UNKNOWN_TOPIC_OR_PARTITION, one another broker leads NOT_LEADER_OR_FOLLOWER (a Kafka
//!    broker that does not host a partition answers so whatever epoch the client sent), and a
//!    `current_leader_epoch` other than the partition's leader epoch FENCED_LEADER_EPOCH
//!    (older) or UNKNOWN_LEADER_EPOCH (newer), as Kafka answers, so the client refreshes its
//!    metadata. What passes is queued with its owner shard and the leader epoch it was
//!    resolved at. Finding the topic (by name or id, the internal `__consumer_offsets`) and
//!    API-specific refusals stay with each handler.
//! 2. **Scatter** once ([`PartitionRequests::run`]): one hop per owner shard, carrying all
//!    of that shard's partitions, where the API's work runs.
//! 3. **On the owner**, the work reaches each log through [`ResolvedPartition::log`], the one
//!    ownership check: the shard must serve the partition at the epoch it was resolved at
//!    (cluster mode: opened by command at that epoch and still given to this shard, not
//!    fenced; standalone: opened on first use). A partition that moved after the request was
//!    resolved answers NOT_LEADER_OR_FOLLOWER there, and nowhere else.
//! 4. **Gather** the outputs back in request order; the partitions of a shard that stopped
//!    (shut-down) answer NOT_LEADER_OR_FOLLOWER.

use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;

use kaas_engine::{LogConfig, PartitionId, PartitionLog};

use crate::groups::offsets_topic;
use crate::model::cluster_view::{ClusterView, Leadership, TopicInfo};
use crate::protocol::ErrorCode;
use crate::shard::partition_error::PartitionError;
use crate::shard::Shard;

/// Where a partition's answer goes in the response: its topic's index in the response's topic
/// list and its index in that topic's partition list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// The topic's index in the response.
    pub topic: usize,
    /// The partition's index within its topic.
    pub partition: usize,
}

/// A partition resolved against the view: served by this broker at `leader_epoch`.
#[derive(Clone, Debug)]
pub struct ResolvedPartition {
    /// The partition.
    pub id: PartitionId,
    /// The leader epoch it was resolved at (what this broker stamps and reports).
    pub leader_epoch: i32,
    /// Its topic's log settings as the view had them (compression, batch size).
    pub config: LogConfig,
}

impl ResolvedPartition {
    /// The partition's log on its owner shard, the one ownership check of the pipeline: the
    /// shard must have it open by command at the resolved epoch, still given to it by the
    /// current view and not fenced ([`Shard::log`]); NOT_LEADER otherwise (it moved, is being
    /// given up, or reopened at another epoch since the request was resolved).
    pub async fn log(&self, shard: &Rc<Shard>) -> Result<PartitionLog, PartitionError> {
        let log = shard.log(&self.id)?;
        if shard.open_epoch(&self.id) != Some(self.leader_epoch) {
            return Err(PartitionError::NotLeader);
        }
        Ok(log)
    }

    /// Whether this is a `__consumer_offsets` partition, served from the shard's group
    /// coordinator rather than from a log.
    pub fn is_offsets_topic(&self) -> bool {
        offsets_topic::is_offsets_topic(&self.id.topic)
    }
}

/// One partition of a request as its owner shard receives it.
pub struct Owned<I> {
    /// Where its answer goes.
    pub position: Position,
    /// The partition and the epoch it was resolved at.
    pub partition: ResolvedPartition,
    /// The API's input for it.
    pub input: I,
}

/// The partitions of one request that passed resolution, grouped by owner shard.
pub struct PartitionRequests<I> {
    view: Arc<ClusterView>,
    by_shard: Vec<Vec<Owned<I>>>,
}

impl<I: Send + 'static> PartitionRequests<I> {
    /// An empty set resolving against `view` (the view the request started with) for a broker
    /// of `shards` shards.
    pub fn new(view: Arc<ClusterView>, shards: usize) -> Self {
        PartitionRequests {
            view,
            by_shard: (0..shards.max(1)).map(|_| Vec::new()).collect(),
        }
    }

    /// The view partitions are resolved against.
    pub fn view(&self) -> &Arc<ClusterView> {
        &self.view
    }

    /// Resolves partition `partition` of `topic` (found by the handler) and queues it for its
    /// owner shard, or returns the error its answer carries. `current_leader_epoch` is the
    /// client's (-1: not given, or a request version without the field).
    pub fn add(
        &mut self,
        position: Position,
        topic: &TopicInfo,
        partition: i32,
        current_leader_epoch: i32,
        input: I,
    ) -> Result<(), ErrorCode> {
        let partition = self.resolve(topic, partition, current_leader_epoch)?;
        let owner = self
            .view
            .owner_shard(&partition.id.topic, partition.id.partition)
            .min(self.by_shard.len() - 1);
        self.by_shard[owner].push(Owned {
            position,
            partition,
            input,
        });
        Ok(())
    }

    fn resolve(
        &self,
        topic: &TopicInfo,
        partition: i32,
        current_leader_epoch: i32,
    ) -> Result<ResolvedPartition, ErrorCode> {
        if !(0..topic.partitions()).contains(&partition) {
            return Err(ErrorCode::UnknownTopicOrPartition);
        }
        // `__consumer_offsets` is served by the group coordinator of its partition's leader.
        let leadership = if offsets_topic::is_offsets_topic(topic.name()) {
            offsets_topic::leadership(&self.view, partition)
        } else {
            self.view.leadership(topic.name(), partition)
        };
        let leader_epoch = match leadership {
            Leadership::Unknown => return Err(ErrorCode::UnknownTopicOrPartition),
            Leadership::Elsewhere => return Err(ErrorCode::NotLeaderOrFollower),
            Leadership::Here { leader_epoch } => leader_epoch,
        };
        match check_leader_epoch(current_leader_epoch, leader_epoch) {
            ErrorCode::None => Ok(ResolvedPartition {
                id: PartitionId::new(topic.name().clone(), partition),
                leader_epoch,
                config: topic.log_config.clone(),
            }),
            error => Err(error),
        }
    }

    /// Whether no partition passed resolution.
    pub fn is_empty(&self) -> bool {
        self.by_shard.iter().all(Vec::is_empty)
    }

    /// Runs `work` once on every owner shard with all of that shard's partitions (one hop
    /// each, concurrently) and returns every queued partition's output in request order: the
    /// work's `(position, output)` for each partition it was given, or
    /// NOT_LEADER_OR_FOLLOWER for the partitions of a shard that stopped.
    pub async fn run<O, F, Fut>(
        self,
        shard: &Rc<Shard>,
        work: F,
    ) -> Vec<(Position, Result<O, ErrorCode>)>
    where
        O: Send + 'static,
        F: Fn(Rc<Shard>, Vec<Owned<I>>) -> Fut + Send + Sync + Clone + 'static,
        Fut: Future<Output = Vec<(Position, O)>> + 'static,
    {
        let calls = self
            .by_shard
            .into_iter()
            .enumerate()
            .filter(|(_, owned)| !owned.is_empty())
            .map(|(target, owned)| {
                let work = work.clone();
                let positions: Vec<Position> = owned.iter().map(|o| o.position).collect();
                async move {
                    match shard
                        .router
                        .call(shard, target, move |owner| work(owner, owned))
                        .await
                    {
                        Some(outputs) => outputs.into_iter().map(|(p, o)| (p, Ok(o))).collect(),
                        None => positions
                            .into_iter()
                            .map(|p| (p, Err(ErrorCode::NotLeaderOrFollower)))
                            .collect::<Vec<_>>(),
                    }
                }
            });
        let mut gathered: Vec<_> = futures_util::future::join_all(calls)
            .await
            .into_iter()
            .flatten()
            .collect();
        gathered.sort_by_key(|(position, _)| *position);
        gathered
    }
}

/// Checks a client's `current_leader_epoch` against the partition's `leader_epoch` (-1 means
/// "not given"): an older one is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, as
/// Kafka answers, so the client refreshes its metadata.
pub fn check_leader_epoch(current_leader_epoch: i32, leader_epoch: i32) -> ErrorCode {
    match current_leader_epoch {
        -1 => ErrorCode::None,
        epoch if epoch > leader_epoch => ErrorCode::UnknownLeaderEpoch,
        epoch if epoch < leader_epoch => ErrorCode::FencedLeaderEpoch,
        _ => ErrorCode::None,
    }
}

#[cfg(test)]
mod tests;
