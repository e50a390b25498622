//! A standalone broker's controller: it keeps the broker's topics in `__cluster/topics.json`
//! ([`crate::topics::topic_store`]) and serves the [`TopicChange`]s its shard 0 sends over the
//! [`TopicChangeLink`](crate::topics::topic_change_link::TopicChangeLink), as the cluster
//! core's KafkaTopic service serves a cluster broker's, one change at a time on shard 0.
//!
//! Each change is written to the topic store first, then applied as the next version of the
//! broker's own one-broker assignment ([`crate::topics::local_assignment`]): the new view is
//! published and partitions are opened and closed by command, as a cluster broker follows
//! its controller's (changed configs reach open partitions that way too); then a deletion's
//! rest is done (the partitions' files removed, the topic's offsets dropped from its groups),
//! and only then is the change answered. So an acknowledged change survives a crash, and a crash
//! midway leaves at worst orphaned partition directories of a deleted topic, which are removed
//! when the topic is deleted again or recreated. [`LocalController::start`] applies the stored
//! topics at start-up.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use kaas_cluster::ids::{BrokerId, TopicName};
use kaas_cluster::topic_change::{
    codes, TopicChange, TopicChangeAnswer, TopicChangeRefusal, TopicChangeRequest,
};
use kaas_engine::log_manager::topic_dir;
use kaas_engine::{PartitionId, Storage};

use crate::model::cluster_view::ClusterView;
use crate::model::group_configs::GroupConfigOverrides;
use crate::model::local_assignment::LocalBroker;
use crate::model::topic_config::{InvalidConfig, TopicConfig};
use crate::protocol::ErrorCode;
use crate::shard::takeover_driver::AssignmentFollower;
use crate::shard::Shard;
use crate::topics::checks::TopicError;
use crate::topics::topic_store::{self, TopicRecord, TopicsFile};

/// Keeps the topic store and applies it.
pub struct LocalController {
    storage: Storage,
    file: RefCell<TopicsFile>,
    broker: LocalBroker,
    /// Applies the local assignment; taken out while a change applies it.
    follower: RefCell<Option<AssignmentFollower>>,
    /// The version of the last local assignment applied.
    version: Cell<u64>,
}

impl LocalController {
    /// A controller over the loaded topic store of broker `broker`.
    pub fn new(storage: Storage, file: TopicsFile, broker: LocalBroker) -> Self {
        let follower = AssignmentFollower::new(BrokerId(broker.id));
        LocalController {
            storage,
            file: RefCell::new(file),
            broker,
            follower: RefCell::new(Some(follower)),
            version: Cell::new(0),
        }
    }

    /// Publishes the stored topics as the view and opens every partition (start-up, before
    /// [`Self::serve`]).
    pub async fn start(&self, shard: &Rc<Shard>) -> Result<(), TopicError> {
        let file = self.file.borrow().clone();
        self.apply(shard, &file).await
    }

    /// Serves `requests` one at a time until every sender is gone (shut-down).
    pub async fn serve(
        self,
        shard: Rc<Shard>,
        requests: async_channel::Receiver<TopicChangeRequest>,
    ) {
        while let Ok(request) = requests.recv().await {
            let answer = self.carry_out(&shard, &request.change).await;
            if let Err(refusal) = &answer {
                tracing::debug!(change = ?request.change, code = refusal.code, message = %refusal.message, "topic change refused");
            }
            request.answer(answer);
        }
    }

    /// Carries out one change (checked by the broker already, against the view this
    /// controller published: only what may have changed since is checked again).
    async fn carry_out(&self, shard: &Rc<Shard>, change: &TopicChange) -> TopicChangeAnswer {
        let mut next = self.file.borrow().clone();
        match change {
            TopicChange::Create {
                topic,
                partitions,
                topic_id,
                configs,
            } => {
                if find(&next, topic).is_some() {
                    return Err(TopicChangeRefusal::new(
                        codes::TOPIC_ALREADY_EXISTS,
                        format!("Topic '{topic}' already exists."),
                    ));
                }
                let configs = TopicConfig::from_pairs(
                    configs
                        .iter()
                        .map(|(name, value)| (name.as_str(), Some(value.as_str()))),
                )
                .map_err(invalid_config)?;
                // Leftovers of an earlier topic with this name (a crash during its deletion)
                // go first.
                self.remove_partition_dirs(shard, topic.as_str()).await;
                next.topics.push(TopicRecord {
                    name: topic.as_str().to_string(),
                    // Kafka's text form.
                    id: topic_id.to_string(),
                    partitions: *partitions,
                    configs,
                });
                self.commit(shard, next).await
            }
            TopicChange::Delete { topic } => {
                let position = find(&next, topic).ok_or_else(|| unknown(topic))?;
                next.topics.remove(position);
                self.commit(shard, next).await?;
                self.remove_partition_dirs(shard, topic.as_str()).await;
                let topic = topic.as_str().to_string();
                shard
                    .router
                    .broadcast(shard, move |target| {
                        let topic = topic.clone();
                        async move { target.groups.remove_topic(&topic).await }
                    })
                    .await;
                Ok(())
            }
            TopicChange::AddPartitions { topic, count } => {
                let position = find(&next, topic).ok_or_else(|| unknown(topic))?;
                let record = &mut next.topics[position];
                if *count <= record.partitions {
                    return Err(TopicChangeRefusal::new(
                        codes::INVALID_PARTITIONS,
                        format!(
                            "Topic currently has {} partitions, which is higher than or equal to the requested {count}.",
                            record.partitions
                        ),
                    ));
                }
                record.partitions = *count;
                self.commit(shard, next).await
            }
            TopicChange::AlterConfigs { topic, configs } => {
                let position = find(&next, topic).ok_or_else(|| unknown(topic))?;
                let record = &mut next.topics[position];
                for (name, value) in configs {
                    match value {
                        Some(value) => record.configs.set(name, value),
                        None => record.configs.delete(name),
                    }
                    .map_err(invalid_config)?;
                }
                record.configs.check_combination().map_err(invalid_config)?;
                self.commit(shard, next).await
            }
            TopicChange::ReplaceConfigs { topic, configs } => {
                let position = find(&next, topic).ok_or_else(|| unknown(topic))?;
                next.topics[position].configs = TopicConfig::from_pairs(
                    configs
                        .iter()
                        .map(|(name, value)| (name.as_str(), Some(value.as_str()))),
                )
                .map_err(invalid_config)?;
                self.commit(shard, next).await
            }
            TopicChange::ReplaceGroupConfigs { group, configs } => {
                next.group_configs.remove(group);
                if !configs.is_empty() {
                    next.group_configs.insert(
                        group.clone(),
                        GroupConfigOverrides::from_checked(configs.clone()),
                    );
                }
                self.commit(shard, next).await
            }
        }
    }

