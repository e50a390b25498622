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
        transactions: Default::default(),
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

/// A topic `name` of `partitions` partitions with default configs.
pub(crate) fn topic(name: &str, partitions: i32) -> crate::model::cluster_view::TopicInfo {
    crate::model::cluster_view::TopicInfo::of(
        kaas_cluster::ids::TopicName::new(name).expect("legal"),
        crate::protocol::Uuid([name.as_bytes()[0]; 16]),
        partitions,
        crate::model::topic_config::TopicConfig::default(),
        &crate::model::topic_config::TopicDefaults::default(),
    )
}

/// Opens partition `partition` of `topic` on `shard` by command at `leader_epoch`.
pub(crate) async fn open_by_command(
    shard: &Rc<Shard>,
    topic: &str,
    partition: i32,
    leader_epoch: i32,
) {
    let name = kaas_cluster::ids::TopicName::new(topic).expect("legal");
    shard
        .run_command(kaas_cluster::command::ShardCommand::OpenPartition {
            partition: kaas_cluster::ids::TopicPartition::new(name, partition),
            leader_epoch: kaas_cluster::ids::LeaderEpoch(leader_epoch),
        })
        .await
        .expect("opened");
}

/// Opens partition `partition` of `topic` on `shard` (on `root`) by command, at the
/// standalone leader epoch, and returns its log. The first call on an executor prepares it for direct reads
/// (`kaas_engine::dma_probe`), as the broker does at start-up.
pub(crate) async fn open_log(
    shard: &Rc<Shard>,
    root: &Path,
    topic: &str,
    partition: i32,
) -> kaas_engine::PartitionLog {
    thread_local!(static PREPARED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    if !PREPARED.with(std::cell::Cell::get) {
        kaas_engine::dma_probe::prepare_executor(root)
            .await
            .expect("direct reads prepared");
        PREPARED.with(|prepared| prepared.set(true));
    }
    open_by_command(
        shard,
        topic,
        partition,
        crate::model::cluster_view::STANDALONE_LEADER_EPOCH,
    )
    .await;
    shard
        .logs
        .get(&kaas_engine::PartitionId::new(topic, partition))
        .expect("open")
}

/// A batch of `records` one-byte records stamped `timestamp`, from producer `producer_id`
/// (epoch 0, first sequence `sequence`; -1 for none), transactional when `transactional`.
pub(crate) fn producer_batch(
    records: usize,
    timestamp: i64,
    producer_id: i64,
    sequence: i32,
    transactional: bool,
) -> Vec<u8> {
    use kaas_engine::batch;
    let pairs: Vec<batch::TestRecord<'_>> = (0..records).map(|_| (None, Some(&b"v"[..]))).collect();
    let epoch = if producer_id < 0 { -1 } else { 0 };
    let mut bytes = batch::encode_batch_for_tests(&pairs, timestamp, producer_id, epoch, sequence);
    if transactional {
        batch::set_transactional_for_tests(&mut bytes);
    }
    bytes
}

/// The clock the test helpers write with; [`producer_batch`] timestamps near it are valid.
pub(crate) const TEST_NOW_MS: i64 = 1_700_000_000_000;

/// Appends `batch` to `log` at the standalone leader epoch; returns its first offset.
pub(crate) async fn append_batch(log: &kaas_engine::PartitionLog, batch: &[u8]) -> u64 {
    log.append(
        batch,
        crate::model::cluster_view::STANDALONE_LEADER_EPOCH,
        TEST_NOW_MS,
    )
    .await
    .expect("appended")
    .base_offset
}

/// Ends producer `producer_id`'s transaction (epoch 0) with a marker from a coordinator at
/// `coordinator_epoch`; returns the marker's offset.
pub(crate) async fn end_transaction(
    log: &kaas_engine::PartitionLog,
    producer_id: i64,
    result: kaas_engine::batch::txn_marker::TxnResult,
    coordinator_epoch: i32,
) -> u64 {
    let marker = kaas_engine::TxnMarker {
        producer_id,
        producer_epoch: 0,
        coordinator_epoch,
        result,
        epoch_check: kaas_engine::producer_state::MarkerEpochCheck::AtLeastCurrent,
    };
    log.append_txn_marker(
        marker,
        crate::model::cluster_view::STANDALONE_LEADER_EPOCH,
        TEST_NOW_MS,
    )
    .await
    .expect("marker written")
}

/// A one-record transactional batch of `producer_id` at `producer_epoch`, first sequence
/// `sequence`, as a transactional producer sends it.
pub(crate) fn transactional_batch(producer_id: i64, producer_epoch: i16, sequence: i32) -> Vec<u8> {
    use kaas_engine::batch;
    let mut bytes = batch::encode_batch_for_tests(
        &[(None, Some(b"v"))],
        1_000,
        producer_id,
        producer_epoch,
        sequence,
    );
    batch::set_transactional_for_tests(&mut bytes);
    bytes
}

/// Appends `batch` to `id`'s log at its open epoch and flushes it.
pub(crate) async fn append_durably(shard: &Rc<Shard>, id: &kaas_engine::PartitionId, batch: &[u8]) {
    let log = shard.log(id).expect("served");
    let epoch = shard.open_epoch(id).expect("open");
    log.append(batch, epoch, 1_000).await.expect("appended");
    let end = log.offsets().log_end_offset;
    log.flush_to(end).await.expect("flushed");
}
