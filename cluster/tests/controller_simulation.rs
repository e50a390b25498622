//! Seeded simulation of a whole cluster's control plane, with no I/O: three or four broker
//! processes, each running the [`Controller`] state machine behind model adapters (a Lease
//! server, the shared volume, heartbeat streams, the EndpointSlice, the KafkaTopic set) and
//! the broker side ([`AssignmentFollower::apply_if_new`], [`plan_takeover`] and a model of
//! the storage fence's claims).
//!
//! Faults during the first minute: processes paused and resumed (also between the check of
//! the renew deadline and the rename of a file, which is how a deposed controller writes one
//! more assignment at its old epoch), crashes and restarts, the Lease stolen (also taken over
//! early from a paused or crashed holder, as a broker whose stream to it broke does, while
//! the paused holder still believes it may write until its deadline), heartbeats
//! lost, late and duplicated, torn and stale reads of `assignment.json`, clocks that run at
//! different rates and offsets, topics created, grown and deleted, groups appearing.
//!
//! Every running broker observes the Lease's epoch (its campaign's watch) a moment after each
//! acquisition and raises its follower's epoch fence with it.
//!
//! The storage fence model: a takeover at epoch `E` claims the partition for `E`, which
//! fails if a claim above `E` exists; a claim at `E` that exists already counts as the
//! claimer's own (as the real fence does). A leader's write is acknowledged only if, after
//! its flush, no claim above its epoch exists; otherwise it is fenced, closes the partition,
//! and reports the claim in its heartbeats. A write after a newer claim is never
//! acknowledged, so it is invisible.
//!
//! Checked at every step:
//! - no partition is claimed at one epoch by two brokers (two writers at one epoch);
//! - acknowledged writes of a partition never go back in epoch, and one epoch's are all
//!   from one broker;
//! - no broker applies an assignment of a controller epoch below one it has applied or
//!   seen, or one whose (controller epoch, version) is not above its current one's;
//! - no controller fails to balance.
//!
//! Then the faults stop and every process runs for 25 s more; at the end exactly one
//! controller leads at the Lease's epoch, its last assignment is on the volume and applied by
//! every broker, lists every broker and topic, and every partition is open on exactly its
//! assigned leader at its assigned epoch, which is the highest claim (so its writes are
//! acknowledged), and every named group is adopted by exactly its broker.
//!
//! A failure prints its seed; `KAAS_SIM_SEED=<seed>` replays it and `KAAS_SIM_RUNS=<n>` runs
//! more seeds.

mod support;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use kaas_cluster::assignment::{Assignment, BrokerEndpoint};
use kaas_cluster::command::ShardCommand;
use kaas_cluster::controller::{
    Action, Controller, ControllerConfig, Heartbeat, Input, MonotonicMillis,
};
use kaas_cluster::follower::{AssignmentFollower, Offer};
use kaas_cluster::ids::{
    BrokerId, ControllerEpoch, GroupId, LeaderEpoch, TopicId, TopicName, TopicPartition,
};
use kaas_cluster::open_state::OpenState;
use kaas_cluster::takeover::plan_takeover;
use kaas_cluster::view::{ClusterView, TopicInfo};
use support::{run_seeds, Rng};

const STEP_MS: u64 = 100;
const FAULT_MS: u64 = 60_000;
const QUIET_MS: u64 = 25_000;
/// Lease duration on the (model) API server.
const LEASE_MS: u64 = 4_000;
const RENEW_EVERY_MS: u64 = 1_000;
/// Renew deadline after a successful acquire or renew, on the controller's own clock.
const DEADLINE_MS: u64 = 3_000;
const SHARDS: usize = 2;
const TOPIC_NAMES: [&str; 4] = ["orders", "audit", "a.b", "x_y-z"];

type Sim<T> = Result<T, String>;

/// Which faults are on.
#[derive(Clone, Copy)]
struct Faults {
    on: bool,
}

impl Faults {
    fn roll(&self, rng: &mut Rng, percent_per_mille: u64) -> bool {
        self.on && rng.below(1000) < percent_per_mille
    }
}

/// The model Lease `kaas-controller`, judged by the API server's (global) time.
#[derive(Debug, Default)]
struct Lease {
    holder: Option<usize>,
    transitions: u64,
    expires_at: u64,
}

