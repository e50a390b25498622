//! The coordinator's clock: monotonic milliseconds since the process started, for session
//! and rebalance deadlines (wall-clock jumps must not expire members).

use std::sync::OnceLock;
use std::time::Instant;

/// Milliseconds on a monotonic clock.
pub fn monotonic_ms() -> i64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX)
}
