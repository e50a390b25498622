//! Following assignments: the driver that turns each one into shard commands and carries them
//! out ([`AssignmentFollower`]). A cluster broker runs it as one task on shard 0 over the
//! assignments its file follower accepts ([`follow_assignments`]); a standalone broker's topic
//! store runs it, on shard 0 too, over the one-broker assignment of its own topics.
//!
//! For every assignment, in order:
//! 1. hand the open partitions of topics whose configs changed their new log settings, then
//!    publish the new view: from then on every shard refuses (NOT_LEADER_OR_FOLLOWER) a
//!    partition the view gives elsewhere, and group requests for groups coordinated
//!    elsewhere answer NOT_COORDINATOR;
//! 2. plan the takeover ([`plan_takeover`]) from the previous view and what is open now;
//! 3. send the close phase to the shards (one hop per shard, the commands as data; a shard
//!    runs up to [`COMMANDS_IN_FLIGHT`] of them at once) and wait until every shard has
//!    finished it, then the open phase, so a partition that moves between shards is never
//!    open on two;
//! 4. forget, on every shard, loaded groups the view now gives another broker;
//! 5. remove from the volume, [`REMOVAL_DELAY`] later, the directories of topics the previous
//!    view had and this one has not (deleted, or created again under the name with a new
//!    id; cluster mode, in `topics/<topic>@<id>`): every shard has closed their partitions
//!    by then (close phase), and the removal
//!    itself fences a broker that still writes them (`kaas_engine::topic_incarnation` has the
//!    argument). Every broker does this; one of them moves each directory away and removes
//!    it. A broker that stops within the delay leaves it to the others.
//!
//! A command that fails (an open whose recovery fails) is logged and left out of the open
//! state, so the next accepted assignment's plan tries it again. An open refused by a newer
//! claim is reported fenced, with the claim, for the heartbeat ([`FenceReports`]); a
//! successful open, or an assignment that gives the partition elsewhere, clears the report.

use std::rc::Rc;
use std::sync::Arc;

use futures_channel::mpsc::UnboundedReceiver;
use futures_util::StreamExt;
use kaas_cluster::assignment::Assignment;
use kaas_cluster::command::{AddressedCommand, ShardCommand};
use kaas_cluster::ids::{BrokerId, GroupId, TopicPartition};
use kaas_cluster::open_state::OpenState;
use kaas_cluster::takeover::plan_takeover;
use kaas_cluster::view::ClusterView as AssignmentView;

use kaas_engine::{topic_incarnation, LogConfig};

use crate::model::cluster_view::ClusterView;
use crate::shard::fence_reports::{claim_leader_epoch, FenceReports};
use crate::shard::partition_error::PartitionError;
use crate::shard::shard_commands::forget_fenced;
use crate::shard::Shard;

/// Follows `assignments` until the channel closes (the broker stops), reporting the
/// partitions it is fenced from to `fence_reports`.
pub async fn follow_assignments(
    shard: Rc<Shard>,
    cluster_id: String,
    broker: BrokerId,
    mut assignments: UnboundedReceiver<Arc<Assignment>>,
    fence_reports: FenceReports,
) {
    if let Some(zero) = crate::shard::shard_zero::on_this_shard() {
        zero.report_fences_to(fence_reports);
    }
    let mut follower = AssignmentFollower::new(broker);
    while let Some(assignment) = assignments.next().await {
        let view = Arc::new(AssignmentView::new(
            &assignment,
            broker,
            shard.router.shards(),
        ));
        let published = ClusterView::of_assignment(
            cluster_id.clone(),
            view.clone(),
            &shard.config.topic_defaults,
        );
        let deleted = follower.apply(&shard, view, published).await;
        remove_deleted_topics(&shard, deleted);
    }
}

/// A topic an applied assignment no longer has (deleted, or replaced under its name by a new
/// id): its name and its id's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeletedTopic {
    /// The topic's name.
    pub name: String,
    /// Its id, in Kafka's text form.
    pub id: String,
}

/// What a broker that follows assignments knows between two of them: the last one applied
/// and what its shards have open. A cluster broker's driver feeds it the assignments the
/// controller writes; a standalone broker's own controller feeds it the one-broker assignment
/// it makes of its own topics (the topic floor's `local_controller`), so both open and close
/// partitions the same way: by command.
pub struct AssignmentFollower {
    broker: BrokerId,
    open: OpenState,
    previous: Option<Arc<AssignmentView>>,
}

impl AssignmentFollower {
    /// A follower of broker `broker` that has applied nothing.
    pub fn new(broker: BrokerId) -> Self {
        AssignmentFollower {
            broker,
            open: OpenState::new(),
            previous: None,
        }
    }

