//! `kaas-bench matrix`: one grid of workloads against several brokers, in alternation.
//!
//! For every record size × partition count × acks, each target in turn runs produce-only at
//! open throttle; then each target in turn runs end-to-end at a fixed rate of
//! `--e2e-rate-fraction` of the *baseline* target's produce throughput for that cell (by
//! default half of Apache Kafka's maximum). Consume-only runs once per record size ×
//! partition count (the topic is filled with acks=all). Running every target back to back
//! for one cell before moving on keeps slow drifts of the machine (other load, page cache,
//! thermal) from landing on one broker only.
//!
//! Every run gets a fresh topic, deleted afterwards. Before each run the harness waits until
//! the disk under `--disk-dir` has `--min-free-gib` free, so brokers that delete lazily do
//! not fill it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::client_config::parse_key_value;
use crate::limits::Limits;
use crate::machine::{git_revision, unix_time, MachineInfo};
use crate::report::{LatencySummary, Summary};
use crate::workload::{run_workload, write_report, WorkloadKind, WorkloadSpec};

fn parse_target(text: &str) -> Result<(String, String), String> {
    parse_key_value(text).map_err(|_| format!("expected NAME=HOST:PORT, got {text:?}"))
}

fn parse_target_config(text: &str) -> Result<(String, String, String), String> {
    let (target, rest) = text
        .split_once(':')
        .ok_or_else(|| format!("expected TARGET:key=value, got {text:?}"))?;
    let (key, value) = parse_key_value(rest)?;
    Ok((target.to_string(), key, value))
}

/// `kaas-bench matrix` flags.
#[derive(Args, Debug, Clone)]
pub struct MatrixArgs {
    /// A broker to measure, `NAME=HOST:PORT`, in alternation order (repeatable).
    #[arg(long = "target", value_parser = parse_target, required_unless_present = "render_only")]
    pub targets: Vec<(String, String)>,
    /// Run nothing: write `RESULTS.md` into `--out` from this `matrix.json`.
    #[arg(long)]
    pub render_only: Option<PathBuf>,
    /// A sentence describing a target for the results, `NAME=TEXT` (repeatable).
    #[arg(long = "describe", value_parser = parse_key_value)]
    pub descriptions: Vec<(String, String)>,
    /// The broker under test (ratios are this target over the others).
    #[arg(long, default_value = "kaas")]
    pub subject: String,
    /// The target whose produce throughput sets the end-to-end rate.
    #[arg(long, default_value = "kafka-default")]
    pub baseline: String,
    /// The smaller matrix: 1 KiB and 16 KiB, acks=all, 1 and 16 partitions, shorter samples.
    #[arg(long)]
    pub quick: bool,
    /// Record sizes in bytes [default: 100,1024,16384; quick: 1024,16384].
    #[arg(long, value_delimiter = ',')]
    pub sizes: Option<Vec<usize>>,
    /// acks settings [default: 1,all; quick: all].
    #[arg(long, value_delimiter = ',')]
    pub acks: Option<Vec<String>>,
    /// Partition counts [default: 1,16,1000; quick: 1,16].
    #[arg(long, value_delimiter = ',')]
    pub partitions: Option<Vec<i32>>,
    /// Workloads to run (end-to-end needs produce for its rate).
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "produce,end-to-end,consume"
    )]
    pub workloads: Vec<WorkloadKind>,
    /// Warm-up seconds per run [default: 3; quick: 2].
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Seconds per sample [default: 4; quick: 3].
    #[arg(long)]
    pub sample: Option<f64>,
    /// Samples per run [default: 3].
    #[arg(long)]
    pub samples: Option<usize>,
    /// End-to-end rate as a fraction of the baseline's produce throughput.
    #[arg(long, default_value_t = 0.5)]
    pub e2e_rate_fraction: f64,
    /// Bytes written before each consume run (enough that a pass reads for a while at
    /// disk speed, rather than measuring how fast a consumer starts).
    #[arg(long, default_value_t = 2 << 30)]
    pub fill_bytes: u64,
    /// Longest time spent filling before a consume run.
    #[arg(long, default_value_t = 15.0)]
    pub fill_seconds: f64,
    /// Producer threads per run.
    #[arg(long, default_value_t = 1)]
    pub producers: usize,
    /// Consumer threads per run.
    #[arg(long, default_value_t = 1)]
    pub consumers: usize,
    /// librdkafka producer property for every run, `key=value` (repeatable).
    #[arg(long = "producer-prop", value_parser = parse_key_value)]
    pub producer_props: Vec<(String, String)>,
    /// Topic config for one target's topics, `TARGET:key=value` (repeatable).
    #[arg(long = "target-topic-config", value_parser = parse_target_config)]
    pub target_topic_configs: Vec<(String, String, String)>,
    /// Directory on the brokers' disk, watched for free space.
    #[arg(long)]
    pub disk_dir: Option<PathBuf>,
    /// Free space (GiB) to wait for before each run.
    #[arg(long, default_value_t = 3.0)]
    pub min_free_gib: f64,
    /// Before each run: write back every dirty page (`sync`) and wait this long, so no
    /// broker's background I/O (another broker deleting or flushing the previous run's
    /// topic) lands in the next run's fsyncs.
    #[arg(long, default_value_t = 3.0)]
    pub settle_secs: f64,
    /// JSON written by `kaas-bench limits`, included in the results.
    #[arg(long)]
    pub limits: Option<PathBuf>,
    /// The command line to print in the results (what reproduces them).
    #[arg(long)]
    pub command: Option<String>,
    /// Output directory: runs/, plots/, matrix.json, RESULTS.md.
    #[arg(long, default_value = "matrix-out")]
    pub out: PathBuf,
}

