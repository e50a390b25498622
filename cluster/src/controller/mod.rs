//! The controller as a state machine with no I/O: adapters feed it [`Input`]s with their
//! monotonic clock reading, and carry out the [`Action`]s it returns, in order (raft-rs'
//! `step` style). One instance lives on every broker; it leads only while its broker holds
//! the `kaas-controller` Lease.
//!
//! # A term, step by step
//!
//! 1. [`Input::LeaseAcquired`] at epoch `E` (the Lease's `leaseTransitions`). If `E` is not
//!    above the highest epoch this instance has led at or any broker reported applying, it
//!    answers [`Action::EpochRefused`] and does not lead. Otherwise: [`Action::ReadVolume`].
//! 2. [`Input::VolumeRead`]: if `E` is not above the highest epoch recorded on the volume or
//!    that of the `assignment.json` there, [`Action::EpochRefused`]. Otherwise
//!    [`Action::RecordEpoch`]`(E)`; nothing is written at `E` before
//!    [`Input::EpochRecorded`]`(E)` confirms it is durable.
//! 3. **Waiting for brokers.** The first assignment is computed once the topics are known
//!    (a [`Input::TopicsChanged`] arrived: before it, computing would delete every topic), at
//!    least one broker is alive, and either every EndpointSlice-ready broker is connected or
//!    [`ControllerConfig::startup_grace_ms`] has passed since the win. The holder whose
//!    expired Lease this term took over (`expired_holder`) is not waited for: it stopped
//!    renewing, and the EndpointSlice may call it ready for a while. It is written even if
//!    it says what the file on the volume says, to stamp `E` into it.
//! 4. **Leading.** It computes again on every input that changes what it decides from
//!    (the alive set, topics, groups, a fenced partition a broker reports, another
//!    controller's file on the volume) and writes when the result differs. A broker ages
//!    out by the controller's clock (the adapter wakes it at [`Controller::next_wake`]); a
//!    closed stream removes its broker at once.
//! 5. It stops on [`Input::LeaseLost`], on [`Input::Shutdown`] ([`Action::ReleaseLease`]),
//!    and when it sees a higher controller epoch, on the volume or in a heartbeat
//!    ([`Action::SteppedDown`] and [`Action::ReleaseLease`]).
//!
//! # Rules
//!
//! - **No writes past the renew deadline.** Writes are asked for only while the clock is
//!   below the deadline of the last acquisition or renewal, and each carries the deadline
//!   (`not_after`) for the adapter to check again just before its rename. A renewal that
//!   succeeds later lets writes resume (the Lease was still this broker's).
//! - **Versions continue**: each write's version is one above the highest of the file on the
//!   volume, any file read there since, any version a broker reports applying, and its own
//!   last.
//! - **Alive** ([`alive`]): EndpointSlice-ready ∩ heartbeat-connected, with the fallback to
//!   the connected set alone exactly while that intersection is empty. A broker is connected
//!   while its stream is open and its last ping is at most [`ControllerConfig::age_out_ms`]
//!   old ([`registry`]: the only place that judges a broker alive; the heartbeat server
//!   reports pings and stream ends and decides nothing). No assignment is ever computed with
//!   no alive broker.
//! - **Leader epochs** come from the balancer's per-controller-epoch ranges
//!   ([`crate::balancer::leader_epochs`]): a deposed controller that writes one more file
//!   cannot reuse an epoch this one gives, and this one's leaders win every claim race. The
//!   liveness side, partitions a stale file's claims fenced, is in [`leading`].

pub mod action;
pub mod alive;
pub mod config;
pub mod input;
mod leading;
pub mod registry;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub use action::{Action, StepDownReason};
pub use config::ControllerConfig;
pub use input::{Heartbeat, Input, MonotonicMillis};

use crate::assignment::{Assignment, BrokerEndpoint};
use crate::ids::{BrokerId, ControllerEpoch, GroupId, TopicName};
use crate::view::TopicInfo;
use leading::{Context, Leading};
use registry::BrokerRegistry;

/// A broker silent for this many age-out periods is forgotten (it left long ago).
const FORGET_AFTER_AGE_OUTS: u64 = 20;

/// Where a term is.
#[derive(Clone, Debug)]
enum Stage {
    /// Asked for [`Action::ReadVolume`].
    ReadingVolume,
    /// Asked for [`Action::RecordEpoch`].
    RecordingEpoch { volume: Option<Arc<Assignment>> },
    /// Epoch recorded; waiting for topics and brokers.
    WaitingForBrokers { volume: Option<Arc<Assignment>> },
    /// Computing and writing assignments.
    Leading(Box<Leading>),
}

#[derive(Clone, Debug)]
struct Term {
    epoch: ControllerEpoch,
    renew_deadline: MonotonicMillis,
    won_at: MonotonicMillis,
    /// The holder whose expired Lease this term took over: not waited for.
    expired_holder: Option<BrokerId>,
    stage: Stage,
}

