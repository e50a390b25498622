//! The controller's timing knobs, in milliseconds of the adapter's monotonic clock.

/// How the controller judges brokers alive and how long a fresh controller waits for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerConfig {
    /// A broker whose last heartbeat is older than this is gone: at exactly this age it is
    /// still alive, one millisecond later it is not (brokers ping every second, so the
    /// default of 3 s forgives two lost pings).
    pub age_out_ms: u64,
    /// How long a controller that has just won waits for the EndpointSlice's ready brokers
    /// to dial in before it computes its first assignment without the missing ones.
    pub startup_grace_ms: u64,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            age_out_ms: 3_000,
            startup_grace_ms: 2_000,
        }
    }
}
