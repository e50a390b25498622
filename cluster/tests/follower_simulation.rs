//! Seeded simulation of one broker following a cluster's assignments through controller
//! changes, stale controllers back from a pause, a buggy controller, torn, corrupted and
//! replayed reads, failed partition opens, client requests that adopt unnamed groups, and
//! restarts. After every step it checks that
//!
//! - an applied assignment was written whole by some controller (unless the read flipped a
//!   byte and the result is still a consistent file: the format has no checksum, operators
//!   edit it by hand, and the storage below it is trusted to return what was written), its
//!   epoch is at least that of
//!   every good file this broker process has read, and its `(controller epoch, version)` is
//!   above the last one applied's (a higher epoch whatever its version; within one epoch a
//!   higher version);
//! - while the shards carry out a takeover in any interleaving, no partition or group is ever
//!   open on two shards;
//! - after the takeover (retrying failed opens) exactly what the assignment gives this broker
//!   is open;
//! - at the end, the first file of a newly elected controller is applied, though a deposed
//!   controller may have written its version (or a higher one) before.
//!
//! A failure prints its seed; `KAAS_SIM_SEED=<seed>` replays just that run, and
//! `KAAS_SIM_RUNS=<n>` changes how many seeds a run tries.

mod support;

use std::sync::Arc;

use kaas_cluster::assignment::Assignment;
use kaas_cluster::command::{AddressedCommand, ShardCommand};
use kaas_cluster::follower::{AssignmentFollower, Offer};
use kaas_cluster::ids::{BrokerId, ControllerEpoch, GroupId};
use kaas_cluster::takeover::plan_takeover;
use kaas_cluster::view::ClusterView;
use support::{assignment_of, expected, random_shape, run_seeds, Rng, ShardModel, GROUP_POOL};

struct Broker {
    me: BrokerId,
    shards: usize,
    follower: AssignmentFollower,
    view: Option<ClusterView>,
    model: ShardModel,
    /// The highest epoch of a good file this process has read.
    highest_good_epoch: Option<ControllerEpoch>,
}

impl Broker {
    fn start(me: BrokerId, shards: usize) -> Self {
        Broker {
            me,
            shards,
            follower: AssignmentFollower::new(),
            view: None,
            model: ShardModel::default(),
            highest_good_epoch: None,
        }
    }

    /// Reads `bytes` as the file; on an applied assignment, runs the takeover.
    fn read(
        &mut self,
        rng: &mut Rng,
        bytes: &[u8],
        written: &[Vec<u8>],
        corrupted: bool,
    ) -> Result<bool, String> {
        let previous = self.follower.current().cloned();
        let parsed = Assignment::from_json(bytes).ok();
        let outcome = self.follower.offer(bytes);
        let applied = match outcome {
            Offer::Applied(applied) => applied,
            Offer::Rejected(_) | Offer::Malformed(_) => {
                if let Some(parsed) = parsed {
                    self.highest_good_epoch =
                        self.highest_good_epoch.max(Some(parsed.controller_epoch()));
                }
                if self.follower.current() != previous.as_ref() {
                    return Err("a refused file changed the current assignment".into());
                }
                return Ok(false);
            }
        };
        if !corrupted && !written.iter().any(|w| w.as_slice() == bytes) {
            return Err(format!(
                "applied bytes no controller wrote whole: {applied:?}"
            ));
        }
        if Some(applied.controller_epoch()) < self.highest_good_epoch {
            return Err(format!(
                "applied epoch {:?} after reading a good file of epoch {:?}",
                applied.controller_epoch(),
                self.highest_good_epoch
            ));
        }
        if let Some(previous) = previous {
            let order = |a: &Assignment| (a.controller_epoch(), a.version());
            if order(&applied) <= order(&previous) {
                return Err(format!(
                    "applied (epoch, version) {:?} after {:?}",
                    order(&applied),
                    order(&previous)
                ));
            }
        }
        self.highest_good_epoch = self
            .highest_good_epoch
            .max(Some(applied.controller_epoch()));
        self.take_over(rng, &applied)?;
        Ok(true)
    }

    fn take_over(&mut self, rng: &mut Rng, assignment: &Arc<Assignment>) -> Result<(), String> {
        let new = ClusterView::new(assignment, self.me, self.shards);
        let adopted_before: Vec<GroupId> = self.model.groups.keys().cloned().collect();
        let mut old = self.view.take();
        // Opens fail now and then (a recovery error); the broker replans until converged.
        for round in 0..8 {
            let plan = plan_takeover(old.as_ref(), &new, &self.model.to_open_state());
            if plan.is_empty() {
                break;
            }
            for (index, phase) in plan.phases().into_iter().enumerate() {
                let mut commands: Vec<AddressedCommand> =
                    phase.commands().iter().map(|p| p.command.clone()).collect();
                rng.shuffle(&mut commands);
                for command in commands {
                    let is_open = matches!(
                        command.command,
                        ShardCommand::OpenPartition { .. } | ShardCommand::AdoptGroup { .. }
                    );
                    if is_open != (index == 1) {
                        return Err(format!("phase {index} holds {command:?}"));
                    }
                    if is_open && round < 3 && rng.chance(10) {
                        continue;
                    }
                    self.model.apply(&command)?;
                }
            }
            old = Some(new.clone());
        }
        let want = expected(&new, &adopted_before);
        if self.model != want {
            return Err(format!(
                "after the takeover {:?}\nwanted {want:?}",
                self.model
            ));
        }
        self.view = Some(new);
        Ok(())
    }

