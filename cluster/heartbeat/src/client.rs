//! The broker's side: one task on the cluster core's tokio runtime that keeps exactly one
//! `Heartbeat.Session` stream open to the controller, pings on it every interval, and calls
//! back on `ASSIGNMENT_CHANGED`.
//!
//! The controller's endpoint is an input ([`HeartbeatClient::set_controller`]): the cluster
//! core reads it from the Lease annotation and sets it whenever it changes; the client then
//! drops its stream and dials the new endpoint at once. A failed dial or a stream that ends
//! or breaks is redialed after a [`Backoff`] delay (reset once a stream has been opened).
//! While no endpoint is known the client waits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::ids::{AssignmentVersion, ControllerEpoch, LeaderEpoch, TopicPartition};
use kaas_proto::heartbeat::controller_message::Kind;
use kaas_proto::heartbeat::heartbeat_client::HeartbeatClient as HeartbeatStub;
use kaas_proto::heartbeat::{BrokerPing, ControllerMessage};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;

use crate::backoff::Backoff;
use crate::controller_endpoint::ControllerEndpoint;
use crate::ping::Ping;

/// The largest message accepted from the controller.
const MAX_CONTROLLER_MESSAGE_BYTES: usize = 64 * 1024;
/// Pings queued for sending; when the connection cannot take them, later pings are skipped
/// (a ping is only a sign of life, a newer one replaces an older one).
const PING_QUEUE: usize = 4;

/// Timing of the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// How often to ping (1 s; the controller's `ServerOptions::ping_interval` must match).
    pub ping_interval: Duration,
    /// First redial delay (100 ms).
    pub redial_first: Duration,
    /// Longest redial delay (5 s).
    pub redial_cap: Duration,
    /// How long one dial may take (3 s).
    pub connect_timeout: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            ping_interval: Duration::from_secs(1),
            redial_first: Duration::from_millis(100),
            redial_cap: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(3),
        }
    }
}

/// The controller's `ASSIGNMENT_CHANGED`: a new `assignment.json` is on the volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AssignmentChangedNotice {
    /// The version written.
    pub version: AssignmentVersion,
    /// The epoch of the controller that wrote it.
    pub controller_epoch: ControllerEpoch,
}

/// Where the client is, for logs, `/healthz` and tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientState {
    /// No controller endpoint is known.
    Waiting,
    /// Dialing (or waiting to redial) this endpoint.
    Dialing(ControllerEndpoint),
    /// A stream is open to this endpoint; `stream` counts the streams this client opened
    /// (1 for the first), so a redial shows as a new number.
    Connected {
        /// The controller's endpoint.
        endpoint: ControllerEndpoint,
        /// Which stream this is.
        stream: u64,
    },
}

