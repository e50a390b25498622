//! The transactions of a transactional producer: when the open transaction is committed,
//! how a commit is timed, and what the commits of a run cost.
//!
//! A transactional producer calls `init_transactions` once, then loops `begin_transaction` →
//! produce → `commit_transaction`. A transaction is committed once it has at least one record
//! and is `interval` old or holds `records_per_transaction` records, whichever comes first.
//!
//! **Commit latency** is the time from the decision to commit to the return of the commit:
//! librdkafka's `commit_transaction` first waits for every record of the transaction to be
//! acknowledged, then sends `EndTxn` and waits for its answer, so both are included. The
//! `EndTxn` part alone (from the moment the last record was acknowledged) is kept beside it.
//! A commit is filed under the sample it *started* in; the records it committed under the
//! sample it *returned* in.
//!
//! The wait for acknowledgements is done here, not by the `rdkafka` crate's
//! `commit_transaction`: the crate flushes by calling `poll(100 ms)`, and its `poll` keeps
//! polling until the timeout has passed, so every commit would take at least 100 ms of a busy
//! loop. Here the producer serves its delivery reports without waiting and sleeps 100 µs
//! between tries; the crate's own flush then finds nothing to wait for.

use std::time::{Duration, Instant};

use anyhow::Context;
use hdrhistogram::Histogram;
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseProducer, Producer, ProducerContext};
use serde::{Deserialize, Serialize};

use crate::latency_recorder::new_histogram;
use crate::sample_clock::{Phase, SampleClock};

/// When a transactional producer commits (recorded verbatim in the report).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransactionPlan {
    /// Commit a transaction once it has been open this many milliseconds.
    pub interval_ms: Option<f64>,
    /// Commit a transaction once it holds this many records.
    pub records_per_transaction: Option<u64>,
}

/// The commit interval when `--transactional` is given without a bound.
pub const DEFAULT_INTERVAL_MS: f64 = 100.0;

impl TransactionPlan {
    /// The plan the command line asks for: `None` without `--transactional`; with it and no
    /// bound, a commit every [`DEFAULT_INTERVAL_MS`].
    pub fn from_flags(
        transactional: bool,
        interval_ms: Option<f64>,
        records_per_transaction: Option<u64>,
    ) -> Result<Option<Self>, String> {
        if !transactional {
            if interval_ms.is_some() || records_per_transaction.is_some() {
                return Err(
                    "--transaction-ms and --records-per-transaction need --transactional".into(),
                );
            }
            return Ok(None);
        }
        if interval_ms.is_some_and(|ms| !ms.is_finite() || ms <= 0.0) {
            return Err("--transaction-ms must be positive".into());
        }
        if records_per_transaction == Some(0) {
            return Err("--records-per-transaction must be at least 1".into());
        }
        let interval_ms = match (interval_ms, records_per_transaction) {
            (None, None) => Some(DEFAULT_INTERVAL_MS),
            (interval, _) => interval,
        };
        Ok(Some(TransactionPlan {
            interval_ms,
            records_per_transaction,
        }))
    }

    /// Whether a transaction open for `open_for` with `records` records is to be committed.
    /// An empty transaction never is: there is nothing to commit.
    pub fn is_due(&self, open_for: Duration, records: u64) -> bool {
        if records == 0 {
            return false;
        }
        let old_enough = self
            .interval_ms
            .is_some_and(|ms| open_for.as_secs_f64() * 1e3 >= ms);
        let full = self
            .records_per_transaction
            .is_some_and(|limit| records >= limit);
        old_enough || full
    }

    /// A one-line description, e.g. `txn 100 ms` or `txn 100 ms / 1000 rec`.
    pub fn describe(&self) -> String {
        let interval = self.interval_ms.map(|ms| format!("{ms} ms"));
        let records = self.records_per_transaction.map(|n| format!("{n} rec"));
        let bounds: Vec<String> = interval.into_iter().chain(records).collect();
        format!("txn {}", bounds.join(" / "))
    }
}

/// The `transactional.id` of producer `index` of a run: unique per run, so that a run never
/// fences or waits for another's producer.
pub fn transactional_id(run_tag: &str, index: usize) -> String {
    format!("{run_tag}-txn-{index}")
}

/// The transaction a producer has open.
#[derive(Clone, Copy, Debug)]
pub struct OpenTransaction {
    pub begun: Instant,
    pub records: u64,
    pub bytes: u64,
}

