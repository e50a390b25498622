//! Runs one `__transaction_state` partition's [`TransactionCoordinator`] against its log: the
//! I/O the state machine asks for.
//!
//! - **Loading.** [`CoordinatorDriver::load`] reads the partition's log from its start to its
//!   high watermark (its records are the coordinator's, one record per batch; control
//!   batches are skipped), rebuilds the state and carries out what loading found in flight
//!   (markers of prepared transactions sent again).
//! - **Requests.** Each client call registers a [`RequestId`] with a one-shot channel, feeds
//!   the machine and waits for the answer the machine gives once its record is durable. A
//!   call that needs a new producer id gets one from the hooks and is fed again (the machine
//!   changed nothing the first time).
//! - **Records.** Each append is one RecordBatch of one record (key and value in Kafka's
//!   `__transaction_state` format), appended at the coordinator epoch (the partition's leader
//!   epoch) and made durable (`append_durable`: fdatasync'd) before the machine hears
//!   `append_completed(Ok)`; an engine error reaches it as the Kafka code the caller's
//!   translation gives ([`CoordinatorHooks::append_error`]).
//! - **Markers.** Each set of markers goes to [`CoordinatorHooks::write_markers`], which
//!   returns once every partition has written them (it retries across leader moves) or the
//!   coordinator is no longer current; the machine then appends the Complete record.
//! - **Timers.** [`CoordinatorDriver::tick`] feeds the clock (aborts of timed-out
//!   transactions, expiry of idle transactional ids).
//!
//! A driver lives on the shard that owns its partition (`!Send`); every task it spawns holds
//! it, so dropping the owner's handle does not stop work in flight: [`CoordinatorDriver::stop`]
//! does, answering the waiting calls NOT_COORDINATOR.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use bytes::Bytes;
use futures_channel::oneshot;
use kaas_engine::batch::{scan_batches, CONTROL_MASK};
use kaas_engine::{EngineError, PartitionLog};

use super::coordinator::{
    Actions, AddOffsetsRequest, AddPartitionsRequest, Answer, CoordinatorConfig, EndTxnRequest,
    InitProducerIdRequest, LoadError, LogAppend, NeedsProducerId, RequestId,
    TransactionCoordinator, TxnMarkers,
};
use crate::groups::offsets_topic::record_batch::single_record_batch;
use crate::protocol::ErrorCode;

/// Bytes read from the log per step while loading.
const LOAD_READ_BYTES: usize = 1 << 20;

/// What the driver needs from the broker around it.
pub trait CoordinatorHooks: 'static {
    /// A new producer id, unique across the cluster.
    fn allocate_producer_id(&self) -> impl std::future::Future<Output = Result<i64, ErrorCode>>;
    /// Writes `markers` to every partition they name; true once all are written, false when
    /// this coordinator is no longer current (the markers are then someone else's job).
    fn write_markers(&self, markers: TxnMarkers) -> impl std::future::Future<Output = bool>;
    /// The Kafka code for an engine error of the coordinator's own log.
    fn append_error(&self, error: &EngineError) -> ErrorCode;
    /// The clock, in milliseconds since the epoch.
    fn now_ms(&self) -> i64;
}

/// Why a partition could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum DriverLoadError {
    /// Reading the log failed.
    #[error("reading the transaction log: {0}")]
    Read(#[from] EngineError),
    /// A record of the log does not decode.
    #[error("a transaction log record does not decode: {0:?}")]
    Record(LoadError),
    /// A batch of the log cannot be read record by record (compressed, or malformed).
    #[error("a transaction log batch at offset {0} cannot be read")]
    Batch(i64),
}

/// One `__transaction_state` partition's coordinator and its log.
pub struct CoordinatorDriver<H: CoordinatorHooks> {
    machine: RefCell<TransactionCoordinator>,
    log: PartitionLog,
    hooks: H,
    /// Calls waiting for their answer: the channel, and the answer that says only
    /// NOT_COORDINATOR (sent on [`CoordinatorDriver::stop`]).
    waiting: RefCell<HashMap<RequestId, (oneshot::Sender<Answer>, Answer)>>,
    next_request: Cell<u64>,
    stopped: Cell<bool>,
}

