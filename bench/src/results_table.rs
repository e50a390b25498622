//! The Markdown results of a matrix run: settings, physical limits, targets met or not, and
//! one table per workload with ratios of the subject over every other target.

use std::fmt::Write;

use crate::limits::DiskRun;
use crate::matrix::{CellKey, MatrixResults, RunResult};
use crate::report::LatencySummary;
use crate::workload::WorkloadKind;

fn ms(us: u64) -> String {
    let ms = us as f64 / 1e3;
    if ms >= 100.0 {
        format!("{ms:.0}")
    } else if ms >= 10.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.2}")
    }
}

fn ratio(numerator: Option<f64>, denominator: Option<f64>) -> Option<f64> {
    match (numerator, denominator) {
        (Some(n), Some(d)) if d > 0.0 && n.is_finite() => Some(n / d),
        _ => None,
    }
}

fn show_ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "–".into(), |v| format!("{v:.2}×"))
}

fn size_name(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

fn mark(run: Option<&RunResult>) -> &'static str {
    match run {
        Some(run) if !run.complete => " ⚠",
        _ => "",
    }
}

struct Cells<'a> {
    results: &'a MatrixResults,
}

impl Cells<'_> {
    fn run(&self, cell: &CellKey, target: &str) -> Option<&RunResult> {
        self.results.find(cell, target)
    }

    fn mb_per_s(&self, cell: &CellKey, target: &str) -> Option<f64> {
        self.run(cell, target)?
            .summary
            .as_ref()
            .map(|s| s.mb_per_s)
            .filter(|v| *v > 0.0)
    }

    fn e2e(&self, cell: &CellKey, target: &str) -> Option<&LatencySummary> {
        self.run(cell, target)?
            .summary
            .as_ref()?
            .end_to_end_latency
            .as_ref()
    }

    /// Distinct cells of a workload in run order.
    fn keys(&self, workload: WorkloadKind) -> Vec<CellKey> {
        let mut keys: Vec<CellKey> = Vec::new();
        for run in &self.results.runs {
            if run.cell.workload == workload && !keys.contains(&run.cell) {
                keys.push(run.cell.clone());
            }
        }
        keys
    }
}

fn target_names(results: &MatrixResults) -> Vec<&str> {
    results
        .targets
        .iter()
        .map(|(name, _)| name.as_str())
        .collect()
}

fn others(results: &MatrixResults) -> Vec<&str> {
    target_names(results)
        .into_iter()
        .filter(|name| *name != results.subject)
        .collect()
}

