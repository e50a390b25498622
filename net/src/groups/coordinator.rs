//! The group coordinator of one shard: the groups whose id hashes to this shard
//! ([`placement`](super::placement)), loaded from the data volume at start-up, created on
//! first use, ticked for their deadlines and deleted on request. Every
//! `offsets.retention.check.interval.ms` it removes expired offsets
//! ([`offset_retention`](super::offset_retention)) and then the groups that have neither
//! members nor offsets, as Kafka's periodic group metadata clean-up does; until then an Empty
//! group stays (listed, describable, deletable), even with no offsets.
//!
//! Every group is rebuilt from its [`GroupStore`] alone, so in cluster mode a group can move
//! to another coordinator by closing it here and loading it there.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::{FutureExt, LocalBoxFuture, Shared};
use kaas_engine::group_store::{GroupChange, GroupStore};
use kaas_engine::Storage;

use crate::broker::cluster_view::{ClusterView, ViewHandle};
use crate::groups::clock::{monotonic_ms, wall_ms};
use crate::groups::config::GroupConfig;
use crate::groups::consumer_group::{ConsumerGroupConfig, TopicSnapshot};
use crate::groups::group::{topic_snapshot, Group, GroupState};
use crate::groups::offset_retention::expired_offsets;
use crate::groups::offsets_topic::OffsetsTopic;
use crate::groups::placement::coordinator_shard;
use crate::protocol::ErrorCode;

/// How often deadlines (sessions, join phases) are checked.
const TICK: Duration = Duration::from_millis(50);

type Opening = Shared<LocalBoxFuture<'static, Result<Rc<Group>, String>>>;
type Deleting = Shared<LocalBoxFuture<'static, ()>>;

enum Slot {
    Ready(Rc<Group>),
    Opening(Opening),
}

/// The groups one shard coordinates.
pub struct GroupCoordinator {
    shard: usize,
    shards: usize,
    storage: Storage,
    /// Settings.
    pub config: GroupConfig,
    groups: RefCell<HashMap<String, Slot>>,
    /// Stores being deleted: a group reopened meanwhile waits for the deletion first.
    deleting: RefCell<HashMap<String, Deleting>>,
    loaded: Cell<bool>,
    view: std::sync::Arc<ViewHandle>,
    /// The topics of the last cluster view seen, as consumer groups assign them; rebuilt
    /// only when a new view is published.
    topics: RefCell<Option<(std::sync::Arc<ClusterView>, Rc<TopicSnapshot>)>>,
    /// When (monotonic ms) the next offset retention check is due.
    next_retention_check_ms: Cell<i64>,
    /// The `__consumer_offsets` partitions derived from this shard's groups.
    offsets_topic: OffsetsTopic,
}

impl GroupCoordinator {
    /// The coordinator of shard `shard` out of `shards`.
    pub fn new(
        shard: usize,
        shards: usize,
        storage: Storage,
        config: GroupConfig,
        view: std::sync::Arc<ViewHandle>,
    ) -> Self {
        GroupCoordinator {
            offsets_topic: OffsetsTopic::new(storage.clone(), shard, shards),
            view,
            topics: RefCell::new(None),
            shard,
            shards,
            storage,
            groups: RefCell::new(HashMap::new()),
            deleting: RefCell::new(HashMap::new()),
            loaded: Cell::new(false),
            next_retention_check_ms: Cell::new(
                monotonic_ms().saturating_add(config_check_interval(&config)),
            ),
            config,
        }
    }

    /// The `__consumer_offsets` partitions this shard serves.
    pub fn offsets_topic(&self) -> &OffsetsTopic {
        &self.offsets_topic
    }

    /// The current topics as consumer groups assign them.
    pub fn topics(&self) -> Rc<TopicSnapshot> {
        let view = self.view.load();
        let mut cached = self.topics.borrow_mut();
        match &*cached {
            Some((seen, topics)) if std::sync::Arc::ptr_eq(seen, &view) => topics.clone(),
            _ => {
                let topics = Rc::new(topic_snapshot(&view));
                *cached = Some((view, topics.clone()));
                topics
            }
        }
    }

    /// Settings of the KIP-848 group `group_id`: the broker's, with the group's own configs
    /// (IncrementalAlterConfigs on a GROUP resource) over them.
    pub fn consumer_config(&self, group_id: &str) -> ConsumerGroupConfig {
        let mut config = self.config.consumer();
        if let Some(overrides) = self.view.load().group_configs.get(group_id) {
            overrides.apply_to(&mut config);
        }
        config
    }

    /// Whether this shard coordinates `group_id`.
    pub fn owns(&self, group_id: &str) -> bool {
        coordinator_shard(group_id, self.shards) == self.shard
    }

    /// Loads every stored group this shard coordinates; requests wait for this
    /// (COORDINATOR_LOAD_IN_PROGRESS) so none sees a group half-loaded.
    pub async fn load(&self) {
        match GroupStore::list(&self.storage).await {
            Ok(ids) => {
                for id in ids.into_iter().filter(|id| self.owns(id)) {
                    if let Err(error) = self.get_or_create(&id).await {
                        tracing::error!(group = %id, ?error, "loading group");
                    }
                }
            }
            Err(error) => tracing::error!(%error, "listing stored groups"),
        }
        self.loaded.set(true);
    }

