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
//!
//! In cluster mode a store opens at a storage-fence epoch (its `__consumer_offsets`
//! partition's leader epoch plus one: [`crate::model::fence_epoch`]), so a coordinator that lost the
//! group while it was paused cannot acknowledge anything once the new one has claimed it: its
//! next flush fails with `EngineError::Fenced`, the request is answered NOT_COORDINATOR, and
//! the group is released here (by the next request that finds it, or the next tick).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::{FutureExt, LocalBoxFuture, Shared};
use kaas_engine::group_store::{GroupChange, GroupStore};
use kaas_engine::{EngineError, Storage};

use crate::groups::clock::{monotonic_ms, wall_ms};
use crate::groups::config::GroupConfig;
use crate::groups::consumer_group::{ConsumerGroupConfig, TopicSnapshot};
use crate::groups::group::{topic_snapshot, Group, GroupState};
use crate::groups::offset_retention::expired_offsets;
use crate::groups::offsets_topic::{self, OffsetsTopic};
use crate::groups::placement::coordinator_shard;
use crate::model::cluster_view::{ClusterView, ViewHandle};
use crate::model::fence_epoch::group_fence_epoch;
use crate::protocol::ErrorCode;

/// How often deadlines (sessions, join phases) are checked.
const TICK: Duration = Duration::from_millis(50);

type Opening = Shared<LocalBoxFuture<'static, Result<Rc<Group>, OpenFailure>>>;

/// Why a group store did not open: the code to answer and the cause, for the log.
#[derive(Clone, Debug)]
struct OpenFailure {
    code: ErrorCode,
    reason: String,
}

impl OpenFailure {
    fn of(error: &EngineError) -> Self {
        OpenFailure {
            code: store_error_code(error),
            reason: error.to_string(),
        }
    }
}

