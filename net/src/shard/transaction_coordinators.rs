//! The transaction coordinators one shard runs: one [`CoordinatorDriver`] per
//! `__transaction_state` partition the shard leads.
//!
//! A coordinator follows its partition's log: when the shard opens the partition by command
//! ([`crate::shard::shard_commands`]) the coordinator loads from the log at the partition's
//! leader epoch (its coordinator epoch) and serves once loaded; when the shard closes it, or
//! the storage fence takes it away, the coordinator stops (waiting calls are answered
//! NOT_COORDINATOR) before the log closes. Requests meanwhile are answered
//! COORDINATOR_LOAD_IN_PROGRESS (loading) or NOT_COORDINATOR (not led here), as Kafka's
//! `TransactionStateManager` answers them. A ticker feeds every loaded coordinator the clock
//! (timed-out transactions, expired ids).
//!
//! [`ShardHooks`] give the coordinators what they need from the broker: producer ids from
//! shard 0's allocator, markers written through [`crate::shard::txn_markers`], the wall
//! clock.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};
use std::time::Duration;

use kaas_engine::{EngineError, PartitionId};

use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::transactions::coordinator::{CoordinatorConfig, TxnMarkers};
use crate::transactions::driver::{CoordinatorDriver, CoordinatorHooks};
use crate::transactions::TRANSACTION_STATE_TOPIC;

/// How often loaded coordinators are fed the clock (the coordinator keeps its own, longer,
/// intervals for each kind of clean-up).
pub const TICK: Duration = Duration::from_secs(1);

/// A shard's coordinator driver.
pub type Driver = CoordinatorDriver<ShardHooks>;

enum Slot {
    /// Loading at this coordinator epoch.
    Loading(i32),
    /// Serving.
    Ready(Rc<Driver>),
    /// The log could not be loaded (logged); served by nobody until the partition reopens.
    Failed,
}

/// The coordinators of one shard, by `__transaction_state` partition.
#[derive(Default)]
pub struct TransactionCoordinators {
    slots: RefCell<BTreeMap<i32, Slot>>,
    config: CoordinatorConfig,
}

impl TransactionCoordinators {
    /// Coordinators with `config`.
    pub fn new(config: CoordinatorConfig) -> Self {
        TransactionCoordinators {
            slots: RefCell::new(BTreeMap::new()),
            config,
        }
    }

    /// The coordinator of `partition`: COORDINATOR_LOAD_IN_PROGRESS while it loads,
    /// NOT_COORDINATOR when this shard does not run it.
    pub fn get(&self, partition: i32) -> Result<Rc<Driver>, ErrorCode> {
        match self.slots.borrow().get(&partition) {
            Some(Slot::Ready(driver)) if !driver.is_stopped() => Ok(driver.clone()),
            Some(Slot::Loading(_)) => Err(ErrorCode::CoordinatorLoadInProgress),
            _ => Err(ErrorCode::NotCoordinator),
        }
    }

    /// Every loaded coordinator (ListTransactions).
    pub fn loaded(&self) -> Vec<Rc<Driver>> {
        self.slots
            .borrow()
            .values()
            .filter_map(|slot| match slot {
                Slot::Ready(driver) if !driver.is_stopped() => Some(driver.clone()),
                _ => None,
            })
            .collect()
    }

    /// Whether any coordinator of this shard is loading.
    pub fn any_loading(&self) -> bool {
        self.slots
            .borrow()
            .values()
            .any(|slot| matches!(slot, Slot::Loading(_)))
    }

    /// Whether the coordinator of `partition` at `epoch` is the one running here.
    fn is_current(&self, partition: i32, epoch: i32) -> bool {
        match self.slots.borrow().get(&partition) {
            Some(Slot::Ready(driver)) => {
                !driver.is_stopped() && driver.machine().coordinator_epoch() == epoch
            }
            _ => false,
        }
    }

    /// Stops the coordinator of `partition`, if any (the partition is being closed).
    pub fn lose(&self, partition: i32) {
        let removed = self.slots.borrow_mut().remove(&partition);
        if let Some(Slot::Ready(driver)) = removed {
            driver.stop();
        }
    }

