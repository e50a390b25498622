//! One workload against one broker: `produce`, `consume` or `end-to-end`.
//!
//! - `produce`: producers send for warm-up + samples × sample seconds, at `--rate` (total
//!   records/s over all producers) or as fast as the client accepts records; produce latency
//!   is intended-send-time → delivery report.
//! - `end-to-end`: the same, with consumers reading the topic as it is written; end-to-end
//!   latency is intended-send-time → the consumer has the record.
//! - `--transactional` (produce and end-to-end): every producer sends in transactions with
//!   its own `transactional.id`, committing every `--transaction-ms` and/or
//!   `--records-per-transaction`; commit latency goes beside produce latency.
//! - `consume`: the topic is first filled with `--fill-bytes` of records, then read from the
//!   beginning once per sample (a warm-up pass first when `--warmup` > 0). A pass ends when
//!   every record was read or after `--sample` seconds.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use rdkafka::Offset;
use serde::{Deserialize, Serialize};

use crate::client_config::{parse_key_value, ClientSettings};
use crate::consumer_driver::{run_end_to_end_consumer, run_pass_consumer, share_of};
use crate::latency_recorder::SampleRecorder;
use crate::machine::{git_revision, unix_time, MachineInfo};
use crate::producer_driver::{run_producer, ProducerOutcome, ProducerPlan};
use crate::progress_probe::{ProgressPrinter, ProgressProbe};
use crate::report::{
    median, percentile_curve, summarize_throughput, LatencySummary, Report, SampleReport, Totals,
    TransactionSummary, REPORT_FORMAT,
};
use crate::sample_clock::SampleClock;
use crate::topic_admin::TopicAdmin;
use crate::transaction_cycle::{transactional_id, CommitRecorder, TransactionPlan};

/// What a run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// Producers only: throughput and produce latency.
    Produce,
    /// Fill a topic, then read it from the beginning: consume throughput.
    Consume,
    /// Producers and consumers at once: end-to-end (produce → consume) latency.
    EndToEnd,
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Produce => "produce",
            WorkloadKind::Consume => "consume",
            WorkloadKind::EndToEnd => "end-to-end",
        }
    }
}

/// Everything that defines a workload (recorded verbatim in the report).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkloadSpec {
    pub workload: WorkloadKind,
    /// Existing topic to use; `None` creates a fresh one (and deletes it afterwards).
    pub topic: Option<String>,
    pub partitions: i32,
    pub topic_configs: Vec<(String, String)>,
    /// Value bytes per record.
    pub record_size: usize,
    /// Distinct keys (0: keyless records, partitioned by librdkafka's default partitioner).
    pub keys: u64,
    pub compression: String,
    pub acks: String,
    /// Target records/s over all producers; 0 is open throttle.
    pub rate: f64,
    pub producers: usize,
    pub consumers: usize,
    pub warmup_s: f64,
    pub sample_s: f64,
    pub samples: usize,
    /// Bytes written before a consume run.
    pub fill_bytes: u64,
    /// Longest time spent filling before a consume run (slow brokers get less data).
    pub fill_s: f64,
    pub producer_props: Vec<(String, String)>,
    pub consumer_props: Vec<(String, String)>,
    pub drain_timeout_s: f64,
    pub keep_topic: bool,
    /// Transactional producers and when they commit; `None` for plain producers.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transactions: Option<TransactionPlan>,
}

