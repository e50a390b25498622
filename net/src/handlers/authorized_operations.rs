//! The `*_authorized_operations` bit fields of Metadata and DescribeCluster.
//!
//! kaas has no authorizer, so every client may do everything. Apache Kafka without an
//! authorizer answers with every operation that applies to the resource type (checked against
//! Kafka 4.4: 3576 for a topic, 8096 for the cluster), and with `i32::MIN` when the request did
//! not ask for the field. Bit `n` stands for the `AclOperation` with code `n`.

/// The value of an authorized-operations field the client did not ask for.
pub const NOT_REQUESTED: i32 = i32::MIN;

const READ: u32 = 3;
const WRITE: u32 = 4;
const CREATE: u32 = 5;
const DELETE: u32 = 6;
const ALTER: u32 = 7;
const DESCRIBE: u32 = 8;
const CLUSTER_ACTION: u32 = 9;
const DESCRIBE_CONFIGS: u32 = 10;
const ALTER_CONFIGS: u32 = 11;
const IDEMPOTENT_WRITE: u32 = 12;

const fn bits(operations: &[u32]) -> i32 {
    let mut field = 0;
    let mut i = 0;
    while i < operations.len() {
        field |= 1 << operations[i];
        i += 1;
    }
    field
}

/// Every operation that applies to a topic.
pub const TOPIC: i32 = bits(&[
    READ,
    WRITE,
    CREATE,
    DELETE,
    ALTER,
    DESCRIBE,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
]);

/// Every operation that applies to the cluster.
pub const CLUSTER: i32 = bits(&[
    CREATE,
    ALTER,
    DESCRIBE,
    CLUSTER_ACTION,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    IDEMPOTENT_WRITE,
]);

/// A topic's field: every operation when `requested`, else [`NOT_REQUESTED`].
pub fn topic(requested: bool) -> i32 {
    if requested {
        TOPIC
    } else {
        NOT_REQUESTED
    }
}

/// The cluster's field: every operation when `requested`, else [`NOT_REQUESTED`].
pub fn cluster(requested: bool) -> i32 {
    if requested {
        CLUSTER
    } else {
        NOT_REQUESTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_sets_are_those_apache_kafka_returns_without_an_authorizer() {
        assert_eq!(TOPIC, 3576);
        assert_eq!(CLUSTER, 8096);
        assert_eq!(topic(false), -2147483648);
        assert_eq!(cluster(false), -2147483648);
    }
}
