//! One group as the coordinator holds it: its protocol state and its durable store.
//!
//! The store's metadata blob starts with one byte naming the protocol, followed by that
//! protocol's own persisted form: `1` = classic ([`ClassicGroup::encode`]), `2` = KIP-848
//! consumer group ([`ConsumerGroup::encode`]). An unreadable blob is logged and ignored:
//! the group's offsets stay, its members rejoin.

use std::cell::{Cell, RefCell};

use bytes::{BufMut, Bytes, BytesMut};
use kaas_engine::group_store::{GroupChange, GroupStore};

use crate::groups::classic::ClassicGroup;
use crate::groups::clock::wall_ms;
use crate::groups::config::GroupConfig;
use crate::groups::consumer_group::{ConsumerGroup, TopicSnapshot};
use crate::model::cluster_view::ClusterView;
use crate::model::offsets_topic;
use crate::protocol::ErrorCode;

/// Metadata blob tag of a classic group.
pub const CLASSIC_TAG: u8 = 1;
/// Metadata blob tag of a KIP-848 consumer group.
pub const CONSUMER_TAG: u8 = 2;

/// The protocol a group runs.
#[derive(Debug)]
pub enum GroupState {
    /// Classic protocol (JoinGroup/SyncGroup), or a group that only stores offsets.
    Classic(ClassicGroup),
    /// KIP-848 consumer group protocol (ConsumerGroupHeartbeat).
    Consumer(ConsumerGroup),
}

impl GroupState {
    /// The classic group a JoinGroup joins: an empty consumer group becomes a classic one;
    /// `None` while a consumer group has members (the protocols do not mix).
    pub fn classic_for_join(&mut self, group_id: &str) -> Option<&mut ClassicGroup> {
        if matches!(self, GroupState::Consumer(consumer) if consumer.is_empty()) {
            *self = GroupState::Classic(ClassicGroup::new(group_id));
        }
        match self {
            GroupState::Classic(classic) => Some(classic),
            GroupState::Consumer(_) => None,
        }
    }

    /// The consumer group a ConsumerGroupHeartbeat addresses: an empty classic group becomes
    /// one when a member joins; `None` for a classic group otherwise.
    pub fn consumer_for_heartbeat(
        &mut self,
        group_id: &str,
        joining: bool,
    ) -> Option<&mut ConsumerGroup> {
        if matches!(self, GroupState::Classic(classic) if classic.is_empty() && joining) {
            *self = GroupState::Consumer(ConsumerGroup::new(group_id));
        }
        match self {
            GroupState::Consumer(consumer) => Some(consumer),
            GroupState::Classic(_) => None,
        }
    }
}

/// A group: protocol state plus its committed offsets and persisted metadata.
pub struct Group {
    /// Group id.
    pub id: String,
    /// Offsets and metadata on the data volume.
    pub store: GroupStore,
    /// Protocol state; never borrowed across an await.
    pub state: RefCell<GroupState>,
    /// A consumer group's state changed and is not persisted yet.
    consumer_changed: Cell<bool>,
    /// Requests working on the group's store right now (it is not dropped meanwhile).
    busy: Cell<u32>,
}

/// Marks a group busy while alive.
pub struct BusyGuard<'a>(&'a Group);

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.0.busy.set(self.0.busy.get() - 1);
    }
}

/// The topics of a cluster view as a consumer group assigns them: the user topics and, where
/// this broker serves it, `__consumer_offsets` (Kafka resolves a subscription, by name or by
/// regex, against every topic, internal ones included).
pub fn topic_snapshot(view: &ClusterView) -> TopicSnapshot {
    let offsets_topic = offsets_topic::is_served(view).then(|| offsets_topic::topic_info(view));
    TopicSnapshot::new(
        view.topics
            .values()
            .chain(offsets_topic.as_ref())
            .map(|t| (t.name().to_string(), t.id(), t.partitions())),
    )
}