/// The shared volume.
#[derive(Default)]
struct Volume {
    file: Option<Arc<Vec<u8>>>,
    /// Every file ever renamed in, for stale reads.
    history: Vec<Arc<Vec<u8>>>,
    /// Bumped on every rename, so watchers notice.
    generation: u64,
    recorded_epoch: Option<ControllerEpoch>,
    /// Claims per partition: epoch → claimer.
    claims: BTreeMap<TopicPartition, BTreeMap<i32, usize>>,
    /// Acknowledged writes per partition, in order: (epoch, writer).
    acked: BTreeMap<TopicPartition, Vec<(i32, usize)>>,
}

impl Volume {
    fn highest_claim(&self, partition: &TopicPartition) -> Option<i32> {
        self.claims
            .get(partition)
            .and_then(|c| c.keys().next_back().copied())
    }

    /// A takeover claim; `Err(highest)` when a newer claim exists.
    fn claim(
        &mut self,
        partition: &TopicPartition,
        epoch: i32,
        claimer: usize,
    ) -> Sim<Result<(), i32>> {
        if let Some(highest) = self.highest_claim(partition).filter(|h| *h > epoch) {
            return Ok(Err(highest));
        }
        let claims = self.claims.entry(partition.clone()).or_default();
        match claims.get(&epoch) {
            Some(other) if *other != claimer => Err(format!(
                "two writers at one epoch: {partition} claimed at {epoch} by broker {other} and broker {claimer}"
            )),
            _ => {
                claims.insert(epoch, claimer);
                Ok(Ok(()))
            }
        }
    }

    fn ack(&mut self, partition: &TopicPartition, epoch: i32, writer: usize) -> Sim<()> {
        let acked = self.acked.entry(partition.clone()).or_default();
        if let Some(&(last_epoch, last_writer)) = acked.last() {
            if last_epoch > epoch {
                return Err(format!(
                    "{partition}: write acknowledged at epoch {epoch} after one at {last_epoch}"
                ));
            }
            if last_epoch == epoch && last_writer != writer {
                return Err(format!("{partition}: brokers {last_writer} and {writer} both acknowledged at epoch {epoch}"));
            }
        }
        acked.push((epoch, writer));
        Ok(())
    }
}

/// A message on a heartbeat stream, from a broker to a controller.
struct Message {
    deliver_at: u64,
    to: usize,
    input: Input,
}

/// A file rename the adapter has decided to do (after checking the deadline).
struct PendingWrite {
    due: u64,
    assignment: Arc<Assignment>,
    not_after: MonotonicMillis,
    /// The deadline check passed already; the process was paused before the rename.
    checked: bool,
}

struct Process {
    id: usize,
    up: bool,
    down_until: u64,
    paused_until: u64,
    paused_since: u64,
    clock_offset: u64,
    clock_permille: u64,
    controller: Controller,
    /// The epoch the Lease adapter believes it holds.
    lease_epoch: Option<u64>,
    next_lease_at: u64,
    next_tick_at: u64,
    writes: VecDeque<PendingWrite>,
    volume_seen: u64,
    // Broker side.
    follower: AssignmentFollower,
    view: Option<ClusterView>,
    open: OpenState,
    fenced: BTreeMap<TopicPartition, LeaderEpoch>,
    highest_seen: Option<ControllerEpoch>,
    next_heartbeat_at: u64,
    next_poll_at: u64,
    stream_to: Option<usize>,
    last_delivery: BTreeMap<usize, u64>,
}

impl Process {
    fn new(id: usize, rng: &mut Rng) -> Self {
        Process {
            id,
            up: true,
            down_until: 0,
            paused_until: 0,
            paused_since: 0,
            clock_offset: rng.below(1_000_000),
            clock_permille: 900 + rng.below(201),
            controller: Controller::new(ControllerConfig::default()),
            lease_epoch: None,
            next_lease_at: rng.below(1_000),
            next_tick_at: rng.below(2_000),
            writes: VecDeque::new(),
            volume_seen: 0,
            follower: AssignmentFollower::new(),
            view: None,
            open: OpenState::new(),
            fenced: BTreeMap::new(),
            highest_seen: None,
            next_heartbeat_at: rng.below(1_000),
            next_poll_at: rng.below(1_000),
            stream_to: None,
            last_delivery: BTreeMap::new(),
        }
    }

    fn local(&self, t: u64) -> MonotonicMillis {
        MonotonicMillis(self.clock_offset + t * self.clock_permille / 1000)
    }

    fn running(&self, t: u64) -> bool {
        self.up && t >= self.paused_until
    }

    fn broker(&self) -> BrokerId {
        BrokerId(self.id as i32)
    }
}

