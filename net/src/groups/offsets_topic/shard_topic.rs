//! The `__consumer_offsets` partitions one shard serves: derived from the groups that shard
//! coordinates (a group's partition decides its coordinator shard, see `placement`).
//!
//! The coordinator calls [`OffsetsTopic::sync`] on every tick (50 ms) once its groups are
//! loaded. A sync looks at each group's store: when the store's size or compaction count
//! moved since the last sync (each durable change moves one of them, at the moment the
//! change becomes visible in the store), it rebuilds the group's records (metadata, then
//! every committed offset) and appends those whose value differs from what it wrote before,
//! plus a tombstone for each key that went away; a group no longer coordinated (deleted,
//! dropped as unused) gets a tombstone for every key it had. A commit therefore reaches the
//! topic within a tick of being acknowledged, and only durable state ever does.
//!
//! The first sync that finds a partition of the shard served by this broker (every one on a
//! standalone broker; in a cluster the ones the assignment gives it, [`leadership`]) reserves
//! offsets for it and writes every group's state; until then reads answer
//! NOT_LEADER_OR_FOLLOWER (retriable), so no consumer sees an empty partition whose high
//! watermark then jumps. A partition this broker stops leading is dropped at the next sync;
//! one it leads again is started afresh.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kaas_engine::Storage;

use super::partition::{OffsetsPartition, PartitionRead};
use super::record_format::{
    consumer_group_metadata_key, consumer_group_metadata_value, group_metadata_key,
    group_metadata_value, offset_commit_key, offset_commit_value, ClassicGroupMetadata,
    MemberMetadata,
};
use super::reservation::Reservations;
use super::{leadership, partition_for, shard_of_partition, PARTITIONS};
use crate::groups::classic::ClassicGroup;
use crate::groups::consumer_group::ConsumerGroup;
use crate::groups::group::{Group, CLASSIC_TAG, CONSUMER_TAG};
use crate::model::cluster_view::{ClusterView, Leadership};
use crate::protocol::ErrorCode;

/// How long a fetch waiting on a partition that is not served yet sleeps before looking again.
const NOT_READY_POLL: Duration = Duration::from_millis(50);

enum Slot {
    Ready(OffsetsPartition),
    /// Its reservation file could not be read or written; logged once.
    Failed,
}

/// What was last written for one group.
struct WrittenGroup {
    partition: i32,
    /// The store's (size, compaction count) at the last sync.
    seen: (u64, u64),
    /// The metadata blob the metadata record was built from.
    metadata_blob: Option<Bytes>,
    /// Every live key and its value.
    values: BTreeMap<Bytes, Bytes>,
}

/// The shard's `__consumer_offsets` partitions.
pub struct OffsetsTopic {
    storage: Storage,
    shard: usize,
    shards: usize,
    partitions: RefCell<BTreeMap<i32, Slot>>,
    groups: RefCell<HashMap<String, WrittenGroup>>,
    /// The leader epoch each served partition was started at.
    served_at: RefCell<BTreeMap<i32, i32>>,
    syncing: Cell<bool>,
}

/// How this broker reserves offsets: one file per partition standalone, claimed blocks in a
/// cluster (where a former leader may still write; see [`super::reservation`]).
fn reservations(view: &ClusterView) -> Reservations {
    if view.is_cluster() {
        Reservations::Claims
    } else {
        Reservations::File
    }
}

fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}

/// The metadata record of a stored metadata blob (see `groups::group` for its format), or
/// `None` when there is none or it cannot be read.
fn metadata_record(group_id: &str, blob: &[u8], now_ms: i64) -> Option<(Bytes, Bytes)> {
    let (&tag, body) = blob.split_first()?;
    match tag {
        CLASSIC_TAG => {
            let group = ClassicGroup::decode(group_id, body, now_ms).ok()?;
            let protocol = group.protocol_name().map(str::to_owned);
            let members = group
                .members()
                .map(|member| MemberMetadata {
                    member_id: member.member_id.clone(),
                    group_instance_id: member.group_instance_id.clone(),
                    client_id: member.client_id.clone(),
                    client_host: member.client_host.clone(),
                    rebalance_timeout_ms: member.rebalance_timeout_ms,
                    session_timeout_ms: member.session_timeout_ms,
                    subscription: member.metadata(protocol.as_deref().unwrap_or_default()),
                    assignment: member.assignment.clone(),
                })
                .collect();
            let metadata = ClassicGroupMetadata {
                protocol_type: group.protocol_type().unwrap_or_default().to_owned(),
                generation: group.generation_id(),
                protocol,
                leader: group.leader().map(str::to_owned),
                current_state_timestamp_ms: now_ms,
                members,
            };
            Some((
                group_metadata_key(group_id),
                group_metadata_value(&metadata),
            ))
        }
        CONSUMER_TAG => {
            let group = ConsumerGroup::decode(group_id, body).ok()?;
            Some((
                consumer_group_metadata_key(group_id),
                consumer_group_metadata_value(group.group_epoch()),
            ))
        }
        _ => None,
    }
}