impl OpenTransaction {
    pub fn begin(now: Instant) -> Self {
        OpenTransaction {
            begun: now,
            records: 0,
            bytes: 0,
        }
    }

    pub fn add(&mut self, bytes: u64) {
        self.records += 1;
        self.bytes += bytes;
    }
}

/// How long one commit took.
#[derive(Clone, Copy, Debug)]
pub struct CommitTiming {
    pub started: Instant,
    /// Decision to commit → `commit_transaction` returned.
    pub total: Duration,
    /// Last record acknowledged → `commit_transaction` returned (the `EndTxn` round trip).
    pub end_txn: Duration,
}

/// Why a commit did not happen.
#[derive(Debug)]
pub enum CommitFailure {
    /// Records were still unacknowledged when the timeout passed.
    Unacknowledged { left: i32 },
    /// librdkafka refused or failed the commit.
    Client(KafkaError),
}

impl std::fmt::Display for CommitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommitFailure::Unacknowledged { left } => {
                write!(f, "{left} records of the transaction unacknowledged")
            }
            CommitFailure::Client(error) => write!(f, "{error}"),
        }
    }
}

/// How long the producer sleeps between checks for outstanding acknowledgements.
const ACK_WAIT_PAUSE: Duration = Duration::from_micros(100);

/// Waits for every record of the open transaction to be acknowledged (serving delivery
/// reports), then commits it.
pub fn commit<C: ProducerContext>(
    producer: &BaseProducer<C>,
    timeout: Duration,
) -> Result<CommitTiming, CommitFailure> {
    let started = Instant::now();
    let deadline = started + timeout;
    loop {
        producer.poll(Duration::ZERO);
        let left = producer.in_flight_count();
        if left <= 0 {
            break;
        }
        if Instant::now() >= deadline {
            return Err(CommitFailure::Unacknowledged { left });
        }
        std::thread::sleep(ACK_WAIT_PAUSE);
    }
    let acknowledged = Instant::now();
    producer
        .commit_transaction(deadline.saturating_duration_since(acknowledged))
        .map_err(CommitFailure::Client)?;
    let done = Instant::now();
    Ok(CommitTiming {
        started,
        total: done - started,
        end_txn: done - acknowledged,
    })
}

/// How long `init_transactions` may take (coordinator lookup and producer id).
const INIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Commits that failed with a retriable error are tried this many times in all.
const COMMIT_ATTEMPTS: u32 = 3;

/// A producer's transactions: the one it has open, and what the committed ones cost.
pub struct TransactionLoop {
    plan: TransactionPlan,
    open: Option<OpenTransaction>,
    recorder: CommitRecorder,
    errors: Vec<String>,
}

impl TransactionLoop {
    /// Calls `init_transactions` (which fences any earlier producer with the same id).
    pub fn init<C: ProducerContext>(
        producer: &BaseProducer<C>,
        plan: &TransactionPlan,
        samples: usize,
    ) -> anyhow::Result<Self> {
        producer
            .init_transactions(INIT_TIMEOUT)
            .context("init_transactions")?;
        Ok(TransactionLoop {
            plan: plan.clone(),
            open: None,
            recorder: CommitRecorder::new(samples),
            errors: Vec::new(),
        })
    }

    /// Commits the open transaction if the plan says it is time, then makes sure one is open.
    pub fn commit_if_due<C: ProducerContext>(
        &mut self,
        producer: &BaseProducer<C>,
        clock: &SampleClock,
        now: Instant,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        if let Some(open) = self.open {
            if self
                .plan
                .is_due(now.saturating_duration_since(open.begun), open.records)
            {
                self.commit_open(producer, clock, timeout)?;
            }
        }
        if self.open.is_none() {
            producer.begin_transaction().context("begin_transaction")?;
            self.open = Some(OpenTransaction::begin(Instant::now()));
        }
        Ok(())
    }

    /// Counts a record sent within the open transaction.
    pub fn sent(&mut self, bytes: u64) {
        if let Some(open) = self.open.as_mut() {
            open.add(bytes);
        }
    }

    /// Commits whatever is still open after the last send, and returns what the commits
    /// cost and the errors met (aborted transactions among them).
    pub fn finish<C: ProducerContext>(
        mut self,
        producer: &BaseProducer<C>,
        clock: &SampleClock,
        timeout: Duration,
    ) -> anyhow::Result<(CommitRecorder, Vec<String>)> {
        self.commit_open(producer, clock, timeout)?;
        Ok((self.recorder, self.errors))
    }

