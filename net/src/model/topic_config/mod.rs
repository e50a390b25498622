//! Topic configs: every Kafka topic config name ([`table`]), their defaults (Kafka's, or the
//! broker flag behind them), validation as Kafka does it ([`value`]), and how they become an
//! engine [`LogConfig`] and the produce path's [`TopicCompression`].

pub mod compression;
pub mod table;
pub mod value;

use std::collections::BTreeMap;
use std::time::Duration;

use kaas_engine::batch::record_rules::RecordRules;
use kaas_engine::compaction::CompactionConfig;
use kaas_engine::{LogConfig, TimestampType};

pub use compression::{CompressionType, TopicCompression};
pub use table::{topic_spec, TOPIC_CONFIGS};
pub use value::{ConfigSpec, ValueType};

/// Broker-wide defaults for topic configs (Apache Kafka's defaults unless set).
#[derive(Clone, Debug)]
pub struct TopicDefaults {
    /// `log.retention.ms`.
    pub retention_ms: i64,
    /// `log.retention.bytes`.
    pub retention_bytes: i64,
    /// `log.segment.bytes`.
    pub segment_bytes: i64,
    /// `log.roll.ms`.
    pub segment_ms: i64,
    /// `message.max.bytes`.
    pub max_message_bytes: i64,
}

impl Default for TopicDefaults {
    fn default() -> Self {
        TopicDefaults {
            retention_ms: 604_800_000,
            retention_bytes: -1,
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            max_message_bytes: 1_048_588,
        }
    }
}

impl TopicDefaults {
    /// The broker flag's value behind `name`, for the configs kaas has flags for.
    pub fn broker_value(&self, name: &str) -> Option<i64> {
        match name {
            "retention.ms" => Some(self.retention_ms),
            "retention.bytes" => Some(self.retention_bytes),
            "segment.bytes" => Some(self.segment_bytes),
            "segment.ms" => Some(self.segment_ms),
            "max.message.bytes" => Some(self.max_message_bytes),
            _ => None,
        }
    }
}

/// Why a config was refused (answered as INVALID_CONFIG with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidConfig(pub String);

/// Where a topic config's effective value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigOrigin {
    /// A topic override (DYNAMIC_TOPIC_CONFIG).
    Topic,
    /// A broker flag that differs from Kafka's default (STATIC_BROKER_CONFIG).
    Broker,
    /// Kafka's default (DEFAULT_CONFIG).
    Default,
}

/// A topic's config overrides (only validated names and values are ever stored).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TopicConfig {
    overrides: BTreeMap<String, String>,
}

impl TopicConfig {
    /// Validates and collects the configs of a CreateTopics request, given as (name, value).
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, InvalidConfig> {
        let mut config = TopicConfig::default();
        for (name, value) in pairs {
            let value = value.ok_or_else(|| {
                InvalidConfig(format!(
                    "Null value not supported for topic configs: {name}"
                ))
            })?;
            config.set(name, value)?;
        }
        config.check_combination()?;
        Ok(config)
    }

