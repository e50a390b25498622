//! What the controller asks the adapters to do. The adapters carry actions out in the order
//! given.

use std::sync::Arc;

use crate::assignment::Assignment;
use crate::balancer::BalanceError;
use crate::ids::{AssignmentVersion, ControllerEpoch};

use super::input::MonotonicMillis;

/// Why the controller stopped leading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepDownReason {
    /// The Lease was lost.
    LeaseLost,
    /// A newer controller epoch showed up (on the volume or in a broker's heartbeat).
    NewerController(ControllerEpoch),
}

/// An action for the adapters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Read the volume and answer with [`super::Input::VolumeRead`].
    ReadVolume,
    /// Record `epoch` as the highest epoch used, durably, on the volume (raise it, never
    /// lower it), then answer [`super::Input::EpochRecorded`]. Nothing is written at this
    /// epoch before.
    RecordEpoch(ControllerEpoch),
    /// Write `assignment.json` (tmp + fsync + rename + directory fsync), unless the monotonic
    /// clock has reached `not_after` just before the rename: then drop it. Answer
    /// [`super::Input::AssignmentWritten`] or [`super::Input::AssignmentNotWritten`].
    WriteAssignment {
        /// The assignment.
        assignment: Arc<Assignment>,
        /// The renew deadline it was decided under.
        not_after: MonotonicMillis,
    },
    /// Tell every connected broker `ASSIGNMENT_CHANGED` (the file is durable).
    PushAssignmentChanged {
        /// The epoch it was written at.
        epoch: ControllerEpoch,
        /// Its version.
        version: AssignmentVersion,
    },
    /// Mirror the written assignment into the `KafkaClusterAssignments` resource,
    /// fire-and-forget (nobody reads it back).
    MirrorAssignment(Arc<Assignment>),
    /// Release the Lease, re-sending its `leaseTransitions` so the epoch never rewinds.
    ReleaseLease {
        /// The epoch held.
        epoch: ControllerEpoch,
    },
    /// The Lease was acquired at an epoch not above the highest used: the controller does
    /// not lead. The adapter should take the Lease over again with `leaseTransitions` above
    /// `highest` and feed the new epoch.
    EpochRefused {
        /// The epoch acquired.
        offered: ControllerEpoch,
        /// The highest epoch known to be used.
        highest: ControllerEpoch,
    },
    /// The controller stopped leading (logs, metrics).
    SteppedDown {
        /// The epoch it led at.
        epoch: ControllerEpoch,
        /// Why.
        reason: StepDownReason,
    },
    /// No assignment could be computed; the last one stays (logs, metrics). Retried when an
    /// input changes.
    BalanceFailed(BalanceError),
}
