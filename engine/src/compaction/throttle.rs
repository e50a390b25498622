//! The cleaner's I/O budget: bytes per second, read and written together, per shard.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Delays the cleaner so that its I/O stays at or below a rate.
pub struct Throttle {
    bytes_per_second: Option<u64>,
    started: Instant,
    spent: Cell<u64>,
}

impl Throttle {
    /// A throttle allowing `bytes_per_second` (`None`: unlimited).
    pub fn new(bytes_per_second: Option<u64>) -> Self {
        Throttle {
            bytes_per_second: bytes_per_second.filter(|rate| *rate > 0),
            started: Instant::now(),
            spent: Cell::new(0),
        }
    }

    /// Accounts for `bytes` about to be read or written, sleeping first when the rate
    /// since the throttle started would be exceeded.
    pub async fn spend(&self, bytes: u64) {
        let spent = self.spent.get().saturating_add(bytes);
        self.spent.set(spent);
        let Some(rate) = self.bytes_per_second else {
            return;
        };
        let due = Duration::from_secs_f64(spent as f64 / rate as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            glommio::timer::sleep(due - elapsed).await;
        }
    }
}