/// One broker's controller.
#[derive(Clone, Debug, Default)]
pub struct Controller {
    config: ControllerConfig,
    now: MonotonicMillis,
    highest_led: Option<ControllerEpoch>,
    registry: BrokerRegistry,
    ready: Option<BTreeSet<BrokerId>>,
    topics: Option<BTreeMap<TopicName, TopicInfo>>,
    groups: Option<BTreeSet<GroupId>>,
    transaction_state_requested: bool,
    generation: u64,
    term: Option<Term>,
}

impl Controller {
    /// A controller that does not lead yet.
    pub fn new(config: ControllerConfig) -> Self {
        Controller {
            config,
            ..Controller::default()
        }
    }

    /// Feeds one input observed at `now`; returns what to do, in order.
    pub fn step(&mut self, now: MonotonicMillis, input: Input) -> Vec<Action> {
        self.now = self.now.max(now);
        let mut actions = Vec::new();
        match input {
            Input::LeaseAcquired {
                epoch,
                renew_deadline,
                expired_holder,
            } => self.acquired(epoch, renew_deadline, expired_holder, &mut actions),
            Input::LeaseRenewed { renew_deadline } => {
                if let Some(term) = &mut self.term {
                    term.renew_deadline = renew_deadline;
                }
            }
            Input::LeaseLost => self.step_down(StepDownReason::LeaseLost, &mut actions),
            Input::VolumeRead {
                recorded_epoch,
                assignment,
            } => self.volume_read(recorded_epoch, assignment, &mut actions),
            Input::EpochRecorded(epoch) => {
                if let Some(term) = &mut self.term {
                    if let Stage::RecordingEpoch { volume } = &mut term.stage {
                        if epoch == term.epoch {
                            let volume = volume.take();
                            term.stage = Stage::WaitingForBrokers { volume };
                        }
                    }
                }
            }
            Input::Heartbeat(heartbeat) => {
                self.registry.ping(self.now, heartbeat);
            }
            Input::StreamClosed { broker } => self.registry.stream_closed(broker),
            Input::EndpointsReady(ready) => {
                self.ready = Some(ready);
                self.generation += 1;
            }
            Input::TopicsChanged(topics) => {
                self.topics = Some(topics);
                self.generation += 1;
            }
            Input::GroupsKnown(groups) => {
                self.groups = Some(groups);
                self.generation += 1;
            }
            Input::TransactionStateRequested => {
                if !self.transaction_state_requested {
                    self.transaction_state_requested = true;
                    self.generation += 1;
                }
            }
            Input::AssignmentWritten { version } => {
                if let Some(leading) = self.leading_mut() {
                    leading.written(version, &mut actions);
                }
            }
            Input::AssignmentNotWritten { version } => {
                if let Some(leading) = self.leading_mut() {
                    leading.not_written(version);
                }
            }
            Input::Tick => {
                let forget_after = self.config.age_out_ms.saturating_mul(FORGET_AFTER_AGE_OUTS);
                self.registry.forget_silent(self.now, forget_after);
                if let Some(leading) = self.leading_mut() {
                    leading.tick();
                }
            }
            // Nothing to do but look at the alive set again, below.
            Input::Wake => {}
            Input::Shutdown => {
                if let Some(term) = self.term.take() {
                    actions.push(Action::ReleaseLease { epoch: term.epoch });
                }
            }
        }
        self.advance(&mut actions);
        actions
    }

    /// The epoch it leads at, once it computes assignments (not while it prepares).
    pub fn leading_epoch(&self) -> Option<ControllerEpoch> {
        match &self.term {
            Some(Term {
                epoch,
                stage: Stage::Leading(_),
                ..
            }) => Some(*epoch),
            _ => None,
        }
    }

    /// The last assignment it asked to write in this term.
    pub fn last_assignment(&self) -> Option<&Arc<Assignment>> {
        match &self.term {
            Some(Term {
                stage: Stage::Leading(leading),
                ..
            }) => leading.last(),
            _ => None,
        }
    }

    /// The alive brokers now, and whether the fallback (connected alone) decided them.
    pub fn alive(&self) -> (BTreeMap<BrokerId, BrokerEndpoint>, bool) {
        let connected = self.registry.connected(self.now, self.config.age_out_ms);
        alive::alive_set(self.ready.as_ref(), connected)
    }

    /// The connected brokers now (stream open, last ping at most the age-out period old):
    /// the brokers to push `ASSIGNMENT_CHANGED` to.
    pub fn connected(&self) -> BTreeSet<BrokerId> {
        self.registry
            .connected_ids(self.now, self.config.age_out_ms)
    }

    /// When to feed [`Input::Wake`] next: the first moment a connected broker ages out
    /// unless it pings before. `None` while no broker is connected. Changes with every ping,
    /// so an adapter asks again after each step.
    pub fn next_wake(&self) -> Option<MonotonicMillis> {
        self.registry.next_age_out(self.now, self.config.age_out_ms)
    }

    fn leading_mut(&mut self) -> Option<&mut Leading> {
        match &mut self.term {
            Some(Term {
                stage: Stage::Leading(leading),
                ..
            }) => Some(leading),
            _ => None,
        }
    }