struct World {
    t: u64,
    rng: Rng,
    faults: Faults,
    lease: Lease,
    volume: Volume,
    procs: Vec<Process>,
    network: Vec<Message>,
    topics: BTreeMap<TopicName, TopicInfo>,
    topic_incarnation: u8,
    groups: BTreeSet<GroupId>,
    /// What the EndpointSlice says, and when each process hears it.
    ready_sent: Option<BTreeSet<BrokerId>>,
    /// When the last watch event to each process is delivered (watches keep their order).
    watch_last: Vec<u64>,
    stats: Stats,
}

/// How often the interesting things happened (printed, so a change that stops exercising
/// them shows).
#[derive(Clone, Copy, Debug, Default)]
struct Stats {
    /// Files renamed in by a controller below the highest epoch written before.
    stale_writes: u64,
    /// Takeover claims refused because of a newer claim.
    refused_claims: u64,
    /// Flushes that found a newer claim.
    fenced_flushes: u64,
    /// Controller epochs used.
    terms: u64,
    /// `Wake`s fed at the controller's `next_wake()`.
    wakes: u64,
    /// Leases taken over from a paused or crashed holder before they expired.
    early_takeovers: u64,
}

impl World {
    fn new(seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let count = 3 + rng.below(2) as usize;
        let procs = (0..count).map(|id| Process::new(id, &mut rng)).collect();
        let mut world = World {
            t: 0,
            rng,
            faults: Faults { on: true },
            lease: Lease::default(),
            volume: Volume::default(),
            procs,
            network: Vec::new(),
            topics: BTreeMap::new(),
            topic_incarnation: 0,
            groups: BTreeSet::new(),
            ready_sent: None,
            watch_last: vec![0; count],
            stats: Stats::default(),
        };
        for index in 0..2 {
            world.create_topic(index);
        }
        world
    }

    fn create_topic(&mut self, index: usize) {
        self.topic_incarnation = self.topic_incarnation.wrapping_add(1);
        let mut id = [0u8; 16];
        id[0] = 0x20 + index as u8;
        id[1] = self.topic_incarnation;
        id[15] = 9;
        let name = TopicName::new(TOPIC_NAMES[index]).expect("legal");
        let info = TopicInfo {
            name: name.clone(),
            id: TopicId(id),
            partitions: 1 + self.rng.below(4) as i32,
            configs: BTreeMap::new(),
        };
        self.topics.insert(name, info);
    }

    // ---------------------------------------------------------------- controller side