    /// Stops every coordinator (shut-down).
    pub fn stop_all(&self) {
        let slots = std::mem::take(&mut *self.slots.borrow_mut());
        for slot in slots.into_values() {
            if let Slot::Ready(driver) = slot {
                driver.stop();
            }
        }
    }
}

/// Starts loading the coordinator of `partition` from its log, opened on `shard` at
/// `coordinator_epoch` (a coordinator already running for it stops first).
pub fn gain(shard: &Rc<Shard>, partition: i32, coordinator_epoch: i32) {
    let coordinators = &shard.transactions;
    coordinators.lose(partition);
    let id = PartitionId::new(std::sync::Arc::from(TRANSACTION_STATE_TOPIC), partition);
    let Some(log) = shard.logs.get(&id) else {
        return;
    };
    coordinators
        .slots
        .borrow_mut()
        .insert(partition, Slot::Loading(coordinator_epoch));
    let hooks = ShardHooks {
        shard: Rc::downgrade(shard),
        partition,
        coordinator_epoch,
    };
    let config = coordinators.config.clone();
    let shard = shard.clone();
    glommio::spawn_local(async move {
        let loaded =
            CoordinatorDriver::load(log, partition, coordinator_epoch, config, hooks).await;
        let mut slots = shard.transactions.slots.borrow_mut();
        let still_wanted = matches!(
            slots.get(&partition),
            Some(Slot::Loading(epoch)) if *epoch == coordinator_epoch
        );
        match loaded {
            Ok(driver) if still_wanted => {
                tracing::debug!(
                    partition,
                    coordinator_epoch,
                    "transaction coordinator loaded"
                );
                slots.insert(partition, Slot::Ready(driver));
            }
            Ok(driver) => driver.stop(),
            Err(error) => {
                tracing::error!(partition, %error, "loading a transaction coordinator");
                if still_wanted {
                    slots.insert(partition, Slot::Failed);
                }
            }
        }
    })
    .detach();
}

/// Feeds every loaded coordinator of `shard` the clock, every [`TICK`].
pub fn spawn_ticker(shard: &Rc<Shard>) -> glommio::task::JoinHandle<()> {
    kaas_engine::periodic::spawn_every(Rc::downgrade(shard), TICK, |shard: Rc<Shard>| async move {
        for driver in shard.transactions.loaded() {
            driver.tick();
        }
    })
}

/// What a shard's coordinator needs from the broker.
pub struct ShardHooks {
    shard: Weak<Shard>,
    partition: i32,
    coordinator_epoch: i32,
}

impl CoordinatorHooks for ShardHooks {
    async fn allocate_producer_id(&self) -> Result<i64, ErrorCode> {
        let Some(shard) = self.shard.upgrade() else {
            return Err(ErrorCode::NotCoordinator);
        };
        crate::shard::producer_ids::allocate_on_shard_zero(&shard).await
    }

    async fn write_markers(&self, markers: TxnMarkers) -> bool {
        let Some(shard) = self.shard.upgrade() else {
            return false;
        };
        let (partition, epoch) = (self.partition, self.coordinator_epoch);
        let weak = self.shard.clone();
        let still_current = move || {
            weak.upgrade()
                .is_some_and(|shard| shard.transactions.is_current(partition, epoch))
        };
        crate::shard::txn_markers::write_markers(&shard, markers, still_current).await
    }

    fn append_error(&self, error: &EngineError) -> ErrorCode {
        // Kafka's TransactionStateManager: a write that failed because this broker no longer
        // leads the partition (or its storage failed) means "not the coordinator"; a full or
        // slow log means "not available now".
        match error {
            EngineError::Fenced { .. } | EngineError::Closed | EngineError::Io { .. } => {
                ErrorCode::NotCoordinator
            }
            _ => ErrorCode::CoordinatorNotAvailable,
        }
    }

    fn now_ms(&self) -> i64 {
        kaas_engine::log_manager::now_ms()
    }
}
