//! The cleaner's counters, as plain data for `/metrics`.

use std::collections::BTreeMap;

use crate::log_manager::PartitionId;

/// One partition's cleaning figures.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PartitionCleanerStats {
    /// Dirty bytes over cleanable bytes at the last look.
    pub dirty_ratio: f64,
    /// Broker time of the last pass that ended, if any.
    pub last_clean_ms: Option<i64>,
}

impl PartitionCleanerStats {
    /// Milliseconds since the last pass (`None`: never cleaned since it opened here).
    pub fn since_last_clean_ms(&self, now_ms: i64) -> Option<i64> {
        self.last_clean_ms.map(|at| now_ms.saturating_sub(at))
    }
}

/// A shard cleaner's counters since it started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CleanerStats {
    /// Passes that ended (with or without swaps).
    pub passes: u64,
    /// Passes that failed.
    pub failed_passes: u64,
    /// Bytes read by passes.
    pub bytes_read: u64,
    /// Bytes written by passes.
    pub bytes_written: u64,
    /// Segments swapped for cleaned copies.
    pub segments_swapped: u64,
    /// Per open compacted partition.
    pub partitions: BTreeMap<PartitionId, PartitionCleanerStats>,
}
