//! `fence-cost`: what the storage fence costs produce throughput, standalone against cluster
//! mode, side by side.
//!
//! Starts two real `kaas` processes with their own data directories: one standalone (fence
//! epoch 0: no claim, no check) and one in cluster mode, alone in its assignment, leading
//! every partition of the topic at leader epoch 1 (its logs open at a fence epoch, so every
//! group commit checks the fence after its fdatasync). Then, `--rounds` times, runs the same
//! `kaas-bench run` produce workload (this binary, as a child process: 1 KiB records, 16
//! partitions, acks=all by default) against each, alternating which goes first, and reports
//! each run's records/s, the median of each and the median of the per-round ratios
//! cluster / standalone. The report also says whether the cluster broker's partitions were
//! claimed at all (`claims/` exists), i.e. whether the fence was in play.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use crate::cluster_broker::{free_port, write_assignment, ClusterBroker, TOPIC_ID};
use crate::machine::{git_revision, unix_time, MachineInfo};
use crate::report::median;

/// Report format identifier, bumped when fields change meaning.
pub const FENCE_COST_FORMAT: &str = "kaas-bench-fence-cost/1";
const TOPIC: &str = "fence-cost";

#[derive(Args, Debug, Clone)]
pub struct FenceCostArgs {
    /// The `kaas` binary to run (a release build).
    #[arg(long, default_value = "target/release/kaas")]
    pub kaas: PathBuf,
    /// `--shards` of each broker.
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 16)]
    pub partitions: usize,
    /// Record value size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// `acks` of the producer.
    #[arg(long, default_value = "all")]
    pub acks: String,
    /// Rounds; each runs the workload once against each broker.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Warm-up seconds of each run.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Seconds measured per run.
    #[arg(long, default_value_t = 5.0)]
    pub sample: f64,
    /// Parent of the data directories (on the disk to measure).
    #[arg(long, default_value = "/tmp")]
    pub data_parent: PathBuf,
    /// JSON report file.
    #[arg(long)]
    pub report: Option<PathBuf>,
}

#[derive(Serialize, Debug)]
struct Round {
    standalone_records_per_s: f64,
    cluster_records_per_s: f64,
    ratio: f64,
    standalone_p50_us: Option<f64>,
    cluster_p50_us: Option<f64>,
}

#[derive(Serialize, Debug)]
struct FenceCostReport {
    format: &'static str,
    started_at_unix: u64,
    git_revision: String,
    machine: MachineInfo,
    shards: usize,
    partitions: usize,
    record_size: usize,
    acks: String,
    /// Whether the cluster broker claimed its partitions (the fence was in play).
    cluster_partitions_claimed: bool,
    rounds: Vec<Round>,
    median_standalone_records_per_s: f64,
    median_cluster_records_per_s: f64,
    median_ratio: f64,
}

/// A standalone broker, stopped when dropped.
struct StandaloneBroker {
    kafka: String,
    child: Option<std::process::Child>,
}