/// Renders `results` as Markdown.
pub fn render(results: &MatrixResults) -> String {
    let mut out = String::new();
    let cells = Cells { results };
    let machine = &results.machine;
    let _ = writeln!(out, "# {} and Apache Kafka side by side\n", results.subject);
    let _ = writeln!(out, "Produced by:\n\n```sh\n{}\n```\n", results.command);
    let _ = writeln!(
        out,
        "- git revision: `{}`\n- machine: {} ({} CPUs available, {:.0} GiB memory), Linux {}\n- client: librdkafka {} through the `rdkafka` crate, one producer{} per run (consumers with `fetch.queue.backoff.ms={}`)\n- each run: fresh topic, started after `sync` and {:.0} s of quiet, {:.0} s warm-up, then {} samples of {:.0} s; throughput is the median over samples, latency percentiles come from every sample's HdrHistogram merged (microsecond resolution)\n- end-to-end runs send at a fixed rate of {:.0} % of `{}`'s produce throughput for the same cell, latency measured from each record's intended send time (no coordinated omission)\n- consume runs fill the topic with {} MiB (acks=all), then read it from the beginning once per sample (each pass timed from its first record to its last)\n- MB/s = 10^6 bytes of record values (and keys) per second; ⚠ marks a run with errors (listed at the end)\n",
        results.git_revision,
        machine.cpu_model,
        machine.cpus,
        machine.memory_bytes as f64 / (1u64 << 30) as f64,
        machine.kernel,
        machine.librdkafka,
        if results.consumers > 0 { " and one consumer" } else { "" },
        crate::client_config::FETCH_QUEUE_BACKOFF_MS,
        results.settle_s,
        results.warmup_s,
        results.samples,
        results.sample_s,
        results.e2e_rate_fraction * 100.0,
        results.baseline,
        results.fill_bytes >> 20,
    );
    if !results.producer_props.is_empty() {
        let props: Vec<String> = results
            .producer_props
            .iter()
            .map(|(k, v)| format!("`{k}={v}`"))
            .collect();
        let _ = writeln!(
            out,
            "- producer settings beyond librdkafka's defaults: {}\n",
            props.join(", ")
        );
    }
    let _ = writeln!(out, "Targets, in the order they ran in each cell:\n");
    for (name, bootstrap) in &results.targets {
        let description = results
            .descriptions
            .iter()
            .find(|(target, _)| target == name)
            .map_or("", |(_, text)| text.as_str());
        let configs: Vec<String> = results
            .target_topic_configs
            .iter()
            .filter(|(target, _, _)| target == name)
            .map(|(_, k, v)| format!("`{k}={v}`"))
            .collect();
        let topic_note = if configs.is_empty() {
            String::new()
        } else {
            format!(" Topic configs: {}.", configs.join(", "))
        };
        let _ = writeln!(
            out,
            "- **{name}** (`{bootstrap}`): {description}{topic_note}"
        );
    }
    let _ = writeln!(out);

    render_limits(&mut out, results);
    render_targets(&mut out, results, &cells);
    render_throughput(
        &mut out,
        results,
        &cells,
        WorkloadKind::Produce,
        "Produce throughput (open throttle)",
    );
    render_end_to_end(&mut out, results, &cells);
    render_throughput(
        &mut out,
        results,
        &cells,
        WorkloadKind::Consume,
        "Consume throughput (reading a filled topic from the beginning)",
    );
    render_plots(&mut out, &cells);
    render_errors(&mut out, results);
    render_notes(&mut out, results);
    out
}

fn render_notes(out: &mut String, results: &MatrixResults) {
    let noted: Vec<&RunResult> = results
        .runs
        .iter()
        .filter(|r| !r.notes.is_empty())
        .collect();
    if noted.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Notes\n");
    let _ = writeln!(
        out,
        "A consume pass that hits its time limit counts the records read within the limit.\n"
    );
    for run in noted {
        let _ = writeln!(
            out,
            "- {} on **{}**: {}",
            run.cell.slug(),
            run.target,
            run.notes.join("; ")
        );
    }
    let _ = writeln!(out);
}

fn render_plots(out: &mut String, cells: &Cells<'_>) {
    let keys = cells.keys(WorkloadKind::EndToEnd);
    if keys.is_empty() {
        return;
    }
    let _ = writeln!(out, "## End-to-end latency plots\n");
    for key in keys {
        let _ = writeln!(
            out,
            "![end-to-end latency, {}, acks={}, {} partition(s)](plots/{}.png)\n",
            size_name(key.record_size),
            key.acks,
            key.partitions,
            key.slug()
        );
    }
}

fn render_limits(out: &mut String, results: &MatrixResults) {
    let Some(limits) = &results.limits else {
        return;
    };
    let _ = writeln!(out, "## Physical limits (same run)\n");
    let _ = writeln!(out, "| measure | MB/s |\n|---|---:|");
    render_disk_rows(
        out,
        "O_DIRECT sequential write into a preallocated file",
        limits.o_direct_write_mb_per_s,
        &limits.disk_runs,
    );
    render_disk_rows(
        out,
        "O_DIRECT sequential read",
        limits.o_direct_read_mb_per_s,
        &limits.read_runs,
    );
    let _ = writeln!(
        out,
        "| loopback TCP, one connection, 256 KiB writes | {:.0} |\n| memcpy, 64 MiB buffers | {:.0} |\n",
        limits.loopback_tcp_mb_per_s, limits.memcpy_mb_per_s
    );
}