/// The coordinates of one cell of the grid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellKey {
    pub workload: WorkloadKind,
    pub record_size: usize,
    pub acks: String,
    pub partitions: i32,
}

impl CellKey {
    pub fn slug(&self) -> String {
        format!(
            "{}-{}B-acks{}-p{}",
            self.workload.name(),
            self.record_size,
            self.acks,
            self.partitions
        )
    }
}

/// One target's result in one cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub cell: CellKey,
    pub target: String,
    /// Fixed rate (records/s) for end-to-end runs.
    pub rate: f64,
    pub summary: Option<Summary>,
    pub complete: bool,
    pub errors: Vec<String>,
    #[serde(default)]
    pub notes: Vec<String>,
    pub report_file: Option<String>,
}

/// Everything the matrix produced (`matrix.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MatrixResults {
    pub started_at_unix: u64,
    pub finished_at_unix: u64,
    pub git_revision: String,
    pub machine: MachineInfo,
    pub command: String,
    pub targets: Vec<(String, String)>,
    pub descriptions: Vec<(String, String)>,
    pub subject: String,
    pub baseline: String,
    pub warmup_s: f64,
    pub sample_s: f64,
    pub samples: usize,
    pub e2e_rate_fraction: f64,
    pub fill_bytes: u64,
    /// Seconds of quiet (after `sync`) before each run; absent in older results.
    #[serde(default)]
    pub settle_s: f64,
    pub producers: usize,
    pub consumers: usize,
    pub producer_props: Vec<(String, String)>,
    pub target_topic_configs: Vec<(String, String, String)>,
    pub limits: Option<Limits>,
    pub runs: Vec<RunResult>,
}

impl MatrixResults {
    pub fn find(&self, cell: &CellKey, target: &str) -> Option<&RunResult> {
        self.runs
            .iter()
            .find(|run| &run.cell == cell && run.target == target)
    }
}

fn free_gib(dir: &std::path::Path) -> Option<f64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs fills the zeroed struct; `path` is a valid C string.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    Some(stat.f_bavail as f64 * stat.f_frsize as f64 / (1u64 << 30) as f64)
}

