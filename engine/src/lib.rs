//! kaas storage engine: durable partition logs on glommio direct I/O.
//!
//! See the crate README for the on-disk layout, the durability contract and threading.

pub mod aligned_buffer;
pub mod batch;
pub mod block_claims;
pub mod checkpoint;
pub mod compaction;
pub mod compression;
pub mod config;
pub mod data_dir_lock;
pub mod dma_probe;
pub mod error;
pub mod fence;
mod file_pool;
mod group_commit;
pub mod group_store;
pub mod leader_epoch;
pub mod log;
pub mod log_manager;
pub mod offset_index;
pub mod periodic;
pub mod producer_state;
mod read_ahead;
pub mod record_timestamps;
mod recovery;
pub mod reserved_block;
mod segment;
mod segment_appender;
mod segment_reader;
pub mod sparse_index;
pub mod storage;
mod tail_cache;
mod takeover;
pub mod time_index;
pub mod topic_incarnation;
pub mod txn_index;
pub mod volume_sync;

pub use config::{LogConfig, TimestampType};
pub use error::{EngineError, Result};
pub use group_store::{CommittedOffset, GroupChange, GroupStore};
pub use log::{
    AbortedTransaction, AppendOutcome, CommittedRead, FetchedRecords, LogOffsets, PartitionLog,
    TxnMarker,
};
pub use log_manager::{DiskSpace, LogManager, PartitionId};
pub use storage::Storage;
