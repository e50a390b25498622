//! Starting and stopping the shards of a broker.
//!
//! Start-up: lock the data directory (a second broker on it refuses to start), make sure no
//! other process listens on the Kafka port, load the topic store, then start one executor per
//! shard, each pinned to a CPU of its own among those the process may use when there are
//! enough, otherwise fenced to them ([`crate::runtime::cpus`]). Each shard applies the
//! direct-I/O probe work-around, listens on the Kafka port with `SO_REUSEPORT` (the kernel
//! spreads connections over the shards), serves its inbox, opens the partitions it owns and
//! runs log maintenance. Shut-down: every shard stops accepting, then flushes and
//! checkpoints every partition it has open.
//!
//! Cluster mode (`BrokerConfig::cluster`): brokers share the data directory, so it is not
//! locked; topics come from `<data>/__cluster/assignment.json` (not `topics.json`), which a
//! [`FileFollower`] thread watches; shard 0 follows every accepted assignment
//! ([`takeover_driver`]) and partitions open only by its commands. The cluster id is
//! `<data>/__cluster/cluster-id`, shared by every broker. Topic changes go to whoever takes
//! [`Broker::serve_topic_changes`] (the cluster core's KafkaTopic service).

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future;
use glommio::net::TcpListener;
use glommio::LocalExecutorBuilder;
use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::BrokerId;
use kaas_cluster_file::{FileFollower, FollowerOptions};
use kaas_engine::compaction::shard_cleaner::ShardCleaner;
use kaas_engine::data_dir_lock::{DataDirLock, DataDirLockError};
use kaas_engine::periodic::spawn_every;
use kaas_engine::{LogManager, Storage};

use crate::groups::coordinator::GroupCoordinator;
use crate::model::cluster_view::{ClusterView, ViewHandle};
use crate::model::local_assignment::LocalBroker;
use crate::runtime::connection;
use crate::runtime::cpus::AllowedCpus;
use crate::runtime::port_guard::{self, PortInUse};
use crate::shard::config::BrokerConfig;
use crate::shard::metrics::ShardMetrics;
use crate::shard::producer_expiration;
use crate::shard::producer_ids::{IdBlockStore, ProducerIdAllocator};
use crate::shard::router::{Inbox, Router};
use crate::shard::shard_zero::{self, ShardZero};
use crate::shard::takeover_driver;
use crate::shard::transaction_coordinators::{self, TransactionCoordinators};
use crate::shard::Shard;
use crate::topics::local_controller::LocalController;
use crate::topics::topic_change_link::TopicChangeLink;
use crate::topics::topic_changes::{self, TopicChanges};
use crate::topics::topic_store::{self, TopicsFile};
use kaas_cluster::topic_change::TopicChangeRequest;

/// How often each shard runs log maintenance (age rolls, retention, checkpoints).
const MAINTENANCE_INTERVAL: Duration = Duration::from_secs(1);