/// `kaas-bench run` flags.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Broker address (`bootstrap.servers`).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Name of the broker in the report and plot (e.g. `kaas`, `kafka-default`).
    #[arg(long, default_value = "broker")]
    pub target: String,
    /// What to measure.
    #[arg(long, value_enum, default_value = "produce")]
    pub workload: WorkloadKind,
    /// Use this existing topic (created if missing) instead of a fresh one.
    #[arg(long)]
    pub topic: Option<String>,
    /// Keep the topic after the run (fresh topics are deleted by default).
    #[arg(long)]
    pub keep_topic: bool,
    /// Partitions of a fresh topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: i32,
    /// Topic config for a fresh topic, `key=value` (repeatable).
    #[arg(long = "topic-config", value_parser = parse_key_value)]
    pub topic_configs: Vec<(String, String)>,
    /// Value bytes per record (the first 8 carry the send timestamp).
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Distinct keys to draw from uniformly (0: keyless).
    #[arg(long, default_value_t = 0)]
    pub keys: u64,
    /// Producer compression: none, gzip, snappy, lz4, zstd.
    #[arg(long, default_value = "none")]
    pub compression: String,
    /// Producer acks: 0, 1 or all.
    #[arg(long, default_value = "all")]
    pub acks: String,
    /// Target records per second over all producers; 0 sends as fast as possible.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Producer threads (one librdkafka producer each).
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Consumer threads (end-to-end and consume workloads).
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// Warm-up seconds, not measured.
    #[arg(long, default_value_t = 5.0)]
    pub warmup: f64,
    /// Seconds per sample.
    #[arg(long, default_value_t = 10.0)]
    pub sample: f64,
    /// Number of samples.
    #[arg(long, default_value_t = 3)]
    pub samples: usize,
    /// Bytes of records written before a consume run reads them.
    #[arg(long, default_value_t = 512 << 20)]
    pub fill_bytes: u64,
    /// Stop filling after this many seconds even if fewer bytes were written.
    #[arg(long, default_value_t = 30.0)]
    pub fill_seconds: f64,
    /// librdkafka producer property, `key=value` (repeatable), e.g. `linger.ms=1`.
    #[arg(long = "producer-prop", value_parser = parse_key_value)]
    pub producer_props: Vec<(String, String)>,
    /// librdkafka consumer property, `key=value` (repeatable).
    #[arg(long = "consumer-prop", value_parser = parse_key_value)]
    pub consumer_props: Vec<(String, String)>,
    /// Seconds to wait for outstanding deliveries (and consumers to catch up) after the load;
    /// also the timeout of each transaction commit.
    #[arg(long, default_value_t = 30.0)]
    pub drain_timeout: f64,
    /// Transactional producers (produce and end-to-end): each gets its own
    /// `transactional.id` and commits every `--transaction-ms` (100 unless
    /// `--records-per-transaction` is given). Needs `--acks all`.
    #[arg(long)]
    pub transactional: bool,
    /// Commit a transaction once it has been open this many milliseconds.
    #[arg(long)]
    pub transaction_ms: Option<f64>,
    /// Commit a transaction once it holds this many records (with `--transaction-ms`,
    /// whichever comes first).
    #[arg(long)]
    pub records_per_transaction: Option<u64>,
    /// Where to write the JSON report.
    #[arg(long, default_value = "kaas-bench-report.json")]
    pub report: PathBuf,
    /// Where to write the PNG latency-percentile plot (default: the report path with .png).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Do not draw a plot.
    #[arg(long)]
    pub no_plot: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl RunArgs {
    pub fn spec(&self) -> anyhow::Result<WorkloadSpec> {
        let transactions = TransactionPlan::from_flags(
            self.transactional,
            self.transaction_ms,
            self.records_per_transaction,
        )
        .map_err(anyhow::Error::msg)?;
        Ok(WorkloadSpec {
            workload: self.workload,
            topic: self.topic.clone(),
            partitions: self.partitions,
            topic_configs: self.topic_configs.clone(),
            record_size: self.record_size,
            keys: self.keys,
            compression: self.compression.clone(),
            acks: self.acks.clone(),
            rate: self.rate,
            producers: self.producers,
            consumers: self.consumers,
            warmup_s: self.warmup,
            sample_s: self.sample,
            samples: self.samples,
            fill_bytes: self.fill_bytes,
            fill_s: self.fill_seconds,
            producer_props: self.producer_props.clone(),
            consumer_props: self.consumer_props.clone(),
            drain_timeout_s: self.drain_timeout,
            keep_topic: self.keep_topic,
            transactions,
        })
    }
}

impl WorkloadSpec {
    fn validate(&self) -> anyhow::Result<()> {
        if self.partitions < 1 {
            bail!("--partitions must be at least 1");
        }
        if self.producers < 1 || self.consumers < 1 {
            bail!("--producers and --consumers must be at least 1");
        }
        if self.samples < 1 || self.sample_s <= 0.0 {
            bail!("--samples and --sample must be positive");
        }
        if self.warmup_s < 0.0 || !self.rate.is_finite() || self.rate < 0.0 {
            bail!("--warmup and --rate must not be negative");
        }
        if self.workload == WorkloadKind::EndToEnd && self.record_size < 8 {
            bail!("end-to-end runs need --record-size of at least 8 (the send timestamp)");
        }
        if self.transactions.is_some() {
            if self.workload == WorkloadKind::Consume {
                bail!("--transactional applies to produce and end-to-end runs");
            }
            if !matches!(self.acks.as_str(), "all" | "-1") {
                bail!("transactional producers need --acks all");
            }
        }
        Ok(())
    }