    /// Applies `view` (of an assignment): publishes `published` as every shard's view, then
    /// closes and opens on the shards what the change of assignment asks for. Returns the
    /// topics the previous assignment had and this one has not, whose files are left to the
    /// caller (their partitions are closed by then).
    pub async fn apply(
        &mut self,
        shard: &Rc<Shard>,
        view: Arc<AssignmentView>,
        published: ClusterView,
    ) -> Vec<DeletedTopic> {
        if let Some(previous) = &self.previous {
            push_changed_configs(shard, previous, &view, &published).await;
        }
        shard.view.publish(published);
        forget_fence_reports_moved_away(&view);
        let open = &mut self.open;
        // Partitions the storage fence closed since the last plan are not open any more.
        if let Some(zero) = crate::shard::shard_zero::on_this_shard() {
            forget_fenced(open, zero.take_fenced_closes());
        }
        if let Some(previous) = &self.previous {
            close_replaced_topics(shard, previous, &view, open).await;
        }
        let plan = plan_takeover(self.previous.as_deref(), &view, open);
        for phase in plan.phases() {
            run_phase(shard, phase.by_shard(), open).await;
        }
        release_groups_moved_away(shard, view.clone()).await;
        let deleted = self
            .previous
            .as_ref()
            .map(|previous| deleted_topics(previous, &view))
            .unwrap_or_default();
        tracing::info!(
            controller_epoch = view.controller_epoch().0,
            assignment_version = view.assignment_version().0,
            partitions_led = view.partitions_led_by(self.broker).len(),
            "following assignment"
        );
        self.previous = Some(view);
        deleted
    }
}

/// Hands every shard's open partitions of each topic whose configs differ between `previous`
/// and `view` their new log settings (`published`'s), before the view is published: once a
/// broker shows an assignment, its open logs follow that assignment's configs.
async fn push_changed_configs(
    shard: &Rc<Shard>,
    previous: &AssignmentView,
    view: &AssignmentView,
    published: &ClusterView,
) {
    let changed: Vec<(Arc<str>, LogConfig)> = view
        .topics()
        .iter()
        .filter(|(name, topic)| {
            previous
                .topics()
                .get(*name)
                .is_some_and(|before| before.id == topic.id && before.configs != topic.configs)
        })
        .filter_map(|(name, _)| {
            let topic = published.topic(name.as_str())?;
            Some((topic.name().clone(), topic.log_config.clone()))
        })
        .collect();
    if changed.is_empty() {
        return;
    }
    shard
        .router
        .broadcast(shard, move |target| {
            let changed = changed.clone();
            async move {
                for id in target.logs.open_partitions() {
                    let Some((_, config)) = changed.iter().find(|(name, _)| *name == id.topic)
                    else {
                        continue;
                    };
                    if let Some(log) = target.logs.get(&id) {
                        log.set_config(config.clone());
                    }
                }
            }
        })
        .await;
}

/// The topics `previous` had that `view` has not (by name and id).
fn deleted_topics(previous: &AssignmentView, view: &AssignmentView) -> Vec<DeletedTopic> {
    previous
        .topics()
        .iter()
        .filter(|(name, topic)| {
            view.topics()
                .get(*name)
                .is_none_or(|now| now.id != topic.id)
        })
        .map(|(name, topic)| DeletedTopic {
            name: name.as_str().to_string(),
            id: topic.id.to_string(),
        })
        .collect()
}

/// Commands a shard carries out at once within a phase. Opening a partition is mostly
/// waiting for the file system (claim, links, fsyncs, the recovery read); one after another,
/// 1,000 opens took seconds. The bound keeps a takeover of 10,000 partitions from holding
/// 10,000 recoveries' buffers and descriptors at once; the engine's file threads bound the
/// blocking calls in flight below it.
const COMMANDS_IN_FLIGHT: usize = 64;

/// Runs one phase: every shard's commands in one hop, all shards at once, up to
/// [`COMMANDS_IN_FLIGHT`] of a shard's commands at a time (the commands of one phase are
/// independent: each names another partition or group); returns when all are done, recording
/// what succeeded in `open`.
async fn run_phase(
    shard: &Rc<Shard>,
    by_shard: std::collections::BTreeMap<kaas_cluster::ids::ShardIndex, Vec<ShardCommand>>,
    open: &mut OpenState,
) {
    let calls = by_shard.into_iter().map(|(target, commands)| async move {
        let done = shard
            .router
            .call(shard, target.0, move |owner| async move {
                futures_util::stream::iter(commands)
                    .map(|command| {
                        let owner = owner.clone();
                        async move {
                            let result = owner.run_command(command.clone()).await;
                            let fenced_by = match &result {
                                Err(PartitionError::Engine(kaas_engine::EngineError::Fenced {
                                    by_epoch,
                                    ..
                                })) => Some(*by_epoch),
                                _ => None,
                            };
                            (command, result.map_err(|e| e.to_string()), fenced_by)
                        }
                    })
                    .buffer_unordered(COMMANDS_IN_FLIGHT)
                    .collect::<Vec<_>>()
                    .await
            })
            .await
            .unwrap_or_default();
        (target, done)
    });
    for (target, done) in futures_util::future::join_all(calls).await {
        for (command, result, fenced_by) in done {
            report_fence(&command, result.is_ok(), fenced_by);
            // A close leaves the partition closed even when its final flush failed.
            let closed = matches!(command, ShardCommand::ClosePartition { .. });
            if let Err(error) = &result {
                tracing::error!(shard = target.0, ?command, %error, "shard command failed");
            }
            if result.is_ok() || closed {
                let addressed = AddressedCommand {
                    shard: target,
                    command,
                };
                if let Err(error) = open.apply(&addressed) {
                    tracing::warn!(%error, "open state disagrees with a command");
                }
            }
        }
    }
}