    /// Sets one override after validating it.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), InvalidConfig> {
        let spec = known(name)?;
        let value = spec.check(value)?;
        if name == "remote.storage.enable" && value.eq_ignore_ascii_case("true") {
            // kaas has no tiered storage; Kafka answers the same with it disabled.
            return Err(InvalidConfig(
                "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.".into(),
            ));
        }
        self.overrides.insert(name.to_string(), value);
        Ok(())
    }

    /// Removes an override (back to the default).
    pub fn delete(&mut self, name: &str) -> Result<(), InvalidConfig> {
        known(name)?;
        self.overrides.remove(name);
        Ok(())
    }

    /// Removes every override.
    pub fn clear(&mut self) {
        self.overrides.clear();
    }

    /// Checks what single values cannot: Kafka's rules across configs.
    pub fn check_combination(&self) -> Result<(), InvalidConfig> {
        let number = |name: &str| {
            let spec = topic_spec(name)?;
            ConfigSpec::number(self.get(name).unwrap_or(spec.default))
        };
        if let (Some(min), Some(max)) = (
            number("min.compaction.lag.ms"),
            number("max.compaction.lag.ms"),
        ) {
            if min > max {
                return Err(InvalidConfig(format!(
                    "conflict topic config setting min.compaction.lag.ms ({min}) > max.compaction.lag.ms ({max})"
                )));
            }
        }
        Ok(())
    }

    /// The override of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.overrides.get(name).map(String::as_str)
    }

    /// The overrides, by name.
    pub fn overrides(&self) -> impl Iterator<Item = (&str, &str)> {
        self.overrides.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The effective value of `spec` and where it comes from.
    pub fn effective(&self, spec: &ConfigSpec, defaults: &TopicDefaults) -> (String, ConfigOrigin) {
        if let Some(value) = self.get(spec.name) {
            return (value.to_string(), ConfigOrigin::Topic);
        }
        match defaults.broker_value(spec.name) {
            Some(value) if value.to_string() != spec.default => {
                (value.to_string(), ConfigOrigin::Broker)
            }
            _ => (spec.default.to_string(), ConfigOrigin::Default),
        }
    }

    /// The effective value of the config `name` (empty for an unknown name).
    pub fn value(&self, name: &str, defaults: &TopicDefaults) -> String {
        topic_spec(name).map_or_else(String::new, |spec| self.effective(spec, defaults).0)
    }

    fn number(&self, name: &str, defaults: &TopicDefaults) -> i64 {
        // Stored values and the table's defaults were validated (a table test checks them).
        ConfigSpec::number(&self.value(name, defaults)).unwrap_or(-1)
    }

    /// The produce path's view of the compression configs.
    pub fn compression(&self) -> TopicCompression {
        let defaults = TopicDefaults::default();
        let level = |name: &str| self.number(name, &defaults) as i32;
        TopicCompression {
            codec: CompressionType::from_name(&self.value("compression.type", &defaults)),
            gzip_level: level("compression.gzip.level"),
            lz4_level: level("compression.lz4.level"),
            zstd_level: level("compression.zstd.level"),
        }
    }

    /// The engine settings these configs mean.
    pub fn log_config(&self, defaults: &TopicDefaults) -> LogConfig {
        // Kafka deletes by time or size only under the `delete` policy; a `compact`-only topic
        // keeps every segment, which only the cleaner rewrites.
        let policy = self.value("cleanup.policy", defaults);
        let deletes = value::list_items(&policy).contains(&"delete");
        let compacts = value::list_items(&policy).contains(&"compact");
        let (retention_ms, retention_bytes) = if deletes {
            (
                self.number("retention.ms", defaults),
                self.number("retention.bytes", defaults),
            )
        } else {
            (-1, -1)
        };
        LogConfig {
            segment_bytes: self.number("segment.bytes", defaults).max(14) as u64,
            segment_age: Duration::from_millis(self.number("segment.ms", defaults).max(1) as u64),
            retention_age: (retention_ms >= 0).then(|| Duration::from_millis(retention_ms as u64)),
            retention_bytes: (retention_bytes >= 0).then_some(retention_bytes as u64),
            max_batch_bytes: self.number("max.message.bytes", defaults).max(0) as usize,
            timestamp_type: if self.value("message.timestamp.type", defaults) == "LogAppendTime" {
                TimestampType::LogAppendTime
            } else {
                TimestampType::CreateTime
            },
            index_interval_bytes: self.number("index.interval.bytes", defaults).max(1) as u64,
            compression: self.compression().engine_target(),
            compaction: compacts.then(|| self.compaction_config(defaults)),
            record_rules: RecordRules {
                keys_required: compacts,
                timestamp_before_max_ms: self.number("message.timestamp.before.max.ms", defaults),
                timestamp_after_max_ms: self.number("message.timestamp.after.max.ms", defaults),
                max_decompressed_record_bytes: self
                    .number("max.decompressed.message.bytes", defaults)
                    .max(1) as usize,
            },
            ..LogConfig::default()
        }
    }
}

impl TopicConfig {
    /// The cleaner's settings for a compacted topic (`max.compaction.lag.ms` at its maximum,
    /// Kafka's default, means no deadline).
    fn compaction_config(&self, defaults: &TopicDefaults) -> CompactionConfig {
        let millis = |name: &str| Duration::from_millis(self.number(name, defaults).max(0) as u64);
        let max_lag = self.number("max.compaction.lag.ms", defaults);
        CompactionConfig {
            min_cleanable_dirty_ratio: self
                .value("min.cleanable.dirty.ratio", defaults)
                .parse()
                .unwrap_or(0.5),
            min_compaction_lag: millis("min.compaction.lag.ms"),
            max_compaction_lag: (max_lag != i64::MAX).then(|| millis("max.compaction.lag.ms")),
            delete_retention: millis("delete.retention.ms"),
        }
    }
}