impl Group {
    /// Rebuilds a group from its store (a new classic group when nothing usable is stored).
    pub fn from_store(store: GroupStore, config: &GroupConfig, now_ms: i64) -> Self {
        let id = store.group_id().to_string();
        let state = store
            .metadata()
            .filter(|blob| !blob.is_empty())
            .and_then(|blob| {
                let decoded = match blob[0] {
                    CLASSIC_TAG => ClassicGroup::decode(&id, &blob[1..], now_ms)
                        .map(GroupState::Classic)
                        .map_err(|e| e.to_string()),
                    CONSUMER_TAG => ConsumerGroup::decode(&id, &blob[1..])
                        .map(|mut group| {
                            group.restore(&config.consumer(), now_ms);
                            GroupState::Consumer(group)
                        })
                        .map_err(|e| e.to_string()),
                    tag => Err(format!("unknown protocol tag {tag}")),
                };
                decoded
                    .map_err(|error| {
                        tracing::warn!(group = %id, %error, "ignoring unreadable group metadata")
                    })
                    .ok()
            })
            .unwrap_or_else(|| GroupState::Classic(ClassicGroup::new(&id)));
        Group {
            id,
            store,
            state: RefCell::new(state),
            consumer_changed: Cell::new(false),
            busy: Cell::new(0),
        }
    }

    /// Keeps the group from being dropped as unused while the guard lives.
    pub fn busy(&self) -> BusyGuard<'_> {
        self.busy.set(self.busy.get() + 1);
        BusyGuard(self)
    }

    /// Records that a consumer group call reported a change.
    pub fn mark_consumer_changed(&self) {
        self.consumer_changed.set(true);
    }

    /// The blob to persist if the protocol state changed since the last call.
    pub fn take_changed_metadata(&self) -> Option<Bytes> {
        let (tag, encoded) = match &mut *self.state.borrow_mut() {
            GroupState::Classic(group) => {
                let dirty = group.take_dirty();
                if dirty {
                    group.stamp_empty_since(wall_ms());
                }
                (CLASSIC_TAG, dirty.then(|| group.encode()))
            }
            GroupState::Consumer(group) => {
                let dirty = self.consumer_changed.replace(false);
                (CONSUMER_TAG, dirty.then(|| group.encode()))
            }
        };
        encoded.map(|body| {
            let mut blob = BytesMut::with_capacity(body.len() + 1);
            blob.put_u8(tag);
            blob.put_slice(&body);
            blob.freeze()
        })
    }

    /// Persists the protocol state if it changed; failures are logged (members recover by
    /// rejoining, offsets are unaffected).
    pub async fn persist_if_changed(&self) {
        if let Some(blob) = self.take_changed_metadata() {
            if let Err(error) = self.store.apply(vec![GroupChange::Metadata(blob)]).await {
                tracing::error!(group = %self.id, %error, "persisting group metadata");
            }
        }
    }

    /// Whether the group has no members, no committed offsets and no pending transactional
    /// ones (Kafka keeps a group while a transaction has offsets pending in it).
    pub fn is_unused(&self) -> bool {
        self.has_no_members()
            && self.busy.get() == 0
            && !self.store.has_offsets()
            && !self.store.has_pending_offsets()
    }

    /// Whether the group has no members (offsets may remain).
    pub fn has_no_members(&self) -> bool {
        match &*self.state.borrow() {
            GroupState::Classic(group) => group.is_empty(),
            GroupState::Consumer(group) => group.is_empty(),
        }
    }

    /// The error for an OffsetFetch by `member` (id and epoch, OffsetFetch v9+).
    pub fn validate_offset_fetch(&self, member: Option<&(String, i32)>) -> ErrorCode {
        match &*self.state.borrow() {
            GroupState::Classic(_) => ErrorCode::None,
            GroupState::Consumer(group) => match member {
                Some((member_id, epoch)) => group.validate_offset_fetch(Some(member_id), *epoch),
                None => ErrorCode::None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscriptions_resolve_against_consumer_offsets_too() {
        let view = ClusterView::default();
        assert!(
            offsets_topic::is_served(&view),
            "a standalone broker serves it"
        );
        let snapshot = topic_snapshot(&view);
        let (id, partitions) = snapshot
            .by_name(offsets_topic::NAME)
            .expect("__consumer_offsets is in the snapshot");
        assert_eq!(partitions, offsets_topic::PARTITIONS);
        assert_eq!(id, offsets_topic::topic_info(&view).id());
    }
}
