//! Which leader epochs a controller may choose: each controller epoch owns a range of its own.
//!
//! # The rule
//!
//! A controller at controller epoch `c` only ever *chooses* leader epochs in
//! `range(c) = [c · 2^16, (c + 1) · 2^16)`. When it gives a partition a new leader (or must
//! give it a fresh epoch), the new epoch is `max(previous + 1, floor + 1, c · 2^16)`, where
//! `previous` is the partition's epoch in the assignment the controller builds on and `floor`
//! anything higher it knows the partition had (see [`crate::balancer`]); a result at or past
//! `(c + 1) · 2^16` is refused with [`BalanceError::EpochRangeExhausted`], never wrapped or
//! clamped. A partition whose leader stays keeps its epoch: copying a (leader, epoch) pair is
//! not choosing one.
//!
//! # Why two controllers never give one partition one epoch with two leaders
//!
//! The storage fence treats an existing claim at epoch `E` as the claimer's own, so the
//! danger is two assignments that name the same partition with the same leader epoch and
//! different leaders. Such a pair can only come from two *choices* (a copied pair repeats a
//! choice with its leader), so look at who chose:
//!
//! - **Two controller epochs.** Ranges of different controller epochs do not overlap, so
//!   controllers `c ≠ c'` never choose the same number. This holds whatever either one knew:
//!   a deposed controller back from a pause that writes one more assignment at its old epoch
//!   `c`, built on a file older than the new controller's, still picks only from `range(c)`.
//! - **One controller epoch.** One epoch has one controller (the Lease gives `leaseTransitions`
//!   to one holder, and a controller refuses to lead at an epoch not above the highest used on
//!   the volume, so a restart never reuses one). It builds each assignment on its own last one,
//!   so each partition's chosen epochs strictly rise: never the same number twice.
//!
//! The ranges also make a new controller's leaders win every claim race against a stale one:
//! everything it chooses is at least `c' · 2^16`, above all that any lower controller epoch
//! chose, so its takeover claims succeed and fence the stale leader, not the other way round.
//!
//! # Budget
//!
//! Leader epochs are `i32` on the wire, so `c · 2^16` must stay at most `i32::MAX`: controller
//! epochs `0 ..= 32767` (`MAX_CONTROLLER_EPOCH`), each with 65,536 leader changes per
//! partition. A controller epoch is one Lease transition (one failover or controller
//! restart), and a change of leader is one move of that partition, so either budget lasts
//! decades at one failover an hour or one move of a partition a minute. A controller
//! past the budget refuses to balance ([`BalanceError::ControllerEpochTooLarge`]).
//!
//! Epochs written by hand (the file source of tests and operators) are outside the rule; they
//! are normally small, which is `range(0)`, and every later controller chooses above them.

use super::error::BalanceError;
use crate::ids::{ControllerEpoch, LeaderEpoch, TopicPartition};

/// Bits of a leader epoch below the controller epoch's part: each controller epoch owns
/// `2^EPOCH_BITS_PER_CONTROLLER` leader epochs.
pub const EPOCH_BITS_PER_CONTROLLER: u32 = 16;

/// The highest controller epoch whose range still fits an `i32`.
pub const MAX_CONTROLLER_EPOCH: u64 = (i32::MAX as u64) >> EPOCH_BITS_PER_CONTROLLER;

/// The leader epochs controller epoch `c` may choose: `first ..= last`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochRange {
    /// The lowest epoch of the range, `c · 2^16`.
    pub first: LeaderEpoch,
    /// The highest, `(c + 1) · 2^16 − 1`.
    pub last: LeaderEpoch,
}

impl EpochRange {
    /// The range of controller epoch `epoch`; an error beyond [`MAX_CONTROLLER_EPOCH`].
    pub fn of(epoch: ControllerEpoch) -> Result<EpochRange, BalanceError> {
        if epoch.0 > MAX_CONTROLLER_EPOCH {
            return Err(BalanceError::ControllerEpochTooLarge(epoch));
        }
        let first = (epoch.0 << EPOCH_BITS_PER_CONTROLLER) as i32;
        let last = first | ((1 << EPOCH_BITS_PER_CONTROLLER) - 1);
        Ok(EpochRange {
            first: LeaderEpoch(first),
            last: LeaderEpoch(last),
        })
    }

    /// Whether `epoch` is in the range.
    pub fn contains(&self, epoch: LeaderEpoch) -> bool {
        self.first <= epoch && epoch <= self.last
    }

    /// The epoch to give `partition` when it needs a new one: above `previous` and `floor`
    /// (either may be absent) and at least the range's first; an error past its last.
    pub fn next(
        &self,
        partition: &TopicPartition,
        previous: Option<LeaderEpoch>,
        floor: Option<LeaderEpoch>,
    ) -> Result<LeaderEpoch, BalanceError> {
        let above = previous.max(floor).map_or(i64::MIN, |e| i64::from(e.0) + 1);
        let chosen = above.max(i64::from(self.first.0));
        if chosen > i64::from(self.last.0) {
            return Err(BalanceError::EpochRangeExhausted {
                partition: partition.clone(),
                highest: previous.max(floor).unwrap_or(self.last),
                range_last: self.last,
            });
        }
        // `chosen` lies in `first ..= last`, both `i32`.
        Ok(LeaderEpoch(chosen as i32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TopicName;

    fn tp() -> TopicPartition {
        TopicPartition::new(TopicName::new("t").expect("legal"), 0)
    }

    #[test]
    fn ranges_are_disjoint_and_fill_the_i32() {
        let zero = EpochRange::of(ControllerEpoch(0)).expect("fits");
        assert_eq!(
            (zero.first, zero.last),
            (LeaderEpoch(0), LeaderEpoch(65_535))
        );
        let one = EpochRange::of(ControllerEpoch(1)).expect("fits");
        assert_eq!(one.first, LeaderEpoch(65_536));
        let top = EpochRange::of(ControllerEpoch(MAX_CONTROLLER_EPOCH)).expect("fits");
        assert_eq!(top.last, LeaderEpoch(i32::MAX));
        assert_eq!(
            EpochRange::of(ControllerEpoch(MAX_CONTROLLER_EPOCH + 1)),
            Err(BalanceError::ControllerEpochTooLarge(ControllerEpoch(
                MAX_CONTROLLER_EPOCH + 1
            )))
        );
        assert!(!zero.contains(one.first) && !one.contains(zero.last));
    }

    #[test]
    fn next_rises_above_previous_and_floor_within_the_range() {
        let range = EpochRange::of(ControllerEpoch(2)).expect("fits");
        assert_eq!(range.next(&tp(), None, None), Ok(range.first));
        assert_eq!(
            range.next(&tp(), Some(LeaderEpoch(7)), None),
            Ok(range.first)
        );
        let inside = LeaderEpoch(range.first.0 + 10);
        assert_eq!(
            range.next(&tp(), Some(inside), None),
            Ok(LeaderEpoch(inside.0 + 1))
        );
        assert_eq!(
            range.next(&tp(), Some(inside), Some(LeaderEpoch(inside.0 + 5))),
            Ok(LeaderEpoch(inside.0 + 6))
        );
        assert!(matches!(
            range.next(&tp(), Some(range.last), None),
            Err(BalanceError::EpochRangeExhausted { .. })
        ));
        let top = EpochRange::of(ControllerEpoch(MAX_CONTROLLER_EPOCH)).expect("fits");
        assert!(matches!(
            top.next(&tp(), Some(LeaderEpoch(i32::MAX)), None),
            Err(BalanceError::EpochRangeExhausted { .. })
        ));
    }
}
