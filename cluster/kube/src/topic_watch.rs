//! The cluster core's [`TopicSource`]: [`TopicStore::watch`] mapped to the controller's
//! topic set. Each KafkaTopic becomes a [`TopicInfo`]: its Kafka name, partition count and
//! configs, and its topic id: `spec.topicId` when set, else the id derived from the
//! resource's `metadata.uid` (a UUID, the 16 bytes Kafka's ids are), so a KafkaTopic applied
//! by hand has the same id on every broker without anybody writing it, and a topic deleted
//! and applied again gets a new one, as in Kafka. A resource whose id is not a topic id or
//! whose partition count is below 1 is left out and logged (the CRD's schema refuses both).

use std::collections::BTreeMap;

use futures_util::StreamExt;
use kaas_cluster::ids::{TopicId, TopicName};
use kaas_cluster::view::TopicInfo;
use kaas_cluster_core::TopicSource;
use tokio::sync::mpsc;

use crate::context::SharedContext;
use crate::error_log::ErrorLog;
use crate::kafka_topic::TopicDescription;
use crate::topic_store::{TopicSet, TopicStore};

/// The KafkaTopic source of one namespace.
pub struct TopicWatch {
    context: SharedContext,
}

impl TopicWatch {
    /// Watches the KafkaTopics of `context`'s namespace once started.
    pub fn new(context: SharedContext) -> Self {
        TopicWatch { context }
    }
}

impl TopicSource for TopicWatch {
    fn start(&mut self) -> mpsc::UnboundedReceiver<BTreeMap<TopicName, TopicInfo>> {
        let (topics, receiver) = mpsc::unbounded_channel();
        let context = match self.context.get() {
            Ok(context) => context,
            Err(error) => {
                tracing::error!(%error, "no Kubernetes client: no KafkaTopics");
                return receiver;
            }
        };
        let stream = TopicStore::new(&context).watch();
        tokio::spawn(async move {
            let mut errors = ErrorLog::new("KafkaTopics");
            let mut reported = None;
            futures_util::pin_mut!(stream);
            while let Some(set) = stream.next().await {
                match set {
                    Ok(set) => {
                        errors.succeeded();
                        let now = topic_infos(&set);
                        if reported.as_ref() != Some(&now) {
                            if topics.send(now.clone()).is_err() {
                                return;
                            }
                            reported = Some(now);
                        }
                    }
                    Err(error) => errors.failed(&error),
                }
            }
        });
        receiver
    }
}

/// The controller's topics of a KafkaTopic set (see the module doc).
pub fn topic_infos(set: &TopicSet) -> BTreeMap<TopicName, TopicInfo> {
    set.values()
        .filter_map(|description| match topic_info(description) {
            Ok(info) => Some((info.name.clone(), info)),
            Err(reason) => {
                tracing::warn!(topic = %description.name, resource = %description.resource_name,
                    reason, "KafkaTopic left out of the assignment");
                None
            }
        })
        .collect()
}

fn topic_info(description: &TopicDescription) -> Result<TopicInfo, String> {
    if description.partitions < 1 {
        return Err(format!("{} partitions", description.partitions));
    }
    let id = match (&description.topic_id, &description.uid) {
        (Some(text), _) => {
            TopicId::parse(text).map_err(|error| format!("spec.topicId {text:?}: {error}"))?
        }
        (None, Some(uid)) => {
            id_of_uid(uid).ok_or_else(|| format!("metadata.uid {uid:?} is not a UUID"))?
        }
        (None, None) => return Err("neither spec.topicId nor metadata.uid".into()),
    };
    Ok(TopicInfo {
        name: description.name.clone(),
        id,
        partitions: description.partitions,
        configs: description.configs.clone(),
    })
}

/// The topic id of a Kubernetes UID (`8-4-4-4-12` hex digits); `None` for anything else or
/// for an id Kafka reserves.
pub fn id_of_uid(uid: &str) -> Option<TopicId> {
    let groups: Vec<&str> = uid.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lengths != [8, 4, 4, 4, 12] {
        return None;
    }
    let hex: String = groups.concat();
    let value = u128::from_str_radix(&hex, 16).ok()?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let id = TopicId(value.to_be_bytes());
    (id != TopicId::ZERO && id != TopicId::METADATA).then_some(id)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn description(
        name: &str,
        partitions: i32,
        id: Option<&str>,
        uid: Option<&str>,
    ) -> TopicDescription {
        TopicDescription {
            name: TopicName::new(name).unwrap(),
            resource_name: name.to_owned(),
            partitions,
            topic_id: id.map(str::to_owned),
            uid: uid.map(str::to_owned),
            configs: BTreeMap::from([("retention.ms".to_owned(), "1000".to_owned())]),
        }
    }

    #[test]
    fn a_uid_is_the_uuid_kafka_prints() {
        // Kafka's Uuid.toString() of 01234567-89ab-cdef-fedc-ba9876543210.
        let id = id_of_uid("01234567-89ab-cdef-fedc-ba9876543210").unwrap();
        assert_eq!(id.to_string(), "ASNFZ4mrze_-3LqYdlQyEA");
        for bad in [
            "",
            "0123456789abcdeffedcba9876543210",
            "01234567-89ab-cdef-fedc-ba987654321",
            "0123456g-89ab-cdef-fedc-ba9876543210",
            "+1234567-89ab-cdef-fedc-ba9876543210",
            "00000000-0000-0000-0000-000000000000",
            "00000000-0000-0000-0000-000000000001",
        ] {
            assert_eq!(id_of_uid(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_spec_id_wins_and_bad_resources_are_left_out() {
        let set: TopicSet = [
            description(
                "given",
                3,
                Some("ASNFZ4mrze_-3LqYdlQyEA"),
                Some("11111111-1111-1111-1111-111111111111"),
            ),
            description(
                "derived",
                1,
                None,
                Some("01234567-89ab-cdef-fedc-ba9876543210"),
            ),
            description(
                "empty",
                0,
                None,
                Some("11111111-1111-1111-1111-111111111111"),
            ),
            description(
                "bad-id",
                1,
                Some("nope"),
                Some("11111111-1111-1111-1111-111111111111"),
            ),
            description("no-id", 1, None, None),
        ]
        .into_iter()
        .map(|d| (d.name.clone(), d))
        .collect();
        let infos = topic_infos(&set);
        let names: Vec<&str> = infos.keys().map(TopicName::as_str).collect();
        assert_eq!(names, ["derived", "given"]);
        let given = &infos[&TopicName::new("given").unwrap()];
        assert_eq!(
            (given.id.to_string().as_str(), given.partitions),
            ("ASNFZ4mrze_-3LqYdlQyEA", 3)
        );
        assert_eq!(given.configs["retention.ms"], "1000");
        assert_eq!(
            infos[&TopicName::new("derived").unwrap()].id.to_string(),
            "ASNFZ4mrze_-3LqYdlQyEA"
        );
    }
}
