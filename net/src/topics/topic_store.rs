//! `__cluster/topics.json`: the topics of a standalone broker.
//!
//! JSON: `{"version": 1, "cluster_id": "...", "topics": [{"name": "...", "id": "<topic id>",
//! "partitions": N, "configs": {"retention.ms": "..."}}], "group_configs": {"<group>":
//! {"consumer.session.timeout.ms": "..."}}}`. `group_configs` (the GROUP config overrides) is
//! left out while empty, and a file without it reads as no overrides, so files written before
//! it existed read unchanged. A topic id is written in Kafka's text form (22 characters of
//! URL-safe base64, as in `assignment.json`); files written before hold 32 lowercase hex
//! digits, which still read. Replaced atomically (temporary
//! file, fsync, rename, directory fsync) on every topic change, before the change is
//! published to the shards or acknowledged to the client. A file that does not parse stops
//! the broker at start-up rather than silently forgetting topics.

use std::collections::BTreeMap;
use std::path::Path;

use kaas_engine::Storage;
use serde::{Deserialize, Serialize};

use crate::model::cluster_view::TopicInfo;
use crate::model::group_configs::GroupConfigOverrides;
use crate::model::topic_config::{TopicConfig, TopicDefaults};
use crate::model::uuid_text::parse_topic_id;

/// Path of the file relative to the data directory (`__cluster/topics.json`).
pub fn topics_file() -> std::path::PathBuf {
    kaas_volume::in_cluster_dir(kaas_volume::TOPICS_FILE)
}

/// The file's content.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicsFile {
    /// Format version (1).
    pub version: u32,
    /// Cluster id, created at first start.
    pub cluster_id: String,
    /// Every topic.
    pub topics: Vec<TopicRecord>,
    /// Config overrides of consumer groups, by group id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub group_configs: BTreeMap<String, GroupConfigOverrides>,
}

/// One topic in the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Topic name.
    pub name: String,
    /// Topic id in Kafka's text form (older files: 32 lowercase hex digits).
    pub id: String,
    /// Partition count.
    pub partitions: i32,
    /// Config overrides.
    #[serde(default)]
    pub configs: TopicConfig,
}

/// Errors reading the file.
#[derive(Debug, thiserror::Error)]
pub enum TopicStoreError {
    /// The storage failed.
    #[error("topic store: {0}")]
    Engine(#[from] kaas_engine::EngineError),
    /// The file is not valid JSON of the expected shape.
    #[error("topic store {path} is malformed: {0}", path = topics_file().display())]
    Malformed(String),
}

impl TopicRecord {
    /// The topic as the cluster view holds it.
    pub fn to_info(&self, defaults: &TopicDefaults) -> Result<TopicInfo, TopicStoreError> {
        let id = parse_topic_id(&self.id)
            .ok_or_else(|| TopicStoreError::Malformed(format!("bad topic id {}", self.id)))?;
        let name = kaas_cluster::ids::TopicName::new(&self.name)
            .map_err(|e| TopicStoreError::Malformed(format!("topic {}: {e}", self.name)))?;
        Ok(TopicInfo::of(
            name,
            id,
            self.partitions,
            self.configs.clone(),
            defaults,
        ))
    }
}

/// Reads the file; a missing file is an empty store with a fresh cluster id.
pub async fn load(storage: &Storage) -> Result<TopicsFile, TopicStoreError> {
    match storage.read_small(&topics_file()).await? {
        Some(bytes) => {
            serde_json::from_slice(&bytes).map_err(|e| TopicStoreError::Malformed(e.to_string()))
        }
        None => Ok(TopicsFile {
            version: 1,
            cluster_id: new_cluster_id(),
            topics: Vec::new(),
            group_configs: BTreeMap::new(),
        }),
    }
}

/// Replaces the file durably.
pub async fn save(storage: &Storage, file: &TopicsFile) -> Result<(), TopicStoreError> {
    let bytes =
        serde_json::to_vec_pretty(file).map_err(|e| TopicStoreError::Malformed(e.to_string()))?;
    storage
        .create_dir_all(Path::new(kaas_volume::CLUSTER_DIR))
        .await?;
    storage.write_small_durable(&topics_file(), bytes).await?;
    Ok(())
}

/// A new cluster id in Kafka's form (22 characters of URL-safe base64 of random bytes).
fn new_cluster_id() -> String {
    kaas_cluster::ids::cluster_id_of(rand::random())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::uuid_text::{random_uuid, topic_id_text};

    #[test]
    fn file_round_trip() {
        let file = TopicsFile {
            version: 1,
            cluster_id: new_cluster_id(),
            topics: vec![TopicRecord {
                name: "t".into(),
                id: topic_id_text(&random_uuid()),
                partitions: 3,
                configs: TopicConfig::from_pairs([("retention.ms", Some("1000"))]).expect("valid"),
            }],
            group_configs: BTreeMap::new(),
        };
        let json = serde_json::to_vec(&file).expect("encode");
        let back: TopicsFile = serde_json::from_slice(&json).expect("decode");
        assert_eq!(back, file);
        assert_eq!(file.cluster_id.len(), 22);
    }

    #[test]
    fn a_file_without_group_configs_still_reads() {
        let old = br#"{"version":1,"cluster_id":"abc","topics":[{"name":"t","id":"0123456789abcdef0123456789abcdef","partitions":1,"configs":{"cleanup.policy":"delete"}}]}"#;
        let file: TopicsFile = serde_json::from_slice(old).expect("decode");
        assert!(file.group_configs.is_empty());
        assert_eq!(file.topics[0].configs.get("cleanup.policy"), Some("delete"));
        let again = serde_json::to_string(&file).expect("encode");
        assert!(!again.contains("group_configs"), "{again}");
    }
}
