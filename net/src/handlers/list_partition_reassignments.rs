//! ListPartitionReassignments (key 46): always empty. A kaas partition has one replica and
//! is never reassigned between brokers; Apache Kafka likewise leaves partitions without an
//! ongoing reassignment (and partitions it does not know) out of the answer, with no error.

use crate::protocol::messages::list_partition_reassignments::{
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

/// Answers ListPartitionReassignments.
pub fn handle(_request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
}
