//! `kaas-bench`: a load generator and benchmark harness for Kafka-compatible brokers.
//!
//! Subcommands:
//! - `run`: one workload (produce, consume or end-to-end) against one broker, with warm-up,
//!   repeated samples, HdrHistogram latencies, a JSON report and a PNG percentile plot;
//! - `matrix`: the same grid of workloads against several brokers in alternation, with a
//!   results table of ratios;
//! - `limits`: the machine's physical limits (O_DIRECT sequential write, loopback TCP, memcpy);
//! - `group-settle`: how long a consumer group takes to settle after one member joins;
//! - `takeover`: time for a cluster-mode broker to serve 100 / 1,000 / 10,000 partitions
//!   moved to it by a new assignment (real `kaas` processes);
//! - `fence-cost`: produce throughput of a standalone broker against a cluster-mode one whose
//!   partitions are fenced, side by side;
//! - `plot`: a percentile plot from one or more JSON reports;
//! - `uring-latency`: per-opcode io_uring latency from `perf script` output.

mod client_config;
mod cluster_broker;
mod consumer_driver;
mod fence_cost;
mod group_member;
mod group_settle;
mod group_view;
mod latency_recorder;
mod limits;
mod machine;
mod matrix;
mod payload;
mod plot;
mod produce_probe;
mod producer_driver;
mod progress_probe;
mod report;
mod results_table;
mod sample_clock;
mod takeover;
mod topic_admin;
mod transaction_cycle;
mod uring_latency;
mod workload;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// Load generator and benchmark harness for Kafka-compatible brokers (librdkafka client).
#[derive(Parser, Debug)]
#[command(name = "kaas-bench", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one workload against one broker and write a JSON report and a PNG plot.
    Run(workload::RunArgs),
    /// Run a grid of workloads against several brokers in alternation.
    Matrix(matrix::MatrixArgs),
    /// Measure the machine's physical limits: O_DIRECT sequential write, loopback TCP, memcpy.
    Limits(limits::LimitsArgs),
    /// Time for a consumer group to settle after one more member joins.
    GroupSettle(group_settle::GroupSettleArgs),
    /// Time for a cluster-mode kaas broker to serve partitions a new assignment moves to it.
    Takeover(takeover::TakeoverArgs),
    /// Produce throughput, standalone against cluster mode (the storage fence's cost).
    FenceCost(fence_cost::FenceCostArgs),
    /// Draw a latency-percentile plot from JSON reports written by `run`.
    Plot(plot::PlotArgs),
    /// Per-opcode io_uring latency from `perf script` output (read on stdin).
    UringLatency(uring_latency::UringLatencyArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => workload::run_command(&args).context("run"),
        Command::Matrix(args) => matrix::matrix_command(&args).context("matrix"),
        Command::Limits(args) => limits::limits_command(&args).context("limits"),
        Command::GroupSettle(args) => {
            group_settle::group_settle_command(&args).context("group-settle")
        }
        Command::Takeover(args) => takeover::takeover_command(&args).context("takeover"),
        Command::FenceCost(args) => fence_cost::fence_cost_command(&args).context("fence-cost"),
        Command::Plot(args) => plot::plot_command(&args).context("plot"),
        Command::UringLatency(args) => {
            uring_latency::uring_latency_command(&args).context("uring-latency")
        }
    }
}