    fn note(&mut self, error: String) {
        if self.errors.len() < 10 {
            self.errors.push(error);
        }
    }

    /// Commits the open transaction. A commit librdkafka says must be aborted is aborted and
    /// noted; a fatal error ends the producer.
    fn commit_open<C: ProducerContext>(
        &mut self,
        producer: &BaseProducer<C>,
        clock: &SampleClock,
        timeout: Duration,
    ) -> anyhow::Result<()> {
        let Some(open) = self.open.take() else {
            return Ok(());
        };
        let mut attempt = 1;
        loop {
            match commit(producer, timeout) {
                Ok(timing) => {
                    if open.records > 0 {
                        let done = Instant::now();
                        self.recorder.record(
                            clock.phase_of(timing.started),
                            clock.phase_of(done),
                            &timing,
                            &open,
                        );
                    }
                    return Ok(());
                }
                Err(CommitFailure::Client(KafkaError::Transaction(error)))
                    if error.is_retriable() && attempt < COMMIT_ATTEMPTS =>
                {
                    attempt += 1;
                }
                Err(CommitFailure::Client(KafkaError::Transaction(error)))
                    if !error.txn_requires_abort() =>
                {
                    anyhow::bail!("committing a transaction: {error}");
                }
                Err(failure) => {
                    self.note(format!(
                        "transaction of {} records aborted: {failure}",
                        open.records
                    ));
                    producer
                        .abort_transaction(timeout)
                        .context("aborting a transaction")?;
                    self.recorder.aborted += 1;
                    return Ok(());
                }
            }
        }
    }
}

/// What one producer's commits cost, per sample.
#[derive(Clone)]
pub struct CommitRecorder {
    /// Commit latency (decision → return) per sample, microseconds.
    pub commit: Vec<Histogram<u64>>,
    /// The `EndTxn` part of it per sample, microseconds.
    pub end_txn: Vec<Histogram<u64>>,
    /// Records and bytes committed per sample (filed when the commit returned).
    pub committed_records: Vec<u64>,
    pub committed_bytes: Vec<u64>,
    /// Transactions committed over the whole run, warm-up and the last one included.
    pub commits: u64,
    /// Transactions aborted over the whole run.
    pub aborted: u64,
}

impl CommitRecorder {
    pub fn new(samples: usize) -> Self {
        CommitRecorder {
            commit: (0..samples).map(|_| new_histogram()).collect(),
            end_txn: (0..samples).map(|_| new_histogram()).collect(),
            committed_records: vec![0; samples],
            committed_bytes: vec![0; samples],
            commits: 0,
            aborted: 0,
        }
    }

    /// Files a commit that started in `started_phase` and returned in `done_phase`.
    pub fn record(
        &mut self,
        started_phase: Phase,
        done_phase: Phase,
        timing: &CommitTiming,
        transaction: &OpenTransaction,
    ) {
        self.commits += 1;
        if let Phase::Sample(index) = started_phase {
            if let (Some(commit), Some(end_txn)) =
                (self.commit.get_mut(index), self.end_txn.get_mut(index))
            {
                commit.saturating_record((timing.total.as_micros() as u64).max(1));
                end_txn.saturating_record((timing.end_txn.as_micros() as u64).max(1));
            }
        }
        if let Phase::Sample(index) = done_phase {
            if let (Some(records), Some(bytes)) = (
                self.committed_records.get_mut(index),
                self.committed_bytes.get_mut(index),
            ) {
                *records += transaction.records;
                *bytes += transaction.bytes;
            }
        }
    }

    /// Adds another producer's recorder into this one.
    pub fn merge(&mut self, other: &CommitRecorder) {
        for (mine, theirs) in self.commit.iter_mut().zip(&other.commit) {
            // Same bounds on both sides, so adding cannot fail.
            let _ = mine.add(theirs);
        }
        for (mine, theirs) in self.end_txn.iter_mut().zip(&other.end_txn) {
            let _ = mine.add(theirs);
        }
        for (mine, theirs) in self
            .committed_records
            .iter_mut()
            .zip(&other.committed_records)
        {
            *mine += theirs;
        }
        for (mine, theirs) in self.committed_bytes.iter_mut().zip(&other.committed_bytes) {
            *mine += theirs;
        }
        self.commits += other.commits;
        self.aborted += other.aborted;
    }

