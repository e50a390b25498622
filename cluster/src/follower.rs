//! `apply_if_new`: the rule by which a broker follows assignments. It holds the highest
//! controller epoch it has seen and the assignment it applied last, and applies a new
//! assignment only if
//!
//! - its `controller_epoch` is at least the highest seen (a deposed controller, back from a
//!   pause, cannot roll the cluster back), **and**
//! - its `(controller_epoch, assignment_version)` is above the current assignment's, compared
//!   epoch first: a file of a higher controller epoch is newer whatever its version, and within
//!   one epoch the version must rise (a replayed or older file changes nothing).
//!
//! Versions are ordered within an epoch only. A new controller continues from the highest
//! version it has seen, so versions keep rising across controllers as operators read them,
//! but that is not what makes a file newer: a deposed controller, paused after its last check,
//! and its successor can both write version N, and a broker that applied the stale `(c, N)`
//! must still apply the new controller's `(c + 1, N)`.
//!
//! A good file of a higher epoch raises the epoch fence even when it is not applied (it
//! proves that a controller of that epoch exists): afterwards the older controller's files are
//! refused. A file that does not parse raises nothing; its epoch is not to be trusted.
//!
//! The epoch fence can also be raised from outside ([`AssignmentFollower::observe_epoch`]),
//! for example from the Lease once the controller's heartbeat carries it.

use std::sync::Arc;

use crate::assignment::{Assignment, AssignmentError};
use crate::ids::{AssignmentVersion, ControllerEpoch};

/// A broker's follower state.
#[derive(Clone, Debug, Default)]
pub struct AssignmentFollower {
    highest_epoch: Option<ControllerEpoch>,
    current: Option<Arc<Assignment>>,
}

/// Why an assignment was not applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// Written by a controller older than one already seen.
    #[error("controller epoch {offered:?} is below the highest seen, {highest:?}")]
    StaleEpoch {
        /// The file's epoch.
        offered: ControllerEpoch,
        /// The highest epoch seen.
        highest: ControllerEpoch,
    },
    /// Of the current assignment's controller epoch, with a version not above its (a
    /// replay, or an older file).
    #[error(
        "assignment version {offered:?} is not newer than the current {current:?} of controller epoch {epoch:?}"
    )]
    NotNewer {
        /// The epoch of both.
        epoch: ControllerEpoch,
        /// The file's version.
        offered: AssignmentVersion,
        /// The current assignment's version.
        current: AssignmentVersion,
    },
}

/// What became of bytes offered to the follower.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Applied: this is now the current assignment.
    Applied(Arc<Assignment>),
    /// A good file, but not newer.
    Rejected(Rejection),
    /// Not a good file (torn, not JSON, inconsistent).
    Malformed(AssignmentError),
}

impl AssignmentFollower {
    /// A follower that has seen nothing.
    pub fn new() -> Self {
        AssignmentFollower::default()
    }

    /// The assignment applied last.
    pub fn current(&self) -> Option<&Arc<Assignment>> {
        self.current.as_ref()
    }

    /// The highest controller epoch seen.
    pub fn highest_epoch(&self) -> Option<ControllerEpoch> {
        self.highest_epoch
    }

    /// Raises the epoch fence to `epoch` (never lowers it).
    pub fn observe_epoch(&mut self, epoch: ControllerEpoch) {
        self.highest_epoch = self.highest_epoch.max(Some(epoch));
    }

    /// Applies `assignment` if it is new (see the module doc); returns the now-current one.
    pub fn apply_if_new(&mut self, assignment: Assignment) -> Result<Arc<Assignment>, Rejection> {
        let offered_epoch = assignment.controller_epoch();
        if let Some(highest) = self.highest_epoch {
            if offered_epoch < highest {
                return Err(Rejection::StaleEpoch {
                    offered: offered_epoch,
                    highest,
                });
            }
        }
        self.observe_epoch(offered_epoch);
        if let Some(current) = &self.current {
            // The fence is at least the current epoch, so the offered one is too: equal, or
            // above and newer whatever its version.
            if offered_epoch == current.controller_epoch()
                && assignment.version() <= current.version()
            {
                return Err(Rejection::NotNewer {
                    epoch: offered_epoch,
                    offered: assignment.version(),
                    current: current.version(),
                });
            }
        }
        let applied = Arc::new(assignment);
        self.current = Some(applied.clone());
        Ok(applied)
    }

