//! Log cleaner flags (Kafka's `log.cleaner.*` broker settings, with its names and defaults).

use std::time::Duration;

use clap::Args;
use kaas_engine::compaction::CleanerConfig;

/// Kafka's default `log.cleaner.io.max.bytes.per.second`: `Double.MAX_VALUE`, no limit.
const UNLIMITED: f64 = f64::MAX;

/// Settings of the cleaner that compacts `cleanup.policy=compact` topics.
#[derive(Args, Debug, Clone)]
pub struct CleanerFlags {
    /// How many shards may run a cleaning pass at the same time (`log.cleaner.threads`).
    /// Each shard has one cleaner task for its own partitions.
    #[arg(long, env = "KAAS_LOG_CLEANER_THREADS", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub log_cleaner_threads: u16,
    /// Memory for one shard's key → latest-offset map, in bytes
    /// (`log.cleaner.dedupe.buffer.size`).
    #[arg(long, env = "KAAS_LOG_CLEANER_DEDUPE_BUFFER_SIZE", default_value_t = 134_217_728,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub log_cleaner_dedupe_buffer_size: u64,
    /// Bytes per second one shard's cleaner reads plus writes
    /// (`log.cleaner.io.max.bytes.per.second`; the default means no limit).
    #[arg(long, env = "KAAS_LOG_CLEANER_IO_MAX_BYTES_PER_SECOND", default_value_t = UNLIMITED,
          value_parser = positive_rate)]
    pub log_cleaner_io_max_bytes_per_second: f64,
    /// Pause of a shard's cleaner after a round that found nothing to clean
    /// (`log.cleaner.backoff.ms`).
    #[arg(long, env = "KAAS_LOG_CLEANER_BACKOFF_MS", default_value_t = 15_000)]
    pub log_cleaner_backoff_ms: u64,
}

fn positive_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate > 0.0 => Ok(rate),
        _ => Err(format!(
            "{text:?} is not a positive number of bytes per second"
        )),
    }
}

impl CleanerFlags {
    /// The engine's cleaner settings these flags mean.
    pub fn cleaner_config(&self) -> CleanerConfig {
        let dedupe = usize::try_from(self.log_cleaner_dedupe_buffer_size).unwrap_or(usize::MAX);
        let rate = self.log_cleaner_io_max_bytes_per_second;
        CleanerConfig {
            threads: usize::from(self.log_cleaner_threads),
            dedupe_buffer_bytes: dedupe,
            // A rate at or past u64's range limits nothing (Kafka's default is f64::MAX).
            io_bytes_per_second: (rate < u64::MAX as f64).then(|| rate.ceil() as u64),
            backoff: Duration::from_millis(self.log_cleaner_backoff_ms),
            ..CleanerConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Only {
        #[command(flatten)]
        cleaner: CleanerFlags,
    }

    fn parse(args: &[&str]) -> Result<CleanerConfig, clap::Error> {
        let mut all = vec!["kaas"];
        all.extend_from_slice(args);
        Only::try_parse_from(all).map(|only| only.cleaner.cleaner_config())
    }

    #[test]
    fn defaults_are_kafkas() {
        let config = parse(&[]).expect("defaults");
        assert_eq!(config.threads, 1);
        assert_eq!(config.dedupe_buffer_bytes, 134_217_728);
        assert_eq!(config.io_bytes_per_second, None);
        assert_eq!(config.backoff, Duration::from_millis(15_000));
        assert_eq!(config, CleanerConfig::default());
    }

    #[test]
    fn flags_reach_the_engine_config() {
        let config = parse(&[
            "--log-cleaner-threads",
            "2",
            "--log-cleaner-dedupe-buffer-size",
            "1048576",
            "--log-cleaner-io-max-bytes-per-second",
            "5e6",
            "--log-cleaner-backoff-ms",
            "200",
        ])
        .expect("valid");
        assert_eq!(config.threads, 2);
        assert_eq!(config.dedupe_buffer_bytes, 1 << 20);
        assert_eq!(config.io_bytes_per_second, Some(5_000_000));
        assert_eq!(config.backoff, Duration::from_millis(200));
    }

    #[test]
    fn nonsense_is_refused() {
        for bad in [
            ["--log-cleaner-threads", "0"],
            ["--log-cleaner-dedupe-buffer-size", "0"],
            ["--log-cleaner-io-max-bytes-per-second", "0"],
            ["--log-cleaner-io-max-bytes-per-second", "-1"],
            ["--log-cleaner-io-max-bytes-per-second", "fast"],
            ["--log-cleaner-backoff-ms", "-5"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }
}
