//! The controller's monotonic clock: milliseconds since the core started, from
//! `std::time::Instant` (never the wall clock, which may jump).

use std::time::{Duration, Instant};

use kaas_cluster::controller::MonotonicMillis;

/// Converts `Instant`s to the controller's [`MonotonicMillis`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    origin: Instant,
}

impl Clock {
    pub(crate) fn new(origin: Instant) -> Self {
        Clock { origin }
    }

    /// `instant` on the controller's clock (instants before the origin are 0).
    pub(crate) fn at(&self, instant: Instant) -> MonotonicMillis {
        let millis = instant.saturating_duration_since(self.origin).as_millis();
        MonotonicMillis(u64::try_from(millis).unwrap_or(u64::MAX))
    }

    /// The `Instant` of `millis` on the controller's clock.
    pub(crate) fn instant(&self, millis: MonotonicMillis) -> Instant {
        self.origin + Duration::from_millis(millis.0)
    }

    /// Now on the controller's clock.
    pub(crate) fn now(&self) -> MonotonicMillis {
        self.at(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_become_millis_since_the_origin() {
        let origin = Instant::now();
        let clock = Clock::new(origin);
        assert_eq!(clock.at(origin), MonotonicMillis(0));
        assert_eq!(
            clock.at(origin + Duration::from_millis(2_500)),
            MonotonicMillis(2_500)
        );
        assert_eq!(
            clock.instant(MonotonicMillis(2_500)),
            origin + Duration::from_millis(2_500)
        );
        let later = Clock::new(origin + Duration::from_secs(1));
        assert_eq!(later.at(origin), MonotonicMillis(0), "saturates");
    }
}
