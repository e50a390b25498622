//! The loop of the cluster core: it collects the controller's inputs (heartbeat events, the
//! Lease, the EndpointSlice, the KafkaTopics, a tick, the volume), feeds each to
//! [`Controller::step`] stamped with the monotonic clock, and carries out the actions in the
//! order given, feeding their answers (`VolumeRead`, `EpochRecorded`, `AssignmentWritten`,
//! ...) back before it takes the next outside input.
//!
//! The heartbeat server reports pings and closed streams only; a broker that goes silent on
//! an open stream is aged out by the controller, which names the moment
//! ([`Controller::next_wake`]): the loop sleeps until then and feeds `Wake`, so the controller
//! acts on the age-out at once rather than at the next tick.
//!
//! The volume's reads and writes (`fsync`s, the epoch file's `flock`) run on tokio's blocking
//! pool ([`crate::volume`]) while the loop awaits them, so actions are still carried out in
//! order, but the heartbeat server, the Lease campaign and the broker's heartbeat client keep
//! running on the core's thread however long the volume stalls. The pings that arrive
//! meanwhile are fed to the controller before the volume's answer, so a slow write never ages
//! out a broker that kept pinging. Failed writes are not retried here: the controller asks
//! again at its next tick. A failed volume read or epoch record is retried at the next tick,
//! and until it succeeds the controller does not lead.
//!
//! While leading, each tick also lists the consumer groups stored on the volume and feeds
//! them (`GroupsKnown`) when they changed, so `assignment.json`'s `consumerGroups` names
//! every group's coordinator, and until it finds `__cluster/transaction-state-requested`,
//! looks for it (`TransactionStateRequested`: from then on `__transaction_state` is placed).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use kaas_cluster::controller::{Action, Controller, Input};
use kaas_cluster::ids::{BrokerId, ControllerEpoch, TopicName};
use kaas_cluster::view::TopicInfo;
use kaas_cluster_heartbeat::{HeartbeatEvent, HeartbeatServer};
use tokio::sync::{mpsc, oneshot};

use crate::broker_side::BrokerSide;
use crate::clock::Clock;
use crate::sources::{LeaseEvent, LeaseSource, MirrorSink};
use crate::volume::Volume;

/// How often the controller ticks (the alive-set poll; also where failed steps are retried).
pub const TICK: Duration = Duration::from_secs(2);
/// How often the broker side looks for a newly applied assignment.
const APPLIED_POLL: Duration = Duration::from_millis(250);
/// The longest shut-down waits for the Lease to be released.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// The inputs the loop drains (the heartbeat events are the loop's own, see
/// [`ControllerLoop::new`]).
pub(crate) struct Inlets {
    pub(crate) lease: mpsc::UnboundedReceiver<LeaseEvent>,
    pub(crate) endpoints: mpsc::UnboundedReceiver<BTreeSet<BrokerId>>,
    pub(crate) topics: mpsc::UnboundedReceiver<BTreeMap<TopicName, TopicInfo>>,
}

/// The controller and everything that carries out its actions.
pub(crate) struct ControllerLoop {
    pub(crate) controller: Controller,
    pub(crate) clock: Clock,
    pub(crate) volume: Volume,
    pub(crate) server: HeartbeatServer,
    pub(crate) lease: Box<dyn LeaseSource>,
    pub(crate) mirror: Option<Box<dyn MirrorSink>>,
    pub(crate) broker: BrokerSide,
    pub(crate) tick: Duration,
    /// The heartbeat server's events (also drained while the volume works).
    heartbeats: mpsc::UnboundedReceiver<HeartbeatEvent>,
    /// The groups last fed as `GroupsKnown`.
    groups_known: Option<BTreeSet<kaas_cluster::ids::GroupId>>,
    /// `TransactionStateRequested` was fed (once is enough: the controller keeps it).
    transaction_state_fed: bool,
    /// A `ReadVolume` that failed, to be retried at the next tick.
    retry_read: bool,
    /// A `RecordEpoch` that failed, to be retried at the next tick.
    retry_record: Option<ControllerEpoch>,
}

impl ControllerLoop {
    pub(crate) fn new(
        controller: Controller,
        clock: Clock,
        volume: Volume,
        (server, heartbeats): (HeartbeatServer, mpsc::UnboundedReceiver<HeartbeatEvent>),
        lease: Box<dyn LeaseSource>,
        broker: BrokerSide,
        tick: Duration,
    ) -> Self {
        ControllerLoop {
            controller,
            clock,
            volume,
            server,
            lease,
            mirror: None,
            broker,
            tick,
            heartbeats,
            groups_known: None,
            transaction_state_fed: false,
            retry_read: false,
            retry_record: None,
        }
    }

    /// Mirrors every written assignment into `mirror` (started already).
    pub(crate) fn with_mirror(mut self, mirror: Option<Box<dyn MirrorSink>>) -> Self {
        self.mirror = mirror;
        self
    }

