//! Topic configs: the Kafka names the broker accepts, their defaults, validation, and how
//! they become an engine [`LogConfig`].

use std::collections::BTreeMap;
use std::time::Duration;

use kaas_engine::compression::{Codec, CompressionTarget};
use kaas_engine::{LogConfig, TimestampType};

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

/// Why a config was refused (answered as INVALID_CONFIG with this message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidConfig(pub String);

/// A topic config key kaas understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigKey {
    /// `cleanup.policy` (only `delete`).
    CleanupPolicy,
    /// `retention.ms`.
    RetentionMs,
    /// `retention.bytes`.
    RetentionBytes,
    /// `segment.bytes`.
    SegmentBytes,
    /// `segment.ms`.
    SegmentMs,
    /// `max.message.bytes`.
    MaxMessageBytes,
    /// `message.timestamp.type`.
    MessageTimestampType,
    /// `compression.type`: `producer` keeps the producer's codec, any other value re-encodes.
    CompressionType,
    /// `compression.gzip.level`.
    CompressionGzipLevel,
    /// `compression.lz4.level`.
    CompressionLz4Level,
    /// `compression.zstd.level`.
    CompressionZstdLevel,
}

/// Every settable key, in the order DescribeConfigs lists them.
pub const SETTABLE_KEYS: &[ConfigKey] = &[
    ConfigKey::CleanupPolicy,
    ConfigKey::CompressionGzipLevel,
    ConfigKey::CompressionLz4Level,
    ConfigKey::CompressionType,
    ConfigKey::CompressionZstdLevel,
    ConfigKey::MaxMessageBytes,
    ConfigKey::MessageTimestampType,
    ConfigKey::RetentionBytes,
    ConfigKey::RetentionMs,
    ConfigKey::SegmentBytes,
    ConfigKey::SegmentMs,
];

/// Configs reported by DescribeConfigs with a fixed value (what kaas always does).
pub const FIXED_CONFIGS: &[(&str, &str)] = &[
    ("min.insync.replicas", "1"),
    ("unclean.leader.election.enable", "false"),
    ("message.timestamp.before.max.ms", "9223372036854775807"),
    ("message.timestamp.after.max.ms", "9223372036854775807"),
];

