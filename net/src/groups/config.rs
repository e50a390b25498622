//! Group coordinator settings (Kafka's `group.*` and `offset.*` broker settings).

use crate::groups::classic::ClassicGroupConfig;
use crate::groups::consumer_group::ConsumerGroupConfig;

/// How the coordinator runs groups.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// Classic protocol settings.
    pub classic: ClassicGroupConfig,
    /// `offset.metadata.max.bytes`: larger commit metadata gets OFFSET_METADATA_TOO_LARGE.
    pub offset_metadata_max_bytes: usize,
    /// `group.consumer.session.timeout.ms` (KIP-848 groups).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (KIP-848 groups).
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.max.size`.
    pub consumer_max_size: usize,
    /// `offsets.retention.minutes`, in ms: how long the offsets of an Empty group (or of a
    /// standalone consumer) are kept.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms`: how often expired offsets are looked for.
    pub offsets_retention_check_interval_ms: i64,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            classic: ClassicGroupConfig::default(),
            offset_metadata_max_bytes: 4096,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_max_size: usize::MAX,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
        }
    }
}

impl GroupConfig {
    /// Settings of KIP-848 consumer groups.
    pub fn consumer(&self) -> ConsumerGroupConfig {
        ConsumerGroupConfig {
            session_timeout_ms: self.consumer_session_timeout_ms,
            heartbeat_interval_ms: self.consumer_heartbeat_interval_ms,
            max_size: self.consumer_max_size,
            ..ConsumerGroupConfig::default()
        }
    }
}
