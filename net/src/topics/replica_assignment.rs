//! Manual replica assignments (CreateTopics `assignments`, CreatePartitions `assignments`),
//! checked as Kafka's controller checks them. kaas keeps no replicas (durability is the shared
//! volume's): an assignment that names only registered brokers is accepted and the partition
//! is led by this broker, which Metadata reports as its only replica.

use crate::protocol::ErrorCode;
use crate::topics::checks::TopicError;

fn refused(message: String) -> TopicError {
    TopicError {
        code: ErrorCode::InvalidReplicaAssignment,
        message,
    }
}

/// Checks the replica lists of new partitions against the registered `brokers`.
pub fn check_replicas<'a>(
    replica_lists: impl IntoIterator<Item = &'a [i32]>,
    brokers: &[i32],
) -> Result<(), TopicError> {
    let mut first_size = None;
    for replicas in replica_lists {
        if replicas.is_empty() {
            return Err(refused(
                "The manual partition assignment includes an empty replica list.".into(),
            ));
        }
        for (i, broker) in replicas.iter().enumerate() {
            if replicas[..i].contains(broker) {
                return Err(refused(format!(
                    "The manual partition assignment includes the broker {broker} more than once."
                )));
            }
            if !brokers.contains(broker) {
                return Err(refused(format!(
                    "The manual partition assignment includes broker {broker}, but no such broker is registered."
                )));
            }
        }
        match first_size {
            None => first_size = Some(replicas.len()),
            Some(size) if size != replicas.len() => {
                return Err(TopicError {
                    code: ErrorCode::InvalidReplicationFactor,
                    message: format!(
                        "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {size} replica(s).",
                        replicas.len()
                    ),
                });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Checks a CreateTopics assignment (partition index, replicas) and returns the partition
/// count it means.
pub fn check_topic_assignment(
    assignments: &[(i32, Vec<i32>)],
    brokers: &[i32],
) -> Result<i32, TopicError> {
    check_replicas(assignments.iter().map(|(_, r)| r.as_slice()), brokers)?;
    let mut indexes: Vec<i32> = assignments.iter().map(|(index, _)| *index).collect();
    indexes.sort_unstable();
    if indexes
        .iter()
        .enumerate()
        .any(|(i, index)| i64::from(*index) != i as i64)
    {
        return Err(refused(
            "partitions should be a consecutive 0-based integer sequence".into(),
        ));
    }
    i32::try_from(assignments.len())
        .map_err(|_| refused("too many partitions in the assignment".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assignments_naming_registered_brokers_are_accepted() {
        assert_eq!(
            check_topic_assignment(&[(1, vec![0]), (0, vec![0])], &[0]),
            Ok(2)
        );
        let refused = |a: &[(i32, Vec<i32>)]| check_topic_assignment(a, &[0]).expect_err("refused");
        let unknown = refused(&[(0, vec![7])]);
        assert_eq!(unknown.code, ErrorCode::InvalidReplicaAssignment);
        assert_eq!(
            unknown.message,
            "The manual partition assignment includes broker 7, but no such broker is registered."
        );
        assert_eq!(
            refused(&[(0, vec![0, 0])]).code,
            ErrorCode::InvalidReplicaAssignment
        );
        assert_eq!(
            refused(&[(0, vec![])]).code,
            ErrorCode::InvalidReplicaAssignment
        );
        assert_eq!(
            refused(&[(0, vec![0]), (2, vec![0])]).message,
            "partitions should be a consecutive 0-based integer sequence"
        );
        assert_eq!(
            check_replicas([&[0][..], &[0, 1][..]], &[0, 1])
                .expect_err("refused")
                .code,
            ErrorCode::InvalidReplicationFactor
        );
    }
}
