//! The JSON report of a run.
//!
//! Throughput is in records/s and MB/s (10^6 bytes of record key + value per second, not
//! counting protocol overhead). The summary's throughput is the median over samples; its
//! latency percentiles come from all samples' histograms merged. Latencies are in
//! microseconds.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::machine::MachineInfo;
use crate::workload::WorkloadSpec;

/// Report format identifier, bumped when fields change meaning.
pub const REPORT_FORMAT: &str = "kaas-bench-report/1";

/// Percentiles of one latency histogram, in microseconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_us: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
}

impl LatencySummary {
    /// `None` for an empty histogram.
    pub fn of(histogram: &Histogram<u64>) -> Option<Self> {
        if histogram.is_empty() {
            return None;
        }
        Some(LatencySummary {
            count: histogram.len(),
            min_us: histogram.min(),
            p50_us: histogram.value_at_quantile(0.50),
            p90_us: histogram.value_at_quantile(0.90),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            max_us: histogram.max(),
            mean_us: histogram.mean(),
        })
    }
}

/// One point of a latency-percentile curve.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct PercentilePoint {
    pub percentile: f64,
    pub latency_us: u64,
}

/// Latency at percentiles spaced evenly on a log scale of 1 / (1 - p), from 0 % up to
/// 99.999 %, then the maximum at 100 %.
pub fn percentile_curve(histogram: &Histogram<u64>) -> Vec<PercentilePoint> {
    if histogram.is_empty() {
        return Vec::new();
    }
    let mut curve: Vec<PercentilePoint> = (0..=60)
        .map(|step| {
            let quantile = 1.0 - 10f64.powf(-(step as f64) / 12.0);
            PercentilePoint {
                percentile: quantile * 100.0,
                latency_us: histogram.value_at_quantile(quantile),
            }
        })
        .collect();
    curve.push(PercentilePoint {
        percentile: 100.0,
        latency_us: histogram.max(),
    });
    // Quantile lookups return the top of a bucket and `max` the value itself; keep the curve
    // from dipping at the end.
    let mut highest = 0;
    for point in &mut curve {
        highest = highest.max(point.latency_us);
        point.latency_us = highest;
    }
    curve
}

/// One sample (or, for consume-only runs, one pass over the topic).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SampleReport {
    pub index: usize,
    pub seconds: f64,
    pub records: u64,
    pub bytes: u64,
    pub records_per_s: f64,
    pub mb_per_s: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub produce_latency: Option<LatencySummary>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub end_to_end_latency: Option<LatencySummary>,
    /// Commit latency of the transactions started in this sample.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub commit_latency: Option<LatencySummary>,
}

/// What the transactions of a transactional run cost.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct TransactionSummary {
    /// Transactions committed over the whole run (warm-up and the last one included).
    pub commits: u64,
    /// Transactions aborted over the whole run.
    pub aborted: u64,
    /// Records committed per second and MB/s: median over samples, filed when the commit
    /// returned (the headline throughput counts acknowledged records).
    pub committed_records_per_s: f64,
    pub committed_mb_per_s: f64,
    /// Mean records per committed transaction within the samples.
    pub records_per_transaction: f64,
    /// Decision to commit → `commit_transaction` returned: the wait for the transaction's
    /// last acknowledgements plus the `EndTxn` round trip. Merged over samples.
    pub commit_latency: Option<LatencySummary>,
    /// Last record acknowledged → `commit_transaction` returned (the `EndTxn` part).
    pub end_txn_latency: Option<LatencySummary>,
}

/// Medians and merged percentiles over all samples.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Summary {
    pub records_per_s: f64,
    pub mb_per_s: f64,
    pub records_per_s_min: f64,
    pub records_per_s_max: f64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub produce_latency: Option<LatencySummary>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub end_to_end_latency: Option<LatencySummary>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub produce_latency_curve: Vec<PercentilePoint>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub end_to_end_latency_curve: Vec<PercentilePoint>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub transactions: Option<TransactionSummary>,
}

/// Record counts over the whole run (warm-up and drain included).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Totals {
    pub sent: u64,
    pub delivered: u64,
    pub failed: u64,
    pub consumed: u64,
}

/// Everything a run writes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub format: String,
    /// Which broker (e.g. `kaas`, `kafka-default`).
    pub target: String,
    pub bootstrap: String,
    pub started_at_unix: u64,
    pub git_revision: String,
    pub machine: MachineInfo,
    pub settings: WorkloadSpec,
    pub samples: Vec<SampleReport>,
    pub summary: Summary,
    pub totals: Totals,
    /// False when records were lost, a pass did not finish, or the run failed.
    pub complete: bool,
    /// Delivery, consume and client errors (first few of each).
    pub errors: Vec<String>,
    /// Things worth knowing that are not errors (e.g. a consume pass that hit its time
    /// limit: its throughput is records read within the limit).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Median of `values` (0 for none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

/// Fills the throughput part of a summary from its samples.
pub fn summarize_throughput(samples: &[SampleReport]) -> Summary {
    let rates: Vec<f64> = samples.iter().map(|s| s.records_per_s).collect();
    let mbs: Vec<f64> = samples.iter().map(|s| s.mb_per_s).collect();
    Summary {
        records_per_s: median(&rates),
        mb_per_s: median(&mbs),
        records_per_s_min: if rates.is_empty() {
            0.0
        } else {
            rates.iter().copied().fold(f64::INFINITY, f64::min)
        },
        records_per_s_max: rates.iter().copied().fold(0.0, f64::max),
        ..Summary::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::latency_recorder::new_histogram;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn summaries_and_curves() {
        let mut histogram = new_histogram();
        assert!(LatencySummary::of(&histogram).is_none());
        assert!(percentile_curve(&histogram).is_empty());
        for value in 1..=1000 {
            histogram.record(value).unwrap();
        }
        let summary = LatencySummary::of(&histogram).unwrap();
        assert_eq!(summary.count, 1000);
        assert_eq!(summary.p50_us, 500);
        assert_eq!(summary.p99_us, 990);
        assert_eq!(summary.max_us, 1000);
        let curve = percentile_curve(&histogram);
        assert_eq!(curve.first().unwrap().percentile, 0.0);
        assert_eq!(curve.last().unwrap().latency_us, 1000);
        assert!(curve.windows(2).all(|w| w[0].latency_us <= w[1].latency_us));
    }
}