impl<H: CoordinatorHooks> CoordinatorDriver<H> {
    /// Loads partition `partition` from `log` (opened by the caller as the partition's leader
    /// at `coordinator_epoch`) and starts what loading found in flight.
    pub async fn load(
        log: PartitionLog,
        partition: i32,
        coordinator_epoch: i32,
        config: CoordinatorConfig,
        hooks: H,
    ) -> Result<Rc<Self>, DriverLoadError> {
        let records = read_records(&log).await?;
        let (machine, actions) = TransactionCoordinator::load(
            partition,
            coordinator_epoch,
            config,
            records,
            hooks.now_ms(),
        )
        .map_err(DriverLoadError::Record)?;
        let driver = Rc::new(CoordinatorDriver {
            machine: RefCell::new(machine),
            log,
            hooks,
            waiting: RefCell::new(HashMap::new()),
            next_request: Cell::new(0),
            stopped: Cell::new(false),
        });
        driver.carry_out(actions);
        Ok(driver)
    }

    /// The coordinator's state, to read (Describe, List).
    pub fn machine(&self) -> std::cell::Ref<'_, TransactionCoordinator> {
        self.machine.borrow()
    }

    /// The log it writes.
    pub fn log(&self) -> &PartitionLog {
        &self.log
    }

    /// Stops: nothing more is written, and every waiting call is answered NOT_COORDINATOR.
    pub fn stop(&self) {
        self.stopped.set(true);
        for (_, (waiting, not_coordinator)) in self.waiting.borrow_mut().drain() {
            let _ = waiting.send(not_coordinator);
        }
    }

    /// Whether [`CoordinatorDriver::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.get()
    }

    /// InitProducerId with a transactional id.
    pub async fn init_producer_id(self: &Rc<Self>, request: InitProducerIdRequest) -> Answer {
        let failed = |error| Answer::InitProducerId {
            error,
            producer_id: -1,
            producer_epoch: -1,
        };
        self.call(failed, |machine, id, now| {
            machine.init_producer_id(id, &request, now)
        })
        .await
    }

    /// AddPartitionsToTxn (a client's, or a V2 partition leader's implicit add).
    pub async fn add_partitions(self: &Rc<Self>, request: AddPartitionsRequest) -> Answer {
        let failed = |error| Answer::AddPartitions { error };
        self.call(failed, |machine, id, now| {
            Ok(machine.add_partitions(id, &request, now))
        })
        .await
    }

    /// AddOffsetsToTxn.
    pub async fn add_offsets(self: &Rc<Self>, request: AddOffsetsRequest) -> Answer {
        let failed = |error| Answer::AddPartitions { error };
        self.call(failed, |machine, id, now| {
            Ok(machine.add_offsets(id, &request, now))
        })
        .await
    }

    /// EndTxn.
    pub async fn end_txn(self: &Rc<Self>, request: EndTxnRequest) -> Answer {
        let failed = |error| Answer::EndTxn {
            error,
            producer_id: -1,
            producer_epoch: -1,
        };
        self.call(failed, |machine, id, now| {
            machine.end_txn(id, &request, now)
        })
        .await
    }

    /// Feeds the clock.
    pub fn tick(self: &Rc<Self>) {
        if self.stopped.get() {
            return;
        }
        let now = self.hooks.now_ms();
        let actions = self.machine.borrow_mut().tick(now);
        self.carry_out(actions);
    }

    /// Registers a call, feeds it (again after supplying a producer id when it needs one)
    /// and waits for its answer; `failed` is the call's answer carrying only an error.
    async fn call(
        self: &Rc<Self>,
        failed: impl Fn(ErrorCode) -> Answer,
        mut feed: impl FnMut(
            &mut TransactionCoordinator,
            RequestId,
            i64,
        ) -> Result<Actions, NeedsProducerId>,
    ) -> Answer {
        loop {
            if self.stopped.get() {
                return failed(ErrorCode::NotCoordinator);
            }
            let request = RequestId(self.next_request.get());
            self.next_request.set(request.0 + 1);
            let (sender, answer) = oneshot::channel();
            self.waiting
                .borrow_mut()
                .insert(request, (sender, failed(ErrorCode::NotCoordinator)));
            let now = self.hooks.now_ms();
            let fed = feed(&mut self.machine.borrow_mut(), request, now);
            match fed {
                Ok(actions) => {
                    self.carry_out(actions);
                    return answer
                        .await
                        .unwrap_or_else(|_| failed(ErrorCode::NotCoordinator));
                }
                Err(NeedsProducerId) => {
                    self.waiting.borrow_mut().remove(&request);
                    match self.hooks.allocate_producer_id().await {
                        Ok(producer_id) => {
                            self.machine.borrow_mut().supply_producer_id(producer_id)
                        }
                        Err(error) => return failed(error),
                    }
                }
            }
        }
    }

    /// Sends the answers and starts the appends, markers and producer-id allocations.
    fn carry_out(self: &Rc<Self>, actions: Actions) {
        for (request, answer) in actions.answers {
            if let Some((waiting, _)) = self.waiting.borrow_mut().remove(&request) {
                let _ = waiting.send(answer);
            }
        }
        if self.stopped.get() {
            return;
        }
        for append in actions.appends {
            let driver = self.clone();
            glommio::spawn_local(async move { driver.append(append).await }).detach();
        }
        for markers in actions.markers {
            let driver = self.clone();
            glommio::spawn_local(async move { driver.send_markers(markers).await }).detach();
        }
        if actions.producer_ids_wanted > 0 {
            let driver = self.clone();
            let wanted = actions.producer_ids_wanted;
            glommio::spawn_local(async move { driver.supply_producer_ids(wanted).await }).detach();
        }
    }

    /// Appends one record durably and reports it.
    async fn append(self: Rc<Self>, append: LogAppend) {
        let now = self.hooks.now_ms();
        let result = match (append.key_bytes(), append.value_bytes()) {
            (Ok(key), Ok(value)) => {
                let epoch = self.machine.borrow().coordinator_epoch();
                let batch = single_record_batch(0, epoch, now, &key, value.as_deref());
                match self.log.append_durable(&batch, epoch, now).await {
                    Ok(_) => Ok(()),
                    Err(error) => Err(self.hooks.append_error(&error)),
                }
            }
            // The machine's own values always encode; refuse the write rather than panic.
            _ => Err(ErrorCode::UnknownServerError),
        };
        if self.stopped.get() {
            return;
        }
        let now = self.hooks.now_ms();
        let actions = self
            .machine
            .borrow_mut()
            .append_completed(append.write_id, result, now);
        self.carry_out(actions);
    }

    /// Writes a transaction's markers and, once they are all written, reports it.
    async fn send_markers(self: Rc<Self>, markers: TxnMarkers) {
        let (id, producer_id, producer_epoch) = (
            markers.transactional_id.clone(),
            markers.producer_id,
            markers.producer_epoch,
        );
        if !self.hooks.write_markers(markers).await || self.stopped.get() {
            return;
        }
        let actions = self
            .machine
            .borrow_mut()
            .markers_written(&id, producer_id, producer_epoch);
        self.carry_out(actions);
    }

    /// Supplies producer ids a tick asked for.
    async fn supply_producer_ids(self: Rc<Self>, wanted: usize) {
        for _ in 0..wanted {
            match self.hooks.allocate_producer_id().await {
                Ok(producer_id) => self.machine.borrow_mut().supply_producer_id(producer_id),
                Err(error) => {
                    tracing::warn!(
                        ?error,
                        "cannot allocate a producer id for the transaction coordinator"
                    );
                    return;
                }
            }
        }
    }
}