/// A running heartbeat client. Dropping it stops it (the stream closes, which the controller
/// takes as this broker's departure).
pub struct HeartbeatClient {
    controller: watch::Sender<Option<ControllerEndpoint>>,
    report: Arc<Mutex<Ping>>,
    paused: Arc<AtomicBool>,
    state: watch::Receiver<ClientState>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl HeartbeatClient {
    /// Starts the client on the current tokio runtime for `broker` (its id and advertised
    /// Kafka endpoint), dialing `controller` if known. `on_assignment_changed` runs on the
    /// client's task for every `ASSIGNMENT_CHANGED`: it must not block (the broker's nudges
    /// its `FileFollower`, which only wakes a thread).
    pub fn spawn<F>(
        broker: BrokerEndpoint,
        controller: Option<ControllerEndpoint>,
        options: ClientOptions,
        on_assignment_changed: F,
    ) -> HeartbeatClient
    where
        F: Fn(AssignmentChangedNotice) + Send + Sync + 'static,
    {
        let (controller_sender, controller_receiver) = watch::channel(controller);
        let (state_sender, state) = watch::channel(ClientState::Waiting);
        let (stop, stopped) = oneshot::channel();
        let report = Arc::new(Mutex::new(Ping::new(broker)));
        let paused = Arc::new(AtomicBool::new(false));
        let session = Session {
            options,
            report: report.clone(),
            paused: paused.clone(),
            on_assignment_changed: Box::new(on_assignment_changed),
            state: state_sender,
            streams_opened: 0,
        };
        let task = tokio::spawn(session.run(controller_receiver, stopped));
        HeartbeatClient {
            controller: controller_sender,
            report,
            paused,
            state,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// The controller's endpoint changed (or became known, or unknown): drop the stream and
    /// dial the new one at once. Setting the endpoint already in use changes nothing.
    pub fn set_controller(&self, endpoint: Option<ControllerEndpoint>) {
        self.controller.send_if_modified(|current| {
            let changed = *current != endpoint;
            *current = endpoint;
            changed
        });
    }

    /// The newest assignment this broker has applied (its controller epoch and version);
    /// the next pings carry it.
    pub fn set_applied(&self, epoch: ControllerEpoch, version: AssignmentVersion) {
        lock(&self.report).applied = Some((epoch, version));
    }

    /// The partitions this broker found claimed on the volume at a higher leader epoch than
    /// it was told to lead them at (with that epoch); the next pings carry them, replacing
    /// the previous list.
    pub fn set_fenced(&self, fenced: Vec<(TopicPartition, LeaderEpoch)>) {
        lock(&self.report).fenced = fenced;
    }

    /// Stops (or resumes) pinging while keeping the stream open, as a paused process would:
    /// for fault-injection tests of the controller's age-out.
    pub fn set_pings_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    /// Where the client is now, and a way to wait for changes.
    pub fn state(&self) -> watch::Receiver<ClientState> {
        self.state.clone()
    }

    /// Stops the client and waits for its task to end (the stream is closed by then).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for HeartbeatClient {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Why one stream's life ended.
enum StreamEnd {
    /// The client was stopped.
    Stopped,
    /// A new endpoint was set: dial it at once.
    EndpointChanged,
    /// The dial failed, or the stream ended or broke; `opened` says whether a stream had
    /// been opened (then the backoff starts over).
    Failed { opened: bool },
}

/// The ping's contents are plain values: a panic elsewhere cannot leave them half-written in
/// a way worth refusing to ping over.
fn lock(report: &Mutex<Ping>) -> std::sync::MutexGuard<'_, Ping> {
    report
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Session {
    options: ClientOptions,
    report: Arc<Mutex<Ping>>,
    paused: Arc<AtomicBool>,
    on_assignment_changed: Box<dyn Fn(AssignmentChangedNotice) + Send + Sync>,
    state: watch::Sender<ClientState>,
    streams_opened: u64,
}

impl Session {
    async fn run(
        mut self,
        mut controller: watch::Receiver<Option<ControllerEndpoint>>,
        mut stopped: oneshot::Receiver<()>,
    ) {
        let mut backoff = Backoff::new(self.options.redial_first, self.options.redial_cap);
        loop {
            let endpoint = controller.borrow_and_update().clone();
            let Some(endpoint) = endpoint else {
                self.state.send_replace(ClientState::Waiting);
                tokio::select! {
                    _ = &mut stopped => return,
                    changed = controller.changed() => {
                        if changed.is_err() {
                            return;
                        }
                        continue;
                    }
                }
            };
            self.state
                .send_replace(ClientState::Dialing(endpoint.clone()));
            let end = tokio::select! {
                _ = &mut stopped => StreamEnd::Stopped,
                changed = controller.changed() => match changed {
                    Ok(()) => StreamEnd::EndpointChanged,
                    Err(_) => StreamEnd::Stopped,
                },
                end = self.stream(&endpoint) => end,
            };
            match end {
                StreamEnd::Stopped => return,
                StreamEnd::EndpointChanged => backoff.reset(),
                StreamEnd::Failed { opened } => {
                    if opened {
                        backoff.reset();
                    }
                    let delay = backoff.next_delay();
                    self.state
                        .send_replace(ClientState::Dialing(endpoint.clone()));
                    tracing::debug!(%endpoint, ?delay, "heartbeat stream lost; redialing");
                    tokio::select! {
                        _ = &mut stopped => return,
                        // A new endpoint is dialed at once; the loop reads it.
                        _ = controller.changed() => {}
                        _ = tokio::time::sleep(delay) => {}
                    }
                }
            }
        }
    }

    fn ping(&self) -> BrokerPing {
        lock(&self.report).to_wire()
    }

    /// Dials `endpoint`, opens the stream and serves it until it ends.
    async fn stream(&mut self, endpoint: &ControllerEndpoint) -> StreamEnd {
        let failed = StreamEnd::Failed { opened: false };
        let channel = match tonic::transport::Endpoint::from_shared(endpoint.uri()) {
            Ok(channel) => channel,
            Err(error) => {
                tracing::warn!(%endpoint, %error, "unusable heartbeat endpoint");
                return failed;
            }
        };
        let interval = self.options.ping_interval;
        let channel = channel
            .connect_timeout(self.options.connect_timeout)
            .tcp_nodelay(true)
            // Notices a controller that stopped answering without closing the connection (a
            // paused process, a host that vanished; one that dies closes it) within 3 s: the
            // broker's Lease campaign then counts it as dead and takes the Lease over early.
            // The floors keep a busy machine's late timers from cutting a healthy stream too
            // often; a stream cut wrongly is redialed at once.
            .http2_keep_alive_interval(interval.max(Duration::from_secs(1)))
            .keep_alive_timeout((interval * 2).max(Duration::from_secs(2)))
            .keep_alive_while_idle(true);
        let channel = match channel.connect().await {
            Ok(channel) => channel,
            Err(error) => {
                tracing::debug!(%endpoint, %error, "dialing the controller failed");
                return failed;
            }
        };
        let (pings, outbound) = mpsc::channel(PING_QUEUE);
        // The first ping goes out with the stream's headers: the controller learns of this
        // broker without waiting an interval.
        let _ = pings.try_send(self.ping());
        let mut stub =
            HeartbeatStub::new(channel).max_decoding_message_size(MAX_CONTROLLER_MESSAGE_BYTES);
        let mut inbound = match stub.session(ReceiverStream::new(outbound)).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                tracing::debug!(%endpoint, %status, "the controller refused the stream");
                return failed;
            }
        };
        self.streams_opened += 1;
        self.state.send_replace(ClientState::Connected {
            endpoint: endpoint.clone(),
            stream: self.streams_opened,
        });
        tracing::info!(%endpoint, "heartbeat stream open");
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => {
                    if !self.paused.load(Ordering::Relaxed) {
                        // A full queue means the connection is stuck; the keep-alive ends it.
                        let _ = pings.try_send(self.ping());
                    }
                }
                message = inbound.message() => match message {
                    Ok(Some(message)) => self.handle(message),
                    Ok(None) => {
                        tracing::info!(%endpoint, "the controller ended the heartbeat stream");
                        return StreamEnd::Failed { opened: true };
                    }
                    Err(status) => {
                        tracing::info!(%endpoint, %status, "the heartbeat stream broke");
                        return StreamEnd::Failed { opened: true };
                    }
                },
            }
        }
    }

    fn handle(&self, message: ControllerMessage) {
        match message.kind {
            Some(Kind::AssignmentChanged(changed)) => {
                (self.on_assignment_changed)(AssignmentChangedNotice {
                    version: AssignmentVersion(changed.assignment_version),
                    controller_epoch: ControllerEpoch(changed.controller_epoch),
                });
            }
            // A kind this build does not know: nothing to do.
            None => {}
        }
    }
}