/// The code for a failed store operation: NOT_COORDINATOR when a newer coordinator claimed
/// the group on the volume (the client looks the coordinator up again), else
/// COORDINATOR_NOT_AVAILABLE.
pub fn store_error_code(error: &EngineError) -> ErrorCode {
    match error {
        EngineError::Fenced { .. } => ErrorCode::NotCoordinator,
        _ => ErrorCode::CoordinatorNotAvailable,
    }
}
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
    /// Cluster mode: a group not loaded yet is loaded from its store by the first request
    /// that looks it up, so a group that moved here keeps its offsets and members.
    loads_on_demand: Cell<bool>,
    view: std::sync::Arc<ViewHandle>,
    /// The topics of the last cluster view seen, as consumer groups assign them; rebuilt
    /// only when a new view is published.
    topics: RefCell<Option<(std::sync::Arc<ClusterView>, Rc<TopicSnapshot>)>>,
    /// The assignment whose groups were last loaded for `__consumer_offsets` (cluster mode).
    groups_loaded_for: RefCell<Option<std::sync::Arc<kaas_cluster::view::ClusterView>>>,
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
            loads_on_demand: Cell::new(false),
            groups_loaded_for: RefCell::new(None),
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
        self.loads_on_demand.set(true);
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

    /// Forgets `group` if its store has been fenced (a newer coordinator claimed it): waiting
    /// members are answered and later requests load it again, which a newer claim refuses.
    /// Returns NOT_COORDINATOR then.
    fn forget_if_fenced(&self, group: &Rc<Group>) -> Result<(), ErrorCode> {
        if !group.store.is_fenced() {
            return Ok(());
        }
        tracing::warn!(group = %group.id, "fenced by a newer coordinator's claim: releasing the group");
        {
            let mut groups = self.groups.borrow_mut();
            if matches!(groups.get(&group.id), Some(Slot::Ready(current)) if Rc::ptr_eq(current, group))
            {
                groups.remove(&group.id);
            }
        }
        if let GroupState::Classic(classic) = &mut *group.state.borrow_mut() {
            classic.mark_dead();
        }
        Err(ErrorCode::NotCoordinator)
    }

    /// The fence epoch `group_id`'s store opened now opens at: 0 in standalone mode, in
    /// cluster mode the one the followed assignment gives it (its `__consumer_offsets`
    /// partition's, see [`crate::model::fence_epoch`]; none before the first assignment).
    fn fence_epoch_now(&self, group_id: &str) -> Result<u32, OpenFailure> {
        let view = self.view.load();
        if !view.is_cluster() {
            return Ok(0);
        }
        let group = kaas_cluster::ids::GroupId::new(group_id);
        let cluster = view.cluster.as_ref();
        cluster
            .and_then(|cluster| group_fence_epoch(cluster, &group))
            .ok_or_else(|| OpenFailure {
                code: ErrorCode::NotCoordinator,
                reason: format!(
                    "assignment version {:?} gives group {group_id} no fence epoch",
                    cluster.map(|c| c.assignment_version())
                ),
            })
    }

    /// COORDINATOR_LOAD_IN_PROGRESS until [`load`](Self::load) has finished.
    pub fn check_ready(&self) -> Result<(), ErrorCode> {
        if self.loaded.get() {
            Ok(())
        } else {
            Err(ErrorCode::CoordinatorLoadInProgress)
        }
    }

    /// The group if it exists. In cluster mode a group that is not loaded but has a store on
    /// the volume (it moved here, or was never touched since start-up) is loaded first, as
    /// Kafka's new coordinator loads a group before it answers for it: a member that
    /// committed on the previous coordinator is known here, never GROUP_ID_NOT_FOUND.
    pub async fn find(&self, group_id: &str) -> Result<Option<Rc<Group>>, ErrorCode> {
        self.check_ready()?;
        let loaded = self.groups.borrow().contains_key(group_id);
        if !loaded {
            return self.load_if_stored(group_id).await;
        }
        let opening = match self.groups.borrow().get(group_id) {
            None => return Ok(None),
            Some(Slot::Ready(group)) => Ok(group.clone()),
            Some(Slot::Opening(opening)) => Err(opening.clone()),
        };
        let group = match opening {
            Ok(group) => group,
            Err(opening) => opening.await.map_err(|failure| failure.code)?,
        };
        self.forget_if_fenced(&group)?;
        Ok(Some(group))
    }

    /// Cluster mode: loads `group_id` from its store if it has one (None otherwise, and
    /// always None in standalone mode, where [`load`](Self::load) loaded every stored group).
    async fn load_if_stored(&self, group_id: &str) -> Result<Option<Rc<Group>>, ErrorCode> {
        if !self.loads_on_demand.get() || self.deleting.borrow().contains_key(group_id) {
            return Ok(None);
        }
        match crate::groups::stored::has_store(&self.storage, group_id).await {
            Ok(true) => {}
            Ok(false) => return Ok(None),
            Err(error) => {
                tracing::error!(group = %group_id, %error, "looking for a group store");
                return Err(store_error_code(&error));
            }
        }
        // Deleted while the directory was read: gone, not to be recreated empty.
        let loaded = self.groups.borrow().contains_key(group_id);
        if !loaded && self.deleting.borrow().contains_key(group_id) {
            return Ok(None);
        }
        self.get_or_create(group_id).await.map(Some)
    }

    /// The group, created (with its store) if it does not exist yet.
    pub async fn find_or_create(&self, group_id: &str) -> Result<Rc<Group>, ErrorCode> {
        self.check_ready()?;
        self.get_or_create(group_id).await
    }

    async fn get_or_create(&self, group_id: &str) -> Result<Rc<Group>, ErrorCode> {
        let ready = match self.groups.borrow().get(group_id) {
            Some(Slot::Ready(group)) => Some(group.clone()),
            _ => None,
        };
        if let Some(group) = ready {
            self.forget_if_fenced(&group)?;
            return Ok(group);
        }
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
                    // Read now, not when the open runs: the version under which the request
                    // (or the adoption) reached this coordinator.
                    let fence_epoch = self.fence_epoch_now(group_id);
                    let opening: Opening = async move {
                        if let Some(deletion) = deletion {
                            deletion.await;
                        }
                        let store = GroupStore::open_at_epoch(&storage, &id, fence_epoch?)
                            .await
                            .map_err(|e| OpenFailure::of(&e))?;
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
            Err(failure) => {
                tracing::error!(group = %group_id, reason = %failure.reason, "opening group store");
                if matches!(groups.get(group_id), Some(Slot::Opening(_))) {
                    groups.remove(group_id);
                }
                Err(failure.code)
            }
        }
    }

    /// Cluster mode: loads every group with a store on the volume that this shard
    /// coordinates and `placed_here` accepts (the view gives it to this broker), so that
    /// ListGroups lists the groups this broker coordinates, loaded or not, as Kafka's
    /// coordinator lists every group of the `__consumer_offsets` partitions it has loaded.
    /// A group that fails to load (a newer coordinator's claim, a store error) is logged and
    /// left out; failing to list the volume is the request's error. Standalone mode loaded
    /// every group at start-up: nothing to do.
    pub async fn load_stored_groups(
        &self,
        placed_here: impl Fn(&str) -> bool,
    ) -> Result<(), ErrorCode> {
        self.check_ready()?;
        if !self.loads_on_demand.get() {
            return Ok(());
        }
        let ids = GroupStore::list(&self.storage).await.map_err(|error| {
            tracing::error!(%error, "listing stored groups");
            store_error_code(&error)
        })?;
        for id in ids {
            // One still opening (an AdoptGroup, another request) is waited for: listed once
            // it is loaded, as every other.
            let ready = matches!(self.groups.borrow().get(&id), Some(Slot::Ready(_)));
            if ready || !self.owns(&id) || !placed_here(&id) {
                continue;
            }
            if let Err(code) = self.find(&id).await {
                tracing::warn!(group = %id, ?code, "stored group not loaded for ListGroups");
            }
        }
        Ok(())
    }

    /// Cluster mode: once per new view, loads every stored group the view places on this
    /// shard, so that the `__consumer_offsets` partitions this broker leads hold every group
    /// of theirs (a group that moved here is served before any member's request reaches it).
    async fn load_groups_placed_here(&self, view: &std::sync::Arc<ClusterView>) {
        let Some(cluster) = view.cluster.as_ref().filter(|_| view.is_cluster()) else {
            return;
        };
        let seen = self.groups_loaded_for.borrow().clone();
        if seen.is_some_and(|seen| std::sync::Arc::ptr_eq(&seen, cluster)) {
            return;
        }
        *self.groups_loaded_for.borrow_mut() = Some(cluster.clone());
        let me = cluster.this_broker();
        let placed_here = |group: &str| {
            cluster.coordinator_of(&kaas_cluster::ids::GroupId::new(group)) == Some(me)
        };
        if let Err(code) = self.load_stored_groups(placed_here).await {
            tracing::warn!(?code, "loading the groups this broker coordinates");
            *self.groups_loaded_for.borrow_mut() = None;
        }
    }

    /// The groups of `__consumer_offsets` partition `partition` that this shard
    /// coordinates (what a transaction marker written to that partition applies to). In
    /// cluster mode the stored groups the view places on this broker are loaded first, so a
    /// group that moved here is not missed. NOT_COORDINATOR when another shard serves the
    /// partition, or another broker leads it; COORDINATOR_LOAD_IN_PROGRESS before
    /// [`load`](Self::load) has finished.
    pub async fn groups_of_offsets_partition(
        &self,
        partition: i32,
    ) -> Result<Vec<Rc<Group>>, ErrorCode> {
        self.check_ready()?;
        if offsets_topic::shard_of_partition(partition, self.shards) != self.shard {
            return Err(ErrorCode::NotCoordinator);
        }
        let view = self.view.load();
        if view.is_cluster() {
            let led_elsewhere = offsets_topic::is_served(&view)
                && !matches!(
                    offsets_topic::leadership(&view, partition),
                    crate::model::cluster_view::Leadership::Here { .. }
                );
            if view.cluster.is_none() || led_elsewhere {
                return Err(ErrorCode::NotCoordinator);
            }
            self.load_groups_placed_here(&view).await;
        }
        Ok(self
            .groups()
            .into_iter()
            .filter(|group| offsets_topic::partition_for(&group.id) == partition)
            .collect())
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
                    outcome.set(match error {
                        EngineError::Fenced { .. } => ErrorCode::NotCoordinator,
                        _ => ErrorCode::KafkaStorageError,
                    });
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
            if self.forget_if_fenced(&group).is_err() {
                continue;
            }
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
        let view = self.view.load();
        if self.loaded.get() && offsets_topic::is_served(&view) {
            self.load_groups_placed_here(&view).await;
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
                let mut expired =
                    expired_offsets(&group.state.borrow(), &offsets, now_ms, retention_ms);
                // Kafka does not expire an offset while a transaction has a pending one for
                // its partition.
                expired.retain(|(topic, partition)| {
                    !group.store.has_pending_offset(topic, *partition)
                });
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
        kaas_engine::periodic::spawn_every(Rc::downgrade(self), TICK, |this: Rc<Self>| async move {
            this.tick(monotonic_ms()).await;
        })
    }
}

