//! The transaction coordinator's decisions and its log format, without I/O.
//!
//! As in Kafka, the coordinator of a `transactional.id` is the leader of the id's partition
//! of the internal topic `__transaction_state` ([`partition_for`]), whose records hold each
//! id's state. This folder decides; the caller does the I/O:
//!
//! - [`state`]: `TransactionState` (byte ids, names, legal predecessors) and
//!   `TransactionVersion` (Transactions V1 / V2).
//! - [`log_format`]: the `__transaction_state` record key and value, byte for byte as Kafka
//!   writes them.
//! - [`metadata`]: one transactional id's state and its transitions (prepare → write →
//!   complete).
//! - [`coordinator`]: a state machine over every transactional id of one
//!   `__transaction_state` partition, fed requests, record-append results, marker
//!   completions and timer ticks, and returning records to append, markers to write and
//!   answers, as plain data.

pub mod coordinator;
pub mod driver;
pub mod log_format;
pub mod metadata;
pub mod state;

use kaas_cluster::placement::java_string_hash;

pub use kaas_cluster::internal_topics::{TRANSACTION_STATE_PARTITIONS, TRANSACTION_STATE_TOPIC};

/// The `__transaction_state` partition of `transactional_id`: Kafka's
/// `Utils.abs(transactionalId.hashCode()) % 50`.
pub fn partition_for(transactional_id: &str) -> i32 {
    let hash = java_string_hash(transactional_id);
    // Kafka's Utils.abs maps Integer.MIN_VALUE to 0 instead of overflowing.
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % TRANSACTION_STATE_PARTITIONS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_kafkas() {
        // Computed with Kafka 4.4's `Utils.abs(id.hashCode()) % 50` ("polygenelubricants"
        // hashes to Integer.MIN_VALUE).
        assert_eq!(java_string_hash("my-txn"), -1_061_187_895);
        assert_eq!(partition_for("my-txn"), 45);
        assert_eq!(partition_for("txn-7"), 16);
        assert_eq!(partition_for("app-producer-1"), 42);
        assert_eq!(partition_for("polygenelubricants"), 0);
        assert_eq!(partition_for(""), 0);
    }
}