    /// Runs until `stop` fires (or its sender is dropped), then steps the controller with
    /// `Shutdown` (releasing the Lease if held), closes the broker's stream and stops the
    /// heartbeat server.
    pub(crate) async fn run(mut self, mut inlets: Inlets, mut stop: oneshot::Receiver<()>) {
        let mut tick = tokio::time::interval(self.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut applied_poll = tokio::time::interval(APPLIED_POLL);
        applied_poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Asked again on every turn: each ping moves it.
            let wake = self.controller.next_wake();
            let wake_at = wake.map(|at| self.clock.instant(at));
            tokio::select! {
                biased;
                _ = &mut stop => break,
                Some(event) = self.heartbeats.recv() => {
                    let at = self.clock.at(event.at());
                    self.feed_at(at, event.to_controller_input()).await;
                }
                Some(event) = inlets.lease.recv() => self.lease_event(event).await,
                Some(ready) = inlets.endpoints.recv() => {
                    self.lease.ready_brokers(ready.clone());
                    self.feed(Input::EndpointsReady(ready)).await;
                }
                (endpoint, down_since) = self.broker.stream_changed() => {
                    if down_since.is_some() {
                        tracing::info!(controller = %endpoint, "the heartbeat stream to the controller is down");
                    }
                    self.lease.holder_stream(endpoint, down_since);
                }
                Some(topics) = inlets.topics.recv() => {
                    self.feed(Input::TopicsChanged(topics)).await;
                }
                _ = tick.tick() => self.tick().await,
                _ = sleep_until(wake_at), if wake_at.is_some() => {
                    // Fed at the named time (the sleep may end a little late, never early).
                    if let Some(at) = wake {
                        let now = self.clock.now().max(at);
                        self.feed_at(now, Input::Wake).await;
                    }
                }
                _ = applied_poll.tick() => self.broker.refresh_applied(),
            }
        }
        self.feed(Input::Shutdown).await;
        self.broker.stop().await;
        self.server.shutdown().await;
    }

    async fn lease_event(&mut self, event: LeaseEvent) {
        match event {
            LeaseEvent::Acquired {
                epoch,
                renew_deadline,
                expired_holder,
            } => {
                tracing::info!(
                    epoch = epoch.0,
                    expired_holder = expired_holder.map(|b| b.0),
                    "acquired the controller Lease"
                );
                let renew_deadline = self.clock.at(renew_deadline);
                self.feed(Input::LeaseAcquired {
                    epoch,
                    renew_deadline,
                    expired_holder,
                })
                .await;
            }
            LeaseEvent::Renewed { renew_deadline } => {
                let renew_deadline = self.clock.at(renew_deadline);
                self.feed(Input::LeaseRenewed { renew_deadline }).await;
            }
            LeaseEvent::Lost => {
                tracing::warn!("lost the controller Lease");
                self.feed(Input::LeaseLost).await;
            }
            LeaseEvent::Holder(endpoint) => {
                tracing::info!(controller = ?endpoint.as_ref().map(ToString::to_string), "the controller's heartbeat endpoint");
                self.broker.controller_moved(endpoint);
            }
            LeaseEvent::Epoch(epoch) => {
                tracing::debug!(epoch = epoch.0, "the controller Lease's epoch");
                self.broker.lease_epoch(epoch);
            }
        }
    }

    async fn tick(&mut self) {
        let leading = self.controller.leading_epoch().is_some();
        if std::mem::take(&mut self.retry_read) {
            self.carry_out_all(vec![Action::ReadVolume]).await;
        } else if leading && self.volume.changed().await {
            // Another controller's file (a deposed one waking up): the controller decides.
            self.carry_out_all(vec![Action::ReadVolume]).await;
        }
        if let Some(epoch) = self.retry_record.take() {
            self.carry_out_all(vec![Action::RecordEpoch(epoch)]).await;
        }
        if leading {
            self.feed_groups_if_changed().await;
            self.feed_transaction_state_if_requested().await;
        }
        self.feed(Input::Tick).await;
    }

    /// Feeds `TransactionStateRequested` once a broker asked for `__transaction_state`.
    async fn feed_transaction_state_if_requested(&mut self) {
        if self.transaction_state_fed {
            return;
        }
        match self.volume.transaction_state_requested().await {
            Ok(true) => {
                self.transaction_state_fed = true;
                self.feed(Input::TransactionStateRequested).await;
            }
            Ok(false) => {}
            Err(error) => tracing::warn!(%error, "cannot read whether transactions were asked for"),
        }
    }

    /// Feeds the groups stored on the volume when they differ from those fed last.
    async fn feed_groups_if_changed(&mut self) {
        match self.volume.groups().await {
            Ok(groups) if self.groups_known.as_ref() != Some(&groups) => {
                self.groups_known = Some(groups.clone());
                self.feed(Input::GroupsKnown(groups)).await;
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "cannot list the consumer groups on the volume"),
        }
    }

    /// Queues the heartbeat events that arrived while the volume worked, ahead of its answer.
    fn drain_heartbeats(&mut self, answers: &mut VecDeque<Input>) {
        while let Ok(event) = self.heartbeats.try_recv() {
            answers.push_back(event.to_controller_input());
        }
    }