impl ConfigKey {
    /// The Kafka config name.
    pub fn name(self) -> &'static str {
        match self {
            ConfigKey::CleanupPolicy => "cleanup.policy",
            ConfigKey::RetentionMs => "retention.ms",
            ConfigKey::RetentionBytes => "retention.bytes",
            ConfigKey::SegmentBytes => "segment.bytes",
            ConfigKey::SegmentMs => "segment.ms",
            ConfigKey::MaxMessageBytes => "max.message.bytes",
            ConfigKey::MessageTimestampType => "message.timestamp.type",
            ConfigKey::CompressionType => "compression.type",
            ConfigKey::CompressionGzipLevel => "compression.gzip.level",
            ConfigKey::CompressionLz4Level => "compression.lz4.level",
            ConfigKey::CompressionZstdLevel => "compression.zstd.level",
        }
    }

    /// Looks a key up by name.
    pub fn from_name(name: &str) -> Option<Self> {
        SETTABLE_KEYS.iter().copied().find(|k| k.name() == name)
    }

    /// The value used when the topic does not override it.
    pub fn default_value(self, defaults: &TopicDefaults) -> String {
        match self {
            ConfigKey::CleanupPolicy => "delete".into(),
            ConfigKey::RetentionMs => defaults.retention_ms.to_string(),
            ConfigKey::RetentionBytes => defaults.retention_bytes.to_string(),
            ConfigKey::SegmentBytes => defaults.segment_bytes.to_string(),
            ConfigKey::SegmentMs => defaults.segment_ms.to_string(),
            ConfigKey::MaxMessageBytes => defaults.max_message_bytes.to_string(),
            ConfigKey::MessageTimestampType => "CreateTime".into(),
            ConfigKey::CompressionType => "producer".into(),
            ConfigKey::CompressionGzipLevel => "-1".into(),
            ConfigKey::CompressionLz4Level => "9".into(),
            ConfigKey::CompressionZstdLevel => "3".into(),
        }
    }

    /// Kafka's config type code for DescribeConfigs (v3+): 2 STRING, 3 INT, 4 LONG, 7 LIST.
    pub fn type_code(self) -> i8 {
        match self {
            ConfigKey::CleanupPolicy => 7,
            ConfigKey::MessageTimestampType | ConfigKey::CompressionType => 2,
            ConfigKey::SegmentBytes
            | ConfigKey::MaxMessageBytes
            | ConfigKey::CompressionGzipLevel
            | ConfigKey::CompressionLz4Level
            | ConfigKey::CompressionZstdLevel => 3,
            _ => 4,
        }
    }

    /// Checks a value for this key.
    pub fn validate(self, value: &str) -> Result<(), InvalidConfig> {
        let number = |min: i64, max: i64| -> Result<(), InvalidConfig> {
            match value.trim().parse::<i64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(()),
                _ => Err(InvalidConfig(format!(
                    "Invalid value {value} for configuration {}: must be an integer in [{min}, {max}]",
                    self.name()
                ))),
            }
        };
        match self {
            ConfigKey::CleanupPolicy => {
                let policies: Vec<&str> = value.split(',').map(str::trim).collect();
                if policies == ["delete"] {
                    Ok(())
                } else {
                    Err(InvalidConfig(format!(
                        "Invalid value {value} for configuration cleanup.policy: only \"delete\" is supported"
                    )))
                }
            }
            ConfigKey::RetentionMs | ConfigKey::RetentionBytes => number(-1, i64::MAX),
            ConfigKey::SegmentBytes => number(14, i64::from(i32::MAX)),
            ConfigKey::SegmentMs => number(1, i64::MAX),
            ConfigKey::MaxMessageBytes => number(0, i64::from(i32::MAX)),
            ConfigKey::MessageTimestampType => match value {
                "CreateTime" | "LogAppendTime" => Ok(()),
                _ => Err(InvalidConfig(format!(
                    "Invalid value {value} for configuration message.timestamp.type: must be CreateTime or LogAppendTime"
                ))),
            },
            ConfigKey::CompressionType => match value {
                "producer" | "uncompressed" | "gzip" | "snappy" | "lz4" | "zstd" => Ok(()),
                _ => Err(InvalidConfig(format!(
                    "Invalid value {value} for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"
                ))),
            },
            ConfigKey::CompressionGzipLevel => match value.trim() {
                "-1" => Ok(()),
                _ => number(1, 9),
            },
            ConfigKey::CompressionLz4Level => number(1, 17),
            ConfigKey::CompressionZstdLevel => number(-131_072, 22),
        }
    }
}

/// A topic's config overrides (only validated keys are ever stored).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TopicConfig {
    overrides: BTreeMap<String, String>,
}