    /// Persists `next`, then applies it.
    async fn commit(&self, shard: &Rc<Shard>, next: TopicsFile) -> TopicChangeAnswer {
        topic_store::save(&self.storage, &next)
            .await
            .map_err(|e| TopicChangeRefusal::new(codes::KAFKA_STORAGE_ERROR, e.to_string()))?;
        *self.file.borrow_mut() = next.clone();
        self.apply(shard, &next)
            .await
            .map_err(|e| TopicChangeRefusal::new(e.code.code(), e.message))
    }

    /// Publishes the view of the stored topics (start-up, before the groups load; the
    /// partitions open with [`Self::start`]).
    pub fn publish_stored(&self, shard: &Rc<Shard>) -> Result<(), TopicError> {
        let file = self.file.borrow().clone();
        let view = self.view_of(shard, &file, self.version.get())?;
        shard.view.publish(view);
        Ok(())
    }

    /// Applies `file` as the next version of the local assignment: publishes its view, then
    /// opens and closes partitions by command.
    async fn apply(&self, shard: &Rc<Shard>, file: &TopicsFile) -> Result<(), TopicError> {
        let version = self.version.get() + 1;
        let published = self.view_of(shard, file, version)?;
        let Some(view) = published.cluster.clone() else {
            return Err(TopicError::new(
                ErrorCode::UnknownServerError,
                "a standalone view without its assignment",
            ));
        };
        let Some(mut follower) = self.follower.borrow_mut().take() else {
            return Err(TopicError::new(
                ErrorCode::UnknownServerError,
                "a topic change is being applied already",
            ));
        };
        // Deleted topics' files are removed by the change that deleted them, once this
        // returns (`topics/<topic>/`: the next topic of that name uses the same directory).
        let _deleted = follower.apply(shard, view, published).await;
        *self.follower.borrow_mut() = Some(follower);
        self.version.set(version);
        Ok(())
    }

    /// The view of `file` as version `version` of the local assignment.
    fn view_of(
        &self,
        shard: &Shard,
        file: &TopicsFile,
        version: u64,
    ) -> Result<ClusterView, TopicError> {
        let defaults = &shard.config.topic_defaults;
        let topics = file
            .topics
            .iter()
            .map(|record| record.to_info(defaults))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TopicError::new(ErrorCode::UnknownServerError, e.to_string()))?;
        let mut view = ClusterView::standalone(
            file.cluster_id.clone(),
            shard.router.shards(),
            &topics,
            &self.broker,
            version,
            defaults,
        )
        .map_err(|e| TopicError::new(ErrorCode::UnknownServerError, e.to_string()))?;
        view.group_configs = Arc::new(file.group_configs.clone());
        Ok(view)
    }

    /// Closes and removes every partition directory of `name` on every shard, then the topic
    /// directory itself.
    async fn remove_partition_dirs(&self, shard: &Rc<Shard>, name: &str) {
        let topic: Arc<str> = name.into();
        let listing = self
            .storage
            .list_dir(&topic_dir(name))
            .await
            .unwrap_or_default();
        let partitions: Vec<i32> = listing.iter().filter_map(|n| n.parse().ok()).collect();
        if partitions.is_empty() {
            return;
        }
        shard
            .router
            .broadcast(shard, move |target| {
                let topic = topic.clone();
                let partitions = partitions.clone();
                async move {
                    for partition in partitions {
                        let id = PartitionId::new(topic.clone(), partition);
                        let owner = target.view.load().owner_shard(&topic, partition);
                        if owner == target.index {
                            if let Err(error) = target.logs.delete(&id).await {
                                tracing::error!(partition = %id, %error, "deleting partition");
                            }
                        }
                    }
                    target
                        .metrics
                        .set_partitions_open(target.logs.open_partitions().len());
                }
            })
            .await;
        if let Err(error) = shard.logs.remove_topic_dir(name).await {
            tracing::error!(topic = name, %error, "removing topic directory");
        }
    }
}

/// The position of `topic` in `file`.
fn find(file: &TopicsFile, topic: &TopicName) -> Option<usize> {
    file.topics.iter().position(|t| t.name == topic.as_str())
}

fn unknown(topic: &TopicName) -> TopicChangeRefusal {
    TopicChangeRefusal::new(
        codes::UNKNOWN_TOPIC_OR_PARTITION,
        format!("This server does not host this topic: {topic}"),
    )
}

fn invalid_config(error: InvalidConfig) -> TopicChangeRefusal {
    TopicChangeRefusal::new(codes::INVALID_CONFIG, error.0)
}
