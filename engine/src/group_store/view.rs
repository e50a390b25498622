//! The in-memory state of a group rebuilt from its records: committed offsets by topic and
//! partition, pending transactional offsets by producer, the metadata blob, and how many
//! bytes a compacted file would take.
//!
//! # Pending transactional offsets
//! A [`GroupChange::PendingCommit`] keeps an offset aside for its producer (one per
//! partition: a later one of the same producer replaces it) until a
//! [`GroupChange::CompleteTransaction`] of that producer moves every one of them into the
//! committed offsets (commit) or drops them (abort), as Kafka's `OffsetMetadataManager`
//! does with the transactional offset commits of `__consumer_offsets`.
//!
//! Kafka decides which of two commits of a partition wins by their record offsets in the
//! log: a completed transactional commit replaces the committed offset unless that one was
//! written after it (a plain commit, or another transaction's commit written later). Here
//! every commit and pending commit takes the next value of a sequence when it is applied,
//! which is the order of the file; a committed offset keeps the sequence of the write it
//! came from. The sequence lives only in memory: a compacted file writes the offsets in
//! sequence order, so replaying it gives the same order.
//!
//! A pending commit or completion whose producer epoch is below the one the producer's
//! pending offsets were written at is ignored (the coordinator refuses it before writing,
//! as Kafka's producer state refuses a stale epoch; this keeps replay deterministic should
//! one reach the file). A deleted offset (and a deleted topic) drops the pending offsets
//! of that partition too, as Kafka's tombstone does.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use super::record::{self, Change};
use super::{CommittedOffset, GroupChange};

/// An offset and the sequence of the write it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    committed: CommittedOffset,
    sequence: u64,
}

/// The pending offsets of one producer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingTransaction {
    /// The highest epoch its pending offsets were written at.
    producer_epoch: i16,
    offsets: BTreeMap<(String, i32), Entry>,
}

/// Durable offsets and metadata of one group.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct View {
    offsets: BTreeMap<String, BTreeMap<i32, Entry>>,
    /// Pending transactional offsets by producer id; never an empty one.
    pending: BTreeMap<i64, PendingTransaction>,
    /// The producers with a pending offset, by topic and partition.
    open: BTreeMap<String, BTreeMap<i32, BTreeSet<i64>>>,
    metadata: Option<Bytes>,
    /// Encoded size of the changes that rebuild this state.
    live_bytes: usize,
    /// The sequence the next commit or pending commit takes.
    next_sequence: u64,
}

fn commit_len(topic: &str, committed: &CommittedOffset) -> usize {
    1 + 4 + topic.len() + 4 + 8 + 4 + 4 + committed.metadata.len() + 8
}