impl TopicConfig {
    /// Validates and collects overrides given as (name, value) pairs.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, InvalidConfig> {
        let mut config = TopicConfig::default();
        for (name, value) in pairs {
            match value {
                Some(value) => config.set(name, value)?,
                None => config.delete(name)?,
            }
        }
        Ok(config)
    }

    /// Sets one override after validating it.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), InvalidConfig> {
        let key = ConfigKey::from_name(name)
            .ok_or_else(|| InvalidConfig(format!("Unknown topic config name: {name}")))?;
        key.validate(value)?;
        self.overrides
            .insert(name.to_string(), value.trim().to_string());
        Ok(())
    }

    /// Removes an override (back to the default).
    pub fn delete(&mut self, name: &str) -> Result<(), InvalidConfig> {
        ConfigKey::from_name(name)
            .ok_or_else(|| InvalidConfig(format!("Unknown topic config name: {name}")))?;
        self.overrides.remove(name);
        Ok(())
    }

    /// The override for `key`, if set.
    pub fn get(&self, key: ConfigKey) -> Option<&str> {
        self.overrides.get(key.name()).map(String::as_str)
    }

    /// The effective value of `key`.
    pub fn value(&self, key: ConfigKey, defaults: &TopicDefaults) -> String {
        self.get(key)
            .map_or_else(|| key.default_value(defaults), str::to_string)
    }

    fn number(&self, key: ConfigKey, defaults: &TopicDefaults) -> i64 {
        // Stored values were validated; a default that does not parse is a bug caught by tests.
        self.value(key, defaults).parse().unwrap_or(-1)
    }

    /// The codec and level batches are stored in; `None` for `producer` (kept as sent).
    pub fn compression_target(&self, defaults: &TopicDefaults) -> Option<CompressionTarget> {
        let (codec, level_key) = match self.value(ConfigKey::CompressionType, defaults).as_str() {
            "uncompressed" => (Codec::None, None),
            "gzip" => (Codec::Gzip, Some(ConfigKey::CompressionGzipLevel)),
            "snappy" => (Codec::Snappy, None),
            "lz4" => (Codec::Lz4, Some(ConfigKey::CompressionLz4Level)),
            "zstd" => (Codec::Zstd, Some(ConfigKey::CompressionZstdLevel)),
            _ => return None,
        };
        let level = level_key
            .map(|key| self.number(key, defaults))
            .and_then(|level| i32::try_from(level).ok())
            .filter(|&level| level != -1);
        Some(CompressionTarget { codec, level })
    }

    /// The engine settings these configs mean.
    pub fn log_config(&self, defaults: &TopicDefaults) -> LogConfig {
        let retention_ms = self.number(ConfigKey::RetentionMs, defaults);
        let retention_bytes = self.number(ConfigKey::RetentionBytes, defaults);
        LogConfig {
            segment_bytes: self.number(ConfigKey::SegmentBytes, defaults).max(14) as u64,
            segment_age: Duration::from_millis(
                self.number(ConfigKey::SegmentMs, defaults).max(1) as u64
            ),
            retention_age: (retention_ms >= 0).then(|| Duration::from_millis(retention_ms as u64)),
            retention_bytes: (retention_bytes >= 0).then_some(retention_bytes as u64),
            max_batch_bytes: self.number(ConfigKey::MaxMessageBytes, defaults).max(0) as usize,
            timestamp_type: if self.value(ConfigKey::MessageTimestampType, defaults)
                == "LogAppendTime"
            {
                TimestampType::LogAppendTime
            } else {
                TimestampType::CreateTime
            },
            compression: self.compression_target(defaults),
            ..LogConfig::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_and_map_to_engine_settings() {
        let defaults = TopicDefaults::default();
        let config = TopicConfig::default().log_config(&defaults);
        assert_eq!(config.segment_bytes, 1 << 30);
        assert_eq!(
            config.retention_age,
            Some(Duration::from_millis(604_800_000))
        );
        assert_eq!(config.retention_bytes, None);
        assert_eq!(config.max_batch_bytes, 1_048_588);
        for key in SETTABLE_KEYS {
            assert_eq!(
                key.validate(&key.default_value(&defaults)),
                Ok(()),
                "{}",
                key.name()
            );
        }
    }

    #[test]
    fn overrides_are_validated() {
        let mut config = TopicConfig::default();
        assert!(config.set("retention.ms", "-1").is_ok());
        assert!(config.set("retention.ms", "-2").is_err());
        assert!(config.set("retention.ms", "soon").is_err());
        assert!(config.set("cleanup.policy", "compact").is_err());
        assert!(config.set("no.such.config", "1").is_err());
        assert!(config
            .set("message.timestamp.type", "LogAppendTime")
            .is_ok());
        let log = config.log_config(&TopicDefaults::default());
        assert_eq!(log.retention_age, None);
        assert_eq!(log.timestamp_type, TimestampType::LogAppendTime);
        config.delete("retention.ms").expect("known key");
        assert_eq!(config.get(ConfigKey::RetentionMs), None);
    }
}
