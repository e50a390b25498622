//! The in-memory state of a group rebuilt from its records: offsets by topic and
//! partition, the metadata blob, and how many bytes a compacted file would take.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::record::{self, Change};
use super::{CommittedOffset, GroupChange};

/// Durable offsets and metadata of one group.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct View {
    offsets: BTreeMap<String, BTreeMap<i32, CommittedOffset>>,
    metadata: Option<Bytes>,
    /// Encoded size of the changes that rebuild this state.
    live_bytes: usize,
}

fn commit_len(topic: &str, committed: &CommittedOffset) -> usize {
    1 + 4 + topic.len() + 4 + 8 + 4 + 4 + committed.metadata.len() + 8
}

fn metadata_len(blob: &Bytes) -> usize {
    1 + 4 + blob.len()
}

impl View {
    /// Applies one change.
    pub fn apply(&mut self, change: &Change) {
        match change {
            Change::Group(GroupChange::Commit {
                topic,
                partition,
                committed,
            }) => {
                let added = commit_len(topic, committed);
                let partitions = match self.offsets.get_mut(topic.as_str()) {
                    Some(partitions) => partitions,
                    None => self.offsets.entry(topic.clone()).or_default(),
                };
                if let Some(old) = partitions.insert(*partition, committed.clone()) {
                    self.live_bytes -= commit_len(topic, &old);
                }
                self.live_bytes += added;
            }
            Change::Group(GroupChange::DeleteOffset { topic, partition }) => {
                if let Some(partitions) = self.offsets.get_mut(topic.as_str()) {
                    if let Some(old) = partitions.remove(partition) {
                        self.live_bytes -= commit_len(topic, &old);
                    }
                    if partitions.is_empty() {
                        self.offsets.remove(topic.as_str());
                    }
                }
            }
            Change::Group(GroupChange::Metadata(blob)) => {
                if let Some(old) = self.metadata.take() {
                    self.live_bytes -= metadata_len(&old);
                }
                if !blob.is_empty() {
                    self.live_bytes += metadata_len(blob);
                    self.metadata = Some(blob.clone());
                }
            }
            Change::RemoveTopic(topic) => {
                if let Some(partitions) = self.offsets.remove(topic.as_str()) {
                    for old in partitions.values() {
                        self.live_bytes -= commit_len(topic, old);
                    }
                }
            }
        }
    }

    /// The committed offset of one partition.
    pub fn offset(&self, topic: &str, partition: i32) -> Option<CommittedOffset> {
        self.offsets.get(topic)?.get(&partition).cloned()
    }

    /// Every committed offset, by topic then partition.
    pub fn offsets(&self) -> Vec<(String, i32, CommittedOffset)> {
        self.offsets
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions.iter().map(move |(partition, committed)| {
                    (topic.clone(), *partition, committed.clone())
                })
            })
            .collect()
    }

    /// True when the topic has an offset.
    pub fn has_topic(&self, topic: &str) -> bool {
        self.offsets.contains_key(topic)
    }

    /// The metadata blob, if any.
    pub fn metadata(&self) -> Option<Bytes> {
        self.metadata.clone()
    }

    /// Whether any offset is committed.
    pub fn has_offsets(&self) -> bool {
        !self.offsets.is_empty()
    }

    /// No offsets and no metadata.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty() && self.metadata.is_none()
    }

    /// Encoded size of the changes that rebuild this state (without framing).
    pub fn live_bytes(&self) -> usize {
        self.live_bytes
    }

    /// The changes that rebuild this state: the metadata, then every offset in order.
    pub fn snapshot_changes(&self) -> Vec<Change> {
        let metadata = self
            .metadata
            .iter()
            .map(|blob| Change::Group(GroupChange::Metadata(blob.clone())));
        let commits = self.offsets.iter().flat_map(|(topic, partitions)| {
            partitions.iter().map(move |(partition, committed)| {
                Change::Group(GroupChange::Commit {
                    topic: topic.clone(),
                    partition: *partition,
                    committed: committed.clone(),
                })
            })
        });
        metadata.chain(commits).collect()
    }

    /// A whole compacted file for this state.
    pub fn encode_snapshot(&self, group_id: &str) -> Vec<u8> {
        record::encode_snapshot(group_id, &self.snapshot_changes())
    }
}

/// What recovery found in a file.
#[derive(Debug)]
pub struct Replayed {
    /// The group id named by the header.
    pub group_id: String,
    /// The state after every valid record.
    pub view: View,
    /// Bytes of the header and every valid record; the file is cut here.
    pub valid_len: usize,
    /// Why the record at `valid_len` was not read, when the file goes on past it.
    pub stopped_by: Option<record::RecordError>,
}

/// Rebuilds a group's state from its file. Fails only when the header is unreadable or of a
/// newer version: everything after it is read up to the first invalid record.
pub fn replay(bytes: &[u8]) -> Result<Replayed, record::RecordError> {
    let (body, mut at) = record::unframe(bytes)?;
    let group_id = record::decode_header(body)?;
    let mut view = View::default();
    let mut stopped_by = None;
    while at < bytes.len() {
        let changes = record::unframe(&bytes[at..])
            .and_then(|(body, used)| Ok((record::decode_changes(body)?, used)));
        match changes {
            Ok((changes, used)) => {
                for change in &changes {
                    view.apply(change);
                }
                at += used;
            }
            Err(error) => {
                stopped_by = Some(error);
                break;
            }
        }
    }
    Ok(Replayed {
        group_id,
        view,
        valid_len: at,
        stopped_by,
    })
}
