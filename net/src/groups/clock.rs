//! The coordinator's clocks: monotonic milliseconds since the process started, for session
//! and rebalance deadlines (wall-clock jumps must not expire members), and wall-clock
//! milliseconds for what must survive a restart (commit times, when a group became Empty).

use std::sync::OnceLock;
use std::time::Instant;

/// Milliseconds on a monotonic clock.
pub fn monotonic_ms() -> i64 {
    static START: OnceLock<Instant> = OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX)
}

/// Milliseconds since the Unix epoch, as offset commits are stamped.
pub fn wall_ms() -> i64 {
    kaas_engine::log_manager::now_ms()
}
