//! kaas-volume: the one place that names the paths on the data volume (a standalone broker's
//! data directory, or the volume every broker of a cluster shares). No I/O: the crates that
//! read and write these files (`kaas-engine` on the shards, `kaas-cluster-file` and
//! `kaas-cluster-core` on the cluster core, the binary's start-up checks) take the names from
//! here, so a path is spelled once.
//!
//! ```text
//! <data>/
//!   kaas.lock                              one process per data directory (standalone)
//!   __cluster/
//!     assignment.json                      the controller's assignment (cluster mode)
//!     cluster-id                           the cluster id, created by the first broker
//!     controller-epoch                     the highest controller epoch seen (and its .lock)
//!     brokers/<id>                         each broker's marker (is the volume shared?)
//!     topics.json                          a standalone broker's topics and group configs
//!     producer-id-block                    a standalone broker's reserved producer ids
//!     producer-id-blocks/                  a cluster's producer-id block claims
//!     consumer-offsets/<partition>         reserved offsets of `__consumer_offsets` (standalone)
//!     consumer-offsets/<partition>-blocks/<n>  a claimed block of them (cluster mode)
//!     transaction-state-requested          `__transaction_state` is wanted (first transactional client)
//!     dma-probe                            4 KiB read by each executor at start (glommio's
//!                                          polled-I/O probe; the engine's `dma_probe`)
//!   topics/<topic>/<partition>/            a standalone broker's partition
//!   topics/<topic>@<topic id>/<partition>/ a cluster's partition (the engine's `topic_incarnation`)
//!   topics/<topic>@<topic id>-delete/      a deleted topic's directory while it is removed
//!   groups/<group>/                        committed offsets and group metadata (`GroupStore`;
//!                                          the directory's name: `group_dir`)
//! ```
//!
//! The formats of these files are documented where they are written; the files inside a
//! partition directory (segments, indexes, claims, checkpoints) are the engine's.

pub mod group_dir;

use std::path::{Path, PathBuf};

pub mod topic_name;

/// The cluster-wide files' directory, relative to the data directory.
pub const CLUSTER_DIR: &str = "__cluster";
/// In [`CLUSTER_DIR`]: the controller's assignment.
pub const ASSIGNMENT_FILE: &str = "assignment.json";
/// In [`CLUSTER_DIR`]: the cluster id.
pub const CLUSTER_ID_FILE: &str = "cluster-id";
/// In [`CLUSTER_DIR`]: the highest controller epoch seen.
pub const CONTROLLER_EPOCH_FILE: &str = "controller-epoch";
/// In [`CLUSTER_DIR`]: one marker file per broker, named after its id.
pub const BROKER_MARKERS_DIR: &str = "brokers";
/// In [`CLUSTER_DIR`]: a standalone broker's topics.
pub const TOPICS_FILE: &str = "topics.json";
/// In [`CLUSTER_DIR`]: a standalone broker's reserved producer-id block.
pub const PRODUCER_ID_BLOCK_FILE: &str = "producer-id-block";
/// In [`CLUSTER_DIR`]: a cluster's producer-id block claims.
pub const PRODUCER_ID_BLOCKS_DIR: &str = "producer-id-blocks";
/// In [`CLUSTER_DIR`]: the reserved offsets of each `__consumer_offsets` partition.
pub const CONSUMER_OFFSETS_DIR: &str = "consumer-offsets";
/// In [`CLUSTER_DIR`]: created (empty) by the first broker that needs transactions; from then
/// on the controller places `__transaction_state` like every other topic.
pub const TRANSACTION_STATE_REQUESTED_FILE: &str = "transaction-state-requested";
/// In [`CLUSTER_DIR`]: the file each executor reads with direct I/O before any other (the
/// engine's `dma_probe`).
pub const DMA_PROBE_FILE: &str = "dma-probe";

/// The partitions' directory, relative to the data directory.
pub const TOPICS_DIR: &str = "topics";
/// The consumer groups' directory, relative to the data directory.
pub const GROUPS_DIR: &str = "groups";
/// The lock file of a standalone broker's data directory.
pub const LOCK_FILE: &str = "kaas.lock";

/// `<root>/__cluster`.
pub fn cluster_dir(root: &Path) -> PathBuf {
    root.join(CLUSTER_DIR)
}

/// `__cluster/<name>`, relative to the data directory (what the engine's `Storage` takes).
pub fn in_cluster_dir(name: &str) -> PathBuf {
    Path::new(CLUSTER_DIR).join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_the_ones_on_existing_volumes() {
        assert_eq!(
            cluster_dir(Path::new("/data")).join(ASSIGNMENT_FILE),
            Path::new("/data/__cluster/assignment.json")
        );
        assert_eq!(
            in_cluster_dir(TOPICS_FILE),
            Path::new("__cluster/topics.json")
        );
        assert_eq!(
            in_cluster_dir(PRODUCER_ID_BLOCKS_DIR),
            Path::new("__cluster/producer-id-blocks")
        );
    }
}