/// A pending commit is a commit plus the producer id and epoch.
fn pending_len(topic: &str, committed: &CommittedOffset) -> usize {
    commit_len(topic, committed) + 8 + 2
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
                let sequence = self.take_sequence();
                self.set_committed(
                    topic,
                    *partition,
                    Entry {
                        committed: committed.clone(),
                        sequence,
                    },
                );
            }
            Change::Group(GroupChange::DeleteOffset { topic, partition }) => {
                if let Some(partitions) = self.offsets.get_mut(topic.as_str()) {
                    if let Some(old) = partitions.remove(partition) {
                        self.live_bytes -= commit_len(topic, &old.committed);
                    }
                    if partitions.is_empty() {
                        self.offsets.remove(topic.as_str());
                    }
                }
                self.drop_pending_of(topic, Some(*partition));
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
                        self.live_bytes -= commit_len(topic, &old.committed);
                    }
                }
                self.drop_pending_of(topic, None);
            }
            Change::Group(GroupChange::PendingCommit {
                producer_id,
                producer_epoch,
                topic,
                partition,
                committed,
            }) => self.add_pending(*producer_id, *producer_epoch, topic, *partition, committed),
            Change::Group(GroupChange::CompleteTransaction {
                producer_id,
                producer_epoch,
                commit,
            }) => self.complete_transaction(*producer_id, *producer_epoch, *commit),
        }
    }

    fn take_sequence(&mut self) -> u64 {
        let sequence = self.next_sequence;
        self.next_sequence += 1;
        sequence
    }

    fn set_committed(&mut self, topic: &str, partition: i32, entry: Entry) {
        let added = commit_len(topic, &entry.committed);
        let partitions = match self.offsets.get_mut(topic) {
            Some(partitions) => partitions,
            None => self.offsets.entry(topic.to_owned()).or_default(),
        };
        if let Some(old) = partitions.insert(partition, entry) {
            self.live_bytes -= commit_len(topic, &old.committed);
        }
        self.live_bytes += added;
    }

    fn add_pending(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        topic: &str,
        partition: i32,
        committed: &CommittedOffset,
    ) {
        if self
            .pending
            .get(&producer_id)
            .is_some_and(|txn| producer_epoch < txn.producer_epoch)
        {
            return;
        }
        let sequence = self.take_sequence();
        let txn = self
            .pending
            .entry(producer_id)
            .or_insert_with(|| PendingTransaction {
                producer_epoch,
                offsets: BTreeMap::new(),
            });
        txn.producer_epoch = producer_epoch;
        let entry = Entry {
            committed: committed.clone(),
            sequence,
        };
        let key = (topic.to_owned(), partition);
        if let Some(old) = txn.offsets.insert(key, entry) {
            self.live_bytes -= pending_len(topic, &old.committed);
        }
        self.live_bytes += pending_len(topic, committed);
        self.open
            .entry(topic.to_owned())
            .or_default()
            .entry(partition)
            .or_default()
            .insert(producer_id);
    }

    fn complete_transaction(&mut self, producer_id: i64, producer_epoch: i16, commit: bool) {
        match self.pending.get(&producer_id) {
            Some(txn) if producer_epoch >= txn.producer_epoch => {}
            _ => return,
        }
        let Some(txn) = self.pending.remove(&producer_id) else {
            return;
        };
        for ((topic, partition), entry) in txn.offsets {
            self.live_bytes -= pending_len(&topic, &entry.committed);
            self.forget_open(&topic, partition, producer_id);
            let later_commit = self
                .offsets
                .get(&topic)
                .and_then(|partitions| partitions.get(&partition))
                .is_some_and(|current| current.sequence > entry.sequence);
            if commit && !later_commit {
                self.set_committed(&topic, partition, entry);
            }
        }
    }

    /// Drops every producer's pending offsets of `topic` (of one partition, or all).
    fn drop_pending_of(&mut self, topic: &str, partition: Option<i32>) {
        let Some(partitions) = self.open.get_mut(topic) else {
            return;
        };
        let dropped: Vec<(i32, BTreeSet<i64>)> = match partition {
            Some(partition) => partitions
                .remove(&partition)
                .map(|producers| (partition, producers))
                .into_iter()
                .collect(),
            None => std::mem::take(partitions).into_iter().collect(),
        };
        if partitions.is_empty() {
            self.open.remove(topic);
        }
        for (partition, producers) in dropped {
            for producer_id in producers {
                let Some(txn) = self.pending.get_mut(&producer_id) else {
                    continue;
                };
                if let Some(old) = txn.offsets.remove(&(topic.to_owned(), partition)) {
                    self.live_bytes -= pending_len(topic, &old.committed);
                }
                if txn.offsets.is_empty() {
                    self.pending.remove(&producer_id);
                }
            }
        }
    }

    fn forget_open(&mut self, topic: &str, partition: i32, producer_id: i64) {
        let Some(partitions) = self.open.get_mut(topic) else {
            return;
        };
        if let Some(producers) = partitions.get_mut(&partition) {
            producers.remove(&producer_id);
            if producers.is_empty() {
                partitions.remove(&partition);
            }
        }
        if partitions.is_empty() {
            self.open.remove(topic);
        }
    }

    /// The committed offset of one partition.
    pub fn offset(&self, topic: &str, partition: i32) -> Option<CommittedOffset> {
        Some(self.offsets.get(topic)?.get(&partition)?.committed.clone())
    }

    /// Every committed offset, by topic then partition.
    pub fn offsets(&self) -> Vec<(String, i32, CommittedOffset)> {
        self.offsets
            .iter()
            .flat_map(|(topic, partitions)| {
                partitions.iter().map(move |(partition, entry)| {
                    (topic.clone(), *partition, entry.committed.clone())
                })
            })
            .collect()
    }

    /// The pending offsets of `producer_id`, by topic then partition.
    pub fn pending_offsets(&self, producer_id: i64) -> Vec<(String, i32, CommittedOffset)> {
        self.pending
            .get(&producer_id)
            .map(|txn| {
                txn.offsets
                    .iter()
                    .map(|((topic, partition), entry)| {
                        (topic.clone(), *partition, entry.committed.clone())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The producers with pending offsets and the epoch those were written at, by producer
    /// id.
    pub fn pending_producers(&self) -> Vec<(i64, i16)> {
        self.pending
            .iter()
            .map(|(producer_id, txn)| (*producer_id, txn.producer_epoch))
            .collect()
    }

    /// The epoch `producer_id`'s pending offsets were written at, if it has any.
    pub fn pending_epoch(&self, producer_id: i64) -> Option<i16> {
        self.pending.get(&producer_id).map(|txn| txn.producer_epoch)
    }

    /// Whether some producer has a pending offset for the partition.
    pub fn has_pending_offset(&self, topic: &str, partition: i32) -> bool {
        self.open
            .get(topic)
            .is_some_and(|partitions| partitions.contains_key(&partition))
    }

    /// Whether any producer has a pending offset.
    pub fn has_pending_offsets(&self) -> bool {
        !self.pending.is_empty()
    }

    /// True when the topic has a committed or pending offset.
    pub fn has_topic(&self, topic: &str) -> bool {
        self.offsets.contains_key(topic) || self.open.contains_key(topic)
    }

    /// The metadata blob, if any.
    pub fn metadata(&self) -> Option<Bytes> {
        self.metadata.clone()
    }

    /// Whether any offset is committed.
    pub fn has_offsets(&self) -> bool {
        !self.offsets.is_empty()
    }

    /// No offsets (committed or pending) and no metadata.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty() && self.pending.is_empty() && self.metadata.is_none()
    }

    /// Encoded size of the changes that rebuild this state (without framing).
    pub fn live_bytes(&self) -> usize {
        self.live_bytes
    }

    /// The changes that rebuild this state: the metadata, then every committed and pending
    /// offset in the order they were written (their sequence), so that a replay decides
    /// between them as this view does.
    pub fn snapshot_changes(&self) -> Vec<Change> {
        let metadata = self
            .metadata
            .iter()
            .map(|blob| Change::Group(GroupChange::Metadata(blob.clone())));
        let commits = self.offsets.iter().flat_map(|(topic, partitions)| {
            partitions.iter().map(move |(partition, entry)| {
                let change = Change::Group(GroupChange::Commit {
                    topic: topic.clone(),
                    partition: *partition,
                    committed: entry.committed.clone(),
                });
                (entry.sequence, change)
            })
        });
        let pending = self.pending.iter().flat_map(|(producer_id, txn)| {
            txn.offsets.iter().map(move |((topic, partition), entry)| {
                let change = Change::Group(GroupChange::PendingCommit {
                    producer_id: *producer_id,
                    producer_epoch: txn.producer_epoch,
                    topic: topic.clone(),
                    partition: *partition,
                    committed: entry.committed.clone(),
                });
                (entry.sequence, change)
            })
        });
        let mut offsets: Vec<(u64, Change)> = commits.chain(pending).collect();
        offsets.sort_by_key(|(sequence, _)| *sequence);
        metadata
            .chain(offsets.into_iter().map(|(_, change)| change))
            .collect()
    }

    /// A whole compacted file for this state, at the lowest format version that holds it
    /// and at least `min_version`, and that version.
    pub fn encode_snapshot(&self, group_id: &str, min_version: u16) -> (Vec<u8>, u16) {
        let changes = self.snapshot_changes();
        let version = record::version_for(&changes).max(min_version);
        (
            record::encode_snapshot(group_id, &changes, version),
            version,
        )
    }
}

/// What recovery found in a file.
#[derive(Debug)]
pub struct Replayed {
    /// The group id named by the header.
    pub group_id: String,
    /// The file's format version.
    pub version: u16,
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
    let header = record::decode_header(body)?;
    let mut view = View::default();
    let mut stopped_by = None;
    while at < bytes.len() {
        let changes = record::unframe(&bytes[at..])
            .and_then(|(body, used)| Ok((record::decode_changes(body, header.version)?, used)));
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
        group_id: header.group_id,
        version: header.version,
        view,
        valid_len: at,
        stopped_by,
    })
}
