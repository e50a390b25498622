//! The controller's side: a tonic server for `Heartbeat.Session` on `--heartbeat-listen`,
//! the [`StreamRegistry`](crate::stream_registry::StreamRegistry) behind a mutex, a ticker
//! that reports pings held back, and the push of `ASSIGNMENT_CHANGED` to the streams of the
//! brokers the controller names.
//!
//! Tasks (all on the tokio runtime that called [`HeartbeatServer::bind`]): the tonic server,
//! one reader per stream, and the ticker. Events are sent while the registry's lock is held,
//! on an unbounded channel, so they reach the consumer in the order the registry saw them
//! and a slow consumer never stalls a stream; the registry's reporting rules bound them to
//! about two per ping interval per broker.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kaas_cluster::ids::{AssignmentVersion, BrokerId, ControllerEpoch};
use kaas_proto::heartbeat::controller_message::Kind;
use kaas_proto::heartbeat::heartbeat_server::{Heartbeat, HeartbeatServer as HeartbeatService};
use kaas_proto::heartbeat::{AssignmentChanged, BrokerPing, ControllerMessage};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

use crate::error::HeartbeatError;
use crate::event::{BrokerStatus, HeartbeatEvent};
use crate::ping::Ping;
use crate::stream_registry::{StreamId, StreamRegistry};

/// The largest message a broker may send: a ping is under 300 bytes, plus about 260 per
/// fenced partition it reports.
const MAX_PING_BYTES: usize = 1024 * 1024;
/// Controller messages queued per stream before pushes to it are dropped (the broker's file
/// poll is the backstop for a push it missed).
const OUTBOUND_QUEUE: usize = 16;
/// Streams one connection may have open: a broker needs one.
const MAX_STREAMS_PER_CONNECTION: u32 = 4;
/// How long [`HeartbeatServer::shutdown`] waits for connections to close before cutting them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The server's timing. Whether a broker is alive is not among it: that is the
/// controller's `ControllerConfig::age_out_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerOptions {
    /// How often brokers ping (1 s): pings closer than half of it are reported together.
    pub ping_interval: Duration,
    /// A stream that sends no first ping within this long is closed (3 s).
    pub first_ping_within: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            ping_interval: Duration::from_secs(1),
            first_ping_within: Duration::from_secs(3),
        }
    }
}

/// A running heartbeat server. Dropping it stops it too, without waiting.
pub struct HeartbeatServer {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    serve: Option<JoinHandle<()>>,
    ticker: JoinHandle<()>,
}

