//! `takeover`: how long a broker takes to serve partitions it is given by a new assignment.
//!
//! Per run, in a fresh data directory: two real `kaas` processes in cluster mode (broker 0
//! and 1, `--assignment-source file`) and an assignment in which broker 0 leads every one of
//! `N` partitions of one topic at leader epoch 1. Once broker 0 has taken a produce on every
//! partition (so each log has a record to recover), the benchmark rewrites `assignment.json`
//! moving them all to broker 1 at epoch 2 and, from that moment, asks broker 1 for a produce
//! on every partition not yet served, every `--probe-interval-ms`
//! ([`crate::produce_probe`]). The sample is the time until the last partition answered
//! without error (and the first, for the picture); broker 1 learns of the file from its
//! change notification (or its 1 s poll), opens each partition at epoch 2 (claim, inherit the
//! files of epoch 1, recover) while broker 0 closes them (`--old-leader running`, a planned
//! move), or after broker 0 was killed with SIGKILL just before the rewrite
//! (`--old-leader killed`, a failover: broker 1 inherits logs nobody closed, and has the
//! machine to itself). Both brokers stop (SIGTERM) after
//! each run and the directory is removed. Reported: every run and the median per `N`, and
//! the descriptors broker 1 holds once it serves them all (`/proc/<pid>/fd`: what a broker
//! needs per partition, against `ulimit -n`) and the CPU time it used for the takeover (on a
//! shared machine a busy core, not the disk, can be what the takeover waits for).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use crate::cluster_broker::{write_assignment, ClusterBroker};
use crate::machine::{git_revision, unix_time, MachineInfo};
use crate::produce_probe::ProduceProbe;
use crate::report::median;

/// Report format identifier, bumped when fields change meaning.
pub const TAKEOVER_FORMAT: &str = "kaas-bench-takeover/3";
const TOPIC: &str = "moved";

#[derive(Args, Debug, Clone)]
pub struct TakeoverArgs {
    /// The `kaas` binary to run (a release build).
    #[arg(long, default_value = "target/release/kaas")]
    pub kaas: PathBuf,
    /// Partition counts to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,10000")]
    pub partitions: Vec<usize>,
    /// Runs per partition count (fresh brokers and data each time).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// `--shards` of each broker.
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// Parent of the data directories (on the disk to measure).
    #[arg(long, default_value = "/tmp")]
    pub data_parent: PathBuf,
    /// What happens to broker 0 when the partitions move: `running` (a planned move: it
    /// closes them, flushing, while broker 1 takes them over) or `killed` (a failover:
    /// SIGKILL just before the assignment changes, so broker 1 recovers what a dead leader
    /// left and nothing else uses the machine).
    #[arg(long, value_enum, default_value_t = OldLeader::Running)]
    pub old_leader: OldLeader,
    /// Pause between two probe requests to the new leader.
    #[arg(long, default_value_t = 2)]
    pub probe_interval_ms: u64,
    /// Give up on a run after this long.
    #[arg(long, default_value_t = 300)]
    pub timeout_secs: u64,
    /// JSON report file.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

/// Broker 0's fate in a run ([`TakeoverArgs::old_leader`]).
#[derive(clap::ValueEnum, Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OldLeader {
    Running,
    Killed,
}

#[derive(Serialize, Debug)]
struct RunResult {
    /// Broker start → broker 0 answered a produce on every partition (epoch 1, fresh logs).
    initial_serve_ms: f64,
    /// Assignment written → broker 1 answered a produce on its first partition.
    first_served_ms: f64,
    /// Assignment written → broker 1 answered a produce on the last partition.
    all_served_ms: f64,
    /// Probe requests sent to broker 1 until then.
    probes: usize,
    /// Descriptors broker 1 had open once it served every partition (-1: unknown).
    new_leader_descriptors: i64,
    /// CPU time broker 1 used from the assignment change until then (user + system).
    new_leader_cpu_ms: f64,
}

#[derive(Serialize, Debug)]
struct PartitionCountResult {
    partitions: usize,
    runs: Vec<RunResult>,
    median_all_served_ms: f64,
    median_first_served_ms: f64,
}

#[derive(Serialize, Debug)]
struct TakeoverReport {
    format: &'static str,
    started_at_unix: u64,
    git_revision: String,
    machine: MachineInfo,
    shards: usize,
    old_leader: OldLeader,
    probe_interval_ms: u64,
    results: Vec<PartitionCountResult>,
}