impl OffsetsTopic {
    /// The partitions served by shard `shard` of `shards`, not started yet.
    pub fn new(storage: Storage, shard: usize, shards: usize) -> Self {
        OffsetsTopic {
            storage,
            shard,
            shards: shards.max(1),
            partitions: RefCell::new(BTreeMap::new()),
            groups: RefCell::new(HashMap::new()),
            served_at: RefCell::new(BTreeMap::new()),
            syncing: Cell::new(false),
        }
    }

    fn owned_partitions(&self) -> impl Iterator<Item = i32> + '_ {
        (0..PARTITIONS).filter(|p| shard_of_partition(*p, self.shards) == self.shard)
    }

    /// Brings the partitions up to date with `groups` (every group this shard coordinates).
    pub async fn sync(&self, groups: &[Rc<Group>], view: &ClusterView) {
        if self.syncing.replace(true) {
            return;
        }
        self.follow_leadership(view).await;
        let now_ms = wall_clock_ms();
        let records = self.changed_records(groups, view, now_ms);
        for (partition, key, value) in records {
            self.append(reservations(view), partition, key, value, now_ms)
                .await;
        }
        self.syncing.set(false);
    }

    /// Starts this shard's partitions that `view` gives this broker (again, when their leader
    /// epoch changed) and stops serving the others. A started partition resumes above the
    /// offsets reserved on the volume and gets every group's records anew.
    async fn follow_leadership(&self, view: &ClusterView) {
        let wanted: BTreeMap<i32, i32> = self
            .owned_partitions()
            .filter_map(|partition| match leadership(view, partition) {
                Leadership::Here { leader_epoch } => Some((partition, leader_epoch)),
                _ => None,
            })
            .collect();
        let stopped: Vec<i32> = self
            .served_at
            .borrow()
            .iter()
            .filter(|(partition, epoch)| wanted.get(partition) != Some(epoch))
            .map(|(partition, _)| *partition)
            .collect();
        for partition in stopped {
            self.served_at.borrow_mut().remove(&partition);
            self.partitions.borrow_mut().remove(&partition);
            self.forget_written(partition);
        }
        for (partition, leader_epoch) in wanted {
            if self.served_at.borrow().contains_key(&partition) {
                continue;
            }
            let reserved = reservations(view).start(&self.storage, partition).await;
            let slot = match reserved {
                Ok(offsets) => Slot::Ready(OffsetsPartition::new(offsets.start, offsets.end)),
                Err(error) => {
                    tracing::error!(partition, %error, "__consumer_offsets: reserving offsets; the partition is not served");
                    Slot::Failed
                }
            };
            self.forget_written(partition);
            self.partitions.borrow_mut().insert(partition, slot);
            self.served_at.borrow_mut().insert(partition, leader_epoch);
        }
    }

    /// Forgets what was written for the groups of `partition`, so the next sync writes their
    /// records again (into a partition just started) or not at all (one no longer served).
    fn forget_written(&self, partition: i32) {
        self.groups
            .borrow_mut()
            .retain(|_, group| group.partition != partition);
    }

    /// The records that bring the written state up to `groups`, recording them as written.
    fn changed_records(
        &self,
        groups: &[Rc<Group>],
        view: &ClusterView,
        now_ms: i64,
    ) -> Vec<(i32, Bytes, Option<Bytes>)> {
        let mut records = Vec::new();
        let mut written = self.groups.borrow_mut();
        let mut present = std::collections::HashSet::with_capacity(groups.len());
        for group in groups {
            present.insert(group.id.as_str());
            let seen = (group.store.file_len(), group.store.compaction_count());
            let previous = written.get(&group.id);
            if previous.is_some_and(|p| p.seen == seen) {
                continue;
            }
            let blob = group.store.metadata().filter(|blob| !blob.is_empty());
            let mut values = BTreeMap::new();
            let reused = previous.filter(|p| p.metadata_blob == blob).map(|p| {
                p.values
                    .iter()
                    .filter(|(key, _)| key.get(..2) != Some(&[0, 1][..]))
                    .map(|(key, value)| (key.clone(), value.clone()))
                    .collect::<Vec<_>>()
            });
            match reused {
                Some(metadata) => values.extend(metadata),
                None => {
                    if let Some((key, value)) = blob
                        .as_ref()
                        .and_then(|blob| metadata_record(&group.id, blob, now_ms))
                    {
                        values.insert(key, value);
                    }
                }
            }
            for (topic, partition, committed) in group.store.offsets() {
                let topic_id = view
                    .topic(&topic)
                    .map(|t| t.id())
                    .or_else(|| super::topic_by_name(view, &topic).map(|t| t.id()));
                values.insert(
                    offset_commit_key(&group.id, &topic, partition),
                    offset_commit_value(&committed, topic_id),
                );
            }
            let partition = partition_for(&group.id);
            let empty = BTreeMap::new();
            let before = previous.map_or(&empty, |p| &p.values);
            for (key, value) in &values {
                if before.get(key) != Some(value) {
                    records.push((partition, key.clone(), Some(value.clone())));
                }
            }
            for key in before.keys().filter(|key| !values.contains_key(*key)) {
                records.push((partition, key.clone(), None));
            }
            written.insert(
                group.id.clone(),
                WrittenGroup {
                    partition,
                    seen,
                    metadata_blob: blob,
                    values,
                },
            );
        }
        let gone: Vec<String> = written
            .keys()
            .filter(|id| !present.contains(id.as_str()))
            .cloned()
            .collect();
        for id in gone {
            if let Some(group) = written.remove(&id) {
                for key in group.values.into_keys() {
                    records.push((group.partition, key, None));
                }
            }
        }
        records
    }

    /// Appends one record, reserving more offsets first when none is left.
    async fn append(
        &self,
        reservations: Reservations,
        partition: i32,
        key: Bytes,
        value: Option<Bytes>,
        now_ms: i64,
    ) {
        let reserve_from = match self.partitions.borrow().get(&partition) {
            Some(Slot::Ready(p)) if !p.has_reserved_offset() => Some(p.next_offset()),
            Some(Slot::Ready(_)) => None,
            _ => return,
        };
        if let Some(next) = reserve_from {
            let reserved = reservations.extend(&self.storage, partition, next).await;
            let offsets = match reserved {
                Ok(offsets) => offsets,
                Err(error) => {
                    tracing::error!(partition, %error, "__consumer_offsets: reserving offsets; the partition is not served");
                    self.partitions.borrow_mut().insert(partition, Slot::Failed);
                    return;
                }
            };
            if let Some(Slot::Ready(p)) = self.partitions.borrow_mut().get_mut(&partition) {
                p.extend_reservation(offsets);
            }
        }
        if let Some(Slot::Ready(p)) = self.partitions.borrow_mut().get_mut(&partition) {
            p.append(key, value.as_deref(), now_ms);
        }
    }

    fn with_partition<T>(
        &self,
        partition: i32,
        read: impl FnOnce(&OffsetsPartition) -> Result<T, ErrorCode>,
    ) -> Result<T, ErrorCode> {
        match self.partitions.borrow().get(&partition) {
            Some(Slot::Ready(p)) => read(p),
            Some(Slot::Failed) => Err(ErrorCode::KafkaStorageError),
            None if (0..PARTITIONS).contains(&partition) => Err(ErrorCode::NotLeaderOrFollower),
            None => Err(ErrorCode::UnknownTopicOrPartition),
        }
    }

    /// Whole batches of `partition` from `offset` on (at least one, then up to `max_bytes`).
    pub fn read(
        &self,
        partition: i32,
        offset: i64,
        max_bytes: usize,
    ) -> Result<PartitionRead, ErrorCode> {
        self.with_partition(partition, |p| p.read(offset, max_bytes))
    }

    /// The high watermark of `partition`.
    pub fn high_watermark(&self, partition: i32) -> Result<i64, ErrorCode> {
        self.with_partition(partition, |p| Ok(p.next_offset()))
    }

    /// ListOffsets for one partition: Kafka's special timestamps (-1 latest, -2 earliest,
    /// -3 max timestamp, -4 earliest local, -5 latest tiered) or a timestamp; (offset,
    /// timestamp), `None` when no record matches.
    pub fn list_offset(
        &self,
        partition: i32,
        timestamp: i64,
    ) -> Result<Option<(i64, i64)>, ErrorCode> {
        self.with_partition(partition, |p| match timestamp {
            -1 | -5 => Ok(Some((p.next_offset(), -1))),
            -2 | -4 => Ok(Some((0, -1))),
            -3 => Ok(p.max_timestamp_record()),
            ts if ts >= 0 => Ok(p.offset_for_timestamp(ts)),
            _ => Err(ErrorCode::InvalidRequest),
        })
    }

    /// Returns once `partition` has a record at or beyond `offset` (callers bound the wait
    /// with their own deadline).
    pub async fn wait_for_data_beyond(&self, partition: i32, offset: i64) {
        loop {
            let waiting = match self.partitions.borrow_mut().get_mut(&partition) {
                Some(Slot::Ready(p)) if p.next_offset() > offset => return,
                Some(Slot::Ready(p)) => Some(p.wait_for_append()),
                _ => None,
            };
            match waiting {
                Some(receiver) => {
                    let _ = receiver.await;
                }
                None => glommio::timer::sleep(NOT_READY_POLL).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::groups::config::GroupConfig;
    use kaas_engine::group_store::{CommittedOffset, GroupChange, GroupStore};

    /// Kafka 4.4: `Utils.abs("lag-tool".hashCode()) % 50`.
    const PARTITION: i32 = 29;

    fn commit(offset: i64) -> Vec<GroupChange> {
        vec![GroupChange::Commit {
            topic: "t".into(),
            partition: 0,
            committed: CommittedOffset {
                offset,
                leader_epoch: -1,
                metadata: "m".into(),
                commit_timestamp_ms: 1,
            },
        }]
    }

    fn base_offsets(read: &PartitionRead) -> Vec<i64> {
        read.batches
            .iter()
            .map(|batch| i64::from_be_bytes(batch[..8].try_into().expect("8 bytes")))
            .collect()
    }

    #[test]
    fn sync_follows_the_stores_and_tombstones_what_went_away() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let storage = Storage::memory();
                let view = ClusterView::default();
                let topic = OffsetsTopic::new(storage.clone(), 0, 1);
                assert_eq!(
                    topic.read(PARTITION, 0, 1 << 20).err(),
                    Some(ErrorCode::NotLeaderOrFollower),
                    "not served before the first sync"
                );
                let store = GroupStore::open(&storage, "lag-tool").await.expect("open");
                store.apply(commit(5)).await.expect("apply");
                let group = Rc::new(Group::from_store(store.clone(), &GroupConfig::default(), 0));
                topic.sync(std::slice::from_ref(&group), &view).await;
                let read = topic.read(PARTITION, 0, 1 << 20).expect("read");
                assert_eq!(base_offsets(&read), vec![0]);
                assert_eq!(read.high_watermark, 1);

                // An unchanged store adds nothing.
                topic.sync(std::slice::from_ref(&group), &view).await;
                assert_eq!(topic.high_watermark(PARTITION), Ok(1));

                // A new commit supersedes the old record.
                store.apply(commit(6)).await.expect("apply");
                topic.sync(std::slice::from_ref(&group), &view).await;
                let read = topic.read(PARTITION, 0, 1 << 20).expect("read");
                assert_eq!(base_offsets(&read), vec![1]);

                // A group no longer coordinated (deleted) leaves a tombstone for its key.
                topic.sync(&[], &view).await;
                let read = topic.read(PARTITION, 0, 1 << 20).expect("read");
                assert_eq!(base_offsets(&read), vec![2]);
                assert!(
                    read.batches[0].ends_with(&[0x01, 0x00]),
                    "a null value (length -1), no headers"
                );

                // Another partition of the shard is served, empty.
                assert_eq!(topic.high_watermark(0), Ok(0));

                // After a restart, offsets continue past the reserved block, never reused.
                let restarted = OffsetsTopic::new(storage.clone(), 0, 1);
                restarted.sync(&[group], &view).await;
                let read = restarted.read(PARTITION, 0, 1 << 20).expect("read");
                assert_eq!(
                    base_offsets(&read),
                    vec![crate::groups::offsets_topic::reservation::BLOCK]
                );
            })
            .expect("executor")
            .join()
            .expect("join");
    }

    #[test]
    fn a_shard_serves_only_its_partitions() {
        let topic = OffsetsTopic::new(Storage::memory(), 1, 2);
        let owned: Vec<i32> = topic.owned_partitions().collect();
        assert_eq!(owned.len(), 25);
        assert!(owned.iter().all(|p| p % 2 == 1));
        assert_eq!(
            topic.read(50, 0, 1).err(),
            Some(ErrorCode::UnknownTopicOrPartition)
        );
    }

    /// A cluster view from broker `me` of an assignment placing partition [`PARTITION`] of
    /// `__consumer_offsets` on broker `leader` at `leader_epoch` (the others on broker 2).
    fn offsets_view(me: i32, leader: i32, leader_epoch: i32) -> ClusterView {
        let placements: Vec<String> = (0..PARTITIONS)
            .map(|p| {
                let (broker, epoch) = if p == PARTITION {
                    (leader, leader_epoch)
                } else {
                    (2, 1)
                };
                format!(r#"{{"leader": {broker}, "leader_epoch": {epoch}}}"#)
            })
            .collect();
        let text = format!(
            r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {leader_epoch},
                "brokers": [{{"id": 0, "host": "a", "port": 9092}}, {{"id": 1, "host": "b", "port": 9092}},
                            {{"id": 2, "host": "c", "port": 9092}}],
                "topics": {{"__consumer_offsets": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 50}}}},
                "partitions": {{"__consumer_offsets": [{}]}}}}"#,
            placements.join(", ")
        );
        let assignment =
            kaas_cluster::assignment::Assignment::from_json(text.as_bytes()).expect("valid");
        let view =
            kaas_cluster::view::ClusterView::new(&assignment, kaas_cluster::ids::BrokerId(me), 1);
        ClusterView::of_assignment(
            "c".into(),
            std::sync::Arc::new(view),
            &crate::model::topic_config::TopicDefaults::default(),
        )
    }

    /// Commits `count` partitions of topic `topic` at offset `at`: one record each.
    async fn commit_many(store: &GroupStore, topic: &str, count: i32, at: i64) {
        let changes = (0..count)
            .map(|partition| GroupChange::Commit {
                topic: topic.into(),
                partition,
                committed: CommittedOffset {
                    offset: at,
                    leader_epoch: -1,
                    metadata: String::new(),
                    commit_timestamp_ms: 1,
                },
            })
            .collect();
        store.apply(changes).await.expect("apply");
    }

    /// Every offset a read of the whole partition returns.
    fn all_offsets(topic: &OffsetsTopic) -> Vec<i64> {
        let read = topic.read(PARTITION, 0, usize::MAX).expect("read");
        base_offsets(&read)
    }

    #[test]
    fn a_former_leader_that_wakes_up_cannot_make_offsets_repeat() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let storage = Storage::memory();
                let config = GroupConfig::default();
                // Two groups of partition PARTITION ("g55": Kafka's hash too).
                let small = GroupStore::open(&storage, "lag-tool").await.expect("open");
                let busy = GroupStore::open(&storage, "g55").await.expect("open");
                let group =
                    |store: &GroupStore| Rc::new(Group::from_store(store.clone(), &config, 0));
                let block = crate::groups::offsets_topic::reservation::BLOCK as i32;

                // Broker 0 leads the partition at leader epoch 1, then is paused.
                let stale = OffsetsTopic::new(storage.clone(), 0, 1);
                let stale_view = offsets_view(0, 0, 1);
                commit_many(&small, "a", block - 5, 1).await;
                stale.sync(&[group(&small)], &stale_view).await;

                // Broker 1 takes the partition over at epoch 2 and hands out more than two
                // blocks' worth of offsets.
                let newer = OffsetsTopic::new(storage.clone(), 0, 1);
                let newer_view = offsets_view(1, 1, 2);
                commit_many(&busy, "b", 2 * block + 10, 1).await;
                newer
                    .sync(&[group(&small), group(&busy)], &newer_view)
                    .await;
                let handed_out = all_offsets(&newer);

                // Broker 0 wakes up with its old view and goes on: it runs out of its block
                // and reserves the next one.
                commit_many(&small, "c", 10, 1).await;
                stale.sync(&[group(&small)], &stale_view).await;

                // Broker 2 takes over at epoch 3: none of its offsets was handed out before.
                let next = OffsetsTopic::new(storage.clone(), 0, 1);
                next.sync(&[group(&small), group(&busy)], &offsets_view(2, 2, 3))
                    .await;
                let highest = *handed_out.iter().max().expect("offsets");
                let first = *all_offsets(&next).iter().min().expect("offsets");
                assert!(
                    first > highest,
                    "broker 2 starts at {first}, broker 1 handed out up to {highest}"
                );
            })
            .expect("executor")
            .join()
            .expect("join");
    }
}