/// Writes back every dirty page of the machine and lets the disk go idle.
fn settle_disk(seconds: f64) {
    if seconds <= 0.0 {
        return;
    }
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
    std::thread::sleep(Duration::from_secs_f64(seconds));
}

fn wait_for_disk(dir: Option<&PathBuf>, min_free_gib: f64) -> Result<(), String> {
    let Some(dir) = dir else {
        return Ok(());
    };
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        match free_gib(dir) {
            Some(free) if free >= min_free_gib => return Ok(()),
            Some(free) if Instant::now() >= deadline => {
                return Err(format!(
                    "skipped: only {free:.1} GiB free under {} (need {min_free_gib} GiB)",
                    dir.display()
                ))
            }
            None => return Ok(()),
            Some(_) => std::thread::sleep(Duration::from_secs(1)),
        }
    }
}

/// `kaas-bench matrix`.
pub fn matrix_command(args: &MatrixArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.render_only {
        let results: MatrixResults = serde_json::from_str(
            &std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?,
        )
        .with_context(|| format!("parsing {}", path.display()))?;
        std::fs::create_dir_all(&args.out)?;
        let target = args.out.join("RESULTS.md");
        std::fs::write(&target, crate::results_table::render(&results))?;
        eprintln!("wrote {}", target.display());
        return Ok(());
    }
    let (default_sizes, default_acks, default_partitions, warmup, sample) = if args.quick {
        (
            vec![1024, 16384],
            vec!["all".to_string()],
            vec![1, 16],
            2.0,
            3.0,
        )
    } else {
        (
            vec![100, 1024, 16384],
            vec!["1".to_string(), "all".to_string()],
            vec![1, 16, 1000],
            3.0,
            4.0,
        )
    };
    let sizes = args.sizes.clone().unwrap_or(default_sizes);
    let acks_list = args.acks.clone().unwrap_or(default_acks);
    let partitions_list = args.partitions.clone().unwrap_or(default_partitions);
    let warmup = args.warmup.unwrap_or(warmup);
    let sample = args.sample.unwrap_or(sample);
    let samples = args.samples.unwrap_or(3);
    let wants = |kind| args.workloads.contains(&kind);
    if wants(WorkloadKind::EndToEnd) && !wants(WorkloadKind::Produce) {
        bail!("end-to-end runs take their rate from produce runs: include produce");
    }
    if !args.targets.iter().any(|(name, _)| name == &args.baseline) {
        bail!("the baseline {} is not a --target", args.baseline);
    }
    std::fs::create_dir_all(args.out.join("runs"))?;
    std::fs::create_dir_all(args.out.join("plots"))?;

    let limits = match &args.limits {
        Some(path) => Some(
            serde_json::from_str::<Limits>(
                &std::fs::read_to_string(path)
                    .with_context(|| format!("reading {}", path.display()))?,
            )
            .with_context(|| format!("parsing {}", path.display()))?,
        ),
        None => None,
    };
    let mut results = MatrixResults {
        started_at_unix: unix_time(),
        finished_at_unix: 0,
        git_revision: git_revision(),
        machine: MachineInfo::current(),
        command: args
            .command
            .clone()
            .unwrap_or_else(|| std::env::args().collect::<Vec<_>>().join(" ")),
        targets: args.targets.clone(),
        descriptions: args.descriptions.clone(),
        subject: args.subject.clone(),
        baseline: args.baseline.clone(),
        warmup_s: warmup,
        sample_s: sample,
        samples,
        e2e_rate_fraction: args.e2e_rate_fraction,
        fill_bytes: args.fill_bytes,
        settle_s: args.settle_secs,
        producers: args.producers,
        consumers: args.consumers,
        producer_props: args.producer_props.clone(),
        target_topic_configs: args.target_topic_configs.clone(),
        limits,
        runs: Vec::new(),
    };

    let spec_for = |cell: &CellKey, target: &str, rate: f64| WorkloadSpec {
        workload: cell.workload,
        topic: None,
        partitions: cell.partitions,
        topic_configs: args
            .target_topic_configs
            .iter()
            .filter(|(name, _, _)| name == target)
            .map(|(_, key, value)| (key.clone(), value.clone()))
            .collect(),
        record_size: cell.record_size,
        keys: 0,
        compression: "none".into(),
        acks: cell.acks.clone(),
        rate,
        producers: args.producers,
        consumers: args.consumers,
        warmup_s: warmup,
        sample_s: sample,
        samples,
        fill_bytes: args.fill_bytes,
        fill_s: args.fill_seconds,
        producer_props: args.producer_props.clone(),
        consumer_props: Vec::new(),
        drain_timeout_s: 30.0,
        keep_topic: false,
        transactions: None,
    };

    let total_cells = sizes.len()
        * partitions_list.len()
        * (acks_list.len()
            * (usize::from(wants(WorkloadKind::Produce))
                + usize::from(wants(WorkloadKind::EndToEnd)))
            + usize::from(wants(WorkloadKind::Consume)));
    let mut cell_number = 0;
    let began = Instant::now();
    let mut run_cell = |results: &mut MatrixResults, cell: CellKey, rate: f64| {
        cell_number += 1;
        eprintln!(
            "== cell {cell_number}/{total_cells}: {} (elapsed {:.0} s)",
            cell.slug(),
            began.elapsed().as_secs_f64()
        );
        for (target, bootstrap) in &args.targets {
            let result = match wait_for_disk(args.disk_dir.as_ref(), args.min_free_gib) {
                Err(reason) => RunResult {
                    cell: cell.clone(),
                    target: target.clone(),
                    rate,
                    summary: None,
                    complete: false,
                    errors: vec![reason],
                    notes: Vec::new(),
                    report_file: None,
                },
                Ok(()) => {
                    settle_disk(args.settle_secs);
                    run_one(args, &cell, target, bootstrap, rate, &spec_for)
                }
            };
            for error in &result.errors {
                eprintln!("   {target}: {error}");
            }
            for note in &result.notes {
                eprintln!("   {target}: note: {note}");
            }
            results.runs.push(result);
        }
        // Keep what we have on disk in case the run is interrupted.
        let _ = std::fs::write(
            args.out.join("matrix.json"),
            serde_json::to_string_pretty(results).unwrap_or_default(),
        );
    };

    for &size in &sizes {
        for &partitions in &partitions_list {
            for acks in &acks_list {
                let produce = CellKey {
                    workload: WorkloadKind::Produce,
                    record_size: size,
                    acks: acks.clone(),
                    partitions,
                };
                if wants(WorkloadKind::Produce) {
                    run_cell(&mut results, produce.clone(), 0.0);
                }
                if wants(WorkloadKind::EndToEnd) {
                    let baseline_rate = results
                        .find(&produce, &args.baseline)
                        .and_then(|run| run.summary.as_ref())
                        .map_or(0.0, |summary| summary.records_per_s);
                    // Without a baseline figure, use the slowest target's.
                    let rate = if baseline_rate > 0.0 {
                        baseline_rate
                    } else {
                        results
                            .runs
                            .iter()
                            .filter(|run| run.cell == produce)
                            .filter_map(|run| run.summary.as_ref())
                            .map(|summary| summary.records_per_s)
                            .filter(|rate| *rate > 0.0)
                            .fold(f64::INFINITY, f64::min)
                    };
                    let cell = CellKey {
                        workload: WorkloadKind::EndToEnd,
                        ..produce.clone()
                    };
                    if rate.is_finite() && rate > 0.0 {
                        let rate = (rate * args.e2e_rate_fraction).max(1.0);
                        run_cell(&mut results, cell.clone(), rate);
                        write_e2e_plot(args, &results, &cell);
                    } else {
                        for (target, _) in &args.targets {
                            results.runs.push(RunResult {
                                cell: cell.clone(),
                                target: target.clone(),
                                rate: 0.0,
                                summary: None,
                                complete: false,
                                errors: vec![
                                    "skipped: no produce throughput to derive a rate from".into(),
                                ],
                                notes: Vec::new(),
                                report_file: None,
                            });
                        }
                    }
                }
            }
            if wants(WorkloadKind::Consume) {
                let cell = CellKey {
                    workload: WorkloadKind::Consume,
                    record_size: size,
                    acks: "all".into(),
                    partitions,
                };
                run_cell(&mut results, cell, 0.0);
            }
        }
    }
    results.finished_at_unix = unix_time();
    std::fs::write(
        args.out.join("matrix.json"),
        serde_json::to_string_pretty(&results)?,
    )?;
    let markdown = crate::results_table::render(&results);
    std::fs::write(args.out.join("RESULTS.md"), markdown)?;
    eprintln!(
        "matrix done in {:.0} s: {}",
        began.elapsed().as_secs_f64(),
        args.out.join("RESULTS.md").display()
    );
    Ok(())
}

