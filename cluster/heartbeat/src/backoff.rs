//! How long a broker waits before dialing the controller again: exponential from a first
//! delay up to a cap, each delay drawn at random from its upper half so that brokers that lost
//! the controller together do not redial in step.

use std::time::Duration;

/// Redial delays.
#[derive(Clone, Debug)]
pub struct Backoff {
    first: Duration,
    cap: Duration,
    next: Duration,
}

impl Backoff {
    /// Delays from `first` doubling up to `cap`.
    pub fn new(first: Duration, cap: Duration) -> Self {
        let first = first.max(Duration::from_millis(1));
        let cap = cap.max(first);
        Backoff {
            first,
            cap,
            next: first,
        }
    }

    /// The delay before the next attempt; the one after is twice as long (up to the cap).
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.next;
        self.next = (self.next * 2).min(self.cap);
        let half = ceiling / 2;
        half + ceiling.mul_f64(rand::random::<f64>() / 2.0)
    }

    /// Back to the first delay (after a stream that worked).
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_cap_within_their_upper_half() {
        let first = Duration::from_millis(100);
        let cap = Duration::from_millis(1000);
        let mut backoff = Backoff::new(first, cap);
        let ceilings = [100, 200, 400, 800, 1000, 1000];
        for ceiling in ceilings {
            let ceiling = Duration::from_millis(ceiling);
            let delay = backoff.next_delay();
            assert!(
                delay >= ceiling / 2 && delay <= ceiling,
                "{delay:?} vs {ceiling:?}"
            );
        }
        backoff.reset();
        assert!(backoff.next_delay() <= first);
    }
}