/// Updates the fence reports with how an open went: fenced by a claim at fence epoch
/// `fenced_by`, or opened (no claim above it).
fn report_fence(command: &ShardCommand, opened: bool, fenced_by: Option<u32>) {
    let ShardCommand::OpenPartition { partition, .. } = command else {
        return;
    };
    let Some(zero) = crate::shard::shard_zero::on_this_shard() else {
        return;
    };
    match (opened, fenced_by) {
        (true, _) => zero.fence_reports().clear(partition),
        (false, Some(by_epoch)) => {
            tracing::warn!(%partition, by_epoch, "a newer claim fences the partition: reporting it to the controller");
            zero.fence_reports()
                .record(partition.clone(), claim_leader_epoch(by_epoch));
        }
        (false, None) => {}
    }
}

/// Drops the fence reports of partitions `view` does not give this broker: the controller
/// acts only on its chosen leader's reports.
fn forget_fence_reports_moved_away(view: &AssignmentView) {
    if let Some(zero) = crate::shard::shard_zero::on_this_shard() {
        zero.fence_reports()
            .retain(|partition| view.leads(partition));
    }
}

/// Closes the open partitions of every topic `view` has under a name `previous` gave another
/// id (deleted and created again between two assignments): the plan compares partitions by
/// name, and would keep the old topic's log open for the new one. Closed, the plan opens them
/// again, in the new id's directory.
async fn close_replaced_topics(
    shard: &Rc<Shard>,
    previous: &AssignmentView,
    view: &AssignmentView,
    open: &mut OpenState,
) {
    let mut by_shard: std::collections::BTreeMap<kaas_cluster::ids::ShardIndex, Vec<ShardCommand>> =
        Default::default();
    for (name, topic) in previous.topics() {
        if view.topics().get(name).is_none_or(|now| now.id == topic.id) {
            continue;
        }
        for number in 0..topic.partitions {
            let partition = TopicPartition::new(name.clone(), number);
            for (target, _) in open.where_open(&partition) {
                by_shard
                    .entry(target)
                    .or_default()
                    .push(ShardCommand::ClosePartition {
                        partition: partition.clone(),
                        // The old topic's files are read by nobody again.
                        checkpoint: false,
                    });
            }
        }
    }
    if !by_shard.is_empty() {
        run_phase(shard, by_shard, open).await;
    }
}

/// How long after applying an assignment a broker waits before it removes the topics that
/// assignment deleted: every broker removes them, and each leader closes its partitions of
/// them in the same assignment's close phase, so the wait lets the leaders close cleanly (a
/// close after the removal fails, logged) rather than racing a broker that led nothing. A
/// leader whose view lags longer is fenced by the removal all the same.
const REMOVAL_DELAY: std::time::Duration = std::time::Duration::from_secs(2);

/// Removes, [`REMOVAL_DELAY`] from now and in the background, the files of the topics
/// `deleted` names (`topics/<topic>@<id>`). A failure is logged: the files stay, read by
/// nobody (no later topic has that id).
fn remove_deleted_topics(shard: &Rc<Shard>, deleted: Vec<DeletedTopic>) {
    if deleted.is_empty() {
        return;
    }
    let storage = shard.logs.storage().clone();
    // Only this shard's timer and the storage's file threads wake it: detaching is enough.
    glommio::spawn_local(async move {
        glommio::timer::sleep(REMOVAL_DELAY).await;
        for DeletedTopic { name, id } in deleted {
            match topic_incarnation::remove_deleted_topic(&storage, &name, &id).await {
                Ok(moved) => {
                    tracing::info!(topic = %name, topic_id = %id, moved, "deleted topic's files removed")
                }
                Err(error) => {
                    tracing::warn!(topic = %name, topic_id = %id, %error, "removing a deleted topic's files")
                }
            }
        }
    })
    .detach();
}

/// Forgets, on every shard, loaded groups that `view` has another broker coordinate (named
/// or by the fallback rule), so a group that comes back is rebuilt from its store.
async fn release_groups_moved_away(shard: &Rc<Shard>, view: Arc<AssignmentView>) {
    shard
        .router
        .broadcast(shard, move |owner| {
            let view = view.clone();
            async move {
                for id in owner.groups.loaded_ids() {
                    if view.coordinator_of(&GroupId::new(&id)) != Some(view.this_broker()) {
                        owner.groups.release(&id).await;
                    }
                }
            }
        })
        .await;
}
