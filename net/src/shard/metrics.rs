//! Counters the broker exposes on `/metrics` (Prometheus text format).
//!
//! Each shard writes only its own counters (relaxed atomics, no contention); the admin
//! endpoint sums them when scraped. The log cleaner's counters are the engine's
//! [`CleanerStats`], copied in by the shard every second.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use kaas_engine::compaction::stats::CleanerStats;

/// API keys tracked individually (every key below this bound).
const API_KEYS: usize = 80;

/// One shard's counters.
#[derive(Debug)]
pub struct ShardMetrics {
    requests: Vec<AtomicU64>,
    request_errors: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    connections_open: AtomicI64,
    connections_total: AtomicU64,
    records_appended: AtomicU64,
    fetch_read_bytes: AtomicU64,
    partitions_open: AtomicI64,
    cleaner: Mutex<CleanerStats>,
}

impl Default for ShardMetrics {
    fn default() -> Self {
        ShardMetrics {
            requests: (0..API_KEYS).map(|_| AtomicU64::new(0)).collect(),
            request_errors: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            connections_open: AtomicI64::new(0),
            connections_total: AtomicU64::new(0),
            records_appended: AtomicU64::new(0),
            fetch_read_bytes: AtomicU64::new(0),
            partitions_open: AtomicI64::new(0),
            cleaner: Mutex::new(CleanerStats::default()),
        }
    }
}

