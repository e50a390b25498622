//! The seeded fault schedule of tests/cluster_fault_schedule.rs: which fault comes next, for
//! how long, and how long the cluster is left alone afterwards. Pure: the same seed and Lease
//! duration give the same steps; which broker a step hits is resolved when it runs (the
//! controller is whoever holds the Lease then), from the step's own `pick`.

#![allow(dead_code)]

use std::fmt;

/// A kind of fault; each is undone after its hold time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultKind {
    /// kill -9 of a broker that is not the controller; restarted after the hold time.
    Kill9,
    /// kill -9 of the controller (the Lease holder); restarted after the hold time.
    Kill9Controller,
    /// SIGSTOP of a broker that is not the controller; SIGCONT after the hold time.
    Pause,
    /// SIGSTOP of the controller, half of the time for longer than the Lease duration.
    PauseController,
    /// A broker's endpoint marked not ready in the EndpointSlice; ready again afterwards.
    NotReady,
    /// The API server unreachable from one broker (its proxy cut); restored afterwards.
    ApiCut,
    /// The shared volume's fsync and fdatasync delayed, for every broker; prompt again
    /// afterwards.
    SlowVolume,
}

impl FaultKind {
    pub const ALL: [FaultKind; 7] = [
        FaultKind::Kill9,
        FaultKind::Kill9Controller,
        FaultKind::Pause,
        FaultKind::PauseController,
        FaultKind::NotReady,
        FaultKind::ApiCut,
        FaultKind::SlowVolume,
    ];

    /// The name the report uses.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Kill9 => "kill9",
            FaultKind::Kill9Controller => "kill9-controller",
            FaultKind::Pause => "pause",
            FaultKind::PauseController => "pause-controller",
            FaultKind::NotReady => "not-ready",
            FaultKind::ApiCut => "api-cut",
            FaultKind::SlowVolume => "slow-volume",
        }
    }

    /// Whether the step hits the controller (the others hit a broker picked among those
    /// that are not, except [`FaultKind::ApiCut`], which picks among all three, and
    /// [`FaultKind::SlowVolume`], which hits the volume they share).
    pub fn hits_controller(self) -> bool {
        matches!(
            self,
            FaultKind::Kill9Controller | FaultKind::PauseController
        )
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One step of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub kind: FaultKind,
    /// Chooses the broker among the candidates (`pick % candidates`).
    pub pick: u64,
    /// How long the fault lasts before it is undone.
    pub hold_ms: u64,
    /// How long the cluster runs undisturbed after it has recovered.
    pub quiet_ms: u64,
    /// [`FaultKind::SlowVolume`]: how long each fsync waits (0 for the other kinds).
    pub fsync_delay_ms: u64,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (pick {}) for {} ms",
            self.kind,
            self.pick % 1000,
            self.hold_ms
        )?;
        if self.fsync_delay_ms > 0 {
            write!(f, ", {} ms per fsync", self.fsync_delay_ms)?;
        }
        write!(f, ", then {} ms quiet", self.quiet_ms)
    }
}

/// splitmix64: small, seedable, and the same everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next_u64() % (high - low + 1)
    }
}

/// The schedule: rounds of every kind of fault in a seeded order (so a short run sees each
/// kind once before any twice), each with seeded hold and quiet times.
pub struct Schedule {
    rng: Rng,
    lease_ms: u64,
    round: Vec<FaultKind>,
}

impl Schedule {
    /// The schedule of `seed` for a cluster whose Lease lasts `lease_ms`.
    pub fn new(seed: u64, lease_ms: u64) -> Schedule {
        Schedule {
            rng: Rng::new(seed),
            lease_ms,
            round: Vec::new(),
        }
    }

    fn hold_ms(&mut self, kind: FaultKind) -> u64 {
        let rng = &mut self.rng;
        match kind {
            // Down for a moment or for a while before its pod restarts it.
            FaultKind::Kill9 | FaultKind::Kill9Controller => rng.between(500, 5000),
            FaultKind::Pause => rng.between(1000, 8000),
            // Half shorter than the Lease (the controller wakes up still holding it), half
            // longer (another broker takes the Lease over while it sleeps).
            FaultKind::PauseController => {
                if rng.next_u64().is_multiple_of(2) {
                    rng.between(self.lease_ms / 3, self.lease_ms * 4 / 5)
                } else {
                    self.lease_ms + rng.between(1000, 5000)
                }
            }
            FaultKind::NotReady => rng.between(2000, 8000),
            FaultKind::ApiCut => rng.between(2000, 10_000),
            FaultKind::SlowVolume => rng.between(2000, 8000),
        }
    }
}

impl Iterator for Schedule {
    type Item = Step;

    fn next(&mut self) -> Option<Step> {
        if self.round.is_empty() {
            let mut round = FaultKind::ALL.to_vec();
            // Fisher-Yates, last to first: the next step is popped from the end.
            for i in (1..round.len()).rev() {
                let j = (self.rng.next_u64() % (i as u64 + 1)) as usize;
                round.swap(i, j);
            }
            self.round = round;
        }
        let kind = self.round.pop()?;
        let pick = self.rng.next_u64();
        let hold_ms = self.hold_ms(kind);
        let quiet_ms = self.rng.between(1000, 3000);
        // From a stall a disk can have to one longer than a controller's renew period.
        let fsync_delay_ms = match kind {
            FaultKind::SlowVolume => self.rng.between(300, 4000),
            _ => 0,
        };
        Some(Step {
            kind,
            pick,
            hold_ms,
            quiet_ms,
            fsync_delay_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_schedule() {
        let a: Vec<Step> = Schedule::new(7, 3000).take(20).collect();
        let b: Vec<Step> = Schedule::new(7, 3000).take(20).collect();
        let c: Vec<Step> = Schedule::new(8, 3000).take(20).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn each_round_has_every_kind_once() {
        let steps: Vec<Step> = Schedule::new(42, 3000).take(14).collect();
        for round in steps.chunks(7) {
            let mut kinds: Vec<FaultKind> = round.iter().map(|s| s.kind).collect();
            kinds.sort();
            assert_eq!(kinds, FaultKind::ALL.to_vec());
        }
    }

    #[test]
    fn controller_pauses_are_both_shorter_and_longer_than_the_lease() {
        let holds: Vec<u64> = Schedule::new(1, 15_000)
            .take(120)
            .filter(|s| s.kind == FaultKind::PauseController)
            .map(|s| s.hold_ms)
            .collect();
        assert!(holds.iter().any(|&h| h < 15_000), "{holds:?}");
        assert!(holds.iter().any(|&h| h > 15_000), "{holds:?}");
    }
}
