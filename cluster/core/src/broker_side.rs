//! The broker's side of the cluster core: the heartbeat client to the controller the Lease
//! names, reporting the assignment this broker has applied, and the `ASSIGNMENT_CHANGED`
//! callback that nudges the broker's `FileFollower` so it re-reads the file at once rather
//! than at its next 1 s poll. The controller epochs the broker learns outside the file (the
//! push's, and the Lease's from the Lease adapter) go to [`BrokerHooks::observe_epoch`], which
//! raises the follower's epoch fence: from then on a deposed controller's files are refused,
//! even before the new controller's first file arrives.
//!
//! The core does not depend on the broker's crates: the broker hands it [`BrokerHooks`]
//! (closures), and the core polls `applied` and `fenced` a few times a second (a ping goes
//! out every second, so that is soon enough) and carries what changed into the pings: the
//! controller gives a partition its leader reports fenced a leader epoch above the claim.

use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::ids::{AssignmentVersion, ControllerEpoch, LeaderEpoch, TopicPartition};
use kaas_cluster_heartbeat::{ClientOptions, ClientState, ControllerEndpoint, HeartbeatClient};
use std::time::Instant;
use tokio::sync::watch;

/// The newest assignment the broker has applied, if any.
pub type AppliedFn = dyn Fn() -> Option<(ControllerEpoch, AssignmentVersion)> + Send;

/// The partitions the broker was given and found fenced, each with the leader epoch of the
/// claim above its own (at least).
pub type FencedFn = dyn Fn() -> Vec<(TopicPartition, LeaderEpoch)> + Send;

/// What the broker gives the cluster core.
pub struct BrokerHooks {
    /// This broker's id and advertised Kafka endpoint (what its pings carry).
    pub endpoint: BrokerEndpoint,
    /// The controller epoch and version of the newest assignment it has applied (from the
    /// follower's accepted assignments).
    pub applied: Box<AppliedFn>,
    /// The partitions it was given and could not claim, or gave up at a flush, because the
    /// storage fence holds a newer claim (from its takeover driver), with the claim's leader
    /// epoch; the pings carry them.
    pub fenced: Box<FencedFn>,
    /// Called on the controller's `ASSIGNMENT_CHANGED`; must not block (the broker nudges
    /// its `FileFollower`, which only wakes its thread).
    pub on_assignment_changed: Box<dyn Fn() + Send + Sync>,
    /// A controller of this epoch exists (the Lease shows it, or its push carried it); must
    /// not block (the broker raises its `FileFollower`'s epoch fence,
    /// `FollowerNudger::observe_epoch`). Called before `on_assignment_changed` for a push.
    pub observe_epoch: Box<dyn Fn(ControllerEpoch) + Send + Sync>,
    /// Futures the core spawns on its runtime at start (the service carrying this broker's
    /// topic changes out on the KafkaTopics); they end with the runtime.
    pub tasks: Vec<crate::sources::BoxFuture>,
}

/// The running broker side.
pub(crate) struct BrokerSide {
    client: HeartbeatClient,
    applied: Box<AppliedFn>,
    fenced: Box<FencedFn>,
    observe_epoch: std::sync::Arc<dyn Fn(ControllerEpoch) + Send + Sync>,
    reported: Option<(ControllerEpoch, AssignmentVersion)>,
    reported_fenced: Vec<(TopicPartition, LeaderEpoch)>,
    state: watch::Receiver<ClientState>,
    /// The controller endpoint a stream was last open to, and since when the stream to it
    /// has been down (`None`: open).
    stream: Option<(ControllerEndpoint, Option<Instant>)>,
}

impl BrokerSide {
    /// Starts the heartbeat client on the current tokio runtime, with no controller yet.
    pub(crate) fn start(hooks: BrokerHooks, options: ClientOptions) -> Self {
        let BrokerHooks {
            endpoint,
            applied,
            fenced,
            on_assignment_changed,
            observe_epoch,
            tasks,
        } = hooks;
        for task in tasks {
            tokio::spawn(task);
        }
        let observe_epoch: std::sync::Arc<dyn Fn(ControllerEpoch) + Send + Sync> =
            std::sync::Arc::from(observe_epoch);
        let push_epoch = observe_epoch.clone();
        let client = HeartbeatClient::spawn(endpoint, None, options, move |notice| {
            tracing::debug!(
                version = notice.version.0,
                epoch = notice.controller_epoch.0,
                "assignment changed: re-reading the file"
            );
            push_epoch(notice.controller_epoch);
            on_assignment_changed();
        });
        let client_state = client.state();
        let mut side = BrokerSide {
            client,
            applied,
            fenced,
            observe_epoch,
            reported: None,
            reported_fenced: Vec::new(),
            state: client_state,
            stream: None,
        };
        side.refresh_applied();
        side
    }

    /// The Lease names a new controller endpoint (or none).
    pub(crate) fn controller_moved(&self, endpoint: Option<ControllerEndpoint>) {
        self.client.set_controller(endpoint);
    }

    /// Waits for the heartbeat client's state to change, and returns what the stream to the
    /// controller now says, when that changed: the endpoint, and since when its stream has
    /// been down (`None`: open). A stream counts as down only once it had been open to that
    /// endpoint (a first dial that takes long is not a dead controller). Pending forever once
    /// the client is gone.
    pub(crate) async fn stream_changed(&mut self) -> (ControllerEndpoint, Option<Instant>) {
        loop {
            if self.state.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            let state = self.state.borrow_and_update().clone();
            let next = match state {
                ClientState::Connected { endpoint, .. } => Some((endpoint, None)),
                ClientState::Dialing(endpoint) => match &self.stream {
                    Some((was, None)) if *was == endpoint => Some((endpoint, Some(Instant::now()))),
                    Some((was, Some(since))) if *was == endpoint => Some((endpoint, Some(*since))),
                    _ => None,
                },
                ClientState::Waiting => None,
            };
            if let Some(next) = next {
                if self.stream.as_ref() != Some(&next) {
                    self.stream = Some(next.clone());
                    return next;
                }
            }
        }
    }

    /// The Lease was observed at `epoch`.
    pub(crate) fn lease_epoch(&self, epoch: ControllerEpoch) {
        (self.observe_epoch)(epoch);
    }

    /// Carries a newly applied assignment, and the fenced partitions, into the next pings.
    pub(crate) fn refresh_applied(&mut self) {
        let applied = (self.applied)();
        if applied != self.reported {
            if let Some((epoch, version)) = applied {
                self.client.set_applied(epoch, version);
            }
            self.reported = applied;
        }
        let fenced = (self.fenced)();
        if fenced != self.reported_fenced {
            if !fenced.is_empty() {
                tracing::info!(
                    fenced = fenced.len(),
                    "reporting fenced partitions to the controller"
                );
            }
            self.client.set_fenced(fenced.clone());
            self.reported_fenced = fenced;
        }
    }

    /// Closes the stream (the controller sees this broker depart at once).
    pub(crate) async fn stop(self) {
        self.client.stop().await;
    }
}
