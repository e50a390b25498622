//! The topic metadata a group assigns from.

use std::collections::BTreeMap;

use crate::protocol::Uuid;

/// Topics of the cluster as the coordinator sees them: name to (id, partition count) and id
/// to name. Topics missing here are not assigned, whatever members subscribe to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicSnapshot {
    by_name: BTreeMap<String, (Uuid, i32)>,
    by_id: BTreeMap<Uuid, String>,
}

impl TopicSnapshot {
    /// A snapshot of `(name, id, partition count)` triples.
    pub fn new(topics: impl IntoIterator<Item = (String, Uuid, i32)>) -> Self {
        let mut snapshot = TopicSnapshot::default();
        for (name, id, partitions) in topics {
            snapshot.by_id.insert(id, name.clone());
            snapshot.by_name.insert(name, (id, partitions.max(0)));
        }
        snapshot
    }

    /// Id and partition count of a topic.
    pub fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
        self.by_name.get(name).copied()
    }

    /// Name of a topic id.
    pub fn name(&self, id: &Uuid) -> Option<&str> {
        self.by_id.get(id).map(String::as_str)
    }

    /// Every topic name, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}
