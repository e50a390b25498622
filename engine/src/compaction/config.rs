//! Compaction settings: per log (the topic configs) and per broker (the cleaner's).

use std::time::Duration;

/// A compacted log's settings (`cleanup.policy` containing `compact`). Defaults are Apache
/// Kafka's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompactionConfig {
    /// A log is cleaned once its dirty bytes are at least this share of its cleanable bytes
    /// (`min.cleanable.dirty.ratio`, 0.5).
    pub min_cleanable_dirty_ratio: f64,
    /// Records younger than this are never compacted (`min.compaction.lag.ms`, 0). Decided
    /// per segment, by its largest timestamp, as Kafka does.
    pub min_compaction_lag: Duration,
    /// A log whose oldest dirty record is older than this is cleaned whatever its ratio
    /// (`max.compaction.lag.ms`, forever).
    pub max_compaction_lag: Option<Duration>,
    /// A tombstone (null value) stays this long after the pass that first cleaned its batch
    /// (`delete.retention.ms`, one day).
    pub delete_retention: Duration,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag: Duration::ZERO,
            max_compaction_lag: None,
            delete_retention: Duration::from_millis(86_400_000),
        }
    }
}

/// The broker's cleaner settings (Kafka's `log.cleaner.*`), passed in by the binary.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CleanerConfig {
    /// How many shards clean at the same time, process-wide (`log.cleaner.threads`, 1).
    /// There is one cleaner task per shard; a shard whose turn comes while this many are
    /// cleaning waits for its next round.
    pub threads: usize,
    /// Memory for one shard's key → latest-offset map, in bytes
    /// (`log.cleaner.dedupe.buffer.size`, 128 MiB). A pass covers as much of the dirty log
    /// as its keys fit in; the rest waits for the next pass.
    pub dedupe_buffer_bytes: usize,
    /// Bytes per second a shard's cleaner reads plus writes (`log.cleaner.io.max.bytes.per.second`,
    /// unlimited).
    pub io_bytes_per_second: Option<u64>,
    /// Pause between rounds when nothing needed cleaning (`log.cleaner.backoff.ms`, 15 s).
    pub backoff: Duration,
    /// Largest batch decompressed while cleaning; a larger one is kept as it is.
    pub max_batch_bytes: usize,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            threads: 1,
            dedupe_buffer_bytes: 128 << 20,
            io_bytes_per_second: None,
            backoff: Duration::from_secs(15),
            max_batch_bytes: 64 << 20,
        }
    }
}