    /// Every sample's histogram of `which` merged into one.
    pub fn merged(which: &[Histogram<u64>]) -> Histogram<u64> {
        let mut all = new_histogram();
        for histogram in which {
            let _ = all.add(histogram);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(value: u64) -> Duration {
        Duration::from_millis(value)
    }

    #[test]
    fn flags_make_a_plan() {
        assert_eq!(TransactionPlan::from_flags(false, None, None), Ok(None));
        assert!(TransactionPlan::from_flags(false, Some(100.0), None).is_err());
        assert!(TransactionPlan::from_flags(false, None, Some(10)).is_err());
        assert!(TransactionPlan::from_flags(true, Some(0.0), None).is_err());
        assert!(TransactionPlan::from_flags(true, None, Some(0)).is_err());
        assert_eq!(
            TransactionPlan::from_flags(true, None, None),
            Ok(Some(TransactionPlan {
                interval_ms: Some(DEFAULT_INTERVAL_MS),
                records_per_transaction: None
            }))
        );
        assert_eq!(
            TransactionPlan::from_flags(true, None, Some(500)),
            Ok(Some(TransactionPlan {
                interval_ms: None,
                records_per_transaction: Some(500)
            }))
        );
    }

    #[test]
    fn a_transaction_is_due_at_the_first_bound_it_reaches() {
        let by_time = TransactionPlan {
            interval_ms: Some(100.0),
            records_per_transaction: None,
        };
        assert!(!by_time.is_due(ms(99), 1_000_000));
        assert!(by_time.is_due(ms(100), 1));
        assert!(!by_time.is_due(ms(5_000), 0), "empty transactions wait");

        let by_count = TransactionPlan {
            interval_ms: None,
            records_per_transaction: Some(10),
        };
        assert!(!by_count.is_due(ms(60_000), 9));
        assert!(by_count.is_due(ms(0), 10));

        let both = TransactionPlan {
            interval_ms: Some(100.0),
            records_per_transaction: Some(10),
        };
        assert!(both.is_due(ms(1), 10));
        assert!(both.is_due(ms(100), 1));
        assert!(!both.is_due(ms(99), 9));
        assert_eq!(both.describe(), "txn 100 ms / 10 rec");
        assert_eq!(by_time.describe(), "txn 100 ms");
    }

    #[test]
    fn transactional_ids_differ_per_producer() {
        assert_eq!(transactional_id("run-7", 0), "run-7-txn-0");
        assert_ne!(transactional_id("run-7", 0), transactional_id("run-7", 1));
    }

    #[test]
    fn commits_file_latency_by_start_and_records_by_return() {
        let now = Instant::now();
        let timing = CommitTiming {
            started: now,
            total: ms(12),
            end_txn: ms(3),
        };
        let mut transaction = OpenTransaction::begin(now);
        transaction.add(1024);
        transaction.add(1024);

        let mut recorder = CommitRecorder::new(2);
        recorder.record(Phase::Warmup, Phase::Sample(0), &timing, &transaction);
        recorder.record(Phase::Sample(0), Phase::Sample(1), &timing, &transaction);
        recorder.record(Phase::Sample(1), Phase::After, &timing, &transaction);
        assert_eq!(recorder.commits, 3);
        assert_eq!(recorder.commit[0].len(), 1);
        assert_eq!(recorder.commit[1].len(), 1);
        assert_eq!(recorder.committed_records, vec![2, 2]);
        assert_eq!(recorder.committed_bytes, vec![2048, 2048]);
        let end_txn = CommitRecorder::merged(&recorder.end_txn);
        assert_eq!(end_txn.len(), 2);
        assert!(end_txn.max() >= 2_990 && end_txn.max() <= 3_010);

        let mut other = CommitRecorder::new(2);
        other.aborted = 1;
        other.record(Phase::Sample(1), Phase::Sample(1), &timing, &transaction);
        recorder.merge(&other);
        assert_eq!(recorder.commits, 4);
        assert_eq!(recorder.aborted, 1);
        assert_eq!(recorder.committed_records, vec![2, 4]);
        assert_eq!(CommitRecorder::merged(&recorder.commit).len(), 3);
    }
}
