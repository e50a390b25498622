//! Following accepted assignments (cluster mode): the `_driver` that turns each one into shard
//! commands and carries them out.
//!
//! Runs as one task on shard 0. For every assignment the follower accepts, in order:
//! 1. publish the new view: from then on every shard refuses (NOT_LEADER_OR_FOLLOWER) a
//!    partition the view gives elsewhere, and group requests for groups coordinated
//!    elsewhere answer NOT_COORDINATOR;
//! 2. plan the takeover ([`plan_takeover`]) from the previous view and what is open now;
//! 3. send the close phase to the shards (one hop per shard, the commands as data; a shard
//!    runs up to [`COMMANDS_IN_FLIGHT`] of them at once) and wait until every shard has
//!    finished it, then the open phase, so a partition that moves between shards is never
//!    open on two;
//! 4. forget, on every shard, loaded groups the view now gives another broker.
//!
//! A command that fails (an open whose recovery fails) is logged and left out of the open
//! state, so the next accepted assignment's plan tries it again.

use std::rc::Rc;
use std::sync::Arc;

use futures_channel::mpsc::UnboundedReceiver;
use futures_util::StreamExt;
use kaas_cluster::assignment::Assignment;
use kaas_cluster::command::{AddressedCommand, ShardCommand};
use kaas_cluster::ids::{BrokerId, GroupId};
use kaas_cluster::open_state::OpenState;
use kaas_cluster::takeover::plan_takeover;
use kaas_cluster::view::ClusterView as AssignmentView;

use crate::broker::cluster_view::ClusterView;
use crate::broker::shard::Shard;
use crate::broker::shard_commands::forget_fenced;

/// Follows `assignments` until the channel closes (the broker stops).
pub async fn follow_assignments(
    shard: Rc<Shard>,
    cluster_id: String,
    broker: BrokerId,
    mut assignments: UnboundedReceiver<Arc<Assignment>>,
) {
    let mut open = OpenState::new();
    let mut previous: Option<Arc<AssignmentView>> = None;
    while let Some(assignment) = assignments.next().await {
        let view = Arc::new(AssignmentView::new(
            &assignment,
            broker,
            shard.router.shards(),
        ));
        shard.view.publish(ClusterView::of_assignment(
            cluster_id.clone(),
            view.clone(),
            &shard.config.topic_defaults,
        ));
        // Partitions the storage fence closed since the last plan are not open any more.
        forget_fenced(&mut open, shard.take_fenced_closes());
        let plan = plan_takeover(previous.as_deref(), &view, &open);
        for phase in plan.phases() {
            run_phase(&shard, phase.by_shard(), &mut open).await;
        }
        release_groups_moved_away(&shard, view.clone()).await;
        tracing::info!(
            controller_epoch = view.controller_epoch().0,
            assignment_version = view.assignment_version().0,
            partitions_led = view.partitions_led_by(broker).len(),
            "following assignment"
        );
        previous = Some(view);
    }
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
                            (command, result.map_err(|e| e.to_string()))
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
        for (command, result) in done {
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