    /// Parses `bytes` as an `assignment.json` and applies it if it is good and new.
    pub fn offer(&mut self, bytes: &[u8]) -> Offer {
        match Assignment::from_json(bytes) {
            Err(error) => Offer::Malformed(error),
            Ok(assignment) => match self.apply_if_new(assignment) {
                Ok(applied) => Offer::Applied(applied),
                Err(rejection) => Offer::Rejected(rejection),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assignment::AssignmentFile;

    fn assignment(epoch: u64, version: u64) -> Assignment {
        Assignment::try_from(AssignmentFile {
            format: 1,
            controller_epoch: epoch,
            assignment_version: version,
            brokers: Vec::new(),
            topics: Default::default(),
            partitions: Default::default(),
            consumer_groups: Default::default(),
        })
        .expect("an empty assignment is consistent")
    }

    #[test]
    fn applies_only_newer_versions_from_current_or_newer_epochs() {
        let mut follower = AssignmentFollower::new();
        assert!(follower.apply_if_new(assignment(3, 17)).is_ok());
        assert_eq!(
            follower.apply_if_new(assignment(3, 17)),
            Err(Rejection::NotNewer {
                epoch: ControllerEpoch(3),
                offered: AssignmentVersion(17),
                current: AssignmentVersion(17)
            })
        );
        assert!(follower.apply_if_new(assignment(3, 18)).is_ok());
        assert_eq!(
            follower.apply_if_new(assignment(2, 99)),
            Err(Rejection::StaleEpoch {
                offered: ControllerEpoch(2),
                highest: ControllerEpoch(3)
            })
        );
        assert!(follower.apply_if_new(assignment(4, 19)).is_ok());
        assert_eq!(
            follower.current().map(|a| a.version()),
            Some(AssignmentVersion(19))
        );
    }

    #[test]
    fn a_higher_epoch_is_newer_whatever_its_version_and_fences_the_old_epoch() {
        let mut follower = AssignmentFollower::new();
        assert!(follower.apply_if_new(assignment(3, 17)).is_ok());
        // A deposed controller's (3, 17) and its successor's (4, 17): the successor's wins.
        assert!(follower.apply_if_new(assignment(4, 17)).is_ok());
        assert_eq!(follower.highest_epoch(), Some(ControllerEpoch(4)));
        assert!(matches!(
            follower.apply_if_new(assignment(3, 18)),
            Err(Rejection::StaleEpoch { .. })
        ));
        // Even a lower version, from a controller that did not see the highest one.
        assert!(follower.apply_if_new(assignment(5, 10)).is_ok());
        assert!(matches!(
            follower.apply_if_new(assignment(5, 10)),
            Err(Rejection::NotNewer { .. })
        ));
        assert!(follower.apply_if_new(assignment(5, 11)).is_ok());
        assert_eq!(
            follower
                .current()
                .map(|a| (a.controller_epoch(), a.version())),
            Some((ControllerEpoch(5), AssignmentVersion(11)))
        );
    }

    #[test]
    fn malformed_bytes_change_nothing() {
        let mut follower = AssignmentFollower::new();
        let good = assignment(5, 1).to_json();
        assert!(matches!(
            follower.offer(&good[..good.len() / 2]),
            Offer::Malformed(AssignmentError::Truncated(_))
        ));
        assert_eq!(follower.highest_epoch(), None);
        assert!(matches!(follower.offer(&good), Offer::Applied(_)));
    }

    #[test]
    fn an_observed_epoch_fences_older_files() {
        let mut follower = AssignmentFollower::new();
        follower.observe_epoch(ControllerEpoch(7));
        follower.observe_epoch(ControllerEpoch(2));
        assert_eq!(follower.highest_epoch(), Some(ControllerEpoch(7)));
        assert!(follower.apply_if_new(assignment(6, 100)).is_err());
        assert!(follower.apply_if_new(assignment(7, 1)).is_ok());
    }

    #[test]
    fn an_observed_epoch_above_the_current_lets_that_epochs_first_file_in() {
        let mut follower = AssignmentFollower::new();
        assert!(follower.apply_if_new(assignment(3, 20)).is_ok());
        follower.observe_epoch(ControllerEpoch(4));
        assert!(matches!(
            follower.apply_if_new(assignment(3, 21)),
            Err(Rejection::StaleEpoch { .. })
        ));
        assert!(follower.apply_if_new(assignment(4, 20)).is_ok());
    }
}