    /// Starts with no group loaded (cluster mode: a group loads from its store when it is
    /// adopted or on its first request the view routes here, never all groups of the volume).
    pub fn start_empty(&self) {
        self.loaded.set(true);
    }

    /// The ids of every group loaded or loading here.
    pub fn loaded_ids(&self) -> Vec<String> {
        self.groups.borrow().keys().cloned().collect()
    }

    /// Stops coordinating `group_id` here (cluster mode: it moved to another broker) and
    /// forgets it, so that if it comes back it is rebuilt from its store with what the other
    /// coordinator wrote.
    /// Members waiting in JoinGroup or SyncGroup are answered (COORDINATOR_NOT_AVAILABLE, so
    /// they find the new coordinator), never left hanging.
    pub async fn release(&self, group_id: &str) {
        let slot = self.groups.borrow_mut().remove(group_id);
        let group = match slot {
            Some(Slot::Ready(group)) => group,
            Some(Slot::Opening(opening)) => match opening.await {
                Ok(group) => group,
                Err(_) => return,
            },
            None => return,
        };
        group.persist_if_changed().await;
        let mut state = group.state.borrow_mut();
        if let GroupState::Classic(classic) = &mut *state {
            classic.mark_dead();
        }
    }

    /// COORDINATOR_LOAD_IN_PROGRESS until [`load`](Self::load) has finished.
    pub fn check_ready(&self) -> Result<(), ErrorCode> {
        if self.loaded.get() {
            Ok(())
        } else {
            Err(ErrorCode::CoordinatorLoadInProgress)
        }
    }

    /// The group if it exists.
    pub async fn find(&self, group_id: &str) -> Result<Option<Rc<Group>>, ErrorCode> {
        self.check_ready()?;
        let opening = match self.groups.borrow().get(group_id) {
            None => return Ok(None),
            Some(Slot::Ready(group)) => return Ok(Some(group.clone())),
            Some(Slot::Opening(opening)) => opening.clone(),
        };
        opening
            .await
            .map(Some)
            .map_err(|_| ErrorCode::CoordinatorNotAvailable)
    }

    /// The group, created (with its store) if it does not exist yet.
    pub async fn find_or_create(&self, group_id: &str) -> Result<Rc<Group>, ErrorCode> {
        self.check_ready()?;
        self.get_or_create(group_id).await
    }

    async fn get_or_create(&self, group_id: &str) -> Result<Rc<Group>, ErrorCode> {
        let opening = {
            let mut groups = self.groups.borrow_mut();
            match groups.get(group_id) {
                Some(Slot::Ready(group)) => return Ok(group.clone()),
                Some(Slot::Opening(opening)) => opening.clone(),
                None => {
                    let storage = self.storage.clone();
                    let config = self.config.clone();
                    let id = group_id.to_string();
                    let deletion = self.deleting.borrow().get(group_id).cloned();
                    let opening: Opening = async move {
                        if let Some(deletion) = deletion {
                            deletion.await;
                        }
                        let store = GroupStore::open(&storage, &id)
                            .await
                            .map_err(|e| e.to_string())?;
                        Ok(Rc::new(Group::from_store(store, &config, monotonic_ms())))
                    }
                    .boxed_local()
                    .shared();
                    groups.insert(group_id.to_string(), Slot::Opening(opening.clone()));
                    opening
                }
            }
        };
        let result = opening.await;
        let mut groups = self.groups.borrow_mut();
        match result {
            Ok(group) => {
                if matches!(groups.get(group_id), Some(Slot::Opening(_))) {
                    groups.insert(group_id.to_string(), Slot::Ready(group.clone()));
                }
                Ok(group)
            }
            Err(error) => {
                tracing::error!(group = %group_id, %error, "opening group store");
                if matches!(groups.get(group_id), Some(Slot::Opening(_))) {
                    groups.remove(group_id);
                }
                Err(ErrorCode::CoordinatorNotAvailable)
            }
        }
    }

    /// Every loaded group.
    pub fn groups(&self) -> Vec<Rc<Group>> {
        self.groups
            .borrow()
            .values()
            .filter_map(|slot| match slot {
                Slot::Ready(group) => Some(group.clone()),
                Slot::Opening(_) => None,
            })
            .collect()
    }

    /// DeleteGroups for one group: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or deleted with its
    /// offsets.
    pub async fn delete(&self, group_id: &str) -> ErrorCode {
        let group = match self.find(group_id).await {
            Ok(Some(group)) => group,
            Ok(None) => return ErrorCode::GroupIdNotFound,
            Err(error) => return error,
        };
        if !group.has_no_members() {
            return ErrorCode::NonEmptyGroup;
        }
        self.drop_group(&group).await
    }

