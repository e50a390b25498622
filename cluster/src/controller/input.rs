//! What the adapters tell the controller. Each input is fed with the adapter's monotonic
//! clock reading ([`MonotonicMillis`]) through [`super::Controller::step`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::assignment::{Assignment, BrokerEndpoint};
use crate::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, GroupId, LeaderEpoch, TopicName, TopicPartition,
};
use crate::view::TopicInfo;

/// A reading of the adapter's monotonic clock, in milliseconds (any origin; never a wall
/// clock, which may jump).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MonotonicMillis(pub u64);

impl MonotonicMillis {
    /// `self + ms`, saturating.
    pub fn plus(self, ms: u64) -> MonotonicMillis {
        MonotonicMillis(self.0.saturating_add(ms))
    }
}

/// One ping of a broker's heartbeat stream (the heartbeat server's `Joined` and `Pinged`
/// events carry all but the last two fields).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The broker (its id, the pod's ordinal) and its advertised Kafka endpoint.
    pub broker: BrokerEndpoint,
    /// The version of the newest assignment it has applied, if any.
    pub applied_version: Option<AssignmentVersion>,
    /// The controller epoch of that assignment, when the ping carries it: a higher one than
    /// this controller's deposes it at once.
    pub applied_epoch: Option<ControllerEpoch>,
    /// Partitions it was told to lead at some epoch but found claimed on the volume at a
    /// higher one (its takeover claim failed, or a flush found the newer claim), with that
    /// claim's epoch. The broker repeats a report until an assignment gives the partition a
    /// new epoch or another leader.
    pub fenced: Vec<(TopicPartition, LeaderEpoch)>,
}

/// An input to the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The Lease adapter acquired (or took over) `kaas-controller` at `epoch` (its
    /// `leaseTransitions`, raised by every acquisition, also a re-acquisition by the same
    /// broker); it must stop writing at `renew_deadline` unless it renews first.
    LeaseAcquired {
        /// The Lease's `leaseTransitions` after the acquisition.
        epoch: ControllerEpoch,
        /// When the controller must stop writing unless renewed.
        renew_deadline: MonotonicMillis,
        /// The broker whose Lease was taken over because it expired (it stopped renewing:
        /// dead, paused or cut off). The first assignment does not wait for it to dial in,
        /// even while the EndpointSlice still calls it ready.
        expired_holder: Option<BrokerId>,
    },
    /// A renewal succeeded (same epoch); writes are allowed until the new deadline.
    LeaseRenewed {
        /// The new deadline.
        renew_deadline: MonotonicMillis,
    },
    /// The Lease is lost (a renewal failed or another holder took it).
    LeaseLost,
    /// What the volume holds: the highest controller epoch recorded there and the good
    /// `assignment.json`, if any (missing or refused files are `None`). Sent in answer to
    /// [`super::Action::ReadVolume`], and again whenever the file changes.
    VolumeRead {
        /// The highest epoch recorded on the volume.
        recorded_epoch: Option<ControllerEpoch>,
        /// The assignment file, if there is a good one.
        assignment: Option<Arc<Assignment>>,
    },
    /// The epoch asked for by [`super::Action::RecordEpoch`] is durable on the volume.
    EpochRecorded(ControllerEpoch),
    /// A broker's ping arrived.
    Heartbeat(Heartbeat),
    /// A broker's heartbeat stream broke or ended: it is gone at once. (The heartbeat
    /// server's `StreamClosed` event; a stream that stays open but silent is aged out here,
    /// by the controller's own clock.)
    StreamClosed {
        /// The broker.
        broker: BrokerId,
    },
    /// The EndpointSlice's ready brokers (endpoints matched to pods by `targetRef.name`, the
    /// pod's ordinal being the id): the whole set, each time it changes.
    EndpointsReady(BTreeSet<BrokerId>),
    /// The KafkaTopic set: every topic, each time any changes.
    TopicsChanged(BTreeMap<TopicName, TopicInfo>),
    /// Every consumer group known to exist: the whole set, each time it changes.
    GroupsKnown(BTreeSet<GroupId>),
    /// A broker asked for `__transaction_state` (the first transactional client came): the
    /// controller places it from now on (`crate::internal_topics`).
    TransactionStateRequested,
    /// The assignment of [`super::Action::WriteAssignment`] with this version is durable.
    AssignmentWritten {
        /// Its version.
        version: AssignmentVersion,
    },
    /// That write failed, or was dropped because the deadline passed; it may or may not be
    /// on the volume.
    AssignmentNotWritten {
        /// Its version.
        version: AssignmentVersion,
    },
    /// Time passed (the adapter ticks every 2 s and also whenever it likes).
    Tick,
    /// The time [`super::Controller::next_wake`] named has come: brokers whose last ping is
    /// now too old leave the alive set, and the controller acts on it at once instead of at
    /// the next tick. Unlike [`Input::Tick`] it retries nothing.
    Wake,
    /// The broker is shutting down (SIGTERM).
    Shutdown,
}