/// Every record of the log from its start to its high watermark, as (key, value).
async fn read_records(log: &PartitionLog) -> Result<Vec<(Bytes, Option<Bytes>)>, DriverLoadError> {
    let mut records = Vec::new();
    let mut offset = log.offsets().log_start_offset;
    loop {
        let fetched = log.read(offset, LOAD_READ_BYTES).await?;
        if fetched.chunks.is_empty() || offset >= fetched.high_watermark {
            return Ok(records);
        }
        let before = offset;
        for chunk in &fetched.chunks {
            for scanned in scan_batches(chunk, 0) {
                let header = scanned.header;
                offset = offset.max(header.next_offset() as u64);
                if header.attributes & CONTROL_MASK != 0 {
                    continue;
                }
                let batch = &chunk[scanned.position as usize..][..scanned.total_len];
                let section = &batch[kaas_engine::batch::BATCH_HEADER_LEN..];
                let walked = match header.codec() {
                    Some(kaas_engine::compression::Codec::None) => {
                        kaas_engine::compaction::records::walk(section, header.records_count)
                            .map_err(|_| DriverLoadError::Batch(header.base_offset))?
                    }
                    _ => return Err(DriverLoadError::Batch(header.base_offset)),
                };
                for record in walked {
                    let Some(key) = record.key else { continue };
                    records.push((
                        Bytes::copy_from_slice(key),
                        record.value.map(Bytes::copy_from_slice),
                    ));
                }
            }
        }
        if offset == before {
            return Ok(records);
        }
    }
}

#[cfg(test)]
mod tests;