/// A limit (the best of `runs`) and one indented row per run; nothing without runs.
fn render_disk_rows(out: &mut String, measure: &str, best: f64, runs: &[DiskRun]) {
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(out, "| {measure}, best of the runs below | {best:.0} |");
    for run in runs {
        let (what, sync) = match run.sync.as_str() {
            "end" => ("writes", ", fdatasync at the end"),
            "every-write" => ("writes", ", fdatasync after every write"),
            _ => ("reads", ""),
        };
        let _ = writeln!(
            out,
            "| &nbsp;&nbsp;{} KiB {what} × {} thread(s){sync} | {:.0} |",
            run.block_bytes >> 10,
            run.threads,
            run.mb_per_s
        );
    }
}

fn verdict(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "**met**",
        Some(false) => "**not met**",
        None => "not measured",
    }
}

fn render_targets(out: &mut String, results: &MatrixResults, cells: &Cells<'_>) {
    let subject = results.subject.as_str();
    let baseline = results.baseline.as_str();
    let _ = writeln!(out, "## Targets\n");
    let _ = writeln!(
        out,
        "| target | cell | measured | goal | verdict |\n|---|---|---:|---:|---|"
    );

    // 1. Throughput ≥ 2× Kafka's default configuration, 1 KiB records, acks=all.
    for key in cells.keys(WorkloadKind::Produce) {
        if key.record_size != 1024 || key.acks != "all" {
            continue;
        }
        let value = ratio(
            cells.mb_per_s(&key, subject),
            cells.mb_per_s(&key, baseline),
        );
        let _ = writeln!(
            out,
            "| produce throughput vs {baseline} | 1 KiB, acks=all, {} partition(s) | {} | ≥ 2× | {} |",
            key.partitions,
            show_ratio(value),
            verdict(value.map(|v| v >= 2.0))
        );
    }
    // 2. p99 end-to-end at half of Kafka's max throughput ≤ ½ of Kafka's.
    for key in cells.keys(WorkloadKind::EndToEnd) {
        let value = ratio(
            cells.e2e(&key, subject).map(|l| l.p99_us as f64),
            cells.e2e(&key, baseline).map(|l| l.p99_us as f64),
        );
        let _ = writeln!(
            out,
            "| p99 end-to-end latency vs {baseline} | {}, acks={}, {} partition(s) | {} | ≤ 0.5× | {} |",
            size_name(key.record_size),
            key.acks,
            key.partitions,
            show_ratio(value),
            verdict(value.map(|v| v <= 0.5))
        );
    }
    // 3. Produce throughput at 16 KiB within 80 % of the raw O_DIRECT write limit.
    if let Some(limits) = &results.limits {
        for key in cells.keys(WorkloadKind::Produce) {
            if key.record_size != 16384 {
                continue;
            }
            let value = cells
                .mb_per_s(&key, subject)
                .map(|mb| mb / limits.o_direct_write_mb_per_s);
            let _ = writeln!(
                out,
                "| produce throughput vs O_DIRECT write limit ({:.0} MB/s) | 16 KiB, acks={}, {} partition(s) | {} | ≥ 80 % | {} |",
                limits.o_direct_write_mb_per_s,
                key.acks,
                key.partitions,
                value.map_or_else(|| "–".into(), |v| format!("{:.0} %", v * 100.0)),
                verdict(value.map(|v| v >= 0.8))
            );
        }
    }
    let _ = writeln!(out);
}

