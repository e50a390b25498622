//! What IncrementalAlterConfigs and AlterConfigs share: the config overrides of a resource
//! kind (topic or group) behind one interface, the incremental operations (SET, DELETE,
//! APPEND, SUBTRACT) applied all-or-nothing, the whole-set replacement of the legacy API,
//! one [`ConfigEdit`] type for either API's entries, and the answer for BROKER resources,
//! whose settings are start-up flags in kaas. No I/O here: the per-resource flow that hops
//! to the topic admin is in [`super::config_alteration`].

use crate::groups::config::GroupConfig;
use crate::model::group_configs::{self, GroupConfigOverrides};
use crate::model::topic_config::value::{list_items, ConfigSpec, ValueType};
use crate::model::topic_config::{self, InvalidConfig, TopicConfig, TopicDefaults};
use crate::protocol::ErrorCode;

/// SET.
pub const SET: i8 = 0;
/// DELETE.
pub const DELETE: i8 = 1;
/// APPEND (LIST configs only).
pub const APPEND: i8 = 2;
/// SUBTRACT (LIST configs only).
pub const SUBTRACT: i8 = 3;

/// The overrides of one resource, and the settings their defaults come from.
pub trait Overrides {
    /// The spec of a config name this resource kind knows.
    fn spec(&self, name: &str) -> Option<&'static ConfigSpec>;
    /// The refusal of a name this kind does not know.
    fn unknown(&self, name: &str) -> InvalidConfig;
    /// Sets one override (validated).
    fn set(&mut self, name: &str, value: &str) -> Result<(), InvalidConfig>;
    /// Removes one override.
    fn delete(&mut self, name: &str) -> Result<(), InvalidConfig>;
    /// Removes every override.
    fn clear(&mut self);
    /// The effective value of `spec`.
    fn current(&self, spec: &ConfigSpec) -> String;
}

/// A topic's overrides with the broker's topic defaults.
pub struct TopicOverrides<'a> {
    /// The overrides being changed.
    pub config: &'a mut TopicConfig,
    /// The broker's defaults.
    pub defaults: &'a TopicDefaults,
}

impl Overrides for TopicOverrides<'_> {
    fn spec(&self, name: &str) -> Option<&'static ConfigSpec> {
        topic_config::topic_spec(name)
    }
    fn unknown(&self, name: &str) -> InvalidConfig {
        InvalidConfig(format!("Unknown topic config name: {name}"))
    }
    fn set(&mut self, name: &str, value: &str) -> Result<(), InvalidConfig> {
        self.config.set(name, value)
    }
    fn delete(&mut self, name: &str) -> Result<(), InvalidConfig> {
        self.config.delete(name)
    }
    fn clear(&mut self) {
        self.config.clear();
    }
    fn current(&self, spec: &ConfigSpec) -> String {
        self.config.effective(spec, self.defaults).0
    }
}

/// A group's overrides with the broker's group settings.
pub struct GroupOverrides<'a> {
    /// The overrides being changed.
    pub config: &'a mut GroupConfigOverrides,
    /// The broker's group settings (defaults and bounds).
    pub broker: &'a GroupConfig,
}

impl Overrides for GroupOverrides<'_> {
    fn spec(&self, name: &str) -> Option<&'static ConfigSpec> {
        group_configs::group_spec(name)
    }
    fn unknown(&self, name: &str) -> InvalidConfig {
        InvalidConfig(format!("Unknown group config name: {name}"))
    }
    fn set(&mut self, name: &str, value: &str) -> Result<(), InvalidConfig> {
        self.config.set(name, value, self.broker)
    }
    fn delete(&mut self, name: &str) -> Result<(), InvalidConfig> {
        self.config.delete(name)
    }
    fn clear(&mut self) {
        self.config.clear();
    }
    fn current(&self, spec: &ConfigSpec) -> String {
        self.config.effective(spec, self.broker).0
    }
}

/// One incremental operation: (name, operation code, value).
pub type Operation<'a> = (&'a str, i8, Option<&'a str>);

