//! Why the balancer could not compute an assignment. The controller then keeps the last one
//! it wrote and reports the error; nothing is written.

use crate::assignment::AssignmentError;
use crate::ids::{AssignmentVersion, ControllerEpoch, LeaderEpoch, TopicPartition};

/// A refused balance.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BalanceError {
    /// No alive broker to give anything to.
    #[error("no alive brokers: an assignment needs at least one")]
    NoBrokers,
    /// The controller epoch is too large for its leader epochs to fit an `i32`.
    #[error("controller epoch {0:?} is beyond the last one whose leader epochs fit an i32")]
    ControllerEpochTooLarge(ControllerEpoch),
    /// A partition needs a new leader epoch but its range is used up (or it already had one
    /// at or above the range's end).
    #[error(
        "{partition} needs a leader epoch above {highest:?}, past this controller's last, {range_last:?}"
    )]
    EpochRangeExhausted {
        /// The partition.
        partition: TopicPartition,
        /// The epoch the new one must exceed.
        highest: LeaderEpoch,
        /// The last epoch this controller epoch may choose.
        range_last: LeaderEpoch,
    },
    /// The next version would not fit a `u64`.
    #[error("assignment version {0:?} has no successor")]
    VersionExhausted(AssignmentVersion),
    /// The inputs describe something the file cannot hold (a topic with no partitions, two
    /// topics with one id, an unusable broker endpoint).
    #[error("the computed assignment is not valid: {0}")]
    Invalid(#[from] AssignmentError),
}