/// The retention check interval, at least one tick.
fn config_check_interval(config: &GroupConfig) -> i64 {
    config
        .offsets_retention_check_interval_ms
        .max(TICK.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kaas_cluster::assignment::Assignment;
    use kaas_cluster::ids::BrokerId;

    use super::*;
    use crate::groups::offsets::{commit, Committer, OffsetToCommit};
    use crate::model::topic_config::TopicDefaults;

    /// A one-broker, one-topic cluster view at assignment `version`, this broker coordinating
    /// group `g`.
    fn cluster_view(version: u64) -> ClusterView {
        let text = format!(
            r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
                "brokers": [{{"id": 0, "host": "127.0.0.1", "port": 9092}}],
                "topics": {{"t": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 1}}}},
                "partitions": {{"t": [{{"leader": 0, "leader_epoch": 0}}]}},
                "consumerGroups": {{"g": 0}}}}"#
        );
        let assignment = Assignment::from_json(text.as_bytes()).expect("valid");
        let view = kaas_cluster::view::ClusterView::new(&assignment, BrokerId(0), 1);
        ClusterView::of_assignment("c".into(), Arc::new(view), &TopicDefaults::default())
    }

    async fn commit_offset(
        coordinator: &GroupCoordinator,
        view: &ClusterView,
        offset: i64,
    ) -> ErrorCode {
        let committer = Committer {
            member_id: String::new(),
            group_instance_id: None,
            generation_or_epoch: -1,
            api_version: 8,
        };
        let offsets = vec![OffsetToCommit {
            topic: "t".into(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: None,
        }];
        commit(coordinator, view, "g", committer, offsets, 1).await[0]
    }

    #[test]
    fn a_store_claimed_by_a_newer_coordinator_answers_not_coordinator_and_is_released() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let storage = Storage::memory();
                let handle = Arc::new(ViewHandle::new(cluster_view(4)));
                let coordinator = GroupCoordinator::new(
                    0,
                    1,
                    storage.clone(),
                    GroupConfig::default(),
                    handle.clone(),
                );
                coordinator.start_empty();
                let view = handle.load();
                assert_eq!(
                    commit_offset(&coordinator, &view, 10).await,
                    ErrorCode::None
                );
                let group = coordinator.find("g").await.expect("ready").expect("loaded");
                assert_eq!(
                    group.store.fence_epoch(),
                    5,
                    "assignment version 4, plus one"
                );

                // Another broker adopts the group under assignment 6 while this one still
                // believes it coordinates it.
                let newer = GroupStore::open_at_epoch(&storage, "g", 7)
                    .await
                    .expect("takeover");
                assert_eq!(newer.offset("t", 0).map(|c| c.offset), Some(10));

                assert_eq!(
                    commit_offset(&coordinator, &view, 99).await,
                    ErrorCode::NotCoordinator,
                    "a stale coordinator's commit is refused, not acknowledged"
                );
                assert!(coordinator
                    .find("g")
                    .await
                    .is_err_and(|e| e == ErrorCode::NotCoordinator));
                assert!(coordinator.loaded_ids().is_empty(), "released");
                // Loading it again under the old version meets the newer claim.
                assert_eq!(
                    coordinator.find_or_create("g").await.err(),
                    Some(ErrorCode::NotCoordinator)
                );
                drop(newer);
                let reread = GroupStore::open_at_epoch(&storage, "g", 7)
                    .await
                    .expect("reopen");
                assert_eq!(reread.offset("t", 0).map(|c| c.offset), Some(10));
            })
            .expect("executor")
            .join()
            .expect("join");
    }

    #[test]
    fn a_group_that_moved_here_is_loaded_by_its_first_lookup_and_a_missing_one_is_not_created() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let storage = Storage::memory();
                let before = Arc::new(ViewHandle::new(cluster_view(4)));
                let previous =
                    GroupCoordinator::new(0, 1, storage.clone(), GroupConfig::default(), before);
                previous.start_empty();
                let view = cluster_view(4);
                assert_eq!(commit_offset(&previous, &view, 10).await, ErrorCode::None);

                // The new coordinator, on the same volume, never adopted the group.
                let after = Arc::new(ViewHandle::new(cluster_view(6)));
                let next =
                    GroupCoordinator::new(0, 1, storage.clone(), GroupConfig::default(), after);
                next.start_empty();
                let group = next
                    .find("g")
                    .await
                    .expect("ready")
                    .expect("loaded from its store");
                assert_eq!(group.store.offset("t", 0).map(|c| c.offset), Some(10));
                assert_eq!(group.store.fence_epoch(), 7, "claimed at the new version");
                assert!(next.find("never-stored").await.expect("ready").is_none());
                assert!(
                    !crate::groups::stored::has_store(&storage, "never-stored")
                        .await
                        .expect("list"),
                    "a lookup creates nothing"
                );
            })
            .expect("executor")
            .join()
            .expect("join");
    }

    #[test]
    fn standalone_stores_open_unfenced() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let storage = Storage::memory();
                let handle = Arc::new(ViewHandle::new(ClusterView::default()));
                let coordinator =
                    GroupCoordinator::new(0, 1, storage, GroupConfig::default(), handle);
                coordinator.start_empty();
                let group = coordinator.find_or_create("g").await.expect("created");
                assert_eq!(group.store.fence_epoch(), 0);
            })
            .expect("executor")
            .join()
            .expect("join");
    }
}
