//! Why a shard does not hand a request a partition's log: the routing answers (the partition
//! is not served here, or another broker leads it) beside the engine's own failures. The
//! engine never decides routing; the shard does, from the cluster view.

use kaas_engine::EngineError;

/// Why a partition's log is not available to a request on this shard.
#[derive(Debug, thiserror::Error)]
pub enum PartitionError {
    /// The partition is not served here (its topic is gone, or it is not this owner's): it
    /// must not be opened, and so never recreated on disk.
    #[error("partition is not served here")]
    NotServed,
    /// The partition exists but another broker leads it, or this broker has not opened it
    /// yet (cluster mode): the client should refresh its metadata and go to the leader.
    #[error("partition is led by another broker")]
    NotLeader,
    /// The engine failed to open or use the log.
    #[error(transparent)]
    Engine(#[from] EngineError),
}