/// Errors starting a broker.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Another broker uses the data directory.
    #[error(transparent)]
    DataDirLocked(#[from] DataDirLockError),
    /// Another process listens on the Kafka port.
    #[error(transparent)]
    PortInUse(#[from] PortInUse),
    /// The topic store could not be read.
    #[error(transparent)]
    TopicStore(#[from] topic_store::TopicStoreError),
    /// The CPUs this process may run on could not be read (`sched_getaffinity`).
    #[error("reading the CPUs this process may use: {0}")]
    Cpus(#[source] std::io::Error),
    /// Cluster mode needs the shared data directory.
    #[error("cluster mode needs a data directory (it cannot run in memory)")]
    ClusterInMemory,
    /// The cluster directory (cluster id, assignment follower) could not be set up.
    #[error("cluster directory {dir}: {source}")]
    ClusterDir {
        /// The directory.
        dir: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An executor thread could not be started.
    #[error("starting shard {shard}: {reason}")]
    Shard {
        /// Which shard.
        shard: usize,
        /// Why.
        reason: String,
    },
}

/// A running broker.
pub struct Broker {
    shutdown: Vec<async_channel::Sender<()>>,
    ready: async_channel::Receiver<Result<(), String>>,
    threads: Vec<glommio::ExecutorJoinHandle<()>>,
    metrics: Vec<Arc<ShardMetrics>>,
    view: Arc<ViewHandle>,
    /// Held until the broker is dropped (standalone brokers on disk only).
    _data_dir_lock: Option<DataDirLock>,
    /// The assignment follower thread (cluster mode only).
    follower: Option<FileFollower>,
    /// Where shard 0 sends topic changes (cluster mode only).
    topic_changes: Option<Arc<TopicChangeLink>>,
    /// The partitions shard 0 found fenced (cluster mode only).
    fence_reports: Option<crate::shard::fence_reports::FenceReports>,
}

/// What shard 0 needs to follow the cluster's assignments.
struct ClusterStart {
    cluster_id: String,
    broker: BrokerId,
    assignments: futures_channel::mpsc::UnboundedReceiver<Arc<Assignment>>,
    topic_changes: Arc<TopicChangeLink>,
    fence_reports: crate::shard::fence_reports::FenceReports,
}

/// Where cluster files live: `<data>/__cluster`.
pub fn cluster_dir(data_dir: &Path) -> std::path::PathBuf {
    kaas_volume::cluster_dir(data_dir)
}

impl Broker {
    /// Starts every shard and returns once each listens (or the first fails).
    pub fn start(config: BrokerConfig) -> Result<Broker, StartError> {
        let config = Arc::new(config);
        // Brokers of a cluster share the directory: only a standalone broker locks it.
        let data_dir_lock = match (&config.data_dir, &config.cluster) {
            (Some(dir), None) => Some(DataDirLock::acquire(dir)?),
            _ => None,
        };
        port_guard::ensure_free(config.listen)?;
        let allowed_cpus = AllowedCpus::of_this_process().map_err(StartError::Cpus)?;
        let storage = match &config.data_dir {
            Some(dir) => Storage::disk(dir.clone()),
            None => Storage::memory(),
        };
        let (topics, mut cluster_start, follower) = match &config.cluster {
            None => (load_topics(&storage, &allowed_cpus)?, None, None),
            Some(cluster) => {
                let dir = cluster_dir(
                    config
                        .data_dir
                        .as_deref()
                        .ok_or(StartError::ClusterInMemory)?,
                );
                let dir_error = |source| StartError::ClusterDir {
                    dir: dir.clone(),
                    source,
                };
                let cluster_id =
                    kaas_cluster_file::load_or_create_cluster_id(&dir).map_err(dir_error)?;
                let (sender, assignments) = futures_channel::mpsc::unbounded();
                let follower = FileFollower::spawn(&dir, FollowerOptions::default(), sender)
                    .map_err(dir_error)?;
                let topics = TopicsFile {
                    version: 1,
                    cluster_id: cluster_id.clone(),
                    topics: Vec::new(),
                    group_configs: Default::default(),
                };
                let start = ClusterStart {
                    cluster_id,
                    broker: BrokerId(cluster.broker_id),
                    assignments,
                    topic_changes: Arc::new(TopicChangeLink::new()),
                    fence_reports: Default::default(),
                };
                (topics, Some(start), Some(follower))
            }
        };
        let shards = config.shards.max(1);
        let view = Arc::new(ViewHandle::new(ClusterView::default()));
        let (router, inboxes) = Router::new(shards);
        let router = Arc::new(router);
        let (ready_sender, ready) = async_channel::unbounded();
        let topic_changes = cluster_start.as_ref().map(|c| c.topic_changes.clone());
        let fence_reports = cluster_start.as_ref().map(|c| c.fence_reports.clone());
        let mut broker = Broker {
            shutdown: Vec::new(),
            ready,
            threads: Vec::new(),
            metrics: Vec::new(),
            view: view.clone(),
            _data_dir_lock: data_dir_lock,
            follower,
            topic_changes,
            fence_reports,
        };
        for (index, inbox) in inboxes.into_iter().enumerate() {
            let (stop_sender, stop) = async_channel::bounded(1);
            let metrics = Arc::new(ShardMetrics::default());
            broker.shutdown.push(stop_sender);
            broker.metrics.push(metrics.clone());
            let placement = allowed_cpus.shard_placement(index, shards);
            let context = ShardStart {
                index,
                config: config.clone(),
                storage: storage.clone(),
                view: view.clone(),
                router: router.clone(),
                metrics,
                topics: (index == 0).then(|| topics.clone()),
                cluster: if index == 0 {
                    cluster_start.take()
                } else {
                    None
                },
                inbox,
                stop,
                ready: ready_sender.clone(),
            };
            let thread = LocalExecutorBuilder::new(placement)
                .name(&format!("kaas-shard-{index}"))
                .spawn(move || run_shard(context))
                .map_err(|e| StartError::Shard {
                    shard: index,
                    reason: e.to_string(),
                })?;
            broker.threads.push(thread);
        }
        for _ in 0..shards {
            match broker.ready.recv_blocking() {
                Ok(Ok(())) => {}
                Ok(Err(reason)) => {
                    broker.stop();
                    return Err(StartError::Shard { shard: 0, reason });
                }
                Err(_) => {
                    broker.stop();
                    return Err(StartError::Shard {
                        shard: 0,
                        reason: "a shard stopped during start-up".into(),
                    });
                }
            }
        }
        Ok(broker)
    }

    /// Every shard's counters.
    pub fn metrics(&self) -> Vec<Arc<ShardMetrics>> {
        self.metrics.clone()
    }

    /// Makes the assignment follower re-read `assignment.json` now (cluster mode only): the
    /// controller's `ASSIGNMENT_CHANGED` push calls it.
    pub fn assignment_nudger(&self) -> Option<kaas_cluster_file::FollowerNudger> {
        self.follower.as_ref().map(FileFollower::nudger)
    }

    /// The partitions this broker was given and found fenced by a newer claim, with the
    /// claim's leader epoch (cluster mode only): what its heartbeat reports to the controller.
    pub fn fence_reports(&self) -> Option<crate::shard::fence_reports::FenceReports> {
        self.fence_reports.clone()
    }

    /// The receiving end of this broker's topic changes (cluster mode only, and only the
    /// first time): whoever takes it serves them (the cluster core's KafkaTopic service, on
    /// its own runtime). Until it is taken, and when it never is (`--assignment-source
    /// file`), every topic change is refused and auto-creation is off.
    pub fn serve_topic_changes(
        &self,
    ) -> Option<async_channel::Receiver<kaas_cluster::topic_change::TopicChangeRequest>> {
        self.topic_changes.as_ref()?.serve()
    }

    /// Where the current cluster view can be read from any thread.
    pub fn view_source(&self) -> Arc<ViewHandle> {
        self.view.clone()
    }

    /// Stops accepting, flushes and checkpoints every partition, and waits for the shards.
    pub fn stop(mut self) {
        // No assignment is applied while the shards close their partitions.
        if let Some(follower) = self.follower.take() {
            follower.stop();
        }
        for stop in &self.shutdown {
            let _ = stop.try_send(());
        }
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

fn load_topics(storage: &Storage, allowed_cpus: &AllowedCpus) -> Result<TopicsFile, StartError> {
    let storage = storage.clone();
    let loaded = LocalExecutorBuilder::new(allowed_cpus.anywhere())
        .name("kaas-start")
        .spawn(move || async move {
            let file = topic_store::load(&storage).await?;
            topic_store::save(&storage, &file).await?;
            Ok::<_, topic_store::TopicStoreError>(file)
        })
        .map_err(|e| StartError::Shard {
            shard: 0,
            reason: e.to_string(),
        })?
        .join()
        .map_err(|e| StartError::Shard {
            shard: 0,
            reason: e.to_string(),
        })?;
    Ok(loaded?)
}

struct ShardStart {
    index: usize,
    config: Arc<BrokerConfig>,
    storage: Storage,
    view: Arc<ViewHandle>,
    router: Arc<Router>,
    metrics: Arc<ShardMetrics>,
    topics: Option<TopicsFile>,
    cluster: Option<ClusterStart>,
    inbox: Inbox,
    stop: async_channel::Receiver<()>,
    ready: async_channel::Sender<Result<(), String>>,
}

async fn run_shard(start: ShardStart) {
    let ShardStart {
        index,
        config,
        storage,
        view,
        router,
        metrics,
        topics,
        cluster,
        inbox,
        stop,
        ready,
    } = start;
    let link = cluster.as_ref().map(|c| c.topic_changes.clone());
    let prepared = prepare(&config, &storage, index, &topics, link).await;
    let (topic_changes, local_controller, producer_ids) = match prepared {
        Ok(parts) => parts,
        Err(reason) => {
            let _ = ready.send(Err(reason)).await;
            return;
        }
    };
    let groups = Rc::new(GroupCoordinator::new(
        index,
        config.shards,
        storage.clone(),
        config.groups.clone(),
        view.clone(),
    ));
    let shard = Rc::new(Shard {
        index,
        config: config.clone(),
        storage: storage.clone(),
        groups,
        logs: Rc::new(LogManager::new(storage)),
        view,
        router,
        metrics,
        open_epochs: Default::default(),
        append_turns: Default::default(),
        transactions: TransactionCoordinators::new(config.transactions.clone()),
        peers: crate::peers::PeerClient::for_broker(config.node_id),
    });
    topic_changes::install_on_this_shard(topic_changes);
    shard_zero::install_on_this_shard(producer_ids.map(ShardZero::new));
    if let Some(cluster) = &cluster {
        // Nothing is served until the first assignment is accepted.
        shard.view.publish(ClusterView {
            cluster_id: cluster.cluster_id.clone(),
            shards: config.shards.max(1),
            cluster_mode: true,
            ..ClusterView::default()
        });
    } else if let Some((controller, _)) = &local_controller {
        if let Err(error) = controller.publish_stored(&shard) {
            let _ = ready.send(Err(error.message)).await;
            return;
        }
    }
    let listener = match TcpListener::bind(config.listen) {
        Ok(listener) => listener,
        Err(error) => {
            let _ = ready
                .send(Err(format!("binding {}: {error}", config.listen)))
                .await;
            return;
        }
    };
    // Groups load before the shard reports ready, so a broker that answers /healthz has
    // every coordinator loaded (no COORDINATOR_LOAD_IN_PROGRESS after a restart).
    if config.cluster.is_some() {
        shard.groups.start_empty();
    } else {
        shard.groups.load().await;
    }
    glommio::spawn_local(shard.clone().serve_inbox(inbox)).detach();
    // A standalone broker's shard 0 applies its own assignment of the stored topics: every
    // partition opens (by command, on its shard) before the broker reports ready, so
    // recovery is done before the first request.
    if let Some((controller, requests)) = local_controller {
        if let Err(error) = controller.start(&shard).await {
            let _ = ready.send(Err(error.message)).await;
            return;
        }
        // Ends when the last sender (shard 0's topic changes) is gone, at shut-down.
        glommio::spawn_local(controller.serve(shard.clone(), requests)).detach();
    }
    let _ = ready.send(Ok(())).await;
    // Shard 0 published the view before reporting ready, and `Broker::start` waits for every
    // shard; wait for the view here too so no shard serves a request before it.
    while shard.view.load().cluster_id.is_empty() {
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    if let Some(cluster) = cluster {
        // Ends when the follower stops (`Broker::stop`) and its channel closes.
        glommio::spawn_local(takeover_driver::follow_assignments(
            shard.clone(),
            cluster.cluster_id,
            cluster.broker,
            cluster.assignments,
            cluster.fence_reports,
        ))
        .detach();
    }
    let ticker = shard.groups.spawn_ticker();
    let transactions_ticker = transaction_coordinators::spawn_ticker(&shard);
    spawn_log_cleaner(&shard);
    let maintenance_task = spawn_every(
        Rc::downgrade(&shard),
        MAINTENANCE_INTERVAL,
        |shard: Rc<Shard>| async move {
            shard
                .logs
                .maintain(kaas_engine::log_manager::now_ms())
                .await;
        },
    );
    let producer_expiration_task =
        producer_expiration::spawn(&shard, shard.config.producer_expiration);
    let accept = {
        let shard = shard.clone();
        async move {
            loop {
                match listener.accept().await {
                    Ok(stream) => {
                        glommio::spawn_local(connection::serve(shard.clone(), stream)).detach();
                    }
                    Err(error) => {
                        tracing::warn!(%error, "accept failed");
                        glommio::timer::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }
    };
    future::or(accept, async {
        let _ = stop.recv().await;
    })
    .await;
    drop(maintenance_task);
    drop(producer_expiration_task);
    drop(ticker);
    drop(transactions_ticker);
    shard.transactions.stop_all();
    if let Err(error) = shard.logs.close_all().await {
        tracing::error!(shard = index, %error, "closing partitions at shut-down");
    }
    topic_changes::install_on_this_shard(None);
    shard_zero::install_on_this_shard(None);
}

/// Shard 0's services: its topic changes, a standalone broker's own controller with the
/// requests it serves, and producer id allocation.
type ShardZeroServices = (
    Option<TopicChanges>,
    Option<(LocalController, async_channel::Receiver<TopicChangeRequest>)>,
    Option<ProducerIdAllocator>,
);

async fn prepare(
    config: &BrokerConfig,
    storage: &Storage,
    index: usize,
    topics: &Option<TopicsFile>,
    link: Option<Arc<TopicChangeLink>>,
) -> Result<ShardZeroServices, String> {
    if let Some(dir) = &config.data_dir {
        kaas_engine::dma_probe::prepare_executor(Path::new(dir))
            .await
            .map_err(|e| e.to_string())?;
    }
    if index != 0 {
        return Ok((None, None, None));
    }
    let (link, local_controller) = match link {
        Some(link) => (link, None),
        None => {
            // A standalone broker serves its own topic changes.
            let link = Arc::new(TopicChangeLink::new());
            let requests = link
                .serve()
                .ok_or_else(|| "the topic change link was served already".to_string())?;
            let controller = LocalController::new(
                storage.clone(),
                topics.clone().unwrap_or_default(),
                LocalBroker {
                    id: config.node_id,
                    host: config.advertised_host.clone(),
                    port: config.advertised_port,
                },
            );
            (link, Some((controller, requests)))
        }
    };
    let id_blocks = match &config.cluster {
        Some(_) => IdBlockStore::Claims(storage.clone()),
        None => IdBlockStore::File(storage.clone()),
    };
    let ids = ProducerIdAllocator::load(id_blocks)
        .await
        .map_err(|e| e.to_string())?;
    Ok((Some(TopicChanges::new(link)), local_controller, Some(ids)))
}

/// Starts the shard's log cleaner ([`kaas_engine::compaction::shard_cleaner`]) and copies
/// its counters to the shard's metrics every second, for `/metrics`. Both end with the
/// shard's executor; the cleaner also ends when the shard's log manager goes.
fn spawn_log_cleaner(shard: &Rc<Shard>) {
    let cleaner = ShardCleaner::spawn(&shard.logs, shard.config.cleaner);
    let metrics = shard.metrics.clone();
    glommio::spawn_local(async move {
        loop {
            metrics.set_cleaner(cleaner.stats());
            glommio::timer::sleep(Duration::from_secs(1)).await;
        }
    })
    .detach();
}