impl HeartbeatServer {
    /// Binds `listen` and starts serving on the current tokio runtime. Returns the server and
    /// the receiver of its events, which the consumer must keep draining (it is unbounded).
    pub async fn bind(
        listen: SocketAddr,
        options: ServerOptions,
    ) -> Result<(HeartbeatServer, mpsc::UnboundedReceiver<HeartbeatEvent>), HeartbeatError> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| HeartbeatError::Bind {
                address: listen,
                source,
            })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| HeartbeatError::Bind {
                address: listen,
                source,
            })?;
        let (events, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                registry: StreamRegistry::new(options.ping_interval),
                streams: HashMap::new(),
                stopped: false,
            }),
            events,
            next_stream: AtomicU64::new(1),
            first_ping_within: options.first_ping_within,
        });
        let service = HeartbeatService::new(SessionService {
            shared: shared.clone(),
        })
        .max_decoding_message_size(MAX_PING_BYTES);
        let (shutdown, stop_serving) = oneshot::channel::<()>();
        let keepalive = options.ping_interval;
        let serve = tokio::spawn(async move {
            let result = tonic::transport::Server::builder()
                .tcp_nodelay(true)
                .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
                // Collects connections whose peer vanished without a FIN; the controller ages
                // their brokers out long before this fires.
                .http2_keepalive_interval(Some((keepalive * 5).max(Duration::from_secs(5))))
                .http2_keepalive_timeout(Some((keepalive * 10).max(Duration::from_secs(10))))
                .add_service(service)
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                    let _ = stop_serving.await;
                })
                .await;
            if let Err(error) = result {
                tracing::error!(%error, "the heartbeat server stopped");
            }
        });
        let tick_every = (options.ping_interval / 4).max(Duration::from_millis(10));
        let ticker = tokio::spawn({
            let shared = shared.clone();
            async move {
                let mut interval = tokio::time::interval(tick_every);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    interval.tick().await;
                    shared.tick(Instant::now());
                }
            }
        });
        tracing::info!(%local_addr, "heartbeat server listening");
        Ok((
            HeartbeatServer {
                local_addr,
                shared,
                shutdown: Some(shutdown),
                serve: Some(serve),
                ticker,
            },
            receiver,
        ))
    }

    /// The address bound (the port chosen when the listen port was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The brokers with an open stream, by id, as their last ping described them (a silent
    /// one included: whether it is alive is the controller's call).
    pub fn brokers(&self) -> Vec<BrokerStatus> {
        self.shared.lock().registry.brokers()
    }

    /// Sends `ASSIGNMENT_CHANGED` to the streams of `brokers` (the controller's connected
    /// brokers; those without an open stream are skipped). Returns how many streams it was
    /// queued on (a stream whose queue is full misses it; its broker's file poll picks the
    /// assignment up within a second).
    pub fn push_assignment_changed(
        &self,
        version: AssignmentVersion,
        controller_epoch: ControllerEpoch,
        brokers: &BTreeSet<BrokerId>,
    ) -> usize {
        let message = ControllerMessage {
            kind: Some(Kind::AssignmentChanged(AssignmentChanged {
                assignment_version: version.0,
                controller_epoch: controller_epoch.0,
            })),
        };
        let state = self.shared.lock();
        let mut queued = 0;
        for stream in state.registry.streams_of(brokers) {
            if let Some(handle) = state.streams.get(&stream) {
                match handle.outbound.try_send(Ok(message)) {
                    Ok(()) => queued += 1,
                    Err(_) => tracing::warn!(
                        stream = stream.0,
                        "a heartbeat stream is not reading; ASSIGNMENT_CHANGED not queued"
                    ),
                }
            }
        }
        queued
    }

    /// Stops accepting, ends every stream (reporting no stream ends: the registry goes away
    /// with the server) and waits up to two seconds for the connections to close.
    pub async fn shutdown(mut self) {
        self.stop_now();
        if let Some(serve) = self.serve.take() {
            let abort = serve.abort_handle();
            if tokio::time::timeout(SHUTDOWN_GRACE, serve).await.is_err() {
                abort.abort();
            }
        }
    }

    fn stop_now(&mut self) {
        {
            let mut state = self.shared.lock();
            state.stopped = true;
            // Dropping the handles ends every response stream and stops every reader.
            state.streams.clear();
        }
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        self.ticker.abort();
    }
}

impl Drop for HeartbeatServer {
    fn drop(&mut self) {
        self.stop_now();
        if let Some(serve) = self.serve.take() {
            serve.abort();
        }
    }
}

/// What the service, the readers and the ticker share.
struct Shared {
    state: Mutex<State>,
    events: mpsc::UnboundedSender<HeartbeatEvent>,
    next_stream: AtomicU64,
    /// A stream that sends no first ping within this long is closed.
    first_ping_within: Duration,
}

struct State {
    registry: StreamRegistry,
    streams: HashMap<StreamId, StreamHandle>,
    stopped: bool,
}

/// The server's end of one stream. Dropping it ends the response stream (once the reader
/// has let go of its sender too) and, through `stop`, the reader.
struct StreamHandle {
    outbound: mpsc::Sender<Result<ControllerMessage, Status>>,
    _stop: oneshot::Sender<()>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the registry half-updated in a way that
        // matters more than losing the heartbeat altogether would.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn emit(&self, event: HeartbeatEvent) {
        // A consumer that went away has nobody to tell; the registry still answers queries.
        let _ = self.events.send(event);
    }

    fn ping(&self, stream: StreamId, wire: &BrokerPing) -> Result<(), Status> {
        let ping = Ping::from_wire(wire).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let mut state = self.lock();
        if state.stopped {
            return Err(Status::unavailable("the heartbeat server is stopping"));
        }
        // A stream replaced by a newer one of its broker may still deliver a ping it had
        // read before its reader saw the replacement: it must not take the broker back.
        if !state.streams.contains_key(&stream) {
            return Err(Status::aborted("replaced by a newer stream of this broker"));
        }
        let outcome = state
            .registry
            .ping(stream, ping, Instant::now())
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        if let Some(replaced) = outcome.replaced {
            tracing::info!(
                stream = replaced.0,
                "a broker opened a new heartbeat stream; closing its old one"
            );
            state.streams.remove(&replaced);
        }
        if let Some(event) = outcome.event {
            self.emit(event);
        }
        Ok(())
    }

    fn stream_closed(&self, stream: StreamId) {
        let mut state = self.lock();
        state.streams.remove(&stream);
        if state.stopped {
            return;
        }
        if let Some(event) = state.registry.stream_closed(stream, Instant::now()) {
            self.emit(event);
        }
    }

    fn tick(&self, now: Instant) {
        let mut state = self.lock();
        if state.stopped {
            return;
        }
        for event in state.registry.tick(now) {
            self.emit(event);
        }
    }
}

