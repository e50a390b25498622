//! Test support: a real shard 0 on a directory, following a given view, and a glommio
//! executor to run a test on (for unit tests of code that needs a `Shard`).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;

use kaas_engine::{LogManager, Storage};

use super::Shard;
use crate::groups::config::GroupConfig;
use crate::groups::coordinator::GroupCoordinator;
use crate::model::cluster_view::{ClusterView, ViewHandle};
use crate::shard::config::BrokerConfig;
use crate::shard::metrics::ShardMetrics;
use crate::shard::router::Router;

/// Shard 0 of a broker with `view.shards` shards on `root`, following `view`.
pub(crate) fn shard_zero(root: &Path, view: ClusterView) -> Rc<Shard> {
    let shards = view.shards;
    let storage = Storage::disk(root);
    let listen: SocketAddr = "127.0.0.1:0".parse().expect("address");
    let mut config = BrokerConfig::new(listen);
    config.shards = shards;
    let view = Arc::new(ViewHandle::new(view));
    let (router, _inboxes) = Router::new(shards);
    Rc::new(Shard {
        index: 0,
        config: Arc::new(config),
        storage: storage.clone(),
        logs: Rc::new(LogManager::new(storage.clone())),
        view: view.clone(),
        router: Arc::new(router),
        metrics: Arc::new(ShardMetrics::default()),
        groups: Rc::new(GroupCoordinator::new(
            0,
            shards,
            storage,
            GroupConfig::default(),
            view,
        )),
        open_epochs: Default::default(),
        append_turns: Default::default(),
        peers: crate::peers::PeerClient::for_broker(0),
    })
}

/// The view of a standalone broker (node 0) of `shards` shards holding `topics`.
pub(crate) fn standalone_view(
    shards: usize,
    topics: &[crate::model::cluster_view::TopicInfo],
) -> ClusterView {
    let broker = crate::model::local_assignment::LocalBroker {
        id: 0,
        host: "localhost".into(),
        port: 9092,
    };
    ClusterView::standalone(
        "c".into(),
        shards,
        topics,
        &broker,
        1,
        &crate::model::topic_config::TopicDefaults::default(),
    )
    .expect("a valid one-broker assignment")
}

/// Runs `test` on a glommio executor with a fresh temporary directory.
pub(crate) fn run(
    test: impl FnOnce(PathBuf) -> Pin<Box<dyn Future<Output = ()>>> + Send + 'static,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().to_path_buf();
    glommio::LocalExecutorBuilder::default()
        .spawn(move || test(root))
        .expect("executor")
        .join()
        .expect("join");
}
