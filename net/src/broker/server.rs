//! Starting and stopping the shards of a broker.
//!
//! Start-up: lock the data directory (a second broker on it refuses to start), make sure no
//! other process listens on the Kafka port, load the topic store, then start one executor per shard (pinned to a core when
//! there are enough). Each shard applies the direct-I/O probe work-around, listens on the
//! Kafka port with `SO_REUSEPORT` (the kernel spreads connections over the shards), serves
//! its inbox, opens the partitions it owns and runs log maintenance. Shut-down: every shard
//! stops accepting, then flushes and checkpoints every partition it has open.

use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures_lite::future;
use glommio::net::TcpListener;
use glommio::{LocalExecutorBuilder, Placement};
use kaas_engine::data_dir_lock::{DataDirLock, DataDirLockError};
use kaas_engine::{LogManager, Storage};

use crate::broker::cluster_view::{ClusterView, ViewHandle};
use crate::broker::config::BrokerConfig;
use crate::broker::connection;
use crate::broker::metrics::ShardMetrics;
use crate::broker::port_guard::{self, PortInUse};
use crate::broker::producer_ids::ProducerIdAllocator;
use crate::broker::router::{Inbox, Router};
use crate::broker::shard::Shard;
use crate::broker::topic_admin::{build_view, TopicAdmin};
use crate::broker::topic_store::{self, TopicsFile};
use crate::groups::coordinator::GroupCoordinator;

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
}

impl Broker {
    /// Starts every shard and returns once each listens (or the first fails).
    pub fn start(config: BrokerConfig) -> Result<Broker, StartError> {
        let config = Arc::new(config);
        let data_dir_lock = match &config.data_dir {
            Some(dir) => Some(DataDirLock::acquire(dir)?),
            None => None,
        };
        port_guard::ensure_free(config.listen)?;
        let storage = match &config.data_dir {
            Some(dir) => Storage::disk(dir.clone()),
            None => Storage::memory(),
        };
        let topics = load_topics(&storage)?;
        let shards = config.shards.max(1);
        let view = Arc::new(ViewHandle::new(ClusterView::default()));
        let (router, inboxes) = Router::new(shards);
        let router = Arc::new(router);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (ready_sender, ready) = async_channel::unbounded();
        let mut broker = Broker {
            shutdown: Vec::new(),
            ready,
            threads: Vec::new(),
            metrics: Vec::new(),
            view: view.clone(),
            _data_dir_lock: data_dir_lock,
        };
        for (index, inbox) in inboxes.into_iter().enumerate() {
            let (stop_sender, stop) = async_channel::bounded(1);
            let metrics = Arc::new(ShardMetrics::default());
            broker.shutdown.push(stop_sender);
            broker.metrics.push(metrics.clone());
            let placement = if shards <= cpus {
                Placement::Fixed(index)
            } else {
                Placement::Unbound
            };
            let context = ShardStart {
                index,
                config: config.clone(),
                storage: storage.clone(),
                view: view.clone(),
                router: router.clone(),
                metrics,
                topics: (index == 0).then(|| topics.clone()),
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

    /// Where the current cluster view can be read from any thread.
    pub fn view_source(&self) -> Arc<ViewHandle> {
        self.view.clone()
    }

    /// Stops accepting, flushes and checkpoints every partition, and waits for the shards.
    pub fn stop(self) {
        for stop in &self.shutdown {
            let _ = stop.try_send(());
        }
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

fn load_topics(storage: &Storage) -> Result<TopicsFile, StartError> {
    let storage = storage.clone();
    let loaded = LocalExecutorBuilder::new(Placement::Unbound)
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
        inbox,
        stop,
        ready,
    } = start;
    let prepared = prepare(&config, &storage, index, &topics).await;
    let (topic_admin, producer_ids) = match prepared {
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
        logs: LogManager::new(storage),
        view,
        router,
        metrics,
        topic_admin,
        producer_ids,
    });
    if let (Some(topics), true) = (&topics, index == 0) {
        match build_view(topics, &shard) {
            Ok(initial) => shard.view.publish(initial),
            Err(error) => {
                let _ = ready.send(Err(error.message)).await;
                return;
            }
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
    shard.groups.load().await;
    glommio::spawn_local(shard.clone().serve_inbox(inbox)).detach();
    let _ = ready.send(Ok(())).await;
    // Shard 0 published the view before reporting ready, and `Broker::start` waits for every
    // shard; wait for the view here too so a fast shard does not open nothing.
    while shard.view.load().cluster_id.is_empty() {
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    shard.open_owned_partitions().await;
    let ticker = shard.groups.spawn_ticker();
    let maintenance = Rc::new(LogManagerMaintenance(shard.clone()));
    let maintenance_task = maintenance.spawn();
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
    drop(ticker);
    if let Err(error) = shard.logs.close_all().await {
        tracing::error!(shard = index, %error, "closing partitions at shut-down");
    }
}

async fn prepare(
    config: &BrokerConfig,
    storage: &Storage,
    index: usize,
    topics: &Option<TopicsFile>,
) -> Result<(Option<TopicAdmin>, Option<ProducerIdAllocator>), String> {
    if let Some(dir) = &config.data_dir {
        kaas_engine::dma_probe::prepare_executor(Path::new(dir))
            .await
            .map_err(|e| e.to_string())?;
    }
    if index != 0 {
        return Ok((None, None));
    }
    let file = topics.clone().unwrap_or_default();
    let admin = TopicAdmin::new(storage.clone(), file);
    let ids = ProducerIdAllocator::load(storage.clone())
        .await
        .map_err(|e| e.to_string())?;
    Ok((Some(admin), Some(ids)))
}

/// Periodic log maintenance of one shard.
struct LogManagerMaintenance(Rc<Shard>);

impl LogManagerMaintenance {
    fn spawn(self: &Rc<Self>) -> glommio::task::JoinHandle<()> {
        let this = Rc::downgrade(self);
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(MAINTENANCE_INTERVAL).await;
                let Some(this) = this.upgrade() else { return };
                this.0
                    .logs
                    .maintain(kaas_engine::log_manager::now_ms())
                    .await;
            }
        })
        .detach()
    }
}
