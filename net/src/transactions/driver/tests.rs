use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::Path;
use std::rc::Rc;

use kaas_engine::{LogConfig, Storage};

use super::*;
use crate::transactions::coordinator::TransactionResult;
use crate::transactions::metadata::TopicPartition;
use crate::transactions::partition_for;
use crate::transactions::state::{TransactionState, TransactionVersion};

/// The hooks of a test: producer ids from a counter, markers recorded and written at once
/// (or never, while `hold_markers` is set), a clock the test sets.
#[derive(Clone, Default)]
struct TestHooks {
    next_id: Rc<Cell<i64>>,
    markers: Rc<RefCell<Vec<TxnMarkers>>>,
    hold_markers: Rc<Cell<bool>>,
    now: Rc<Cell<i64>>,
}

impl CoordinatorHooks for TestHooks {
    async fn allocate_producer_id(&self) -> Result<i64, ErrorCode> {
        let id = self.next_id.get() + 1000;
        self.next_id.set(self.next_id.get() + 1);
        Ok(id)
    }

    async fn write_markers(&self, markers: TxnMarkers) -> bool {
        self.markers.borrow_mut().push(markers);
        !self.hold_markers.get()
    }

    fn append_error(&self, _error: &EngineError) -> ErrorCode {
        ErrorCode::KafkaStorageError
    }

    fn now_ms(&self) -> i64 {
        self.now.get()
    }
}

fn run<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { f().await })
        .expect("executor")
        .join()
        .expect("join");
}

/// A transactional id of partition 0, and the partition it coordinates.
const ID: &str = "polygenelubricants";

async fn open_log(storage: &Storage) -> PartitionLog {
    PartitionLog::open(
        storage,
        Path::new("topics/__transaction_state/0"),
        LogConfig::default(),
    )
    .await
    .expect("open")
}

/// Lets spawned appends and markers run until `done` holds (bounded).
async fn settle(done: impl Fn() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("did not settle");
}

/// InitProducerId for [`ID`]: the producer id and epoch.
async fn init(driver: &Rc<CoordinatorDriver<TestHooks>>) -> (i64, i16) {
    let Answer::InitProducerId {
        error,
        producer_id,
        producer_epoch,
    } = driver
        .init_producer_id(InitProducerIdRequest {
            transactional_id: ID.into(),
            transaction_timeout_ms: 60_000,
            expected: None,
        })
        .await
    else {
        panic!("not an InitProducerId answer")
    };
    assert_eq!(error, ErrorCode::None);
    (producer_id, producer_epoch)
}

/// Adds `partitions` to [`ID`]'s transaction and ends it with `result`, both answered NONE.
async fn add_and_end(
    driver: &Rc<CoordinatorDriver<TestHooks>>,
    (producer_id, producer_epoch): (i64, i16),
    partitions: BTreeSet<TopicPartition>,
    result: TransactionResult,
    client_version: TransactionVersion,
) {
    let added = driver
        .add_partitions(AddPartitionsRequest {
            transactional_id: ID.into(),
            producer_id,
            producer_epoch,
            partitions,
            client_version,
        })
        .await;
    assert_eq!(added.error(), ErrorCode::None);
    let ended = driver
        .end_txn(EndTxnRequest {
            transactional_id: ID.into(),
            producer_id,
            producer_epoch,
            result,
            client_version,
        })
        .await;
    assert_eq!(ended.error(), ErrorCode::None);
}