fn run_one(
    args: &MatrixArgs,
    cell: &CellKey,
    target: &str,
    bootstrap: &str,
    rate: f64,
    spec_for: &dyn Fn(&CellKey, &str, f64) -> WorkloadSpec,
) -> RunResult {
    let spec = spec_for(cell, target, rate);
    match run_workload(bootstrap, target, &spec, true) {
        Ok(report) => {
            let file = format!("runs/{}-{target}.json", cell.slug());
            let report_file = match write_report(&args.out.join(&file), &report) {
                Ok(()) => Some(file),
                Err(error) => {
                    eprintln!("   {target}: could not write its report: {error:#}");
                    None
                }
            };
            let summary = &report.summary;
            eprintln!(
                "   {target}: {:.0} rec/s, {:.1} MB/s{}",
                summary.records_per_s,
                summary.mb_per_s,
                latency_note(summary)
            );
            RunResult {
                cell: cell.clone(),
                target: target.into(),
                rate,
                summary: Some(report.summary),
                complete: report.complete,
                errors: report.errors,
                notes: report.notes,
                report_file,
            }
        }
        Err(error) => RunResult {
            cell: cell.clone(),
            target: target.into(),
            rate,
            summary: None,
            complete: false,
            errors: vec![format!("{error:#}")],
            notes: Vec::new(),
            report_file: None,
        },
    }
}