/// Applies incremental operations in order; the caller keeps the result only if all apply.
pub fn apply_incremental(
    target: &mut dyn Overrides,
    operations: &[Operation<'_>],
) -> Result<(), InvalidConfig> {
    let mut seen = std::collections::HashSet::new();
    for &(name, operation, value) in operations {
        if !seen.insert(name) {
            return Err(InvalidConfig(format!(
                "Duplicate configuration {name} in the request"
            )));
        }
        let spec = target.spec(name).ok_or_else(|| target.unknown(name))?;
        match operation {
            SET => {
                let value = value.ok_or_else(|| {
                    InvalidConfig(format!("Null value not supported for : {name}"))
                })?;
                target.set(name, value)?;
            }
            DELETE => target.delete(name)?,
            APPEND | SUBTRACT if spec.value_type == ValueType::List => {
                let current = target.current(spec);
                let mut items: Vec<String> = list_items(&current)
                    .into_iter()
                    .map(str::to_string)
                    .collect();
                for item in list_items(value.unwrap_or("")) {
                    if operation == APPEND {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else {
                        items.retain(|i| i != item);
                    }
                }
                target.set(name, &items.join(","))?;
            }
            APPEND | SUBTRACT => {
                let verb = if operation == APPEND {
                    "APPEND"
                } else {
                    "SUBTRACT"
                };
                return Err(InvalidConfig(format!(
                    "Can't {verb} to key {name} because its type is not LIST."
                )));
            }
            other => return Err(InvalidConfig(format!("Unknown config operation {other}"))),
        }
    }
    Ok(())
}

/// Replaces every override with `configs` (legacy AlterConfigs: names not given are reset).
pub fn replace_all(
    target: &mut dyn Overrides,
    configs: &[(&str, Option<&str>)],
) -> Result<(), InvalidConfig> {
    target.clear();
    for &(name, value) in configs {
        if target.spec(name).is_none() {
            return Err(target.unknown(name));
        }
        match value {
            Some(value) => target.set(name, value)?,
            None => {
                return Err(InvalidConfig(format!(
                    "Null value not supported for : {name}"
                )))
            }
        }
    }
    Ok(())
}

/// One resource's entries, as either API gives them.
pub enum ConfigEdit {
    /// Legacy AlterConfigs: `(name, value)` pairs that replace the resource's whole set.
    ReplaceAll(Vec<(String, Option<String>)>),
    /// IncrementalAlterConfigs: `(name, operation code, value)`, applied in order.
    Incremental(Vec<(String, i8, Option<String>)>),
}

impl ConfigEdit {
    /// The config names, in request order (what a BROKER refusal lists).
    pub fn names(&self) -> Vec<&str> {
        match self {
            ConfigEdit::ReplaceAll(configs) => {
                configs.iter().map(|(name, _)| name.as_str()).collect()
            }
            ConfigEdit::Incremental(operations) => operations
                .iter()
                .map(|(name, _, _)| name.as_str())
                .collect(),
        }
    }

    /// Whether the edit replaces the whole set: a topic's then goes to the topic admin as a
    /// replacement, which in cluster mode rewrites the KafkaTopic's configs as a whole
    /// rather than sending a diff against this broker's view.
    pub fn replaces_whole_set(&self) -> bool {
        matches!(self, ConfigEdit::ReplaceAll(_))
    }

    /// Applies the edit to `target` ([`replace_all`] or [`apply_incremental`]); the caller
    /// keeps the result only if it applies.
    pub fn apply(&self, target: &mut dyn Overrides) -> Result<(), InvalidConfig> {
        match self {
            ConfigEdit::ReplaceAll(configs) => {
                let configs: Vec<(&str, Option<&str>)> = configs
                    .iter()
                    .map(|(name, value)| (name.as_str(), value.as_deref()))
                    .collect();
                replace_all(target, &configs)
            }
            ConfigEdit::Incremental(operations) => {
                let operations: Vec<Operation<'_>> = operations
                    .iter()
                    .map(|(name, operation, value)| (name.as_str(), *operation, value.as_deref()))
                    .collect();
                apply_incremental(target, &operations)
            }
        }
    }
}

/// The answer to altering a BROKER resource: kaas's broker settings are start-up flags, so
/// every one is refused as Kafka refuses its read-only broker configs.
pub fn broker_refusal(names: &[&str]) -> (ErrorCode, String) {
    (
        ErrorCode::InvalidRequest,
        format!(
            "Cannot update these configs dynamically: [{}]",
            names.join(", ")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_operations_on_topics() {
        let defaults = TopicDefaults::default();
        let mut config = TopicConfig::default();
        let mut target = TopicOverrides {
            config: &mut config,
            defaults: &defaults,
        };
        apply_incremental(&mut target, &[("cleanup.policy", APPEND, Some("compact"))])
            .expect("list");
        assert_eq!(target.config.get("cleanup.policy"), Some("delete,compact"));
        apply_incremental(&mut target, &[("cleanup.policy", SUBTRACT, Some("delete"))])
            .expect("list");
        assert_eq!(target.config.get("cleanup.policy"), Some("compact"));
        assert_eq!(
            apply_incremental(&mut target, &[("retention.ms", APPEND, Some("1"))])
                .expect_err("refused")
                .0,
            "Can't APPEND to key retention.ms because its type is not LIST."
        );
        assert!(apply_incremental(&mut target, &[("no.such", SET, Some("1"))]).is_err());
        apply_incremental(&mut target, &[("cleanup.policy", DELETE, None)]).expect("delete");
        assert_eq!(target.config.get("cleanup.policy"), None);
    }

    #[test]
    fn replace_all_resets_what_is_not_named() {
        let defaults = TopicDefaults::default();
        let mut config = TopicConfig::from_pairs([("retention.ms", Some("1000"))]).expect("valid");
        let mut target = TopicOverrides {
            config: &mut config,
            defaults: &defaults,
        };
        replace_all(&mut target, &[("segment.ms", Some("50000"))]).expect("valid");
        assert_eq!(target.config.get("retention.ms"), None);
        assert_eq!(target.config.get("segment.ms"), Some("50000"));
        assert!(replace_all(&mut target, &[("segment.ms", Some("0"))]).is_err());
    }

    #[test]
    fn config_edits_name_their_entries_and_apply_their_api() {
        let defaults = TopicDefaults::default();
        let mut config = TopicConfig::from_pairs([("retention.ms", Some("1000"))]).expect("valid");
        let mut target = TopicOverrides {
            config: &mut config,
            defaults: &defaults,
        };
        let incremental = ConfigEdit::Incremental(vec![
            ("segment.ms".into(), SET, Some("50000".into())),
            ("cleanup.policy".into(), APPEND, Some("compact".into())),
        ]);
        assert_eq!(incremental.names(), ["segment.ms", "cleanup.policy"]);
        assert!(!incremental.replaces_whole_set());
        incremental.apply(&mut target).expect("valid");
        assert_eq!(target.config.get("retention.ms"), Some("1000"));
        assert_eq!(target.config.get("cleanup.policy"), Some("delete,compact"));

        let replace = ConfigEdit::ReplaceAll(vec![("segment.ms".into(), Some("60000".into()))]);
        assert_eq!(replace.names(), ["segment.ms"]);
        assert!(replace.replaces_whole_set());
        replace.apply(&mut target).expect("valid");
        assert_eq!(target.config.get("retention.ms"), None);
        assert_eq!(target.config.get("segment.ms"), Some("60000"));
        assert_eq!(
            ConfigEdit::ReplaceAll(vec![("segment.ms".into(), None)])
                .apply(&mut target)
                .expect_err("null")
                .0,
            "Null value not supported for : segment.ms"
        );
    }

    #[test]
    fn group_operations_use_the_broker_bounds() {
        let broker = GroupConfig::default();
        let mut config = GroupConfigOverrides::default();
        let mut target = GroupOverrides {
            config: &mut config,
            broker: &broker,
        };
        assert!(apply_incremental(
            &mut target,
            &[("consumer.session.timeout.ms", SET, Some("1000"))]
        )
        .is_err());
        apply_incremental(
            &mut target,
            &[("consumer.session.timeout.ms", SET, Some("50000"))],
        )
        .expect("in range");
        assert_eq!(
            target.config.get("consumer.session.timeout.ms"),
            Some("50000")
        );
    }
}
