//! What the cluster core learns from outside the volume and the heartbeat: the controller
//! Lease, the EndpointSlice's ready brokers and the KafkaTopic set; and where it mirrors the
//! assignments it writes (optional). The Kubernetes adapters implement these traits; tests
//! implement them with in-process fakes. Each source is handed
//! to the core thread and started there ([`LeaseSource::start`] and the others), on the
//! core's tokio runtime, and reports through an unbounded channel the core keeps draining.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::{BrokerId, ControllerEpoch, TopicName};
use kaas_cluster::view::TopicInfo;
use kaas_cluster_heartbeat::ControllerEndpoint;
use tokio::sync::mpsc;

/// A future the core awaits (releasing the Lease on shut-down).
pub type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// What the Lease adapter reports, in the order it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseEvent {
    /// This broker acquired (or took over) the Lease; `epoch` is its `leaseTransitions`
    /// after the acquisition (raised by every acquisition). Writes must stop at
    /// `renew_deadline` unless a renewal comes first.
    Acquired {
        /// The Lease's `leaseTransitions`.
        epoch: ControllerEpoch,
        /// When this broker must stop writing unless renewed (monotonic).
        renew_deadline: Instant,
        /// The broker whose Lease this one took over because it had expired (it did not
        /// renew for a lease duration); `None` when the Lease was free, released, or this
        /// broker's own. The new controller does not wait for it to dial in.
        expired_holder: Option<BrokerId>,
    },
    /// A renewal succeeded; writes are allowed until the new deadline.
    Renewed {
        /// The new deadline (monotonic).
        renew_deadline: Instant,
    },
    /// This broker no longer holds the Lease (a renewal failed or another took it).
    Lost,
    /// The heartbeat endpoint the Lease's current holder publishes (its annotation), this
    /// broker's own included; `None` while nobody holds it. Every broker's heartbeat client
    /// dials it.
    Holder(Option<ControllerEndpoint>),
    /// The Lease was observed at this epoch (its `leaseTransitions`), above any reported
    /// before: a controller of this epoch holds or held it. The broker raises its follower's
    /// epoch fence with it.
    Epoch(ControllerEpoch),
}

/// The `kaas-controller` Lease: election, renewal and the controller's published endpoint.
pub trait LeaseSource: Send + 'static {
    /// Starts campaigning and watching on the current tokio runtime. `heartbeat` is this
    /// broker's heartbeat endpoint, to publish on the Lease while it holds it.
    fn start(&mut self, heartbeat: ControllerEndpoint) -> mpsc::UnboundedReceiver<LeaseEvent>;

    /// The controller refused the epoch acquired: take the Lease over again with
    /// `leaseTransitions` above `highest`, and report the new acquisition.
    fn take_over_above(&mut self, highest: ControllerEpoch);

    /// Release the Lease held at `epoch` now (shut-down or stepping down), re-sending its
    /// `leaseTransitions` so the epoch never rewinds. The core awaits the future (bounded by
    /// its own timeout) before it stops.
    fn release(&mut self, epoch: ControllerEpoch) -> BoxFuture;

    /// This broker's heartbeat stream to the controller at `endpoint` has been down since
    /// `down_since` (broken, or redialing after it broke; `None`: open again). With
    /// [`LeaseSource::ready_brokers`] it tells the campaign when the holder is dead, so it
    /// takes the Lease over before it expires. Sources that do not campaign ignore it.
    fn holder_stream(&mut self, endpoint: ControllerEndpoint, down_since: Option<Instant>) {
        let _ = (endpoint, down_since);
    }

    /// The EndpointSlice's ready brokers (a holder not among them is dead once its stream is
    /// down).
    fn ready_brokers(&mut self, ready: BTreeSet<BrokerId>) {
        let _ = ready;
    }
}

/// The EndpointSlice of the brokers' Service: the ready brokers' ids.
pub trait EndpointSource: Send + 'static {
    /// Starts watching on the current tokio runtime; each message is the whole ready set.
    fn start(&mut self) -> mpsc::UnboundedReceiver<BTreeSet<BrokerId>>;
}

/// The KafkaTopic resources: the cluster's topics.
pub trait TopicSource: Send + 'static {
    /// Starts watching on the current tokio runtime; each message is the whole topic set.
    fn start(&mut self) -> mpsc::UnboundedReceiver<BTreeMap<TopicName, TopicInfo>>;
}

/// A copy of each assignment the controller writes, for people (`kubectl get
/// kafkaclusterassignments`); nobody reads it back. Fire-and-forget: `publish` must return
/// at once and never fail, the sink logs its own failures.
pub trait MirrorSink: Send + 'static {
    /// Starts the sink on the current tokio runtime.
    fn start(&mut self);

    /// Hands over the assignment just written (a newer one may replace it unsent).
    fn publish(&mut self, assignment: &Assignment);
}

/// The three sources the controller loop takes its outside inputs from, and the mirror.
pub struct Sources {
    /// The Lease.
    pub lease: Box<dyn LeaseSource>,
    /// The EndpointSlice.
    pub endpoints: Box<dyn EndpointSource>,
    /// The KafkaTopics.
    pub topics: Box<dyn TopicSource>,
    /// Where written assignments are mirrored; `None` mirrors nothing.
    pub mirror: Option<Box<dyn MirrorSink>>,
}