fn latency_note(summary: &Summary) -> String {
    let pick: Option<(&str, &LatencySummary)> = summary
        .end_to_end_latency
        .as_ref()
        .map(|l| ("end-to-end", l))
        .or_else(|| summary.produce_latency.as_ref().map(|l| ("produce", l)));
    match pick {
        Some((name, latency)) => format!(
            ", {name} p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
            latency.p50_us as f64 / 1e3,
            latency.p99_us as f64 / 1e3,
            latency.max_us as f64 / 1e3
        ),
        None => String::new(),
    }
}

fn write_e2e_plot(args: &MatrixArgs, results: &MatrixResults, cell: &CellKey) {
    let series: Vec<crate::plot::Series> = args
        .targets
        .iter()
        .filter_map(|(target, _)| {
            let run = results.find(cell, target)?;
            let summary = run.summary.as_ref()?;
            (!summary.end_to_end_latency_curve.is_empty()).then(|| crate::plot::Series {
                label: target.clone(),
                points: summary.end_to_end_latency_curve.clone(),
            })
        })
        .collect();
    if series.is_empty() {
        return;
    }
    let rate = results
        .find(cell, &args.baseline)
        .map_or(0.0, |run| run.rate);
    let title = format!(
        "end-to-end latency, {} B records, acks={}, {} partition(s), {:.0} records/s",
        cell.record_size, cell.acks, cell.partitions, rate
    );
    let path = args.out.join(format!("plots/{}.png", cell.slug()));
    if let Err(error) = crate::plot::draw_percentile_plot(&path, &title, &series) {
        eprintln!("   plot {}: {error:#}", path.display());
    }
}
