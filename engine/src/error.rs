//! The engine's error type.

use crate::batch::BatchError;
use crate::producer_state::ProducerStateError;

/// Everything a partition log operation can fail with.
#[derive(thiserror::Error, Debug)]
pub enum EngineError {
    /// A produced batch failed validation; nothing was written.
    #[error("invalid record batch: {0}")]
    InvalidBatch(#[from] BatchError),
    /// The idempotent-producer check rejected the batch; nothing was written.
    #[error("producer state: {0}")]
    ProducerState(#[from] ProducerStateError),
    /// An earlier write or fsync failed: the partition accepts nothing more until reopened.
    #[error("partition is poisoned after an I/O failure: {0}")]
    Poisoned(String),
    /// The requested offset is outside `[log_start_offset, log_end_offset]`.
    #[error("offset {offset} out of range [{start}, {end}]")]
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// The log start offset.
        start: u64,
        /// The log end offset.
        end: u64,
    },
    /// The partition has been closed; its handle is no longer usable.
    #[error("partition is closed")]
    Closed,
    /// A file the engine owns is malformed in a way recovery cannot repair.
    #[error("corrupt {what}: {detail}")]
    Corrupt {
        /// Which file or structure.
        what: String,
        /// What was wrong.
        detail: String,
    },
    /// A claim at a newer epoch exists: another broker has taken the partition (or group)
    /// over. Nothing this handle wrote since is acknowledged; it accepts nothing more.
    #[error("{dir} at epoch {epoch} is fenced by a claim at epoch {by_epoch}")]
    Fenced {
        /// The partition or group directory, relative to the storage root.
        dir: String,
        /// The epoch this handle was opened at.
        epoch: u32,
        /// The newest claim found.
        by_epoch: u32,
    },
    /// An I/O call failed.
    #[error("i/o error on {context}: {source}")]
    Io {
        /// What the engine was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl EngineError {
    pub(crate) fn io(context: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        EngineError::Io {
            context: context.into(),
            source: source.into(),
        }
    }
}

/// Result alias for engine operations.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;
