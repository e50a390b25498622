//! Per-partition log settings (the Kafka topic configs the engine understands).

use std::time::Duration;

use crate::batch::record_rules::RecordRules;
use crate::compression::CompressionTarget;

/// Which timestamp a batch carries once stored (`message.timestamp.type`): the batch
/// attribute's type, one enum for both.
pub use crate::batch::TimestampType;

/// Settings of one partition log. Defaults follow Apache Kafka's.
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// Roll to a new segment once the active one would exceed this many bytes (`segment.bytes`).
    pub segment_bytes: u64,
    /// Roll once the active segment's first batch is older than this (`segment.ms`).
    pub segment_age: Duration,
    /// Delete sealed segments whose newest record is older than this; `None` keeps forever
    /// (`retention.ms`, -1 meaning forever).
    pub retention_age: Option<Duration>,
    /// Delete the oldest sealed segments while the log is larger than this (`retention.bytes`).
    pub retention_bytes: Option<u64>,
    /// Largest batch accepted (`max.message.bytes`).
    pub max_batch_bytes: usize,
    /// Timestamp type stored (`message.timestamp.type`).
    pub timestamp_type: TimestampType,
    /// Add an offset-index entry after this many bytes of log (`index.interval.bytes`).
    pub index_interval_bytes: u64,
    /// Preallocate segment files in steps of this many bytes.
    pub preallocate_step: u64,
    /// Size of a write-behind buffer chunk; a full chunk is written without waiting for a flush.
    pub write_chunk_bytes: usize,
    /// Bytes of the newest batches kept in memory to serve tailing readers without disk reads.
    pub tail_cache_bytes: usize,
    /// The codec batches are stored in (`compression.type`); `None` keeps the producer's.
    /// Produce re-encodes with [`crate::batch::recompress::recompress_batches`] before the
    /// append.
    pub compression: Option<CompressionTarget>,
    /// Compaction settings when `cleanup.policy` contains `compact`; `None` never cleans.
    /// (Time and size retention are `retention_age` / `retention_bytes`: a compact-only
    /// topic sets neither.)
    pub compaction: Option<crate::compaction::CompactionConfig>,
    /// What every produced record must meet (keys on compacted topics, timestamp bounds).
    pub record_rules: RecordRules,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1 << 30,
            segment_age: Duration::from_secs(7 * 24 * 3600),
            retention_age: Some(Duration::from_secs(7 * 24 * 3600)),
            retention_bytes: None,
            max_batch_bytes: 1_048_588,
            timestamp_type: TimestampType::CreateTime,
            index_interval_bytes: 4096,
            preallocate_step: 32 << 20,
            write_chunk_bytes: 256 << 10,
            tail_cache_bytes: 1 << 20,
            compression: None,
            compaction: None,
            record_rules: RecordRules::default(),
        }
    }
}
