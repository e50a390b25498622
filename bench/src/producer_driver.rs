//! One producer thread: sends records at a fixed rate or as fast as the client accepts
//! them, and records produce latency from each delivery report.
//!
//! At a fixed rate, record `i` of a producer is *meant* to be sent at `start + i / rate`.
//! Its latency is measured from that intended time, not from when `send` was actually
//! called, so a broker stall that holds the sender back (a full client queue) shows up in the
//! latency of every record that should have been sent meanwhile — there is no coordinated
//! omission. When the sender falls behind it sends the overdue records back to back.
//! With no rate (open throttle) latency is measured from the `send` call.
//!
//! The thread drives librdkafka's `BaseProducer` and serves its delivery reports itself, so
//! the histograms are touched by this thread only (the mutex is never contended).
//!
//! A transactional producer (`ProducerPlan::transactions`) does the same inside transactions:
//! `init_transactions` once, then `begin_transaction` → send → commit when the plan says so
//! (see [`crate::transaction_cycle`]). A commit blocks the thread; at a fixed rate the records
//! meant to be sent meanwhile keep their intended times, so a slow commit shows in their
//! produce latency too.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientConfig;

use crate::latency_recorder::SampleRecorder;
use crate::payload::PayloadSource;
use crate::progress_probe::ProgressProbe;
use crate::sample_clock::SampleClock;
use crate::transaction_cycle::{CommitRecorder, TransactionLoop, TransactionPlan};

/// Client-level errors (connection failures and the like) a client reported.
#[derive(Default)]
pub struct ClientErrors {
    inner: Mutex<(u64, Vec<String>)>,
}

impl ClientErrors {
    const KEPT: usize = 10;

    pub fn add(&self, message: String) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.0 += 1;
            if inner.1.len() < Self::KEPT {
                inner.1.push(message);
            }
        }
    }

    /// The number of errors and the first few messages.
    pub fn snapshot(&self) -> (u64, Vec<String>) {
        self.inner
            .lock()
            .map(|inner| inner.clone())
            .unwrap_or_default()
    }
}

/// What a producer does.
#[derive(Clone, Debug)]
pub struct ProducerPlan {
    pub topic: String,
    /// Records per second for this producer; `None` sends as fast as possible.
    pub rate: Option<f64>,
    pub record_size: usize,
    pub keys: u64,
    /// Stop after this many records (used to fill a topic); `None` runs until the clock ends.
    pub max_records: Option<u64>,
    /// How long to wait for outstanding deliveries after the last send (and, for a
    /// transactional producer, for each commit).
    pub drain_timeout: Duration,
    /// Send in transactions; the client config carries the `transactional.id`.
    pub transactions: Option<TransactionPlan>,
}

/// What a producer measured.
pub struct ProducerOutcome {
    pub recorder: SampleRecorder,
    pub sent: u64,
    pub delivered: u64,
    pub failed: u64,
    pub delivery_errors: Vec<String>,
    pub client_errors: (u64, Vec<String>),
    /// What the commits cost (transactional producers only).
    pub commits: Option<CommitRecorder>,
}

struct DeliveryState {
    recorder: SampleRecorder,
    delivered: u64,
    failed: u64,
    errors: Vec<String>,
}

/// librdkafka context: receives delivery reports on the producing thread.
struct DeliveryProbe {
    clock: SampleClock,
    progress: Arc<ProgressProbe>,
    state: Mutex<DeliveryState>,
    client_errors: Arc<ClientErrors>,
}

impl ClientContext for DeliveryProbe {
    fn error(&self, error: KafkaError, reason: &str) {
        self.client_errors.add(format!("{error}: {reason}"));
    }
}

impl ProducerContext for DeliveryProbe {
    /// Nanoseconds from the run's origin to the record's intended send time.
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, intended_nanos: usize) {
        let now = Instant::now();
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        match result {
            Ok(message) => {
                use rdkafka::Message;
                let bytes = (message.payload_len() + message.key().map_or(0, <[u8]>::len)) as u64;
                let intended = self.clock.at_nanos(intended_nanos as u64);
                let latency_us = now.saturating_duration_since(intended).as_micros() as u64;
                state
                    .recorder
                    .record_latency(self.clock.phase_of(intended), latency_us);
                state.recorder.count(self.clock.phase_of(now), bytes);
                state.delivered += 1;
                self.progress.add_produced(bytes);
                self.progress.observe_latency(latency_us);
            }
            Err((error, _)) => {
                state.failed += 1;
                if state.errors.len() < 10 {
                    state.errors.push(error.to_string());
                }
                self.progress.add_error();
            }
        }
    }
}

/// How long a producer whose client queue is full waits before trying again. The queue
/// holds 100,000 records (librdkafka's default), far more than are delivered in this time.
const QUEUE_FULL_PAUSE: Duration = Duration::from_micros(200);