    /// Feeds `input` to process `p`'s controller and carries out what it asks.
    fn feed(&mut self, p: usize, input: Input) -> Sim<()> {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let now = self.procs[p].local(self.t);
            let actions = self.procs[p].controller.step(now, input);
            for action in actions {
                self.act(p, action, &mut queue)?;
            }
        }
        Ok(())
    }

    fn act(&mut self, p: usize, action: Action, queue: &mut VecDeque<Input>) -> Sim<()> {
        match action {
            Action::ReadVolume => queue.push_back(self.volume_read()),
            Action::RecordEpoch(epoch) => {
                self.volume.recorded_epoch = self.volume.recorded_epoch.max(Some(epoch));
                queue.push_back(Input::EpochRecorded(epoch));
            }
            Action::WriteAssignment {
                assignment,
                not_after,
            } => {
                let due = self.t + self.rng.below(3) * STEP_MS;
                self.procs[p].writes.push_back(PendingWrite {
                    due,
                    assignment,
                    not_after,
                    checked: false,
                });
            }
            Action::PushAssignmentChanged { .. } => {
                for proc in &mut self.procs {
                    proc.next_poll_at = proc.next_poll_at.min(self.t + STEP_MS);
                }
            }
            Action::MirrorAssignment(_) | Action::SteppedDown { .. } => {}
            Action::ReleaseLease { epoch } => {
                if self.lease.holder == Some(p) && self.lease.transitions == epoch.0 {
                    self.lease.holder = None;
                    self.lease.expires_at = self.t;
                }
                self.procs[p].lease_epoch = None;
            }
            Action::EpochRefused { highest, .. } => {
                // Take the Lease over again above the highest epoch used.
                if self.lease.holder == Some(p) {
                    self.lease.transitions = self.lease.transitions.max(highest.0) + 1;
                    self.lease.expires_at = self.t + LEASE_MS;
                    self.procs[p].lease_epoch = Some(self.lease.transitions);
                    let deadline = self.procs[p].local(self.t).plus(DEADLINE_MS);
                    queue.push_back(Input::LeaseAcquired {
                        epoch: ControllerEpoch(self.lease.transitions),
                        renew_deadline: deadline,
                        expired_holder: None,
                    });
                } else {
                    self.procs[p].lease_epoch = None;
                }
            }
            Action::BalanceFailed(error) => {
                return Err(format!(
                    "process {p}'s controller failed to balance: {error}"
                ));
            }
        }
        Ok(())
    }

    fn volume_read(&self) -> Input {
        let assignment = self
            .volume
            .file
            .as_ref()
            .and_then(|bytes| Assignment::from_json(bytes).ok())
            .map(Arc::new);
        Input::VolumeRead {
            recorded_epoch: self.volume.recorded_epoch,
            assignment,
        }
    }

    fn lease_adapter(&mut self, p: usize) -> Sim<()> {
        if self.t < self.procs[p].next_lease_at {
            return Ok(());
        }
        self.procs[p].next_lease_at = self.t
            + if self.procs[p].lease_epoch.is_some() {
                RENEW_EVERY_MS
            } else {
                500
            };
        let deadline = self.procs[p].local(self.t).plus(DEADLINE_MS);
        match self.procs[p].lease_epoch {
            Some(epoch) => {
                if self.lease.holder == Some(p) && self.lease.transitions == epoch {
                    self.lease.expires_at = self.t + LEASE_MS;
                    self.feed(
                        p,
                        Input::LeaseRenewed {
                            renew_deadline: deadline,
                        },
                    )
                } else {
                    self.procs[p].lease_epoch = None;
                    self.feed(p, Input::LeaseLost)
                }
            }
            None => {
                let free = self.lease.holder.is_none() || self.lease.expires_at <= self.t;
                if free {
                    self.acquire(p)
                } else {
                    Ok(())
                }
            }
        }
    }

    fn acquire(&mut self, p: usize) -> Sim<()> {
        self.lease.holder = Some(p);
        self.lease.transitions += 1;
        self.lease.expires_at = self.t + LEASE_MS;
        self.procs[p].lease_epoch = Some(self.lease.transitions);
        self.procs[p].next_lease_at = self.t + RENEW_EVERY_MS;
        let deadline = self.procs[p].local(self.t).plus(DEADLINE_MS);
        self.feed(
            p,
            Input::LeaseAcquired {
                epoch: ControllerEpoch(self.lease.transitions),
                renew_deadline: deadline,
                expired_holder: None,
            },
        )
    }

    /// The writer task: renames files that are due, checking the deadline first.
    fn writer(&mut self, p: usize) -> Sim<()> {
        while let Some(write) = self.procs[p].writes.front() {
            if write.due > self.t {
                break;
            }
            let Some(mut write) = self.procs[p].writes.pop_front() else {
                break;
            };
            let version = write.assignment.version();
            if !write.checked {
                if self.procs[p].local(self.t) >= write.not_after {
                    self.feed(p, Input::AssignmentNotWritten { version })?;
                    continue;
                }
                // Paused between the check and the rename: it renames when it wakes.
                if self.faults.roll(&mut self.rng, 40) {
                    write.checked = true;
                    let pause = 1_000 + self.rng.below(8_000);
                    self.pause(p, pause);
                    self.procs[p].writes.push_front(write);
                    return Ok(());
                }
            }
            let newest = self
                .volume
                .history
                .iter()
                .filter_map(|b| Assignment::from_json(b).ok())
                .map(|a| a.controller_epoch())
                .max();
            if newest > Some(write.assignment.controller_epoch()) {
                self.stats.stale_writes += 1;
            }
            let bytes = Arc::new(write.assignment.to_json());
            self.volume.file = Some(bytes.clone());
            self.volume.history.push(bytes);
            self.volume.generation += 1;
            self.feed(p, Input::AssignmentWritten { version })?;
        }
        Ok(())
    }

    /// Everything a running process's adapters do at this step, controller side.
    fn controller_adapters(&mut self, p: usize) -> Sim<()> {
        self.lease_adapter(p)?;
        self.writer(p)?;
        if !self.procs[p].running(self.t) {
            // Paused between a deadline check and a rename.
            return Ok(());
        }
        if self.procs[p].volume_seen != self.volume.generation {
            self.procs[p].volume_seen = self.volume.generation;
            let read = self.volume_read();
            self.feed(p, read)?;
        }
        if self.t >= self.procs[p].next_tick_at {
            self.procs[p].next_tick_at = self.t + 2_000;
            self.feed(p, Input::Tick)?;
        }
        // The wake-up the controller asks for (a silent broker ages out), as the cluster
        // core's loop sleeps until it.
        let now = self.procs[p].local(self.t);
        if self.procs[p]
            .controller
            .next_wake()
            .is_some_and(|at| at <= now)
        {
            self.stats.wakes += 1;
            self.feed(p, Input::Wake)?;
        }
        Ok(())
    }

    // ---------------------------------------------------------------- broker side

    fn send(&mut self, from: usize, to: usize, input: Input, delay: u64) {
        let deliver_at = (self.t + delay).max(
            self.procs[from]
                .last_delivery
                .get(&to)
                .copied()
                .unwrap_or(0),
        );
        self.procs[from].last_delivery.insert(to, deliver_at);
        self.network.push(Message {
            deliver_at,
            to,
            input,
        });
    }

    fn close_stream(&mut self, p: usize) {
        if let Some(to) = self.procs[p].stream_to.take() {
            let input = Input::StreamClosed {
                broker: self.procs[p].broker(),
            };
            let delay = self.rng.below(3) * STEP_MS;
            self.send(p, to, input, delay);
        }
    }

    fn heartbeat(&mut self, p: usize) {
        if self.t < self.procs[p].next_heartbeat_at {
            return;
        }
        self.procs[p].next_heartbeat_at = self.t + 1_000;
        // The controller's endpoint comes from the Lease's annotation.
        let Some(holder) = self.lease.holder else {
            return;
        };
        if self.procs[p].stream_to != Some(holder) {
            self.close_stream(p);
            self.procs[p].stream_to = Some(holder);
        }
        let proc = &self.procs[p];
        let input = Input::Heartbeat(Heartbeat {
            broker: BrokerEndpoint {
                id: proc.broker(),
                host: format!("10.0.0.{}", proc.id + 1),
                port: 9092,
            },
            applied_version: proc.follower.current().map(|a| a.version()),
            applied_epoch: proc.follower.current().map(|a| a.controller_epoch()),
            fenced: proc.fenced.iter().map(|(p, e)| (p.clone(), *e)).collect(),
        });
        if self.faults.roll(&mut self.rng, 100) {
            return;
        }
        let late = if self.faults.roll(&mut self.rng, 100) {
            500 + self.rng.below(1_500)
        } else {
            self.rng.below(2) * STEP_MS
        };
        if self.faults.roll(&mut self.rng, 50) {
            self.send(p, holder, input.clone(), late);
        }
        self.send(p, holder, input, late);
    }

    fn poll_file(&mut self, p: usize) -> Sim<()> {
        if self.t < self.procs[p].next_poll_at {
            return Ok(());
        }
        self.procs[p].next_poll_at = self.t + 1_000;
        let Some(file) = self.volume.file.clone() else {
            return Ok(());
        };
        let bytes: Vec<u8> = if self.faults.roll(&mut self.rng, 100) {
            file[..self.rng.below(file.len() as u64) as usize].to_vec()
        } else if self.faults.roll(&mut self.rng, 100) {
            let index = self.rng.below(self.volume.history.len() as u64) as usize;
            self.volume.history[index].to_vec()
        } else {
            file.to_vec()
        };
        self.read_file(p, &bytes)
    }

    fn read_file(&mut self, p: usize, bytes: &[u8]) -> Sim<()> {
        let parsed = Assignment::from_json(bytes).ok();
        let before = self.procs[p]
            .follower
            .current()
            .map(|a| (a.controller_epoch(), a.version()));
        let highest_seen = self.procs[p].highest_seen;
        let outcome = self.procs[p].follower.offer(bytes);
        if let Some(parsed) = &parsed {
            self.procs[p].highest_seen = self.procs[p]
                .highest_seen
                .max(Some(parsed.controller_epoch()));
        }
        let Offer::Applied(applied) = outcome else {
            return Ok(());
        };
        if Some(applied.controller_epoch()) < highest_seen {
            return Err(format!(
                "broker {p} applied epoch {:?} after seeing {highest_seen:?}",
                applied.controller_epoch()
            ));
        }
        let order = (applied.controller_epoch(), applied.version());
        if before.is_some_and(|before| order <= before) {
            return Err(format!(
                "broker {p} applied (epoch, version) {order:?} after {before:?}"
            ));
        }
        self.take_over(p, &applied)
    }

    fn take_over(&mut self, p: usize, assignment: &Arc<Assignment>) -> Sim<()> {
        let me = self.procs[p].broker();
        let new = ClusterView::new(assignment, me, SHARDS);
        let plan = plan_takeover(self.procs[p].view.as_ref(), &new, &self.procs[p].open);
        for command in plan.close_phase().commands() {
            self.procs[p]
                .open
                .apply(&command.command)
                .map_err(|e| format!("broker {p}: {e}"))?;
        }
        for command in plan.open_phase().commands() {
            if let ShardCommand::OpenPartition {
                partition,
                leader_epoch,
            } = &command.command.command
            {
                match self.volume.claim(partition, leader_epoch.0, p)? {
                    Ok(()) => {}
                    Err(highest) => {
                        self.stats.refused_claims += 1;
                        self.procs[p]
                            .fenced
                            .insert(partition.clone(), LeaderEpoch(highest));
                        continue;
                    }
                }
            }
            self.procs[p]
                .open
                .apply(&command.command)
                .map_err(|e| format!("broker {p}: {e}"))?;
        }
        // A report stays until an assignment gives the partition a new epoch or leader.
        self.procs[p].fenced.retain(|partition, claim| {
            new.leader_of(partition)
                .is_some_and(|l| l.leader == me && l.leader_epoch <= *claim)
        });
        self.procs[p].view = Some(new);
        Ok(())
    }

    /// Leaders write: a flush is acknowledged unless a newer claim exists.
    fn produce(&mut self, p: usize) -> Sim<()> {
        let open: Vec<(usize, TopicPartition, LeaderEpoch)> = self.procs[p]
            .open
            .shards()
            .flat_map(|(shard, h)| {
                h.partitions
                    .iter()
                    .map(move |(tp, e)| (shard.0, tp.clone(), *e))
            })
            .collect();
        for (shard, partition, epoch) in open {
            if !self.faults.on || self.rng.chance(20) {
                match self.volume.highest_claim(&partition) {
                    Some(highest) if highest > epoch.0 => {
                        self.stats.fenced_flushes += 1;
                        let close = kaas_cluster::command::AddressedCommand {
                            shard: kaas_cluster::ids::ShardIndex(shard),
                            command: ShardCommand::ClosePartition {
                                partition: partition.clone(),
                                checkpoint: false,
                            },
                        };
                        self.procs[p]
                            .open
                            .apply(&close)
                            .map_err(|e| format!("broker {p}: {e}"))?;
                        self.procs[p].fenced.insert(partition, LeaderEpoch(highest));
                    }
                    _ => self.volume.ack(&partition, epoch.0, p)?,
                }
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- faults and the world

    /// Whether the Lease's holder is paused or crashed while its Lease has not expired.
    fn holder_looks_dead(&self) -> bool {
        self.lease
            .holder
            .is_some_and(|h| !self.procs[h].running(self.t) && self.lease.expires_at > self.t)
    }

    fn pause(&mut self, p: usize, ms: u64) {
        self.procs[p].paused_since = self.t;
        self.procs[p].paused_until = self.t + ms;
    }

    /// Tells every process something its adapters watch (delivered once it runs).
    fn broadcast(&mut self, input: &Input) {
        for to in 0..self.procs.len() {
            if self.procs[to].up {
                // Watches deliver in order.
                let deliver_at = (self.t + self.rng.below(4) * STEP_MS).max(self.watch_last[to]);
                self.watch_last[to] = deliver_at;
                self.network.push(Message {
                    deliver_at,
                    to,
                    input: input.clone(),
                });
            }
        }
    }

    fn crash(&mut self, p: usize) {
        self.close_stream(p);
        let proc = &mut self.procs[p];
        proc.up = false;
        proc.down_until = self.t + 1_000 + self.rng.below(4_000);
        proc.writes.clear();
    }

    fn restart(&mut self, p: usize) -> Sim<()> {
        // A restart is a new process: its old streams are gone.
        let mut fresh = Process::new(p, &mut self.rng);
        fresh.clock_offset = self.procs[p].clock_offset;
        fresh.clock_permille = self.procs[p].clock_permille;
        fresh.last_delivery = std::mem::take(&mut self.procs[p].last_delivery);
        // The broker reads the Lease to find the controller; usually that gives it the
        // epoch fence before it reads the file.
        if self.rng.chance(50) && self.lease.transitions > 0 {
            fresh
                .follower
                .observe_epoch(ControllerEpoch(self.lease.transitions));
        }
        self.procs[p] = fresh;
        self.feed(p, Input::TopicsChanged(self.topics.clone()))?;
        self.feed(p, Input::GroupsKnown(self.groups.clone()))?;
        if let Some(ready) = self.ready_sent.clone() {
            self.feed(p, Input::EndpointsReady(ready))?;
        }
        Ok(())
    }

    fn change_topics(&mut self) -> Sim<()> {
        let index = self.rng.below(TOPIC_NAMES.len() as u64) as usize;
        let name = TopicName::new(TOPIC_NAMES[index]).expect("legal");
        let grow = self.rng.chance(60);
        let count = self.topics.len();
        match self.topics.get_mut(&name) {
            None => self.create_topic(index),
            Some(info) if grow => info.partitions += 1,
            Some(_) if count > 1 => {
                self.topics.remove(&name);
            }
            Some(_) => {}
        }
        self.broadcast(&Input::TopicsChanged(self.topics.clone()));
        Ok(())
    }

    fn add_group(&mut self) -> Sim<()> {
        let group = GroupId::new(&format!("group-{}", self.rng.below(8)));
        if self.groups.insert(group) {
            self.broadcast(&Input::GroupsKnown(self.groups.clone()));
        }
        Ok(())
    }

    fn endpoint_slice(&mut self) {
        // Ready: up, and not paused long enough (2 s) for the readiness probe to fail.
        let t = self.t;
        let ready: BTreeSet<BrokerId> = self
            .procs
            .iter()
            .filter(|proc| proc.up && (proc.running(t) || proc.paused_since + 2_000 > t))
            .map(Process::broker)
            .collect();
        if self.ready_sent.as_ref() != Some(&ready) {
            self.ready_sent = Some(ready.clone());
            self.broadcast(&Input::EndpointsReady(ready));
        }
    }

    fn deliver(&mut self) -> Sim<()> {
        let t = self.t;
        let procs = &self.procs;
        self.network.retain(|m| procs[m.to].up);
        let (mut due, later): (Vec<Message>, Vec<Message>) = std::mem::take(&mut self.network)
            .into_iter()
            .partition(|m| m.deliver_at <= t && procs[m.to].running(t));
        self.network = later;
        // A stable sort keeps each stream's order among messages due at one time.
        due.sort_by_key(|m| m.deliver_at);
        for message in due {
            self.feed(message.to, message.input)?;
        }
        Ok(())
    }

    fn step(&mut self) -> Sim<()> {
        self.t += STEP_MS;
        if self.faults.roll(&mut self.rng, 20) {
            self.change_topics()?;
        }
        if self.faults.roll(&mut self.rng, 20) {
            self.add_group()?;
        }
        for p in 0..self.procs.len() {
            if !self.procs[p].up {
                if self.t >= self.procs[p].down_until {
                    self.restart(p)?;
                }
                continue;
            }
            if self.faults.roll(&mut self.rng, 3) {
                self.crash(p);
                continue;
            }
            if !self.procs[p].running(self.t) {
                continue;
            }
            if self.faults.roll(&mut self.rng, 5) {
                let pause = 500 + self.rng.below(7_000);
                self.pause(p, pause);
                continue;
            }
            if self.faults.roll(&mut self.rng, 2) {
                // The Lease is taken over by force (an operator, a confused API server).
                self.acquire(p)?;
            } else if self.holder_looks_dead() && self.faults.roll(&mut self.rng, 150) {
                // Taken over early: this broker's stream to the holder broke (it is paused
                // or crashed) and the Lease has not expired; the holder, if only paused,
                // still believes it may write until its deadline.
                self.stats.early_takeovers += 1;
                self.acquire(p)?;
            }
        }
        self.endpoint_slice();
        self.deliver()?;
        for p in 0..self.procs.len() {
            if !self.procs[p].running(self.t) {
                continue;
            }
            self.controller_adapters(p)?;
            if !self.procs[p].running(self.t) {
                continue;
            }
            self.heartbeat(p);
            // The broker's Lease campaign watches the Lease: its epoch raises the follower's
            // fence a moment after every acquisition.
            if self.lease.transitions > 0 && self.rng.chance(50) {
                let epoch = ControllerEpoch(self.lease.transitions);
                self.procs[p].follower.observe_epoch(epoch);
            }
            self.poll_file(p)?;
            self.produce(p)?;
        }
        Ok(())
    }

    fn quiet(&mut self) {
        self.faults.on = false;
        for proc in &mut self.procs {
            proc.paused_until = proc.paused_until.min(self.t);
            proc.down_until = proc.down_until.min(self.t);
        }
    }

    fn check_converged(&self) -> Sim<()> {
        let leaders: Vec<&Process> = self
            .procs
            .iter()
            .filter(|p| p.controller.leading_epoch().is_some())
            .collect();
        let [controller] = leaders[..] else {
            return Err(format!(
                "{} controllers lead after the faults stopped",
                leaders.len()
            ));
        };
        let epoch = controller.controller.leading_epoch().map(|e| e.0);
        if epoch != Some(self.lease.transitions) || self.lease.holder != Some(controller.id) {
            return Err(format!(
                "the leader's epoch {epoch:?} is not the Lease's {:?}",
                self.lease
            ));
        }
        let last = controller
            .controller
            .last_assignment()
            .ok_or("the controller has written nothing")?;
        let on_volume = self
            .volume
            .file
            .as_ref()
            .and_then(|bytes| Assignment::from_json(bytes).ok())
            .ok_or("no good file on the volume")?;
        if &on_volume != last.as_ref() {
            return Err(format!(
                "the volume holds epoch {:?} version {:?}, the controller wrote {:?} {:?}",
                on_volume.controller_epoch(),
                on_volume.version(),
                last.controller_epoch(),
                last.version()
            ));
        }
        let everyone: BTreeSet<BrokerId> = self.procs.iter().map(Process::broker).collect();
        if last.brokers().keys().copied().collect::<BTreeSet<_>>() != everyone {
            return Err(format!(
                "the assignment lists {:?}; the controller sees {:?} alive; ready {:?}",
                last.brokers().keys(),
                controller.controller.alive().0.keys(),
                self.ready_sent,
            ));
        }
        // Every KafkaTopic, plus the internal `__consumer_offsets` the controller adds.
        let user_topics: Vec<_> = last
            .topics()
            .keys()
            .filter(|name| !kaas_cluster::internal_topics::is_internal(name.as_str()))
            .collect();
        if user_topics != self.topics.keys().collect::<Vec<_>>()
            || !last
                .topics()
                .contains_key(kaas_cluster::internal_topics::OFFSETS_TOPIC)
        {
            return Err("the assignment does not list the topics".into());
        }
        for proc in &self.procs {
            let applied = proc
                .follower
                .current()
                .map(|a| (a.controller_epoch(), a.version()));
            if applied != Some((last.controller_epoch(), last.version())) {
                return Err(format!("broker {} applied {applied:?}", proc.id));
            }
        }
        for (partition, leader) in last.partitions() {
            // Brokers never open `__consumer_offsets` as a log: its leaders coordinate groups.
            if kaas_cluster::internal_topics::is_internal(partition.topic.as_str()) {
                continue;
            }
            let open_on: Vec<(usize, Vec<(kaas_cluster::ids::ShardIndex, LeaderEpoch)>)> = self
                .procs
                .iter()
                .map(|proc| (proc.id, proc.open.where_open(&partition)))
                .filter(|(_, places)| !places.is_empty())
                .collect();
            let expected_shard = kaas_cluster::placement::owner_shard(
                partition.topic.as_str(),
                partition.partition,
                SHARDS,
            );
            let want = vec![(
                leader.leader.0 as usize,
                vec![(expected_shard, leader.leader_epoch)],
            )];
            if open_on != want {
                return Err(format!(
                    "{partition} is open on {open_on:?}, wanted {want:?}"
                ));
            }
            if self.volume.highest_claim(&partition) != Some(leader.leader_epoch.0) {
                return Err(format!(
                    "{partition}: highest claim {:?}, leader epoch {:?}",
                    self.volume.highest_claim(&partition),
                    leader.leader_epoch
                ));
            }
        }
        for (group, broker) in last.groups() {
            let adopted: Vec<usize> = self
                .procs
                .iter()
                .filter(|proc| !proc.open.where_adopted(group).is_empty())
                .map(|proc| proc.id)
                .collect();
            if adopted != [broker.0 as usize] {
                return Err(format!(
                    "group {group} adopted on {adopted:?}, assigned to {broker:?}"
                ));
            }
        }
        Ok(())
    }
}

fn simulate(seed: u64) -> Sim<Stats> {
    let mut world = World::new(seed);
    for p in 0..world.procs.len() {
        world.feed(p, Input::TopicsChanged(world.topics.clone()))?;
    }
    while world.t < FAULT_MS {
        world
            .step()
            .map_err(|e| format!("at {} ms: {e}", world.t))?;
    }
    world.quiet();
    while world.t < FAULT_MS + QUIET_MS {
        world
            .step()
            .map_err(|e| format!("at {} ms: {e}", world.t))?;
    }
    world.check_converged()?;
    world.stats.terms = world.lease.transitions;
    Ok(world.stats)
}

#[test]
fn controllers_brokers_and_the_fence_hold_their_invariants_and_converge() {
    let mut total = Stats::default();
    run_seeds(0x636f_6e74, 40, simulate, |stats: Stats| {
        total.stale_writes += stats.stale_writes;
        total.refused_claims += stats.refused_claims;
        total.fenced_flushes += stats.fenced_flushes;
        total.terms += stats.terms;
        total.wakes += stats.wakes;
        total.early_takeovers += stats.early_takeovers;
    });
    eprintln!("{total:?}");
}
