//! Group configs (Kafka's `GroupConfig`, KIP-848): the per-group overrides DescribeConfigs and
//! IncrementalAlterConfigs serve for resource type GROUP, validated as Kafka does against the
//! broker's bounds, kept in `topics.json` and published in the cluster view, where the KIP-848
//! coordinator reads a group's session timeout and heartbeat interval
//! ([`GroupConfigOverrides::apply_to`]).
//!
//! The broker bounds are Kafka's defaults (`group.consumer.min.session.timeout.ms` 45000,
//! `...max...` 60000, heartbeat 5000–15000, ...), widened to include the broker's own
//! session timeout and heartbeat interval when its flags set them outside (Kafka would refuse
//! to start; kaas keeps starting and stays consistent).

use std::collections::BTreeMap;

use crate::broker::topic_config::value::{ConfigSpec, Rule, Synonym, ValueType};
use crate::broker::topic_config::InvalidConfig;
use crate::groups::config::GroupConfig;
use crate::groups::consumer_group::ConsumerGroupConfig;

const fn group(
    name: &'static str,
    value_type: ValueType,
    default: &'static str,
    rule: Rule,
    synonym: &'static str,
) -> ConfigSpec {
    ConfigSpec {
        name,
        value_type,
        default,
        rule,
        synonym: Some(Synonym {
            name: synonym,
            listed_by_default: true,
        }),
    }
}

use ValueType::{Boolean, Int, List};

/// Every non-internal group config of Apache Kafka 4.4, sorted by name, with its broker synonym.
pub const GROUP_CONFIGS: &[ConfigSpec] = &[
    group(
        "consumer.assignment.interval.ms",
        Int,
        "1000",
        Rule::AtLeast(0),
        "group.consumer.assignment.interval.ms",
    ),
    group(
        "consumer.heartbeat.interval.ms",
        Int,
        "5000",
        Rule::AtLeast(1),
        "group.consumer.heartbeat.interval.ms",
    ),
    group(
        "consumer.session.timeout.ms",
        Int,
        "45000",
        Rule::AtLeast(1),
        "group.consumer.session.timeout.ms",
    ),
    group(
        "errors.deadletterqueue.copy.record.enable",
        Boolean,
        "false",
        Rule::Any,
        "errors.deadletterqueue.copy.record.enable",
    ),
    group(
        "errors.deadletterqueue.topic.name",
        ValueType::String,
        "",
        Rule::Any,
        "errors.deadletterqueue.topic.name",
    ),
    group(
        "share.assignment.interval.ms",
        Int,
        "1000",
        Rule::AtLeast(0),
        "group.share.assignment.interval.ms",
    ),
    group(
        "share.auto.offset.reset",
        ValueType::String,
        "latest",
        Rule::AutoOffsetReset,
        "share.auto.offset.reset",
    ),
    group(
        "share.delivery.count.limit",
        Int,
        "5",
        Rule::AtLeast(2),
        "group.share.delivery.count.limit",
    ),
    group(
        "share.heartbeat.interval.ms",
        Int,
        "5000",
        Rule::AtLeast(1),
        "group.share.heartbeat.interval.ms",
    ),
    group(
        "share.isolation.level",
        ValueType::String,
        "read_uncommitted",
        Rule::OneOf(&["read_committed", "read_uncommitted"]),
        "share.isolation.level",
    ),
    group(
        "share.partition.max.record.locks",
        Int,
        "2000",
        Rule::AtLeast(100),
        "group.share.partition.max.record.locks",
    ),
    group(
        "share.record.lock.duration.ms",
        Int,
        "30000",
        Rule::AtLeast(1000),
        "group.share.record.lock.duration.ms",
    ),
    group(
        "share.renew.acknowledge.enable",
        Boolean,
        "true",
        Rule::Any,
        "share.renew.acknowledge.enable",
    ),
    group(
        "share.session.timeout.ms",
        Int,
        "45000",
        Rule::AtLeast(1),
        "group.share.session.timeout.ms",
    ),
    group(
        "streams.assignment.interval.ms",
        Int,
        "1000",
        Rule::AtLeast(0),
        "group.streams.assignment.interval.ms",
    ),
    group(
        "streams.assignor.name",
        ValueType::String,
        "sticky",
        Rule::Any,
        "group.streams.assignors",
    ),
    group(
        "streams.heartbeat.interval.ms",
        Int,
        "5000",
        Rule::AtLeast(1),
        "group.streams.heartbeat.interval.ms",
    ),
    group(
        "streams.initial.rebalance.delay.ms",
        Int,
        "3000",
        Rule::AtLeast(0),
        "group.streams.initial.rebalance.delay.ms",
    ),
    group(
        "streams.num.standby.replicas",
        Int,
        "0",
        Rule::AtLeast(0),
        "group.streams.num.standby.replicas",
    ),
    group(
        "streams.rack.aware.assignment.tags",
        List,
        "",
        Rule::Any,
        "group.streams.rack.aware.assignment.tags",
    ),
    group(
        "streams.session.timeout.ms",
        Int,
        "45000",
        Rule::AtLeast(1),
        "group.streams.session.timeout.ms",
    ),
];

