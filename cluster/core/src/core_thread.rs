//! Starting and stopping the cluster core's thread (`kaas-cluster-core`): a current-thread
//! tokio runtime that binds the heartbeat server, starts the sources and the broker's
//! heartbeat client, and runs the [`ControllerLoop`](crate::controller_loop) until stopped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kaas_cluster::controller::{Controller, ControllerConfig};
use kaas_cluster_heartbeat::{
    ClientOptions, ControllerEndpoint, HeartbeatError, HeartbeatServer, ServerOptions,
};
use tokio::sync::oneshot;

use crate::broker_side::{BrokerHooks, BrokerSide};
use crate::clock::Clock;
use crate::controller_loop::{ControllerLoop, Inlets, TICK};
use crate::sources::Sources;
use crate::volume::Volume;

/// How the core runs.
#[derive(Clone, Debug)]
pub struct CoreOptions {
    /// `<data>/__cluster`.
    pub cluster_dir: PathBuf,
    /// Where the heartbeat server binds (`--heartbeat-listen`).
    pub heartbeat_listen: SocketAddr,
    /// The host brokers dial this broker's heartbeat server at (its advertised host); the
    /// port is the one bound. Published on the Lease while this broker holds it.
    pub heartbeat_host: String,
    /// The heartbeat server's timing.
    pub server: ServerOptions,
    /// The heartbeat client's timing.
    pub client: ClientOptions,
    /// The controller's age-out and start-up grace.
    pub controller: ControllerConfig,
    /// How often the controller ticks (2 s).
    pub tick: Duration,
}

impl CoreOptions {
    /// The defaults for a cluster directory, a listen address and an advertised host.
    pub fn new(cluster_dir: &Path, heartbeat_listen: SocketAddr, heartbeat_host: &str) -> Self {
        CoreOptions {
            cluster_dir: cluster_dir.to_path_buf(),
            heartbeat_listen,
            heartbeat_host: heartbeat_host.to_string(),
            server: ServerOptions::default(),
            client: ClientOptions::default(),
            controller: ControllerConfig::default(),
            tick: TICK,
        }
    }
}

/// Why the core did not start.
#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    /// The thread or its runtime could not be created.
    #[error("starting the cluster core thread: {0}")]
    Thread(#[from] std::io::Error),
    /// The heartbeat server could not bind.
    #[error(transparent)]
    Heartbeat(#[from] HeartbeatError),
    /// The thread ended before it reported.
    #[error("the cluster core thread stopped during start-up")]
    Vanished,
}

/// The running cluster core. Dropping it stops it like [`ClusterCore::shutdown`].
pub struct ClusterCore {
    heartbeat_addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ClusterCore {
    /// Starts the thread and returns once the heartbeat server listens (or failed to).
    pub fn spawn(
        options: CoreOptions,
        sources: Sources,
        broker: BrokerHooks,
    ) -> Result<ClusterCore, CoreError> {
        let (ready_sender, ready) = std::sync::mpsc::channel();
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("kaas-cluster-core".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(error) => {
                        let _ = ready_sender.send(Err(CoreError::Thread(error)));
                        return;
                    }
                };
                runtime.block_on(run(options, sources, broker, ready_sender, stopped));
            })?;
        match ready.recv() {
            Ok(Ok(heartbeat_addr)) => Ok(ClusterCore {
                heartbeat_addr,
                stop: Some(stop),
                thread: Some(thread),
            }),
            Ok(Err(error)) => {
                let _ = thread.join();
                Err(error)
            }
            Err(_) => {
                let _ = thread.join();
                Err(CoreError::Vanished)
            }
        }
    }

    /// The address the heartbeat server bound.
    pub fn heartbeat_addr(&self) -> SocketAddr {
        self.heartbeat_addr
    }

    /// Stops the core: releases the Lease if this broker leads, closes its heartbeat stream,
    /// stops the heartbeat server, and waits for the thread.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ClusterCore {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

async fn run(
    options: CoreOptions,
    mut sources: Sources,
    broker: BrokerHooks,
    ready: std::sync::mpsc::Sender<Result<SocketAddr, CoreError>>,
    stopped: oneshot::Receiver<()>,
) {
    let clock = Clock::new(Instant::now());
    let (server, heartbeats) =
        match HeartbeatServer::bind(options.heartbeat_listen, options.server).await {
            Ok(bound) => bound,
            Err(error) => {
                let _ = ready.send(Err(CoreError::Heartbeat(error)));
                return;
            }
        };
    let heartbeat_addr = server.local_addr();
    let published = ControllerEndpoint::new(options.heartbeat_host.clone(), heartbeat_addr.port());
    let inlets = Inlets {
        lease: sources.lease.start(published),
        endpoints: sources.endpoints.start(),
        topics: sources.topics.start(),
    };
    if let Some(mirror) = sources.mirror.as_mut() {
        mirror.start();
    }
    let broker = BrokerSide::start(broker, options.client);
    let core = ControllerLoop::new(
        Controller::new(options.controller),
        clock,
        Volume::new(&options.cluster_dir),
        (server, heartbeats),
        sources.lease,
        broker,
        options.tick,
    )
    .with_mirror(sources.mirror);
    let _ = ready.send(Ok(heartbeat_addr));
    core.run(inlets, stopped).await;
}
