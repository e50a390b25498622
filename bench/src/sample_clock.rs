//! The time line of a run: a warm-up, then back-to-back samples of equal length.
//!
//! Every thread of a run shares one `SampleClock`, so each can tell on its own, from a
//! timestamp, which phase an event belongs to; no thread signals phase changes to another.

use std::time::{Duration, Instant};

/// Phase of a run that an instant falls in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Before the run started (cannot normally happen; treated like warm-up).
    Before,
    /// Measured but discarded.
    Warmup,
    /// Sample `n` (from 0).
    Sample(usize),
    /// After the last sample ended (draining).
    After,
}

/// Start, warm-up length and sample windows of a run.
#[derive(Clone, Copy, Debug)]
pub struct SampleClock {
    /// Origin of the run; record timestamps are nanoseconds since this instant.
    pub origin: Instant,
    /// When load starts (a little after `origin`).
    pub start: Instant,
    pub warmup: Duration,
    pub sample: Duration,
    pub samples: usize,
}

impl SampleClock {
    /// A clock whose load starts `lead` from now.
    pub fn new(lead: Duration, warmup: Duration, sample: Duration, samples: usize) -> Self {
        let origin = Instant::now();
        SampleClock {
            origin,
            start: origin + lead,
            warmup,
            sample,
            samples,
        }
    }

    /// When the first sample starts.
    pub fn measure_start(&self) -> Instant {
        self.start + self.warmup
    }

    /// When the last sample ends and load stops.
    pub fn end(&self) -> Instant {
        self.measure_start() + self.sample * self.samples as u32
    }

    /// The phase that `at` falls in.
    pub fn phase_of(&self, at: Instant) -> Phase {
        if at < self.start {
            return Phase::Before;
        }
        let measure_start = self.measure_start();
        if at < measure_start {
            return Phase::Warmup;
        }
        let since = at.duration_since(measure_start).as_nanos();
        let index = (since / self.sample.as_nanos().max(1)) as usize;
        if index < self.samples {
            Phase::Sample(index)
        } else {
            Phase::After
        }
    }

    /// Nanoseconds from the origin to `at` (0 if `at` is earlier).
    pub fn nanos_since_origin(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.origin).as_nanos() as u64
    }

    /// The instant `nanos` after the origin.
    pub fn at_nanos(&self, nanos: u64) -> Instant {
        self.origin + Duration::from_nanos(nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_follow_the_schedule() {
        let clock = SampleClock::new(
            Duration::from_millis(100),
            Duration::from_secs(2),
            Duration::from_secs(3),
            2,
        );
        let start = clock.start;
        assert_eq!(clock.phase_of(clock.origin), Phase::Before);
        assert_eq!(clock.phase_of(start), Phase::Warmup);
        assert_eq!(
            clock.phase_of(start + Duration::from_millis(1999)),
            Phase::Warmup
        );
        assert_eq!(
            clock.phase_of(start + Duration::from_secs(2)),
            Phase::Sample(0)
        );
        assert_eq!(
            clock.phase_of(start + Duration::from_secs(5)),
            Phase::Sample(1)
        );
        assert_eq!(
            clock.phase_of(start + Duration::from_millis(7999)),
            Phase::Sample(1)
        );
        assert_eq!(clock.phase_of(start + Duration::from_secs(8)), Phase::After);
        assert_eq!(clock.end(), start + Duration::from_secs(8));
    }

    #[test]
    fn timestamps_round_trip() {
        let clock = SampleClock::new(Duration::ZERO, Duration::ZERO, Duration::from_secs(1), 1);
        let later = clock.origin + Duration::from_micros(1234);
        assert_eq!(clock.at_nanos(clock.nanos_since_origin(later)), later);
    }
}
