//! `assignment.json` exactly as it is written: plain serde structs mirroring the JSON, with no
//! consistency checks of their own (those are in [`super::validate`]). Writers build one of
//! these and turn it into an [`super::Assignment`], which refuses anything inconsistent.
//!
//! Readers ignore fields they do not know (newer writers may add some), and refuse an object
//! that names the same key twice (JSON allows it; silently keeping the last one would hide a
//! writer's bug).

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// The whole file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignmentFile {
    /// Format of the file; this crate reads [`super::FORMAT`].
    pub format: u32,
    /// Epoch of the controller that wrote it.
    pub controller_epoch: u64,
    /// Version of this assignment.
    pub assignment_version: u64,
    /// Every broker of the cluster.
    pub brokers: Vec<BrokerFile>,
    /// Every topic, by name.
    #[serde(deserialize_with = "unique_keys")]
    pub topics: BTreeMap<String, TopicFile>,
    /// Every partition's leader, by topic; entry `i` is partition `i`.
    #[serde(deserialize_with = "unique_keys")]
    pub partitions: BTreeMap<String, Vec<PartitionFile>>,
    /// The broker coordinating each named consumer group (optional when empty).
    #[serde(rename = "consumerGroups", default, deserialize_with = "unique_keys")]
    pub consumer_groups: BTreeMap<String, i32>,
}

/// One broker: where clients reach it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerFile {
    /// Broker id.
    pub id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised Kafka port.
    pub port: u16,
}

/// One topic.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicFile {
    /// Topic id, Kafka's text form (22 characters of URL-safe base64).
    pub id: String,
    /// Number of partitions.
    pub partitions: i32,
    /// Topic config overrides (Kafka names and string values; optional when empty).
    #[serde(default, deserialize_with = "unique_keys")]
    pub configs: BTreeMap<String, String>,
}

/// One partition's leadership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionFile {
    /// The leading broker.
    pub leader: i32,
    /// The leader epoch it leads at.
    pub leader_epoch: i32,
}

/// Deserializes a JSON object into a map, refusing a key that appears twice.
fn unique_keys<'de, D, K, V>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Ord + fmt::Display,
    V: Deserialize<'de>,
{
    struct UniqueKeys<K, V>(PhantomData<(K, V)>);

    impl<'de, K, V> Visitor<'de> for UniqueKeys<K, V>
    where
        K: Deserialize<'de> + Ord + fmt::Display,
        V: Deserialize<'de>,
    {
        type Value = BTreeMap<K, V>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object with distinct keys")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
            let mut map = BTreeMap::new();
            while let Some((key, value)) = access.next_entry::<K, V>()? {
                if map.contains_key(&key) {
                    return Err(serde::de::Error::custom(format!(
                        "key \"{key}\" appears twice"
                    )));
                }
                map.insert(key, value);
            }
            Ok(map)
        }
    }

    deserializer.deserialize_map(UniqueKeys(PhantomData))
}