    async fn drop_group(&self, group: &Rc<Group>) -> ErrorCode {
        if let GroupState::Classic(classic) = &mut *group.state.borrow_mut() {
            classic.mark_dead();
        }
        {
            let mut groups = self.groups.borrow_mut();
            if matches!(groups.get(&group.id), Some(Slot::Ready(current)) if Rc::ptr_eq(current, group))
            {
                groups.remove(&group.id);
            }
        }
        let store = group.store.clone();
        let id = group.id.clone();
        let outcome = Rc::new(Cell::new(ErrorCode::None));
        let deletion: Deleting = {
            let outcome = outcome.clone();
            async move {
                if let Err(error) = store.delete().await {
                    tracing::error!(group = %id, %error, "deleting group store");
                    outcome.set(ErrorCode::KafkaStorageError);
                }
            }
            .boxed_local()
            .shared()
        };
        self.deleting
            .borrow_mut()
            .insert(group.id.clone(), deletion.clone());
        deletion.clone().await;
        let mut deleting = self.deleting.borrow_mut();
        if deleting.get(&group.id).is_some_and(|d| d.ptr_eq(&deletion)) {
            deleting.remove(&group.id);
        }
        outcome.get()
    }

    /// A topic was deleted: its offsets go from every group.
    pub async fn remove_topic(&self, topic: &str) {
        for group in self.groups() {
            if let Err(error) = group.store.remove_topic(topic).await {
                tracing::error!(group = %group.id, %error, "removing offsets of a deleted topic");
            }
        }
    }

    /// Runs every group's deadlines, and the offset retention check when it is due.
    pub async fn tick(&self, now_ms: i64) {
        let mut topics = None;
        for group in self.groups() {
            let due = {
                let mut state = group.state.borrow_mut();
                match &mut *state {
                    GroupState::Classic(classic) => {
                        let due = classic.next_deadline().is_some_and(|at| at <= now_ms);
                        if due {
                            classic.tick(&self.config.classic, now_ms);
                        }
                        due
                    }
                    GroupState::Consumer(consumer) => {
                        let due = consumer.next_deadline().is_some_and(|at| at <= now_ms);
                        if due {
                            let topics = topics.get_or_insert_with(|| self.topics());
                            if consumer.expire(topics, &self.consumer_config(&group.id), now_ms) {
                                group.mark_consumer_changed();
                            }
                        }
                        due
                    }
                }
            };
            if due {
                group.persist_if_changed().await;
            }
        }
        if now_ms >= self.next_retention_check_ms.get() {
            self.next_retention_check_ms
                .set(now_ms.saturating_add(config_check_interval(&self.config)));
            self.expire_offsets(wall_ms()).await;
        }
        // In cluster mode every broker would serve all 50 partitions from the same files; until
        // the assignment places them, `__consumer_offsets` is served by standalone brokers only.
        let view = self.view.load();
        if self.loaded.get() && !view.cluster_mode {
            self.offsets_topic.sync(&self.groups(), &view).await;
        }
    }

    /// Kafka's group metadata clean-up at wall-clock `now_ms`: expired offsets are removed
    /// (written to the group's store before they leave memory), then every group with
    /// neither members nor offsets is deleted with its store. Returns how many offsets and
    /// groups were removed.
    pub async fn expire_offsets(&self, now_ms: i64) -> (usize, usize) {
        let retention_ms = self.config.offsets_retention_ms;
        let (mut offsets_removed, mut groups_removed) = (0, 0);
        for group in self.groups() {
            let expired = {
                let _busy = group.busy();
                let offsets = group.store.offsets();
                let expired =
                    expired_offsets(&group.state.borrow(), &offsets, now_ms, retention_ms);
                if !expired.is_empty() {
                    let changes = expired
                        .iter()
                        .map(|(topic, partition)| GroupChange::DeleteOffset {
                            topic: topic.clone(),
                            partition: *partition,
                        })
                        .collect();
                    if let Err(error) = group.store.apply(changes).await {
                        tracing::error!(group = %group.id, %error, "removing expired offsets");
                        continue;
                    }
                }
                expired.len()
            };
            if expired > 0 {
                tracing::info!(group = %group.id, offsets = expired, "removed expired offsets");
                offsets_removed += expired;
            }
            if group.is_unused() && self.drop_group(&group).await == ErrorCode::None {
                tracing::info!(group = %group.id, "removed a group with neither members nor offsets");
                groups_removed += 1;
            }
        }
        (offsets_removed, groups_removed)
    }

    /// Ticks every group until the coordinator is dropped.
    pub fn spawn_ticker(self: &Rc<Self>) -> glommio::task::JoinHandle<()> {
        let this = Rc::downgrade(self);
        glommio::spawn_local(async move {
            loop {
                glommio::timer::sleep(TICK).await;
                let Some(this) = this.upgrade() else { return };
                this.tick(monotonic_ms()).await;
            }
        })
        .detach()
    }
}

/// The retention check interval, at least one tick.
fn config_check_interval(config: &GroupConfig) -> i64 {
    config
        .offsets_retention_check_interval_ms
        .max(TICK.as_millis() as i64)
}