/// The streams task assignors Kafka registers (`group.streams.assignors`).
const STREAMS_ASSIGNORS: &[&str] = &["sticky"];
/// `group.streams.max.standby.replicas`.
const MAX_STANDBY_REPLICAS: i64 = 2;

/// The spec of a group config, by name.
pub fn group_spec(name: &str) -> Option<&'static ConfigSpec> {
    GROUP_CONFIGS.iter().find(|spec| spec.name == name)
}

/// The broker's value behind a group config, where kaas has a flag for it.
pub fn broker_value(name: &str, broker: &GroupConfig) -> Option<i64> {
    match name {
        "consumer.session.timeout.ms" => Some(broker.consumer_session_timeout_ms.into()),
        "consumer.heartbeat.interval.ms" => Some(broker.consumer_heartbeat_interval_ms.into()),
        _ => None,
    }
}

/// The inclusive range the broker allows for `name` (Kafka's `group.*.min/max.*` settings).
fn bounds(name: &str, broker: &GroupConfig) -> Option<(i64, i64)> {
    let kafka = match name {
        "consumer.session.timeout.ms" => (45_000, 60_000),
        "consumer.heartbeat.interval.ms" => (5_000, 15_000),
        "consumer.assignment.interval.ms"
        | "share.assignment.interval.ms"
        | "streams.assignment.interval.ms" => (0, 15_000),
        "share.session.timeout.ms" | "streams.session.timeout.ms" => (45_000, 60_000),
        "share.heartbeat.interval.ms" | "streams.heartbeat.interval.ms" => (5_000, 15_000),
        "share.record.lock.duration.ms" => (15_000, 60_000),
        "share.delivery.count.limit" => (2, 10),
        "share.partition.max.record.locks" => (100, 4_000),
        _ => return None,
    };
    Some(match broker_value(name, broker) {
        Some(own) => (kafka.0.min(own), kafka.1.max(own)),
        None => kafka,
    })
}

/// One group's config overrides (validated names and values only).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct GroupConfigOverrides {
    overrides: BTreeMap<String, String>,
}

impl GroupConfigOverrides {
    /// Sets one override after validating it (alone; see [`Self::check_combination`]).
    pub fn set(
        &mut self,
        name: &str,
        value: &str,
        broker: &GroupConfig,
    ) -> Result<(), InvalidConfig> {
        let spec = known(name)?;
        let value = spec.check(value)?;
        if let (Some((min, max)), Some(number)) = (bounds(name, broker), ConfigSpec::number(&value))
        {
            if !(min..=max).contains(&number) {
                return Err(InvalidConfig(format!(
                    "{name} must be in the range {min} to {max} inclusive."
                )));
            }
        }
        match name {
            "streams.num.standby.replicas"
                if ConfigSpec::number(&value).is_some_and(|n| n > MAX_STANDBY_REPLICAS) =>
            {
                return Err(InvalidConfig(format!(
                    "{name} must be less than or equal to {MAX_STANDBY_REPLICAS}"
                )));
            }
            "streams.assignor.name" if !STREAMS_ASSIGNORS.contains(&value.as_str()) => {
                return Err(InvalidConfig(format!(
                    "{name} '{value}' is not a registered task assignor. Registered assignors are: [{}].",
                    STREAMS_ASSIGNORS.join(", ")
                )));
            }
            "errors.deadletterqueue.topic.name" if value.starts_with("__") => {
                return Err(InvalidConfig(format!(
                    "{name}: DLQ topic name must not start with '__'"
                )));
            }
            _ => {}
        }
        self.overrides.insert(name.to_string(), value);
        Ok(())
    }

    /// Removes an override.
    pub fn delete(&mut self, name: &str) -> Result<(), InvalidConfig> {
        known(name)?;
        self.overrides.remove(name);
        Ok(())
    }

    /// Removes every override.
    pub fn clear(&mut self) {
        self.overrides.clear();
    }

    /// Whether no config is overridden.
    pub fn is_empty(&self) -> bool {
        self.overrides.is_empty()
    }