    fn acquired(
        &mut self,
        epoch: ControllerEpoch,
        renew_deadline: MonotonicMillis,
        expired_holder: Option<BrokerId>,
        actions: &mut Vec<Action>,
    ) {
        if let Some(term) = &mut self.term {
            if term.epoch == epoch {
                term.renew_deadline = renew_deadline;
                return;
            }
        }
        self.term = None;
        let highest = self.highest_led.max(self.registry.highest_applied_epoch());
        if let Some(highest) = highest.filter(|h| *h >= epoch) {
            actions.push(Action::EpochRefused {
                offered: epoch,
                highest,
            });
            return;
        }
        self.highest_led = Some(epoch);
        self.term = Some(Term {
            epoch,
            renew_deadline,
            won_at: self.now,
            expired_holder,
            stage: Stage::ReadingVolume,
        });
        actions.push(Action::ReadVolume);
    }

    fn volume_read(
        &mut self,
        recorded: Option<ControllerEpoch>,
        file: Option<Arc<Assignment>>,
        actions: &mut Vec<Action>,
    ) {
        let Some(term) = &mut self.term else {
            return;
        };
        let file_epoch = file.as_ref().map(|f| f.controller_epoch());
        let highest = recorded.max(file_epoch);
        match &mut term.stage {
            Stage::ReadingVolume => {
                if let Some(highest) = highest.filter(|h| *h >= term.epoch) {
                    actions.push(Action::EpochRefused {
                        offered: term.epoch,
                        highest,
                    });
                    self.term = None;
                    return;
                }
                actions.push(Action::RecordEpoch(term.epoch));
                term.stage = Stage::RecordingEpoch { volume: file };
            }
            _ if highest.is_some_and(|h| h > term.epoch) => {
                let newer = highest.unwrap_or(term.epoch);
                self.step_down(StepDownReason::NewerController(newer), actions);
            }
            Stage::RecordingEpoch { volume } | Stage::WaitingForBrokers { volume } => {
                // Not leading yet: build on the newest file seen.
                let newer = file.filter(|f| {
                    f.controller_epoch() < term.epoch
                        && volume.as_ref().is_none_or(|v| f.version() > v.version())
                });
                if newer.is_some() {
                    *volume = newer;
                }
            }
            Stage::Leading(leading) => {
                if let Some(file) = file.filter(|f| f.controller_epoch() < term.epoch) {
                    leading.saw_older_file(&file);
                }
            }
        }
    }

    fn step_down(&mut self, reason: StepDownReason, actions: &mut Vec<Action>) {
        if let Some(term) = self.term.take() {
            let release = matches!(reason, StepDownReason::NewerController(_));
            actions.push(Action::SteppedDown {
                epoch: term.epoch,
                reason,
            });
            if release {
                actions.push(Action::ReleaseLease { epoch: term.epoch });
            }
        }
    }

    /// Moves the term on as far as the inputs allow, and reconciles when leading.
    fn advance(&mut self, actions: &mut Vec<Action>) {
        let Some(term) = &self.term else {
            return;
        };
        if let Some(seen) = self.registry.highest_applied_epoch() {
            if seen > term.epoch {
                self.step_down(StepDownReason::NewerController(seen), actions);
                return;
            }
        }
        let (alive, _) = self.alive();
        let Some(term) = &mut self.term else {
            return;
        };
        if let Stage::WaitingForBrokers { volume } = &mut term.stage {
            let connected = self
                .registry
                .connected_ids(self.now, self.config.age_out_ms);
            // The expired holder stopped renewing: it is not waited for, however long the
            // EndpointSlice takes to call it unready.
            let awaited: Option<BTreeSet<BrokerId>> = self.ready.as_ref().map(|ready| {
                ready
                    .iter()
                    .filter(|id| Some(**id) != term.expired_holder)
                    .copied()
                    .collect()
            });
            let all_ready_here = awaited
                .as_ref()
                .is_some_and(|ready| !ready.is_empty() && ready.is_subset(&connected));
            let grace_over = self.now >= term.won_at.plus(self.config.startup_grace_ms);
            if self.topics.is_none() || alive.is_empty() || !(all_ready_here || grace_over) {
                return;
            }
            let volume = volume.take();
            term.stage = Stage::Leading(Box::new(Leading::new(volume)));
        }
        let Stage::Leading(leading) = &mut term.stage else {
            return;
        };
        let Some(topics) = &self.topics else {
            return;
        };
        if self.now >= term.renew_deadline {
            return;
        }
        let context = Context {
            epoch: term.epoch,
            not_after: term.renew_deadline,
            alive,
            topics,
            groups: self.groups.as_ref(),
            transaction_state_requested: self.transaction_state_requested,
            generation: self.generation,
            fenced: self
                .registry
                .fenced(self.now, self.config.age_out_ms)
                .map(|(broker, partition, claim)| (broker, partition.clone(), claim))
                .collect(),
            reported_version: self.registry.highest_applied_version(),
        };
        leading.reconcile(context, actions);
    }
}

#[cfg(test)]
mod tests;