struct SessionService {
    shared: Arc<Shared>,
}

type ControllerStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<ControllerMessage, Status>> + Send>>;

#[tonic::async_trait]
impl Heartbeat for SessionService {
    type SessionStream = ControllerStream;

    async fn session(
        &self,
        request: Request<Streaming<BrokerPing>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let stream = StreamId(self.shared.next_stream.fetch_add(1, Ordering::Relaxed));
        let (outbound, responses) = mpsc::channel(OUTBOUND_QUEUE);
        let (stop_sender, stop) = oneshot::channel();
        {
            let mut state = self.shared.lock();
            if state.stopped {
                return Err(Status::unavailable("the heartbeat server is stopping"));
            }
            state.streams.insert(
                stream,
                StreamHandle {
                    outbound: outbound.clone(),
                    _stop: stop_sender,
                },
            );
        }
        tokio::spawn(read_pings(
            self.shared.clone(),
            stream,
            request.into_inner(),
            outbound,
            stop,
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(responses))))
    }
}

/// Reads one stream's pings until it ends, breaks, sends a bad ping, or the server drops its
/// handle (replaced by a newer stream of the same broker, or shutting down).
async fn read_pings(
    shared: Arc<Shared>,
    stream: StreamId,
    mut inbound: Streaming<BrokerPing>,
    outbound: mpsc::Sender<Result<ControllerMessage, Status>>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut pinged = false;
    let first_ping_deadline = tokio::time::sleep(shared.first_ping_within);
    tokio::pin!(first_ping_deadline);
    loop {
        let next = tokio::select! {
            _ = &mut stop => break,
            next = inbound.message() => next,
            _ = &mut first_ping_deadline, if !pinged => {
                let _ = outbound.try_send(Err(Status::deadline_exceeded("no ping")));
                break;
            }
        };
        match next {
            Ok(Some(wire)) => {
                pinged = true;
                if let Err(status) = shared.ping(stream, &wire) {
                    tracing::warn!(stream = stream.0, %status, "refused a heartbeat ping");
                    let _ = outbound.try_send(Err(status));
                    break;
                }
            }
            Ok(None) => break,
            Err(status) => {
                // Tell the broker why, if it is still there (an oversized ping, for one).
                tracing::debug!(stream = stream.0, %status, "a heartbeat stream broke");
                let _ = outbound.try_send(Err(status));
                break;
            }
        }
    }
    shared.stream_closed(stream);
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_cluster::assignment::BrokerEndpoint;

    fn shared() -> (Arc<Shared>, mpsc::UnboundedReceiver<HeartbeatEvent>) {
        let options = ServerOptions::default();
        let (events, receiver) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                registry: StreamRegistry::new(options.ping_interval),
                streams: HashMap::new(),
                stopped: false,
            }),
            events,
            next_stream: AtomicU64::new(1),
            first_ping_within: options.first_ping_within,
        });
        (shared, receiver)
    }

    fn open(shared: &Shared, stream: StreamId) {
        let (outbound, _responses) = mpsc::channel(1);
        let (stop, _stopped) = oneshot::channel();
        shared.lock().streams.insert(
            stream,
            StreamHandle {
                outbound,
                _stop: stop,
            },
        );
    }

    #[test]
    fn a_replaced_streams_late_ping_does_not_take_the_broker_back() {
        let (shared, mut events) = shared();
        let ping = Ping::new(BrokerEndpoint {
            id: BrokerId(1),
            host: "127.0.0.2".into(),
            port: 9092,
        })
        .to_wire();
        let (old, new) = (StreamId(1), StreamId(2));
        open(&shared, old);
        open(&shared, new);
        shared.ping(old, &ping).expect("joins");
        shared.ping(new, &ping).expect("replaces");
        assert!(!shared.lock().streams.contains_key(&old));
        let late = shared.ping(old, &ping).expect_err("the old stream is gone");
        assert_eq!(late.code(), tonic::Code::Aborted);
        let broker: BTreeSet<BrokerId> = [BrokerId(1)].into();
        assert_eq!(shared.lock().registry.streams_of(&broker), vec![new]);
        let joins = std::iter::from_fn(|| events.try_recv().ok())
            .filter(|event| matches!(event, HeartbeatEvent::Joined(_)))
            .count();
        assert_eq!(joins, 2);
        // Its reader then ends: no stream end reported, the broker stays on the new stream.
        shared.stream_closed(old);
        assert!(events.try_recv().is_err());
        assert_eq!(shared.lock().registry.brokers().len(), 1);
    }
}