    /// The override of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.overrides.get(name).map(String::as_str)
    }

    /// The effective value of `spec` and whether it comes from the broker's flag.
    pub fn effective(&self, spec: &ConfigSpec, broker: &GroupConfig) -> (String, bool) {
        if let Some(value) = self.get(spec.name) {
            return (value.to_string(), false);
        }
        match broker_value(spec.name, broker) {
            Some(value) if value.to_string() != spec.default => (value.to_string(), true),
            _ => (spec.default.to_string(), false),
        }
    }

    fn number(&self, name: &str, broker: &GroupConfig) -> Option<i64> {
        let spec = group_spec(name)?;
        ConfigSpec::number(&self.effective(spec, broker).0)
    }

    /// Kafka's rule across configs: each kind of group's session timeout must exceed its
    /// heartbeat interval (overrides and broker defaults together).
    pub fn check_combination(&self, broker: &GroupConfig) -> Result<(), InvalidConfig> {
        for kind in ["consumer", "share", "streams"] {
            let session = format!("{kind}.session.timeout.ms");
            let heartbeat = format!("{kind}.heartbeat.interval.ms");
            if let (Some(s), Some(h)) = (
                self.number(&session, broker),
                self.number(&heartbeat, broker),
            ) {
                if s <= h {
                    return Err(InvalidConfig(format!(
                        "{session} must be greater than {heartbeat}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The group's own session timeout and heartbeat interval over the broker's settings.
    pub fn apply_to(&self, config: &mut ConsumerGroupConfig) {
        let int = |name: &str| self.get(name).and_then(|v| v.parse::<i32>().ok());
        if let Some(session) = int("consumer.session.timeout.ms") {
            config.session_timeout_ms = session;
        }
        if let Some(heartbeat) = int("consumer.heartbeat.interval.ms") {
            config.heartbeat_interval_ms = heartbeat;
        }
    }
}

fn known(name: &str) -> Result<&'static ConfigSpec, InvalidConfig> {
    group_spec(name).ok_or_else(|| InvalidConfig(format!("Unknown group config name: {name}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_defaults_are_valid() {
        let broker = GroupConfig::default();
        assert!(GROUP_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
        for spec in GROUP_CONFIGS {
            let mut overrides = GroupConfigOverrides::default();
            assert_eq!(
                overrides.set(spec.name, spec.default, &broker),
                Ok(()),
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn values_are_bounded_by_the_broker() {
        let broker = GroupConfig::default();
        let mut overrides = GroupConfigOverrides::default();
        assert_eq!(
            overrides
                .set("consumer.session.timeout.ms", "1000", &broker)
                .expect_err("refused")
                .0,
            "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive."
        );
        assert_eq!(
            overrides.set("consumer.session.timeout.ms", "abc", &broker).expect_err("refused").0,
            "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"
        );
        assert_eq!(
            overrides
                .set("no.such", "1", &broker)
                .expect_err("refused")
                .0,
            "Unknown group config name: no.such"
        );
        assert!(overrides
            .set("streams.num.standby.replicas", "3", &broker)
            .is_err());
        assert!(overrides
            .set("streams.assignor.name", "foo", &broker)
            .is_err());
        assert!(overrides
            .set("errors.deadletterqueue.topic.name", "__dlq", &broker)
            .is_err());
        assert!(overrides
            .set("share.auto.offset.reset", "by_duration:PT1H", &broker)
            .is_ok());
        // A broker started with a shorter session timeout allows it for its groups too.
        let short = GroupConfig {
            consumer_session_timeout_ms: 6_000,
            consumer_heartbeat_interval_ms: 1_000,
            ..GroupConfig::default()
        };
        assert!(overrides
            .set("consumer.session.timeout.ms", "6000", &short)
            .is_ok());
        assert!(overrides
            .set("consumer.heartbeat.interval.ms", "1000", &short)
            .is_ok());
        overrides.check_combination(&short).expect("6000 > 1000");
        overrides
            .set("consumer.heartbeat.interval.ms", "6000", &short)
            .expect("in range");
        assert_eq!(
            overrides.check_combination(&short).expect_err("refused").0,
            "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
        );
    }

    #[test]
    fn overrides_reach_the_consumer_group_settings() {
        let broker = GroupConfig::default();
        let mut overrides = GroupConfigOverrides::default();
        overrides
            .set("consumer.session.timeout.ms", "50000", &broker)
            .expect("valid");
        overrides
            .set("consumer.heartbeat.interval.ms", "6000", &broker)
            .expect("valid");
        let mut config = broker.consumer();
        overrides.apply_to(&mut config);
        assert_eq!(
            (config.session_timeout_ms, config.heartbeat_interval_ms),
            (50_000, 6_000)
        );
    }
}