    async fn feed(&mut self, input: Input) {
        let now = self.clock.now();
        self.feed_at(now, input).await;
    }

    async fn feed_at(&mut self, now: kaas_cluster::controller::MonotonicMillis, input: Input) {
        let actions = self.controller.step(now, input);
        self.carry_out_all(actions).await;
    }

    /// Carries out `actions`, then the actions their answers lead to, in order.
    async fn carry_out_all(&mut self, actions: Vec<Action>) {
        let mut answers = VecDeque::new();
        for action in actions {
            self.carry_out(action, &mut answers).await;
        }
        while let Some(answer) = answers.pop_front() {
            let now = self.clock.now();
            for action in self.controller.step(now, answer) {
                self.carry_out(action, &mut answers).await;
            }
        }
    }

    async fn read_volume(&mut self, answers: &mut VecDeque<Input>) {
        let read = self.volume.read().await;
        self.drain_heartbeats(answers);
        match read {
            Ok(read) => answers.push_back(read),
            Err(error) => {
                tracing::error!(%error, "cannot read the volume; not leading until it can be read");
                self.retry_read = true;
            }
        }
    }

    async fn record_epoch(
        &mut self,
        epoch: ControllerEpoch,
        answers: &mut VecDeque<Input>,
    ) -> Result<ControllerEpoch, kaas_cluster_file::controller_epoch_file::EpochFileError> {
        let recorded = self.volume.record_epoch(epoch).await;
        self.drain_heartbeats(answers);
        recorded
    }

    async fn carry_out(&mut self, action: Action, answers: &mut VecDeque<Input>) {
        match action {
            Action::ReadVolume => self.read_volume(answers).await,
            Action::RecordEpoch(epoch) => match self.record_epoch(epoch, answers).await {
                Ok(recorded) if recorded == epoch => answers.push_back(Input::EpochRecorded(epoch)),
                Ok(higher) => {
                    // Another controller recorded a higher epoch first: the controller
                    // learns it from the volume and refuses or steps down.
                    tracing::warn!(
                        epoch = epoch.0,
                        higher = higher.0,
                        "a higher controller epoch is recorded on the volume"
                    );
                    self.read_volume(answers).await;
                }
                Err(error) => {
                    tracing::error!(%error, epoch = epoch.0, "cannot record the controller epoch; retrying at the next tick");
                    self.retry_record = Some(epoch);
                }
            },
            Action::WriteAssignment {
                assignment,
                not_after,
            } => {
                let version = assignment.version();
                let clock = self.clock;
                let written = self
                    .volume
                    .write(assignment.clone(), move || clock.now() < not_after)
                    .await;
                self.drain_heartbeats(answers);
                match written {
                    Ok(true) => {
                        tracing::info!(
                            epoch = assignment.controller_epoch().0,
                            version = version.0,
                            brokers = assignment.brokers().len(),
                            "wrote the assignment"
                        );
                        answers.push_back(Input::AssignmentWritten { version });
                    }
                    Ok(false) => {
                        tracing::warn!(
                            version = version.0,
                            "the renew deadline passed before the rename: assignment dropped"
                        );
                        answers.push_back(Input::AssignmentNotWritten { version });
                    }
                    Err(error) => {
                        tracing::error!(%error, version = version.0, "writing the assignment failed");
                        answers.push_back(Input::AssignmentNotWritten { version });
                    }
                }
            }
            Action::PushAssignmentChanged { epoch, version } => {
                let connected = self.controller.connected();
                self.server
                    .push_assignment_changed(version, epoch, &connected);
            }
            Action::MirrorAssignment(assignment) => match self.mirror.as_mut() {
                // Fire-and-forget: the sink sends it (and logs its failures) on its own.
                Some(mirror) => mirror.publish(&assignment),
                None => tracing::debug!(
                    version = assignment.version().0,
                    "no assignment mirror configured"
                ),
            },
            Action::ReleaseLease { epoch } => {
                tracing::info!(epoch = epoch.0, "releasing the controller Lease");
                let release = self.lease.release(epoch);
                if tokio::time::timeout(RELEASE_TIMEOUT, release)
                    .await
                    .is_err()
                {
                    tracing::warn!(
                        epoch = epoch.0,
                        "releasing the Lease timed out; it expires on its own"
                    );
                }
            }
            Action::EpochRefused { offered, highest } => {
                tracing::warn!(
                    offered = offered.0,
                    highest = highest.0,
                    "refused to lead at an epoch not above the highest used; taking the Lease over again"
                );
                self.lease.take_over_above(highest);
            }
            Action::SteppedDown { epoch, reason } => {
                tracing::warn!(epoch = epoch.0, ?reason, "stepped down as controller");
            }
            Action::BalanceFailed(error) => {
                tracing::error!(%error, "no assignment could be computed; the last one stays");
            }
        }
    }
}

/// Sleeps until `at` (forever without one; the branch is disabled then anyway).
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
