//! Group configs (Kafka's `GroupConfig`, KIP-848): the per-group overrides DescribeConfigs and
//! IncrementalAlterConfigs serve for resource type GROUP, validated as Kafka does against the
//! broker's bounds, kept in `topics.json` and published in the cluster view, where the KIP-848
//! coordinator reads a group's session timeout and heartbeat interval
//! (`GroupConfigOverrides::apply_to`).
//!
//! The broker bounds are Kafka's defaults (`group.consumer.min.session.timeout.ms` 45000,
//! `...max...` 60000, heartbeat 5000–15000, ...), widened to include the broker's own
//! session timeout and heartbeat interval when its flags set them outside (Kafka would refuse
//! to start; kaas keeps starting and stays consistent).
//!
//! The broker's settings come in through [`BrokerGroupSettings`] (the coordinator's
//! `GroupConfig` implements it), and the coordinator applies a group's overrides to its
//! settings (`groups::config_overrides`), so this model stays below the coordinator.

use std::collections::BTreeMap;

use crate::model::topic_config::value::{ConfigSpec, Rule, Synonym, ValueType};
use crate::model::topic_config::InvalidConfig;

/// The broker's own group settings that group configs fall back on and are bounded by.
pub trait BrokerGroupSettings {
    /// `group.consumer.session.timeout.ms`.
    fn consumer_session_timeout_ms(&self) -> i32;
    /// `group.consumer.heartbeat.interval.ms`.
    fn consumer_heartbeat_interval_ms(&self) -> i32;
}

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
pub fn broker_value(name: &str, broker: &impl BrokerGroupSettings) -> Option<i64> {
    match name {
        "consumer.session.timeout.ms" => Some(broker.consumer_session_timeout_ms().into()),
        "consumer.heartbeat.interval.ms" => Some(broker.consumer_heartbeat_interval_ms().into()),
        _ => None,
    }
}

/// The inclusive range the broker allows for `name` (Kafka's `group.*.min/max.*` settings).
fn bounds(name: &str, broker: &impl BrokerGroupSettings) -> Option<(i64, i64)> {
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
        broker: &impl BrokerGroupSettings,
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

    /// The overrides as names and values (what a topic change carries).
    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.overrides.clone()
    }

    /// Overrides from names and values that [`Self::set`] has checked already (a topic
    /// change's, made from [`Self::to_map`] on the broker that checked them).
    pub fn from_checked(overrides: BTreeMap<String, String>) -> Self {
        GroupConfigOverrides { overrides }
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
    pub fn effective(
        &self,
        spec: &ConfigSpec,
        broker: &impl BrokerGroupSettings,
    ) -> (String, bool) {
        if let Some(value) = self.get(spec.name) {
            return (value.to_string(), false);
        }
        match broker_value(spec.name, broker) {
            Some(value) if value.to_string() != spec.default => (value.to_string(), true),
            _ => (spec.default.to_string(), false),
        }
    }

    fn number(&self, name: &str, broker: &impl BrokerGroupSettings) -> Option<i64> {
        let spec = group_spec(name)?;
        ConfigSpec::number(&self.effective(spec, broker).0)
    }

    /// Kafka's rule across configs: each kind of group's session timeout must exceed its
    /// heartbeat interval (overrides and broker defaults together).
    pub fn check_combination(
        &self,
        broker: &impl BrokerGroupSettings,
    ) -> Result<(), InvalidConfig> {
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
}

fn known(name: &str) -> Result<&'static ConfigSpec, InvalidConfig> {
    group_spec(name).ok_or_else(|| InvalidConfig(format!("Unknown group config name: {name}")))
}