/// Serves the delivery reports that are waiting, then sleeps for `wait`.
///
/// The producer never waits inside `poll` with a timeout: the `rdkafka` crate's `poll(d)`
/// keeps serving events until `d` has passed, and librdkafka takes whole milliseconds, so
/// the last part of every wait (all of a wait under 1 ms) is a busy loop. That loop took
/// most of a core on a 2-core machine, away from the broker under test.
fn serve_deliveries_then_sleep<C: ProducerContext>(producer: &BaseProducer<C>, wait: Duration) {
    producer.poll(Duration::ZERO);
    std::thread::sleep(wait);
}

/// Runs one producer until the clock's end (or `max_records`), then waits for deliveries.
pub fn run_producer(
    config: &ClientConfig,
    plan: &ProducerPlan,
    clock: SampleClock,
    progress: Arc<ProgressProbe>,
    seed: u64,
) -> anyhow::Result<ProducerOutcome> {
    let client_errors = Arc::new(ClientErrors::default());
    let probe = DeliveryProbe {
        clock,
        progress,
        state: Mutex::new(DeliveryState {
            recorder: SampleRecorder::new(clock.samples),
            delivered: 0,
            failed: 0,
            errors: Vec::new(),
        }),
        client_errors: client_errors.clone(),
    };
    let producer: BaseProducer<DeliveryProbe> = config
        .create_with_context(probe)
        .context("creating a producer")?;
    let mut payload = PayloadSource::new(plan.record_size, plan.keys, seed);
    let interval_nanos = plan.rate.map(|rate| 1e9 / rate);
    let end = clock.end();
    let mut sent: u64 = 0;

    let mut transactions = match &plan.transactions {
        Some(transaction_plan) => Some(TransactionLoop::init(
            &producer,
            transaction_plan,
            clock.samples,
        )?),
        None => None,
    };

    while Instant::now() < clock.start {
        serve_deliveries_then_sleep(&producer, Duration::from_millis(1));
    }
    loop {
        if plan.max_records.is_some_and(|max| sent >= max) {
            break;
        }
        let mut now = Instant::now();
        if now >= end {
            break;
        }
        if let Some(transactions) = transactions.as_mut() {
            transactions.commit_if_due(&producer, &clock, now, plan.drain_timeout)?;
            now = Instant::now();
        }
        let intended = match interval_nanos {
            Some(interval) => {
                let intended = clock.start + Duration::from_nanos((sent as f64 * interval) as u64);
                if intended >= end {
                    break;
                }
                if intended > now {
                    serve_deliveries_then_sleep(
                        &producer,
                        (intended - now).min(Duration::from_millis(1)),
                    );
                    continue;
                }
                intended
            }
            None => now,
        };
        let intended_nanos = clock.nanos_since_origin(intended);
        let key = payload.next_key();
        let value = payload.next_value(intended_nanos);
        let record_bytes = (value.len() + key.as_ref().map_or(0, |key| key.len())) as u64;
        let mut record: BaseRecord<'_, [u8], [u8], usize> =
            BaseRecord::with_opaque_to(&plan.topic, intended_nanos as usize).payload(value);
        if let Some(key) = key.as_ref() {
            record = record.key(&key[..]);
        }
        match producer.send(record) {
            Ok(()) => {
                sent += 1;
                if let Some(transactions) = transactions.as_mut() {
                    transactions.sent(record_bytes);
                }
                if sent.is_multiple_of(64) {
                    producer.poll(Duration::ZERO);
                }
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                // The client's queue is full: let deliveries free some of it, then try the
                // same record again (at a fixed rate it keeps its intended send time).
                serve_deliveries_then_sleep(&producer, QUEUE_FULL_PAUSE);
            }
            Err((error, _)) => return Err(error).context("sending a record"),
        }
    }

    let (commits, transaction_errors) = match transactions {
        Some(transactions) => {
            let (recorder, errors) = transactions.finish(&producer, &clock, plan.drain_timeout)?;
            (Some(recorder), errors)
        }
        None => (None, Vec::new()),
    };
    let drained = producer.flush(plan.drain_timeout);
    let undelivered = if drained.is_err() {
        let left = producer.in_flight_count().max(0) as u64;
        producer.purge(rdkafka::producer::PurgeConfig::default().queue().inflight());
        producer.poll(Duration::from_millis(100));
        left
    } else {
        0
    };
    let state = producer
        .context()
        .state
        .lock()
        .map_err(|_| anyhow::anyhow!("delivery state poisoned"))?;
    let mut delivery_errors = state.errors.clone();
    delivery_errors.extend(transaction_errors);
    if undelivered > 0 {
        delivery_errors.push(format!(
            "{undelivered} records still undelivered {:?} after the last send",
            plan.drain_timeout
        ));
    }
    Ok(ProducerOutcome {
        recorder: state.recorder.clone(),
        sent,
        delivered: state.delivered,
        failed: state.failed.max(sent.saturating_sub(state.delivered)),
        delivery_errors,
        client_errors: client_errors.snapshot(),
        commits,
    })
}
