//! Log compaction (`cleanup.policy=compact`): a background cleaner per shard that keeps the
//! latest record of every key, as Apache Kafka's log cleaner does.
//!
//! | module | concept |
//! |---|---|
//! | `config` | [`CompactionConfig`] (a log's topic configs) and [`CleanerConfig`] (the broker's) |
//! | `offset_map` | the bounded key → latest-offset map, exact on hash collisions |
//! | `records` | walking and re-writing the records of a batch |
//! | `aborted_batches` | which data batches belong to aborted transactions |
//! | `batch_filter` | what happens to one batch: kept, rewritten, emptied or removed |
//! | `segment_batches` | whole batches of a sealed segment, read in windows |
//! | `segment_cleaner` | writing a segment's cleaned copy and its indexes |
//! | `swap` | the crash-safe swap and its recovery (the file states) |
//! | `partition_cleaner` | one pass over one log: dirty range, map, rewrite, swap |
//! | `cleaner_checkpoint` | where a log's last pass ended, on disk (`cleaner-offset-checkpoint`) |
//! | `shard_cleaner` | the shard's background task: pick the dirtiest log, clean it |
//! | `throttle`, `stats` | the I/O rate limit; counters for `/metrics` |
//!
//! What compaction guarantees: offsets never change (removed records leave gaps; a batch
//! keeps its base offset and `lastOffsetDelta`), batch order is kept, the active segment and
//! anything younger than `min.compaction.lag.ms` is never touched, the log start offset and
//! the log end offset do not move, and after every pass — and after a crash at any point of
//! one — the latest record of every key is at its offset.
//!
//! A read at an offset compaction removed is served from the next batch: the reader starts
//! at the batch holding or following the offset. Recovery accepts gaps between the batches
//! of every segment but the last (which compaction never touches); every cleaned segment
//! still ends with the batch ending at the next segment's base, kept as an empty batch if
//! all its records went.

pub mod aborted_batches;
pub mod batch_filter;
pub mod cleaner_checkpoint;
pub mod config;
pub mod offset_map;
pub mod partition_cleaner;
pub mod records;
mod segment_batches;
mod segment_cleaner;
pub mod shard_cleaner;
pub mod stats;
pub(crate) mod swap;
pub mod throttle;

pub use cleaner_checkpoint::CleanerCheckpoint;
pub use config::{CleanerConfig, CompactionConfig};
pub use partition_cleaner::{clean_log, dirty_state, load_checkpoint, DirtyState, PassOutcome};
pub(crate) use segment_cleaner::CleanedSegment;
pub use shard_cleaner::ShardCleaner;
pub use stats::{CleanerStats, PartitionCleanerStats};
pub use throttle::Throttle;