fn render_throughput(
    out: &mut String,
    results: &MatrixResults,
    cells: &Cells<'_>,
    workload: WorkloadKind,
    title: &str,
) {
    let keys = cells.keys(workload);
    if keys.is_empty() {
        return;
    }
    let names = target_names(results);
    let others = others(results);
    let subject = results.subject.as_str();
    let _ = writeln!(out, "## {title}\n");
    let _ = write!(out, "| record | acks | partitions |");
    for name in &names {
        let _ = write!(out, " {name} MB/s (records/s) |");
    }
    for other in &others {
        let _ = write!(out, " {subject} / {other} |");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "|---|---|---:|{}{}",
        "---:|".repeat(names.len()),
        "---:|".repeat(others.len())
    );
    for key in keys {
        let _ = write!(
            out,
            "| {} | {} | {} |",
            size_name(key.record_size),
            key.acks,
            key.partitions
        );
        for name in &names {
            let run = cells.run(&key, name);
            match run
                .and_then(|r| r.summary.as_ref())
                .filter(|s| s.mb_per_s > 0.0)
            {
                Some(summary) => {
                    let _ = write!(
                        out,
                        " {:.1} ({:.0}){} |",
                        summary.mb_per_s,
                        summary.records_per_s,
                        mark(run)
                    );
                }
                None => {
                    let _ = write!(out, " failed |");
                }
            }
        }
        for other in &others {
            let _ = write!(
                out,
                " {} |",
                show_ratio(ratio(
                    cells.mb_per_s(&key, subject),
                    cells.mb_per_s(&key, other)
                ))
            );
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out);
}

fn render_end_to_end(out: &mut String, results: &MatrixResults, cells: &Cells<'_>) {
    let keys = cells.keys(WorkloadKind::EndToEnd);
    if keys.is_empty() {
        return;
    }
    let names = target_names(results);
    let others = others(results);
    let subject = results.subject.as_str();
    let _ = writeln!(
        out,
        "## End-to-end latency at a fixed rate ({:.0} % of {}'s produce throughput)\n",
        results.e2e_rate_fraction * 100.0,
        results.baseline
    );
    let _ = writeln!(
        out,
        "Milliseconds, p50 / p99 / p99.9 / max, produce → consume. Plots: `plots/end-to-end-*.png`.\n"
    );
    let _ = write!(out, "| record | acks | partitions | rate (records/s) |");
    for name in &names {
        let _ = write!(out, " {name} |");
    }
    for other in &others {
        let _ = write!(out, " p99 {subject} / {other} |");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "|---|---|---:|---:|{}{}",
        "---:|".repeat(names.len()),
        "---:|".repeat(others.len())
    );
    for key in keys {
        let rate = names
            .iter()
            .find_map(|name| cells.run(&key, name).map(|r| r.rate))
            .unwrap_or(0.0);
        let _ = write!(
            out,
            "| {} | {} | {} | {:.0} |",
            size_name(key.record_size),
            key.acks,
            key.partitions,
            rate
        );
        for name in &names {
            match cells.e2e(&key, name) {
                Some(l) => {
                    let _ = write!(
                        out,
                        " {} / {} / {} / {}{} |",
                        ms(l.p50_us),
                        ms(l.p99_us),
                        ms(l.p999_us),
                        ms(l.max_us),
                        mark(cells.run(&key, name))
                    );
                }
                None => {
                    let _ = write!(out, " failed |");
                }
            }
        }
        for other in &others {
            let value = ratio(
                cells.e2e(&key, subject).map(|l| l.p99_us as f64),
                cells.e2e(&key, other).map(|l| l.p99_us as f64),
            );
            let _ = write!(out, " {} |", show_ratio(value));
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out);
}

fn render_errors(out: &mut String, results: &MatrixResults) {
    let troubled: Vec<&RunResult> = results
        .runs
        .iter()
        .filter(|r| !r.errors.is_empty())
        .collect();
    if troubled.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Runs with errors\n");
    for run in troubled {
        let errors: Vec<String> = run
            .errors
            .iter()
            .take(4)
            .map(|e| e.replace('|', "/"))
            .collect();
        let _ = writeln!(
            out,
            "- {} on **{}**: {}",
            run.cell.slug(),
            run.target,
            errors.join("; ")
        );
    }
    let _ = writeln!(out);
}
