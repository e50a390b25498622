//! The `KafkaTopic` custom resource (`kafkatopics.kaas.io`, v1; the CRD is
//! `deploy/crds/kafkatopic.yaml`): in cluster mode the topic list lives in Kubernetes.
//!
//! A topic's Kafka name is `spec.topicName`, else the resource's `metadata.name`. Kafka names
//! allow `_` and upper case, Kubernetes names do not, so a topic created here gets the
//! resource name [`resource_name_for`] derives: the Kafka name itself when Kubernetes allows
//! it, else a lowered, cleaned form with a hash of the Kafka name appended (`Orders_EU` →
//! `orders-eu-<16 hex>`); `spec.topicName` always holds the exact Kafka name.

use std::collections::BTreeMap;

use kaas_cluster::ids::TopicName;
use kaas_cluster::placement::fnv1a;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

/// The group of kaas's custom resources.
pub const GROUP: &str = "kaas.io";

/// `spec` of a `KafkaTopic`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[kube(
    group = "kaas.io",
    version = "v1",
    kind = "KafkaTopic",
    plural = "kafkatopics",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct KafkaTopicSpec {
    /// The Kafka topic name; `metadata.name` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_name: Option<String>,
    /// The partition count (at least 1).
    pub partitions: i32,
    /// The topic id in Kafka's 22-character base64url form; absent on a resource applied
    /// by hand until the controller gives it one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// Topic-level configs that differ from the defaults (`retention.ms`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub configs: BTreeMap<String, String>,
}

/// One topic as the KafkaTopic resources describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicDescription {
    /// The Kafka name.
    pub name: TopicName,
    /// The resource's `metadata.name`.
    pub resource_name: String,
    /// `spec.partitions`.
    pub partitions: i32,
    /// `spec.topicId`, unparsed (the controller checks it).
    pub topic_id: Option<String>,
    /// `spec.configs`.
    pub configs: BTreeMap<String, String>,
    /// `metadata.uid` (the topic id of a resource without `spec.topicId`).
    pub uid: Option<String>,
}

impl KafkaTopic {
    /// The Kafka name of this resource's topic, unchecked.
    pub fn kafka_name(&self) -> Option<&str> {
        self.spec
            .topic_name
            .as_deref()
            .or(self.metadata.name.as_deref())
    }

    /// The topic this resource describes; `None` (logged) when its name is not a legal
    /// Kafka topic name.
    pub fn description(&self) -> Option<TopicDescription> {
        let resource_name = self.metadata.name.clone()?;
        let kafka_name = self.kafka_name()?;
        match TopicName::new(kafka_name) {
            Ok(name) => Some(TopicDescription {
                name,
                resource_name,
                partitions: self.spec.partitions,
                topic_id: self.spec.topic_id.clone(),
                configs: self.spec.configs.clone(),
                uid: self.metadata.uid.clone(),
            }),
            Err(error) => {
                tracing::warn!(resource = %resource_name, %error, "KafkaTopic ignored: not a Kafka topic name");
                None
            }
        }
    }
}

/// The topics of a set of resources, by Kafka name. When two resources claim one Kafka name,
/// the one whose resource name sorts first wins (and the other is logged).
pub fn topic_set<'a>(
    resources: impl IntoIterator<Item = &'a KafkaTopic>,
) -> BTreeMap<TopicName, TopicDescription> {
    let mut by_resource: Vec<TopicDescription> = resources
        .into_iter()
        .filter_map(KafkaTopic::description)
        .collect();
    by_resource.sort_by(|a, b| a.resource_name.cmp(&b.resource_name));
    let mut topics = BTreeMap::new();
    for description in by_resource {
        if let Some(first) = topics.get(&description.name) {
            let first: &TopicDescription = first;
            tracing::warn!(topic = %description.name, kept = %first.resource_name,
                ignored = %description.resource_name, "two KafkaTopics name one topic");
            continue;
        }
        topics.insert(description.name.clone(), description);
    }
    topics
}

/// The `metadata.name` for a new KafkaTopic of Kafka topic `topic` (see the module doc).
pub fn resource_name_for(topic: &TopicName) -> String {
    let name = topic.as_str();
    if is_dns_subdomain(name) {
        return name.to_owned();
    }
    let lowered: String = name
        .chars()
        .map(|c| match c {
            '_' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    let labels: Vec<&str> = lowered
        .split('.')
        .map(|label| label.trim_matches('-'))
        .filter(|label| !label.is_empty())
        .collect();
    let mut cleaned = labels.join(".");
    // 253 is Kubernetes' limit; leave room for the 17-character suffix.
    cleaned.truncate(200);
    let cleaned = cleaned.trim_end_matches(['-', '.']);
    let hash = fnv1a(name.as_bytes());
    if cleaned.is_empty() {
        format!("topic-{hash:016x}")
    } else {
        format!("{cleaned}-{hash:016x}")
    }
}

/// Kubernetes' DNS-1123 subdomain: at most 253 characters, dot-separated labels of lower-case
/// letters, digits and `-`, each starting and ending with a letter or digit.
fn is_dns_subdomain(name: &str) -> bool {
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            match (bytes.first(), bytes.last()) {
                (Some(&first), Some(&last)) => {
                    alnum(first) && alnum(last) && bytes.iter().all(|&c| alnum(c) || c == b'-')
                }
                _ => false,
            }
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn name(text: &str) -> TopicName {
        TopicName::new(text).unwrap()
    }

    #[test]
    fn names_kubernetes_allows_are_kept() {
        for kept in ["orders", "orders.eu", "a-1", "0"] {
            assert_eq!(resource_name_for(&name(kept)), kept);
        }
    }

    #[test]
    fn other_names_are_cleaned_and_hashed_apart() {
        let upper = resource_name_for(&name("Orders_EU"));
        assert!(upper.starts_with("orders-eu-"), "{upper}");
        assert!(is_dns_subdomain(&upper), "{upper}");
        assert_ne!(upper, resource_name_for(&name("orders_EU")));
        for odd in [
            "_",
            "__consumer_offsets",
            "-a-",
            "a..b",
            ".x",
            "X",
            &"Y".repeat(249),
        ] {
            let derived = resource_name_for(&name(odd));
            assert!(is_dns_subdomain(&derived), "{odd} -> {derived}");
        }
    }

    #[test]
    fn the_kafka_name_is_spec_topic_name_else_metadata_name() {
        let mut resource = KafkaTopic::new(
            "orders-eu",
            KafkaTopicSpec {
                partitions: 3,
                ..KafkaTopicSpec::default()
            },
        );
        assert_eq!(resource.kafka_name(), Some("orders-eu"));
        resource.spec.topic_name = Some("Orders_EU".into());
        let set = topic_set([&resource]);
        let topic = &set[&name("Orders_EU")];
        assert_eq!(
            (topic.partitions, topic.resource_name.as_str()),
            (3, "orders-eu")
        );
        resource.spec.topic_name = Some("not legal!".into());
        assert!(topic_set([&resource]).is_empty());
    }
}
