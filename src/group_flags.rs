//! Group coordinator flags (Kafka's `group.*` and `offset.*` broker settings).

use clap::Args;
use kaas_net::groups::classic::ClassicGroupConfig;
use kaas_net::groups::config::GroupConfig;

/// Consumer group settings.
#[derive(Args, Debug, Clone)]
pub struct GroupFlags {
    /// How long a new group waits for more members before its first rebalance
    /// (`group.initial.rebalance.delay.ms`).
    #[arg(
        long,
        env = "KAAS_GROUP_INITIAL_REBALANCE_DELAY_MS",
        default_value_t = 3_000
    )]
    pub group_initial_rebalance_delay_ms: i32,
    /// Smallest session timeout a classic member may ask for (`group.min.session.timeout.ms`).
    #[arg(
        long,
        env = "KAAS_GROUP_MIN_SESSION_TIMEOUT_MS",
        default_value_t = 6_000
    )]
    pub group_min_session_timeout_ms: i32,
    /// Largest session timeout a classic member may ask for (`group.max.session.timeout.ms`).
    #[arg(
        long,
        env = "KAAS_GROUP_MAX_SESSION_TIMEOUT_MS",
        default_value_t = 1_800_000
    )]
    pub group_max_session_timeout_ms: i32,
    /// Most members in one group (`group.max.size`).
    #[arg(long, env = "KAAS_GROUP_MAX_SIZE", default_value_t = i32::MAX as usize)]
    pub group_max_size: usize,
    /// Session timeout of KIP-848 consumer group members (`group.consumer.session.timeout.ms`).
    #[arg(
        long,
        env = "KAAS_GROUP_CONSUMER_SESSION_TIMEOUT_MS",
        default_value_t = 45_000
    )]
    pub group_consumer_session_timeout_ms: i32,
    /// Heartbeat interval of KIP-848 consumer group members
    /// (`group.consumer.heartbeat.interval.ms`).
    #[arg(
        long,
        env = "KAAS_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS",
        default_value_t = 5_000
    )]
    pub group_consumer_heartbeat_interval_ms: i32,
    /// Largest metadata string an offset commit may carry (`offset.metadata.max.bytes`).
    #[arg(long, env = "KAAS_OFFSET_METADATA_MAX_BYTES", default_value_t = 4_096)]
    pub offset_metadata_max_bytes: usize,
    /// How long the committed offsets of an Empty group (or of a standalone consumer) are
    /// kept (`offsets.retention.minutes`); fractions of a minute are accepted.
    #[arg(
        long,
        env = "KAAS_OFFSETS_RETENTION_MINUTES",
        default_value_t = 10_080.0,
        value_parser = positive_minutes
    )]
    pub offsets_retention_minutes: f64,
    /// How often expired offsets are looked for (`offsets.retention.check.interval.ms`).
    #[arg(
        long,
        env = "KAAS_OFFSETS_RETENTION_CHECK_INTERVAL_MS",
        default_value_t = 600_000,
        value_parser = clap::value_parser!(i64).range(1..)
    )]
    pub offsets_retention_check_interval_ms: i64,
}

/// A retention of more than zero minutes (Kafka requires at least one; kaas also takes
/// fractions, so that tests can use seconds).
fn positive_minutes(text: &str) -> Result<f64, String> {
    let minutes: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if minutes.is_finite() && minutes > 0.0 && minutes * 60_000.0 < i64::MAX as f64 {
        Ok(minutes)
    } else {
        Err(format!("{text} is not a positive number of minutes"))
    }
}

impl GroupFlags {
    /// The coordinator settings these flags mean.
    pub fn group_config(&self) -> GroupConfig {
        GroupConfig {
            classic: ClassicGroupConfig {
                min_session_timeout_ms: self.group_min_session_timeout_ms,
                max_session_timeout_ms: self.group_max_session_timeout_ms,
                initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms.max(0),
                max_size: self.group_max_size.max(1),
            },
            offset_metadata_max_bytes: self.offset_metadata_max_bytes,
            consumer_session_timeout_ms: self.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms: self.group_consumer_heartbeat_interval_ms,
            consumer_max_size: self.group_max_size.max(1),
            offsets_retention_ms: (self.offsets_retention_minutes * 60_000.0).round() as i64,
            offsets_retention_check_interval_ms: self.offsets_retention_check_interval_ms,
        }
    }
}