impl StandaloneBroker {
    fn start(kaas: &Path, data_dir: &Path, shards: usize) -> anyhow::Result<Self> {
        let kafka = format!("127.0.0.1:{}", free_port()?);
        let admin = format!("127.0.0.1:{}", free_port()?);
        let child = Command::new(kaas)
            .env_remove("MY_POD_NAME")
            .env("RUST_LOG", "warn")
            .args(["--listen", &kafka, "--admin-listen", &admin])
            .args(["--shards", &shards.to_string()])
            .arg("--data-dir")
            .arg(data_dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", kaas.display()))?;
        Ok(StandaloneBroker {
            kafka,
            child: Some(child),
        })
    }
}

impl Drop for StandaloneBroker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            for _ in 0..3000 {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs the produce workload against `bootstrap`; returns records/s and the p50 latency.
fn produce_run(
    args: &FenceCostArgs,
    bootstrap: &str,
    target: &str,
    report: &Path,
) -> anyhow::Result<(f64, Option<f64>)> {
    let status = Command::new(std::env::current_exe()?)
        .arg("run")
        .args(["--bootstrap", bootstrap, "--target", target])
        .args(["--workload", "produce", "--topic", TOPIC, "--keep-topic"])
        .args(["--partitions", &args.partitions.to_string()])
        .args(["--record-size", &args.record_size.to_string()])
        .args(["--acks", &args.acks])
        .args(["--warmup", &args.warmup.to_string()])
        .args(["--sample", &args.sample.to_string(), "--samples", "1"])
        .arg("--report")
        .arg(report)
        .args(["--no-plot", "--quiet"])
        .status()
        .context("running kaas-bench run")?;
    if !status.success() {
        bail!("the produce run against {target} failed ({status})");
    }
    let text = std::fs::read_to_string(report)?;
    let json: serde_json::Value = serde_json::from_str(&text)?;
    let summary = &json["summary"];
    let records = summary["records_per_s"]
        .as_f64()
        .context("no records_per_s in the report")?;
    let p50 = summary["produce_latency"]["p50_us"].as_f64();
    Ok((records, p50))
}

pub fn fence_cost_command(args: &FenceCostArgs) -> anyhow::Result<()> {
    if !args.kaas.exists() {
        bail!(
            "{} not found (cargo build --release -p kaas)",
            args.kaas.display()
        );
    }
    let base = args
        .data_parent
        .join(format!("kaas-bench-fence-cost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (standalone_dir, cluster_dir) = (base.join("standalone"), base.join("cluster"));
    std::fs::create_dir_all(&standalone_dir)?;
    std::fs::create_dir_all(&cluster_dir)?;
    let result = (|| {
        let standalone = StandaloneBroker::start(&args.kaas, &standalone_dir, args.shards)?;
        let mut cluster = ClusterBroker::start(&args.kaas, 0, &cluster_dir, args.shards)?;
        write_assignment(&cluster_dir, &[&cluster], 1, TOPIC, args.partitions, 0, 1)?;
        cluster.wait_for_version(1, Duration::from_secs(60))?;
        std::thread::sleep(Duration::from_millis(500));
        let cluster_kafka = cluster.kafka.to_string();
        let run_report = base.join("run.json");
        let mut rounds = Vec::new();
        println!(
            "{:>5} {:>16} {:>16} {:>7} {:>10} {:>10}",
            "round", "standalone rec/s", "cluster rec/s", "ratio", "p50 s µs", "p50 c µs"
        );
        for round in 0..args.rounds.max(1) {
            let measure = |cluster_side: bool| {
                if cluster_side {
                    produce_run(args, &cluster_kafka, "kaas-cluster", &run_report)
                } else {
                    produce_run(args, &standalone.kafka, "kaas-standalone", &run_report)
                }
            };
            let (standalone_result, cluster_result) = if round % 2 == 0 {
                let s = measure(false)?;
                (s, measure(true)?)
            } else {
                let c = measure(true)?;
                (measure(false)?, c)
            };
            let row = Round {
                standalone_records_per_s: standalone_result.0,
                cluster_records_per_s: cluster_result.0,
                ratio: cluster_result.0 / standalone_result.0.max(f64::MIN_POSITIVE),
                standalone_p50_us: standalone_result.1,
                cluster_p50_us: cluster_result.1,
            };
            println!(
                "{round:>5} {:>16.0} {:>16.0} {:>7.3} {:>10.0} {:>10.0}",
                row.standalone_records_per_s,
                row.cluster_records_per_s,
                row.ratio,
                row.standalone_p50_us.unwrap_or(f64::NAN),
                row.cluster_p50_us.unwrap_or(f64::NAN)
            );
            rounds.push(row);
        }
        // Cluster mode names a partition's directory after its topic id too.
        let claimed = cluster_dir
            .join("topics")
            .join(format!("{TOPIC}@{TOPIC_ID}"))
            .join("0")
            .join("claims")
            .is_dir();
        cluster.stop();
        drop(standalone);
        let pick = |f: fn(&Round) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
        let report = FenceCostReport {
            format: FENCE_COST_FORMAT,
            started_at_unix: unix_time(),
            git_revision: git_revision(),
            machine: MachineInfo::current(),
            shards: args.shards,
            partitions: args.partitions,
            record_size: args.record_size,
            acks: args.acks.clone(),
            cluster_partitions_claimed: claimed,
            median_standalone_records_per_s: pick(|r| r.standalone_records_per_s),
            median_cluster_records_per_s: pick(|r| r.cluster_records_per_s),
            median_ratio: pick(|r| r.ratio),
            rounds,
        };
        println!(
            "median: standalone {:.0} rec/s, cluster {:.0} rec/s, cluster/standalone {:.3} (partitions claimed: {claimed})",
            report.median_standalone_records_per_s,
            report.median_cluster_records_per_s,
            report.median_ratio
        );
        if let Some(path) = &args.report {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&base);
    result
}