    fn client_settings(&self, bootstrap: &str) -> ClientSettings {
        ClientSettings {
            bootstrap: bootstrap.to_string(),
            acks: self.acks.clone(),
            compression: self.compression.clone(),
            producer_props: self.producer_props.clone(),
            consumer_props: self.consumer_props.clone(),
        }
    }

    /// A one-line description, e.g. `produce 1024 B acks=all p=16 open`.
    pub fn describe(&self) -> String {
        let rate = if self.workload == WorkloadKind::Consume {
            String::new()
        } else if self.rate > 0.0 {
            format!(" {:.0} rec/s", self.rate)
        } else {
            " open".into()
        };
        let transactions = self
            .transactions
            .as_ref()
            .map(|plan| format!(" {}", plan.describe()))
            .unwrap_or_default();
        format!(
            "{} {} B acks={} p={}{}{}",
            self.workload.name(),
            self.record_size,
            self.acks,
            self.partitions,
            rate,
            transactions
        )
    }
}

/// `kaas-bench run`.
pub fn run_command(args: &RunArgs) -> anyhow::Result<()> {
    let spec = args.spec()?;
    let report = run_workload(&args.bootstrap, &args.target, &spec, !args.quiet)?;
    write_report(&args.report, &report)?;
    eprintln!("report: {}", args.report.display());
    print_summary(&report);
    if !args.no_plot {
        let plot_path = args
            .plot
            .clone()
            .unwrap_or_else(|| args.report.with_extension("png"));
        let series = crate::plot::series_of_report(&report);
        if series.is_empty() {
            eprintln!("no latencies to plot");
        } else {
            let title = format!("{} — {}", report.target, spec.describe());
            crate::plot::draw_percentile_plot(&plot_path, &title, &series)?;
            eprintln!("plot: {}", plot_path.display());
        }
    }
    if !report.complete {
        bail!("the run was incomplete: {}", report.errors.join("; "));
    }
    Ok(())
}

/// Writes `report` as pretty JSON.
pub fn write_report(path: &Path, report: &Report) -> anyhow::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))
}

fn print_summary(report: &Report) {
    let summary = &report.summary;
    println!(
        "{}: {} — {:.0} records/s, {:.1} MB/s (median of {} samples)",
        report.target,
        report.settings.describe(),
        summary.records_per_s,
        summary.mb_per_s,
        report.samples.len()
    );
    let show = |name: &str, latency: &Option<LatencySummary>| {
        if let Some(l) = latency {
            println!(
                "  {name} latency ms: p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}  ({} records)",
                l.p50_us as f64 / 1e3,
                l.p99_us as f64 / 1e3,
                l.p999_us as f64 / 1e3,
                l.max_us as f64 / 1e3,
                l.count
            );
        }
    };
    show("produce", &summary.produce_latency);
    show("end-to-end", &summary.end_to_end_latency);
    if let Some(transactions) = &summary.transactions {
        println!(
            "  committed: {:.0} records/s, {:.1} MB/s; {} transactions, {:.0} records each, {} aborted",
            transactions.committed_records_per_s,
            transactions.committed_mb_per_s,
            transactions.commits,
            transactions.records_per_transaction,
            transactions.aborted
        );
        let show_commit = |name: &str, latency: &Option<LatencySummary>| {
            if let Some(l) = latency {
                println!(
                    "  {name} ms: p50 {:.3}  p99 {:.3}  max {:.3}  ({} commits)",
                    l.p50_us as f64 / 1e3,
                    l.p99_us as f64 / 1e3,
                    l.max_us as f64 / 1e3,
                    l.count
                );
            }
        };
        show_commit("commit latency", &transactions.commit_latency);
        show_commit("  of which EndTxn", &transactions.end_txn_latency);
    }
    for note in &report.notes {
        println!("  note: {note}");
    }
    for error in &report.errors {
        println!("  error: {error}");
    }
}