#[test]
fn a_committed_transaction_is_logged_marked_and_reloaded() {
    run(|| async {
        assert_eq!(partition_for(ID), 0);
        let storage = Storage::memory();
        let hooks = TestHooks::default();
        hooks.now.set(1_000);
        let config = CoordinatorConfig {
            transaction_version: TransactionVersion::V1,
            ..CoordinatorConfig::default()
        };
        let driver = CoordinatorDriver::load(
            open_log(&storage).await,
            0,
            7,
            config.clone(),
            hooks.clone(),
        )
        .await
        .expect("load");
        let producer = init(&driver).await;
        assert_eq!(producer, (1000, 0));
        let partitions: BTreeSet<TopicPartition> = [
            TopicPartition::new("orders", 2),
            TopicPartition::new("orders", 5),
        ]
        .into();
        add_and_end(
            &driver,
            producer,
            partitions.clone(),
            TransactionResult::Commit,
            TransactionVersion::V1,
        )
        .await;
        // The markers went out once, for exactly the transaction's partitions, and the
        // Complete record followed them.
        settle(|| {
            driver.machine().transaction(ID).map(|t| t.state)
                == Some(TransactionState::CompleteCommit)
        })
        .await;
        let markers = hooks.markers.borrow().clone();
        assert_eq!(markers.len(), 1);
        assert_eq!(markers[0].result, TransactionResult::Commit);
        assert_eq!(markers[0].coordinator_epoch, 7);
        assert_eq!(
            markers[0]
                .partitions
                .iter()
                .cloned()
                .collect::<BTreeSet<_>>(),
            partitions
        );

        // Init, Ongoing, PrepareCommit, CompleteCommit: four durable records.
        let log = driver.log().clone();
        assert_eq!(log.offsets().high_watermark, 4);
        driver.stop();
        let reloaded = CoordinatorDriver::load(log, 0, 8, config, hooks.clone())
            .await
            .expect("reload");
        let state = reloaded
            .machine()
            .transaction(ID)
            .cloned()
            .expect("known after reload");
        assert_eq!(state.state, TransactionState::CompleteCommit);
        assert_eq!((state.producer_id, state.producer_epoch), (1000, 0));
        assert_eq!(
            hooks.markers.borrow().len(),
            1,
            "nothing in flight to resend"
        );
    });
}

#[test]
fn a_prepared_transaction_is_finished_by_the_next_coordinator() {
    run(|| async {
        let storage = Storage::memory();
        let hooks = TestHooks::default();
        hooks.hold_markers.set(true);
        let config = CoordinatorConfig::default();
        let driver = CoordinatorDriver::load(
            open_log(&storage).await,
            0,
            3,
            config.clone(),
            hooks.clone(),
        )
        .await
        .expect("load");
        let producer = init(&driver).await;
        add_and_end(
            &driver,
            producer,
            [TopicPartition::new("t", 0)].into(),
            TransactionResult::Abort,
            TransactionVersion::V2,
        )
        .await;
        // The markers never come back written: the coordinator moves.
        settle(|| hooks.markers.borrow().len() == 1).await;
        driver.stop();
        let log = driver.log().clone();
        assert_eq!(
            driver.machine().transaction(ID).map(|t| t.state),
            Some(TransactionState::PrepareAbort)
        );

        hooks.hold_markers.set(false);
        let next = CoordinatorDriver::load(log, 0, 4, config, hooks.clone())
            .await
            .expect("reload");
        settle(|| {
            next.machine().transaction(ID).map(|t| t.state) == Some(TransactionState::CompleteAbort)
        })
        .await;
        let markers = hooks.markers.borrow().clone();
        assert_eq!(markers.len(), 2, "sent again by the next coordinator");
        assert_eq!(markers[1].result, TransactionResult::Abort);
        assert_eq!(markers[1].coordinator_epoch, 4);
    });
}

#[test]
fn stopping_answers_waiting_calls_not_coordinator() {
    run(|| async {
        let storage = Storage::memory();
        let hooks = TestHooks::default();
        let driver = CoordinatorDriver::load(
            open_log(&storage).await,
            0,
            1,
            CoordinatorConfig::default(),
            hooks,
        )
        .await
        .expect("load");
        driver.stop();
        let answer = driver
            .init_producer_id(InitProducerIdRequest {
                transactional_id: ID.into(),
                transaction_timeout_ms: 60_000,
                expected: None,
            })
            .await;
        assert_eq!(answer.error(), ErrorCode::NotCoordinator);
        assert_eq!(driver.log().offsets().high_watermark, 0, "nothing written");
    });
}