/// Raises the soft descriptor limit to the hard one (brokers inherit it: each open partition
/// holds its segment files open).
fn raise_nofile() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid, owned struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Produces to `partitions` on `address` until every one answered without error; returns
/// the time of the first and of the last success after `since`, and the requests sent.
fn serve_all(
    address: &str,
    partitions: usize,
    since: Instant,
    interval: Duration,
    timeout: Duration,
) -> anyhow::Result<(Duration, Duration, usize)> {
    let mut probe = None;
    let mut pending: Vec<i32> = (0..partitions as i32).collect();
    let mut first = None;
    let mut probes = 0;
    let mut last_errors = Vec::new();
    while !pending.is_empty() {
        if since.elapsed() > timeout {
            bail!(
                "{} partitions still unserved after {timeout:?} (errors {last_errors:?})",
                pending.len()
            );
        }
        if probe.is_none() {
            probe = ProduceProbe::connect(address).ok();
        }
        let answers = match probe.as_mut() {
            Some(p) => p.produce(TOPIC, &pending, b"takeover-probe"),
            None => Ok(Vec::new()),
        };
        probes += 1;
        match answers {
            Ok(answers) => {
                let served: std::collections::HashSet<i32> = answers
                    .iter()
                    .filter(|(_, error)| *error == 0)
                    .map(|(index, _)| *index)
                    .collect();
                if !served.is_empty() && first.is_none() {
                    first = Some(since.elapsed());
                }
                pending.retain(|p| !served.contains(p));
                last_errors = answers
                    .iter()
                    .filter(|(_, e)| *e != 0)
                    .map(|(_, e)| *e)
                    .take(3)
                    .collect();
            }
            // A connection the broker closed (starting, stopping): connect again.
            Err(_) => probe = None,
        }
        if !pending.is_empty() {
            std::thread::sleep(interval);
        }
    }
    let all = since.elapsed();
    Ok((first.unwrap_or(all), all, probes))
}

fn one_run(args: &TakeoverArgs, partitions: usize, run: usize) -> anyhow::Result<RunResult> {
    let data = args.data_parent.join(format!(
        "kaas-bench-takeover-{}-{partitions}-{run}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&data);
    std::fs::create_dir_all(&data)?;
    let result = (|| {
        let timeout = Duration::from_secs(args.timeout_secs);
        let interval = Duration::from_millis(args.probe_interval_ms);
        let started = Instant::now();
        let mut old = ClusterBroker::start(&args.kaas, 0, &data, args.shards)?;
        let mut new = ClusterBroker::start(&args.kaas, 1, &data, args.shards)?;
        write_assignment(&data, &[&old, &new], 1, TOPIC, partitions, 0, 1)?;
        old.wait_for_version(1, timeout)?;
        new.wait_for_version(1, timeout)?;
        let (_, initial, _) = serve_all(
            &old.kafka.to_string(),
            partitions,
            started,
            interval,
            timeout,
        )?;

        if args.old_leader == OldLeader::Killed {
            old.kill();
        }
        let cpu_before = new.cpu_time();
        let moved = Instant::now();
        write_assignment(&data, &[&old, &new], 2, TOPIC, partitions, 1, 2)?;
        let (first, all, probes) =
            serve_all(&new.kafka.to_string(), partitions, moved, interval, timeout)?;
        let descriptors = new.open_descriptors().map_or(-1, |n| n as i64);
        let cpu = match (cpu_before, new.cpu_time()) {
            (Some(before), Some(after)) => after.saturating_sub(before).as_secs_f64() * 1e3,
            _ => -1.0,
        };
        old.stop();
        new.stop();
        Ok(RunResult {
            initial_serve_ms: initial.as_secs_f64() * 1e3,
            first_served_ms: first.as_secs_f64() * 1e3,
            all_served_ms: all.as_secs_f64() * 1e3,
            probes,
            new_leader_descriptors: descriptors,
            new_leader_cpu_ms: cpu,
        })
    })();
    let _ = std::fs::remove_dir_all(&data);
    result
}

pub fn takeover_command(args: &TakeoverArgs) -> anyhow::Result<()> {
    if !args.kaas.exists() {
        bail!(
            "{} not found (cargo build --release -p kaas)",
            args.kaas.display()
        );
    }
    raise_nofile();
    let mut report = TakeoverReport {
        format: TAKEOVER_FORMAT,
        started_at_unix: unix_time(),
        git_revision: git_revision(),
        machine: MachineInfo::current(),
        shards: args.shards,
        old_leader: args.old_leader,
        probe_interval_ms: args.probe_interval_ms,
        results: Vec::new(),
    };
    println!(
        "{:>10} {:>4} {:>14} {:>14} {:>14} {:>7} {:>7} {:>9}",
        "partitions", "run", "initial ms", "first ms", "all ms", "probes", "fds", "cpu ms"
    );
    for &partitions in &args.partitions {
        let mut runs = Vec::new();
        for run in 0..args.runs.max(1) {
            let result = one_run(args, partitions, run)
                .with_context(|| format!("{partitions} partitions, run {run}"))?;
            println!(
                "{partitions:>10} {run:>4} {:>14.1} {:>14.1} {:>14.1} {:>7} {:>7} {:>9.0}",
                result.initial_serve_ms,
                result.first_served_ms,
                result.all_served_ms,
                result.probes,
                result.new_leader_descriptors,
                result.new_leader_cpu_ms
            );
            runs.push(result);
        }
        let all: Vec<f64> = runs.iter().map(|r| r.all_served_ms).collect();
        let first: Vec<f64> = runs.iter().map(|r| r.first_served_ms).collect();
        let result = PartitionCountResult {
            partitions,
            median_all_served_ms: median(&all),
            median_first_served_ms: median(&first),
            runs,
        };
        println!(
            "{partitions:>10} median: first {:.1} ms, all {:.1} ms",
            result.median_first_served_ms, result.median_all_served_ms
        );
        report.results.push(result);
    }
    if let Some(path) = &args.report {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