static TOPIC_COUNTER: AtomicU64 = AtomicU64::new(0);

fn fresh_topic_name() -> String {
    format!(
        "kaas-bench-{}-{}-{}",
        unix_time(),
        std::process::id(),
        TOPIC_COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs `spec` against the broker at `bootstrap` and returns its report. Errors are for runs
/// that could not start (no broker, topic not created); trouble during the load is reported
/// in the report (`complete: false`, `errors`).
pub fn run_workload(
    bootstrap: &str,
    target: &str,
    spec: &WorkloadSpec,
    show_progress: bool,
) -> anyhow::Result<Report> {
    spec.validate()?;
    let settings = spec.client_settings(bootstrap);
    let admin = TopicAdmin::connect(&settings)?;
    let started_at_unix = unix_time();
    let (topic, fresh) = match &spec.topic {
        Some(topic) => {
            // Use it as it is if it exists.
            let _ = admin.create(topic, spec.partitions, &spec.topic_configs);
            (topic.clone(), false)
        }
        None => {
            let topic = fresh_topic_name();
            admin
                .create(&topic, spec.partitions, &spec.topic_configs)
                .with_context(|| format!("creating topic {topic}"))?;
            (topic, true)
        }
    };
    let label = format!("{target} {}", spec.describe());
    let outcome = match spec.workload {
        WorkloadKind::Produce | WorkloadKind::EndToEnd => run_load(
            &settings,
            &admin,
            spec,
            &topic,
            fresh,
            &label,
            show_progress,
        ),
        WorkloadKind::Consume => {
            run_consume(&settings, &admin, spec, &topic, &label, show_progress)
        }
    };
    if fresh && !spec.keep_topic {
        if let Err(error) = admin.delete(&topic) {
            eprintln!("warning: deleting {topic}: {error:#}");
        }
    }
    let measured = outcome?;
    Ok(Report {
        format: REPORT_FORMAT.into(),
        target: target.into(),
        bootstrap: bootstrap.into(),
        started_at_unix,
        git_revision: git_revision(),
        machine: MachineInfo::current(),
        settings: spec.clone(),
        complete: measured.errors.is_empty(),
        samples: measured.samples,
        summary: measured.summary,
        totals: measured.totals,
        errors: measured.errors,
        notes: measured.notes,
    })
}

struct Measured {
    samples: Vec<SampleReport>,
    summary: crate::report::Summary,
    totals: Totals,
    errors: Vec<String>,
    notes: Vec<String>,
}

fn secs(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds.max(0.0))
}

fn spawn_producers(
    settings: &ClientSettings,
    spec: &WorkloadSpec,
    plan: &ProducerPlan,
    clock: SampleClock,
    progress: &Arc<ProgressProbe>,
) -> Vec<std::thread::JoinHandle<anyhow::Result<ProducerOutcome>>> {
    (0..spec.producers)
        .map(|index| {
            let mut config = settings.producer(&format!("kaas-bench-producer-{index}"));
            if plan.transactions.is_some() {
                config.set("transactional.id", transactional_id(&plan.topic, index));
            }
            let plan = plan.clone();
            let progress = progress.clone();
            std::thread::Builder::new()
                .name(format!("producer-{index}"))
                .spawn(move || run_producer(&config, &plan, clock, progress, index as u64 + 1))
        })
        .filter_map(Result::ok)
        .collect()
}

struct ProducersJoined {
    recorder: SampleRecorder,
    /// Transactional producers' commits, merged.
    commits: Option<CommitRecorder>,
    totals: Totals,
    errors: Vec<String>,
}

fn join_producers(
    handles: Vec<std::thread::JoinHandle<anyhow::Result<ProducerOutcome>>>,
    samples: usize,
) -> ProducersJoined {
    let mut joined = ProducersJoined {
        recorder: SampleRecorder::new(samples),
        commits: None,
        totals: Totals::default(),
        errors: Vec::new(),
    };
    for handle in handles {
        match handle.join() {
            Ok(Ok(outcome)) => {
                joined.recorder.merge(&outcome.recorder);
                if let Some(commits) = &outcome.commits {
                    joined
                        .commits
                        .get_or_insert_with(|| CommitRecorder::new(samples))
                        .merge(commits);
                }
                joined.totals.sent += outcome.sent;
                joined.totals.delivered += outcome.delivered;
                joined.totals.failed += outcome.failed;
                if outcome.failed > 0 {
                    joined.errors.push(format!(
                        "{} of {} records not delivered",
                        outcome.failed, outcome.sent
                    ));
                }
                joined
                    .errors
                    .extend(outcome.delivery_errors.into_iter().take(3));
                let (client_errors, messages) = outcome.client_errors;
                if client_errors > 0 {
                    joined.errors.push(format!(
                        "producer client errors: {client_errors} ({})",
                        messages.join(" | ")
                    ));
                }
            }
            Ok(Err(error)) => joined.errors.push(format!("producer failed: {error:#}")),
            Err(_) => joined.errors.push("producer thread panicked".into()),
        }
    }
    joined
}

fn run_load(
    settings: &ClientSettings,
    admin: &TopicAdmin,
    spec: &WorkloadSpec,
    topic: &str,
    fresh: bool,
    label: &str,
    show_progress: bool,
) -> anyhow::Result<Measured> {
    let progress = Arc::new(ProgressProbe::default());
    let end_to_end = spec.workload == WorkloadKind::EndToEnd;
    // The clock starts after consumers are assigned; consumers need it, so create it first
    // with a lead long enough for them to get going.
    let lead = if end_to_end {
        Duration::from_secs(2)
    } else {
        Duration::from_millis(100)
    };
    let clock = SampleClock::new(lead, secs(spec.warmup_s), secs(spec.sample_s), spec.samples);
    let stop_consumers = Arc::new(AtomicBool::new(false));
    let mut consumer_handles = Vec::new();
    if end_to_end {
        let start_offsets: Vec<Offset> = if fresh {
            vec![Offset::Beginning; spec.partitions as usize]
        } else {
            admin
                .end_offsets(topic, spec.partitions)?
                .into_iter()
                .map(Offset::Offset)
                .collect()
        };
        let consumers = spec.consumers.min(spec.partitions as usize).max(1);
        for index in 0..consumers {
            let start: Vec<(i32, Offset)> = share_of(spec.partitions, index, consumers)
                .into_iter()
                .map(|partition| (partition, start_offsets[partition as usize]))
                .collect();
            let config = settings.consumer(&format!("kaas-bench-consumer-{index}"));
            let topic = topic.to_string();
            let progress = progress.clone();
            let stop = stop_consumers.clone();
            let ready = Arc::new(AtomicBool::new(false));
            let thread_ready = ready.clone();
            let handle = std::thread::Builder::new()
                .name(format!("consumer-{index}"))
                .spawn(move || {
                    run_end_to_end_consumer(
                        &config,
                        &topic,
                        &start,
                        clock,
                        progress,
                        &thread_ready,
                        &stop,
                    )
                })
                .context("starting a consumer thread")?;
            consumer_handles.push((handle, ready));
        }
        let deadline = clock.start;
        while consumer_handles
            .iter()
            .any(|(handle, ready)| !ready.load(Ordering::Acquire) && !handle.is_finished())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    let plan = ProducerPlan {
        topic: topic.to_string(),
        rate: (spec.rate > 0.0).then(|| spec.rate / spec.producers as f64),
        record_size: spec.record_size,
        keys: spec.keys,
        max_records: None,
        drain_timeout: secs(spec.drain_timeout_s),
        transactions: spec.transactions.clone(),
    };
    let printer = show_progress
        .then(|| ProgressPrinter::start(label.to_string(), progress.clone(), Some(clock)));
    let producers = spawn_producers(settings, spec, &plan, clock, &progress);
    if producers.len() != spec.producers {
        bail!("could not start every producer thread");
    }
    let joined = join_producers(producers, spec.samples);
    let mut totals = joined.totals;
    let mut errors = joined.errors;

    let mut e2e_recorder = SampleRecorder::new(spec.samples);
    if end_to_end {
        // Wait for consumers to read everything that was acknowledged.
        let deadline = Instant::now() + secs(spec.drain_timeout_s);
        while progress.consumed_records.load(Ordering::Relaxed) < totals.delivered
            && Instant::now() < deadline
            && consumer_handles
                .iter()
                .any(|(handle, _)| !handle.is_finished())
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop_consumers.store(true, Ordering::Release);
        for (handle, _) in consumer_handles {
            match handle.join() {
                Ok(Ok(outcome)) => {
                    e2e_recorder.merge(&outcome.recorder);
                    totals.consumed += outcome.received;
                    note_consumer_errors(&mut errors, outcome.errors, outcome.client_errors);
                }
                Ok(Err(error)) => errors.push(format!("consumer failed: {error:#}")),
                Err(_) => errors.push("consumer thread panicked".into()),
            }
        }
        if totals.consumed < totals.delivered {
            errors.push(format!(
                "consumers read {} of {} acknowledged records within the drain timeout",
                totals.consumed, totals.delivered
            ));
        }
    }
    drop(printer);

    let sample_seconds = spec.sample_s;
    let samples: Vec<SampleReport> = (0..spec.samples)
        .map(|index| {
            let records = joined.recorder.records[index];
            let bytes = joined.recorder.bytes[index];
            SampleReport {
                index,
                seconds: sample_seconds,
                records,
                bytes,
                records_per_s: records as f64 / sample_seconds,
                mb_per_s: bytes as f64 / sample_seconds / 1e6,
                produce_latency: LatencySummary::of(&joined.recorder.latency[index]),
                end_to_end_latency: end_to_end
                    .then(|| LatencySummary::of(&e2e_recorder.latency[index]))
                    .flatten(),
                commit_latency: joined
                    .commits
                    .as_ref()
                    .and_then(|commits| LatencySummary::of(&commits.commit[index])),
            }
        })
        .collect();
    let mut summary = summarize_throughput(&samples);
    let produce_all = joined.recorder.merged_latency();
    summary.produce_latency = LatencySummary::of(&produce_all);
    summary.produce_latency_curve = percentile_curve(&produce_all);
    if end_to_end {
        let e2e_all = e2e_recorder.merged_latency();
        summary.end_to_end_latency = LatencySummary::of(&e2e_all);
        summary.end_to_end_latency_curve = percentile_curve(&e2e_all);
    }
    summary.transactions = joined
        .commits
        .as_ref()
        .map(|commits| summarize_transactions(commits, sample_seconds));
    Ok(Measured {
        samples,
        summary,
        totals,
        errors,
        notes: Vec::new(),
    })
}

fn run_consume(
    settings: &ClientSettings,
    admin: &TopicAdmin,
    spec: &WorkloadSpec,
    topic: &str,
    label: &str,
    show_progress: bool,
) -> anyhow::Result<Measured> {
    let progress = Arc::new(ProgressProbe::default());
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    let mut totals = Totals::default();

    // Fill the topic as fast as possible.
    let records_to_write = (spec.fill_bytes / spec.record_size.max(1) as u64).max(1);
    let per_producer = records_to_write.div_ceil(spec.producers as u64);
    let plan = ProducerPlan {
        topic: topic.to_string(),
        rate: None,
        record_size: spec.record_size,
        keys: spec.keys,
        max_records: Some(per_producer),
        drain_timeout: secs(spec.drain_timeout_s),
        transactions: None,
    };
    let fill_clock = SampleClock::new(
        Duration::ZERO,
        Duration::ZERO,
        secs(spec.fill_s.max(1.0)),
        1,
    );
    {
        let _printer = show_progress
            .then(|| ProgressPrinter::start(format!("{label} fill"), progress.clone(), None));
        let joined = join_producers(
            spawn_producers(settings, spec, &plan, fill_clock, &progress),
            1,
        );
        totals.sent = joined.totals.sent;
        totals.delivered = joined.totals.delivered;
        totals.failed = joined.totals.failed;
        errors.extend(joined.errors);
    }
    let ends = admin.end_offsets(topic, spec.partitions)?;
    let available: u64 = ends.iter().map(|end| (*end).max(0) as u64).sum();

    let consumers = spec.consumers.min(spec.partitions as usize).max(1);
    let passes = usize::from(spec.warmup_s > 0.0) + spec.samples;
    let mut samples = Vec::new();
    for pass in 0..passes {
        let warmup = spec.warmup_s > 0.0 && pass == 0;
        let limit = if warmup { spec.warmup_s } else { spec.sample_s };
        let pass_label = if warmup {
            format!("{label} warm-up pass")
        } else {
            format!("{label} pass {}/{}", samples.len() + 1, spec.samples)
        };
        let _printer =
            show_progress.then(|| ProgressPrinter::start(pass_label, progress.clone(), None));
        let started = Instant::now();
        let deadline = started + secs(limit);
        let handles: Vec<_> = (0..consumers)
            .map(|index| {
                let share = share_of(spec.partitions, index, consumers);
                let expected: u64 = share
                    .iter()
                    .map(|partition| ends[*partition as usize].max(0) as u64)
                    .sum();
                let start: Vec<(i32, Offset)> = share
                    .into_iter()
                    .map(|partition| (partition, Offset::Beginning))
                    .collect();
                let config = settings.consumer(&format!("kaas-bench-consumer-{index}"));
                let topic = topic.to_string();
                let progress = progress.clone();
                std::thread::Builder::new()
                    .name(format!("consumer-{index}"))
                    .spawn(move || {
                        run_pass_consumer(&config, &topic, &start, expected, deadline, progress)
                    })
            })
            .collect::<Result<_, _>>()
            .context("starting consumer threads")?;
        let mut records = 0;
        let mut bytes = 0;
        let mut first: Option<Instant> = None;
        let mut finished = started;
        let mut time_limited = false;
        for handle in handles {
            match handle.join() {
                Ok(Ok(outcome)) => {
                    records += outcome.records;
                    bytes += outcome.bytes;
                    first = match (first, outcome.first) {
                        (Some(earlier), Some(this)) => Some(earlier.min(this)),
                        (earlier, this) => earlier.or(this),
                    };
                    finished = finished.max(outcome.finished);
                    if !outcome.complete && !warmup {
                        time_limited = true;
                    }
                    note_consumer_errors(&mut errors, outcome.errors, outcome.client_errors);
                }
                Ok(Err(error)) => errors.push(format!("consumer failed: {error:#}")),
                Err(_) => errors.push("consumer thread panicked".into()),
            }
        }
        totals.consumed += records;
        if warmup {
            continue;
        }
        // The clock starts at the first record, so that connecting, metadata and the
        // offset lookup (a fixed cost of every pass) do not dilute the rate.
        let seconds = finished
            .duration_since(first.unwrap_or(started))
            .as_secs_f64()
            .max(1e-9);
        if time_limited {
            notes.push(format!(
                "pass {} stopped at the {limit} s limit after {records} of {available} records",
                samples.len() + 1
            ));
        }
        samples.push(SampleReport {
            index: samples.len(),
            seconds,
            records,
            bytes,
            records_per_s: records as f64 / seconds,
            mb_per_s: bytes as f64 / seconds / 1e6,
            produce_latency: None,
            end_to_end_latency: None,
            commit_latency: None,
        });
    }
    if available < totals.delivered {
        errors.push(format!(
            "the topic holds {available} records but {} were acknowledged",
            totals.delivered
        ));
    }
    let summary = summarize_throughput(&samples);
    Ok(Measured {
        samples,
        summary,
        totals,
        errors,
        notes,
    })
}

/// Commit latency and committed throughput of a transactional run.
fn summarize_transactions(commits: &CommitRecorder, sample_seconds: f64) -> TransactionSummary {
    let per_second = |values: &[u64], scale: f64| -> Vec<f64> {
        values
            .iter()
            .map(|value| *value as f64 / sample_seconds / scale)
            .collect()
    };
    let commit_all = CommitRecorder::merged(&commits.commit);
    let committed_records: u64 = commits.committed_records.iter().sum();
    TransactionSummary {
        commits: commits.commits,
        aborted: commits.aborted,
        committed_records_per_s: median(&per_second(&commits.committed_records, 1.0)),
        committed_mb_per_s: median(&per_second(&commits.committed_bytes, 1e6)),
        records_per_transaction: if commit_all.is_empty() {
            0.0
        } else {
            committed_records as f64 / commit_all.len() as f64
        },
        commit_latency: LatencySummary::of(&commit_all),
        end_txn_latency: LatencySummary::of(&CommitRecorder::merged(&commits.end_txn)),
    }
}

/// A consumer's own errors (the first three) and a count of its client's errors.
fn note_consumer_errors(
    errors: &mut Vec<String>,
    own: Vec<String>,
    (count, messages): (u64, Vec<String>),
) {
    errors.extend(own.into_iter().take(3));
    if count > 0 {
        errors.push(format!(
            "consumer client errors: {count} ({})",
            messages.join(" | ")
        ));
    }
}