fn known(name: &str) -> Result<&'static ConfigSpec, InvalidConfig> {
    topic_spec(name).ok_or_else(|| InvalidConfig(format!("Unknown topic config name: {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_map_to_engine_settings() {
        let defaults = TopicDefaults::default();
        let config = TopicConfig::default().log_config(&defaults);
        assert_eq!(config.segment_bytes, 1 << 30);
        assert_eq!(
            config.retention_age,
            Some(Duration::from_millis(604_800_000))
        );
        assert_eq!(config.retention_bytes, None);
        assert_eq!(config.max_batch_bytes, 1_048_588);
        assert_eq!(
            config.record_rules.max_decompressed_record_bytes,
            2_147_483_639
        );
        assert_eq!(config.index_interval_bytes, 4096);
    }

    #[test]
    fn overrides_are_validated() {
        let mut config = TopicConfig::default();
        assert!(config.set("retention.ms", "-1").is_ok());
        assert!(config.set("retention.ms", "-2").is_err());
        assert!(config.set("retention.ms", "soon").is_err());
        assert!(config.set("cleanup.policy", "compact").is_ok());
        assert!(config.set("cleanup.policy", "compact,delete").is_ok());
        assert!(config.set("cleanup.policy", "shred").is_err());
        assert!(config.set("segment.bytes", "1000").is_err());
        assert!(config.set("min.insync.replicas", "2").is_ok());
        assert!(config.set("delete.retention.ms", "1000").is_ok());
        assert_eq!(
            config.set("no.such.config", "1").expect_err("refused").0,
            "Unknown topic config name: no.such.config"
        );
        assert_eq!(
            config
                .set("message.downconversion.enable", "true")
                .expect_err("refused")
                .0,
            "Unknown topic config name: message.downconversion.enable"
        );
        assert!(config.set("remote.storage.enable", "false").is_ok());
        assert!(config.set("remote.storage.enable", "true").is_err());
        assert!(config
            .set("message.timestamp.type", "LogAppendTime")
            .is_ok());
        let log = config.log_config(&TopicDefaults::default());
        assert_eq!(log.retention_age, None);
        assert_eq!(log.timestamp_type, TimestampType::LogAppendTime);
        config.delete("retention.ms").expect("known key");
        assert_eq!(config.get("retention.ms"), None);
    }

    #[test]
    fn only_a_compact_policy_is_cleaned_with_the_topics_compaction_configs() {
        let defaults = TopicDefaults::default();
        let delete = TopicConfig::default().log_config(&defaults);
        assert_eq!(delete.compaction, None);
        let compact = TopicConfig::from_pairs([("cleanup.policy", Some("compact"))])
            .expect("valid")
            .log_config(&defaults);
        assert_eq!(compact.compaction, Some(CompactionConfig::default()));
        let tuned = TopicConfig::from_pairs([
            ("cleanup.policy", Some("compact,delete")),
            ("min.cleanable.dirty.ratio", Some("0.01")),
            ("min.compaction.lag.ms", Some("5")),
            ("max.compaction.lag.ms", Some("60000")),
            ("delete.retention.ms", Some("0")),
        ])
        .expect("valid")
        .log_config(&defaults);
        assert_eq!(
            tuned.compaction,
            Some(CompactionConfig {
                min_cleanable_dirty_ratio: 0.01,
                min_compaction_lag: Duration::from_millis(5),
                max_compaction_lag: Some(Duration::from_millis(60_000)),
                delete_retention: Duration::ZERO,
            })
        );
    }

    #[test]
    fn only_the_delete_policy_deletes_by_time_and_size() {
        let defaults = TopicDefaults {
            retention_bytes: 1000,
            ..TopicDefaults::default()
        };
        let compact =
            TopicConfig::from_pairs([("cleanup.policy", Some("compact"))]).expect("valid");
        let log = compact.log_config(&defaults);
        assert_eq!((log.retention_age, log.retention_bytes), (None, None));
        let both =
            TopicConfig::from_pairs([("cleanup.policy", Some("compact,delete"))]).expect("valid");
        let log = both.log_config(&defaults);
        assert_eq!(log.retention_bytes, Some(1000));
        assert_eq!(log.retention_age, Some(Duration::from_millis(604_800_000)));
    }

    #[test]
    fn create_refuses_nulls_and_conflicting_compaction_lags() {
        assert_eq!(
            TopicConfig::from_pairs([("retention.ms", None)])
                .expect_err("refused")
                .0,
            "Null value not supported for topic configs: retention.ms"
        );
        assert_eq!(
            TopicConfig::from_pairs([
                ("min.compaction.lag.ms", Some("100")),
                ("max.compaction.lag.ms", Some("10"))
            ])
            .expect_err("refused")
            .0,
            "conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (10)"
        );
    }

    #[test]
    fn sources_tell_overrides_broker_flags_and_kafka_defaults_apart() {
        let defaults = TopicDefaults {
            retention_ms: 1000,
            ..TopicDefaults::default()
        };
        let mut config = TopicConfig::default();
        let spec = |name| topic_spec(name).expect("known");
        assert_eq!(
            config.effective(spec("retention.ms"), &defaults),
            ("1000".into(), ConfigOrigin::Broker)
        );
        assert_eq!(
            config.effective(spec("segment.bytes"), &defaults),
            ("1073741824".into(), ConfigOrigin::Default)
        );
        config.set("segment.bytes", "2097152").expect("valid");
        assert_eq!(
            config.effective(spec("segment.bytes"), &defaults),
            ("2097152".into(), ConfigOrigin::Topic)
        );
    }

    #[test]
    fn compression_configs_parse_for_the_produce_path() {
        assert_eq!(
            TopicConfig::default().compression(),
            TopicCompression {
                codec: CompressionType::Producer,
                gzip_level: -1,
                lz4_level: 9,
                zstd_level: 3
            }
        );
        let config = TopicConfig::from_pairs([
            ("compression.type", Some("zstd")),
            ("compression.zstd.level", Some("-5")),
        ])
        .expect("valid");
        assert_eq!(config.compression().codec, CompressionType::Zstd);
        assert_eq!(config.compression().zstd_level, -5);
    }
}