impl ShardMetrics {
    /// A request of `api_key` of `bytes` arrived.
    pub fn request(&self, api_key: i16, bytes: usize) {
        if let Some(counter) = usize::try_from(api_key)
            .ok()
            .and_then(|k| self.requests.get(k))
        {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_in.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A request was refused or its connection closed for bad input.
    pub fn request_error(&self) {
        self.request_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// A response of `bytes` went out.
    pub fn response(&self, bytes: usize) {
        self.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// A connection opened (`+1`) or closed (`-1`).
    pub fn connection(&self, delta: i64) {
        self.connections_open.fetch_add(delta, Ordering::Relaxed);
        if delta > 0 {
            self.connections_total.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records appended.
    pub fn appended(&self, records: u64) {
        self.records_appended.fetch_add(records, Ordering::Relaxed);
    }

    /// Bytes of records a fetch read from a partition log (memory or disk), whether or not
    /// the response had room for them.
    pub fn fetch_read(&self, bytes: usize) {
        self.fetch_read_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Sets the number of partitions open on this shard.
    pub fn set_partitions_open(&self, count: usize) {
        self.partitions_open.store(count as i64, Ordering::Relaxed);
    }

    /// Partitions open on this shard.
    pub fn partitions_open(&self) -> i64 {
        self.partitions_open.load(Ordering::Relaxed)
    }

    /// The shard's log cleaner counters as of now.
    pub fn set_cleaner(&self, stats: CleanerStats) {
        *self.cleaner.lock().unwrap_or_else(|e| e.into_inner()) = stats;
    }

    fn cleaner(&self) -> CleanerStats {
        self.cleaner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// One of a shard cleaner's counters.
type CleanerCounter = fn(&CleanerStats) -> u64;

/// The log cleaner's figures: per shard its passes and bytes, per compacted partition its
/// dirty ratio and the seconds since its last pass (absent until it was cleaned once).
fn render_cleaner(out: &mut String, shards: &[std::sync::Arc<ShardMetrics>], now_ms: i64) {
    let stats: Vec<CleanerStats> = shards.iter().map(|s| s.cleaner()).collect();
    let per_shard: [(&str, CleanerCounter); 5] = [
        ("kaas_log_cleaner_passes_total", |s| s.passes),
        ("kaas_log_cleaner_failed_passes_total", |s| s.failed_passes),
        ("kaas_log_cleaner_read_bytes_total", |s| s.bytes_read),
        ("kaas_log_cleaner_written_bytes_total", |s| s.bytes_written),
        ("kaas_log_cleaner_segments_swapped_total", |s| {
            s.segments_swapped
        }),
    ];
    for (name, value) in per_shard {
        let _ = writeln!(out, "# TYPE {name} counter");
        for (index, shard) in stats.iter().enumerate() {
            let _ = writeln!(out, "{name}{{shard=\"{index}\"}} {}", value(shard));
        }
    }
    let _ = writeln!(out, "# TYPE kaas_log_cleaner_dirty_ratio gauge");
    for shard in &stats {
        for (id, partition) in &shard.partitions {
            let _ = writeln!(
                out,
                "kaas_log_cleaner_dirty_ratio{{topic=\"{}\",partition=\"{}\"}} {}",
                id.topic, id.partition, partition.dirty_ratio
            );
        }
    }
    let _ = writeln!(
        out,
        "# TYPE kaas_log_cleaner_seconds_since_last_clean gauge"
    );
    for shard in &stats {
        for (id, partition) in &shard.partitions {
            if let Some(ms) = partition.since_last_clean_ms(now_ms) {
                let _ = writeln!(
                    out,
                    "kaas_log_cleaner_seconds_since_last_clean{{topic=\"{}\",partition=\"{}\"}} {:.3}",
                    id.topic,
                    id.partition,
                    ms as f64 / 1000.0
                );
            }
        }
    }
}

/// Renders every shard's counters in the Prometheus text format.
pub fn render(shards: &[std::sync::Arc<ShardMetrics>]) -> String {
    let mut out = String::new();
    let sum = |f: &dyn Fn(&ShardMetrics) -> u64| shards.iter().map(|s| f(s)).sum::<u64>();
    let _ = writeln!(out, "# TYPE kaas_requests_total counter");
    for key in 0..API_KEYS {
        let count = sum(&|s| s.requests[key].load(Ordering::Relaxed));
        if count > 0 {
            let _ = writeln!(out, "kaas_requests_total{{api_key=\"{key}\"}} {count}");
        }
    }
    let counters: [(&str, &str, u64); 6] = [
        (
            "kaas_request_errors_total",
            "counter",
            sum(&|s| s.request_errors.load(Ordering::Relaxed)),
        ),
        (
            "kaas_bytes_in_total",
            "counter",
            sum(&|s| s.bytes_in.load(Ordering::Relaxed)),
        ),
        (
            "kaas_bytes_out_total",
            "counter",
            sum(&|s| s.bytes_out.load(Ordering::Relaxed)),
        ),
        (
            "kaas_connections_total",
            "counter",
            sum(&|s| s.connections_total.load(Ordering::Relaxed)),
        ),
        (
            "kaas_records_appended_total",
            "counter",
            sum(&|s| s.records_appended.load(Ordering::Relaxed)),
        ),
        (
            "kaas_fetch_read_bytes_total",
            "counter",
            sum(&|s| s.fetch_read_bytes.load(Ordering::Relaxed)),
        ),
    ];
    for (name, kind, value) in counters {
        let _ = writeln!(out, "# TYPE {name} {kind}\n{name} {value}");
    }
    let open: i64 = shards
        .iter()
        .map(|s| s.connections_open.load(Ordering::Relaxed))
        .sum();
    let _ = writeln!(
        out,
        "# TYPE kaas_connections_open gauge\nkaas_connections_open {open}"
    );
    let _ = writeln!(out, "# TYPE kaas_partitions_open gauge");
    for (index, shard) in shards.iter().enumerate() {
        let _ = writeln!(
            out,
            "kaas_partitions_open{{shard=\"{index}\"}} {}",
            shard.partitions_open()
        );
    }
    render_cleaner(&mut out, shards, kaas_engine::log_manager::now_ms());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn renders_sums_over_shards() {
        let shards = vec![
            Arc::new(ShardMetrics::default()),
            Arc::new(ShardMetrics::default()),
        ];
        shards[0].request(0, 100);
        shards[1].request(0, 50);
        shards[1].request(500, 1);
        shards[0].connection(1);
        let text = render(&shards);
        assert!(text.contains("kaas_requests_total{api_key=\"0\"} 2"));
        assert!(text.contains("kaas_bytes_in_total 151"));
        assert!(text.contains("kaas_connections_open 1"));
    }

    #[test]
    fn renders_the_cleaners_figures() {
        use kaas_engine::compaction::stats::PartitionCleanerStats;
        use kaas_engine::PartitionId;
        let shards = vec![
            Arc::new(ShardMetrics::default()),
            Arc::new(ShardMetrics::default()),
        ];
        let mut stats = CleanerStats {
            passes: 3,
            bytes_read: 4096,
            bytes_written: 1024,
            ..CleanerStats::default()
        };
        let now = kaas_engine::log_manager::now_ms();
        stats.partitions.insert(
            PartitionId::new("compacted", 2),
            PartitionCleanerStats {
                dirty_ratio: 0.25,
                last_clean_ms: Some(now - 1500),
            },
        );
        stats.partitions.insert(
            PartitionId::new("never", 0),
            PartitionCleanerStats::default(),
        );
        shards[1].set_cleaner(stats);
        let text = render(&shards);
        for line in [
            "kaas_log_cleaner_passes_total{shard=\"0\"} 0",
            "kaas_log_cleaner_passes_total{shard=\"1\"} 3",
            "kaas_log_cleaner_read_bytes_total{shard=\"1\"} 4096",
            "kaas_log_cleaner_written_bytes_total{shard=\"1\"} 1024",
            "kaas_log_cleaner_dirty_ratio{topic=\"compacted\",partition=\"2\"} 0.25",
            "kaas_log_cleaner_dirty_ratio{topic=\"never\",partition=\"0\"} 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from\n{text}"
            );
        }
        let since = text
            .lines()
            .find_map(|l| {
                l.strip_prefix(
                    "kaas_log_cleaner_seconds_since_last_clean{topic=\"compacted\",partition=\"2\"} ",
                )
            })
            .expect("time since the last clean");
        let seconds: f64 = since.parse().expect("a number");
        assert!((1.5..60.0).contains(&seconds), "{seconds}");
        assert!(!text.contains("seconds_since_last_clean{topic=\"never\""));
    }
}