    /// A client asks for a group the assignment does not name; the broker the view picks
    /// adopts it (what the request path does).
    fn group_request(&mut self, group: &GroupId) -> Result<(), String> {
        let Some(view) = &self.view else {
            return Ok(());
        };
        if view.named_groups().contains_key(group)
            || view.coordinator_of(group) != Some(self.me)
            || self.model.groups.contains_key(group)
        {
            return Ok(());
        }
        let command = AddressedCommand {
            shard: view.group_shard(group),
            command: ShardCommand::AdoptGroup {
                group: group.clone(),
            },
        };
        self.model.apply(&command)
    }
}

fn simulate(seed: u64) -> Result<(), String> {
    let mut rng = Rng::new(seed);
    let me = BrokerId(rng.below(3) as i32);
    let mut broker = Broker::start(me, 1 + rng.below(4) as usize);
    // Controllers that ever led, by epoch; the last is the current one.
    let mut epochs: Vec<u64> = vec![rng.below(3)];
    let mut max_version = rng.below(5);
    let mut on_disk: Option<Vec<u8>> = None;
    let mut written: Vec<Vec<u8>> = Vec::new();
    for _ in 0..120 {
        let roll = rng.below(100);
        let current = *epochs.last().unwrap_or(&0);
        match roll {
            // The current controller writes the next assignment (it knows the highest
            // version any broker applied, from their heartbeats).
            0..=29 => {
                max_version += 1;
                on_disk = Some(write(current, max_version, &mut rng, &mut written));
            }
            // A new controller is elected.
            30..=35 => epochs.push(current + 1),
            // A deposed controller wakes up and writes at its old epoch, maybe the version
            // the current one writes next.
            36..=43 if epochs.len() > 1 => {
                let stale = epochs[rng.below(epochs.len() as u64 - 1) as usize];
                let version = max_version + rng.below(3);
                on_disk = Some(write(stale, version, &mut rng, &mut written));
            }
            // A controller of a newer epoch that has not seen the highest version.
            44..=45 => {
                epochs.push(current + 1);
                let version = rng.below(max_version + 1);
                on_disk = Some(write(current + 1, version, &mut rng, &mut written));
            }
            // The broker reads the file: whole, torn, with a flipped byte, or an old one.
            46..=89 => {
                let Some(file) = on_disk.clone() else {
                    continue;
                };
                let kind = rng.below(10);
                let bytes = match kind {
                    0 => file[..rng.below(file.len() as u64) as usize].to_vec(),
                    1 => {
                        let mut corrupt = file.clone();
                        let at = rng.below(corrupt.len() as u64) as usize;
                        corrupt[at] = rng.below(256) as u8;
                        corrupt
                    }
                    2 => rng.pick(&written).clone(),
                    _ => file,
                };
                broker.read(&mut rng, &bytes, &written, kind == 1)?;
            }
            // A client asks for a group.
            90..=96 => {
                let group = GroupId::new(GROUP_POOL[rng.below(GROUP_POOL.len() as u64) as usize]);
                broker.group_request(&group)?;
            }
            // The broker restarts: it keeps nothing but the files.
            _ => broker = Broker::start(me, broker.shards),
        }
    }
    // A new controller is elected (above every epoch the broker knows: a flipped byte may
    // have raised its fence; the controller learns it from the broker's heartbeat) and
    // writes the version after the highest it saw, which a deposed controller may have
    // written already: its first file must be applied.
    let newest = *epochs.last().unwrap_or(&0);
    let epoch = newest.max(broker.follower.highest_epoch().map_or(0, |e| e.0)) + 1;
    let file = write(epoch, max_version + 1, &mut rng, &mut written);
    if !broker.read(&mut rng, &file, &written, false)? {
        return Err(format!(
            "the new controller's first file (epoch {epoch}, version {}) was not applied over {:?}",
            max_version + 1,
            broker
                .follower
                .current()
                .map(|a| (a.controller_epoch(), a.version()))
        ));
    }
    Ok(())
}

/// A controller writes the assignment of a random shape; returns the file's bytes.
fn write(epoch: u64, version: u64, rng: &mut Rng, written: &mut Vec<Vec<u8>>) -> Vec<u8> {
    let bytes = assignment_of(&random_shape(rng, 3), epoch, version).to_json();
    written.push(bytes.clone());
    bytes
}

#[test]
fn follower_and_takeover_hold_their_invariants() {
    run_seeds(0x6b61_6173, 100, simulate, |()| {});
}
