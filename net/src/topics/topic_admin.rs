//! Topic changes: create, delete, add partitions, alter topic and group configs.
//!
//! Runs on shard 0 only, one change at a time. Each change is written to the topic store
//! first, then published as a new cluster view, then applied to the shards (configs pushed to
//! open logs, deleted partitions closed and removed) — so an acknowledged change survives a
//! crash, and a crash midway leaves at worst orphaned partition directories of a deleted
//! topic, which are removed when the topic is deleted again or recreated.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use glommio::sync::Semaphore;
use kaas_engine::log_manager::topic_dir;
use kaas_engine::{PartitionId, Storage};

use crate::model::cluster_view::{ClusterView, TopicInfo};
use crate::model::group_configs::GroupConfigOverrides;
use crate::model::topic_config::{InvalidConfig, TopicConfig};
use crate::model::uuid_text::{parse_topic_id, random_uuid, topic_id_text};
use crate::protocol::{ErrorCode, Uuid};
use crate::shard::Shard;
use crate::topics::replica_assignment::{check_replicas, check_topic_assignment};
use crate::topics::topic_store::{self, TopicRecord, TopicsFile};

/// A refused topic change: the Kafka error code and a message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicError {
    /// Error code to answer with.
    pub code: ErrorCode,
    /// Human-readable reason.
    pub message: String,
}

impl TopicError {
    /// A refusal with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        TopicError {
            code,
            message: message.into(),
        }
    }
}

impl From<InvalidConfig> for TopicError {
    fn from(error: InvalidConfig) -> Self {
        TopicError::new(ErrorCode::InvalidConfig, error.0)
    }
}

/// Largest partition count accepted for one topic.
pub const MAX_PARTITIONS: i32 = 100_000;

/// A topic as CreateTopics asks for it, checked in Kafka's order by [`TopicAdmin::create_topic`].
#[derive(Debug, Clone)]
pub struct NewTopic {
    /// Topic name.
    pub name: String,
    /// Partition count, -1 for the broker's default.
    pub num_partitions: i32,
    /// Replication factor, -1 for the default.
    pub replication_factor: i16,
    /// Manual assignment: (partition index, replica broker ids).
    pub assignments: Vec<(i32, Vec<i32>)>,
    /// Configs as (name, value).
    pub configs: Vec<(String, Option<String>)>,
}

/// Serialises topic changes and keeps the topic store.
pub struct TopicAdmin {
    storage: Storage,
    file: RefCell<TopicsFile>,
    lock: Semaphore,
}

impl TopicAdmin {
    /// An admin over the loaded topic store.
    pub fn new(storage: Storage, file: TopicsFile) -> Self {
        TopicAdmin {
            storage,
            file: RefCell::new(file),
            lock: Semaphore::new(1),
        }
    }

    /// Topic changes run one at a time.
    async fn one_change_at_a_time(&self) -> Result<glommio::sync::Permit<'_>, TopicError> {
        self.lock
            .acquire_permit(1)
            .await
            .map_err(|_| shutting_down())
    }

    /// Checks a topic name as Kafka does.
    pub fn validate_name(name: &str) -> Result<(), TopicError> {
        if kaas_cluster::ids::TopicName::new(name).is_ok() {
            Ok(())
        } else {
            Err(TopicError::new(
                ErrorCode::InvalidTopicException,
                format!("Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-', is empty, '.', '..' or longer than 249 characters"),
            ))
        }
    }

    /// Creates a topic from a CreateTopics request, checking as Kafka does: the name, then
    /// whether it exists (TOPIC_ALREADY_EXISTS before anything else, which Kafka Connect
    /// relies on at start-up), then partitions, assignment and replication factor, then configs.
    pub async fn create_topic(
        &self,
        shard: &Rc<Shard>,
        topic: NewTopic,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, TopicError> {
        Self::validate_name(&topic.name)?;
        if self.exists(&topic.name) {
            return Err(already_exists(&topic.name));
        }
        let (partitions, config) = check_new_topic(
            &topic,
            shard.config.default_partitions,
            &[shard.config.node_id],
        )?;
        self.create(shard, &topic.name, partitions, config, validate_only)
            .await
    }

    fn exists(&self, name: &str) -> bool {
        self.file.borrow().topics.iter().any(|t| t.name == name)
    }

    /// Creates a topic (or, with `validate_only`, checks that it could be created).
    pub async fn create(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        partitions: i32,
        config: TopicConfig,
        validate_only: bool,
    ) -> Result<Arc<TopicInfo>, TopicError> {
        Self::validate_name(name)?;
        check_partition_range(partitions)?;
        let _permit = self.one_change_at_a_time().await?;
        if self.exists(name) {
            return Err(already_exists(name));
        }
        let record = TopicRecord {
            name: name.to_string(),
            id: topic_id_text(&random_uuid()),
            partitions,
            configs: config,
        };
        let info = record
            .to_info(&shard.config.topic_defaults)
            .map_err(|e| TopicError::new(ErrorCode::UnknownServerError, e.to_string()))?;
        if validate_only {
            return Ok(Arc::new(info));
        }
        // Leftovers of an earlier topic with this name (a crash during its deletion) go first.
        self.remove_partition_dirs(shard, name).await;
        let mut next = self.file.borrow().clone();
        next.topics.push(record);
        self.commit(shard, next).await?;
        Ok(Arc::new(info))
    }

    /// Deletes a topic; returns its id.
    pub async fn delete(&self, shard: &Rc<Shard>, name: &str) -> Result<Uuid, TopicError> {
        let _permit = self.one_change_at_a_time().await?;
        let mut next = self.file.borrow().clone();
        let Some(position) = next.topics.iter().position(|t| t.name == name) else {
            return Err(unknown_topic(name));
        };
        let removed = next.topics.remove(position);
        let id = parse_topic_id(&removed.id).unwrap_or(Uuid::NIL);
        self.commit(shard, next).await?;
        self.remove_partition_dirs(shard, name).await;
        let topic = name.to_string();
        shard
            .router
            .broadcast(shard, move |target| {
                let topic = topic.clone();
                async move { target.groups.remove_topic(&topic).await }
            })
            .await;
        Ok(id)
    }

    /// Raises a topic's partition count to `count`; `assignments`, when given, names the
    /// replicas of each new partition.
    pub async fn add_partitions(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _permit = self.one_change_at_a_time().await?;
        let mut next = self.file.borrow().clone();
        let Some(topic) = next.topics.iter_mut().find(|t| t.name == name) else {
            return Err(unknown_topic(name));
        };
        check_added_partitions(
            topic.partitions,
            count,
            assignments.as_deref(),
            &[shard.config.node_id],
        )?;
        if validate_only {
            return Ok(());
        }
        topic.partitions = count;
        self.commit(shard, next).await
    }

    /// Changes a topic's config overrides with `change`.
    pub async fn alter_configs(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        change: impl FnOnce(&mut TopicConfig) -> Result<(), InvalidConfig>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _permit = self.one_change_at_a_time().await?;
        let mut next = self.file.borrow().clone();
        let Some(topic) = next.topics.iter_mut().find(|t| t.name == name) else {
            return Err(unknown_topic(name));
        };
        change(&mut topic.configs)?;
        topic.configs.check_combination()?;
        if validate_only {
            return Ok(());
        }
        let log_config = topic.configs.log_config(&shard.config.topic_defaults);
        let topic_name: Arc<str> = name.into();
        self.commit(shard, next).await?;
        shard
            .router
            .broadcast(shard, move |target| {
                let log_config = log_config.clone();
                let topic_name = topic_name.clone();
                async move {
                    for id in target.logs.open_partitions() {
                        if id.topic == topic_name {
                            if let Some(log) = target.logs.get(&id) {
                                log.set_config(log_config.clone());
                            }
                        }
                    }
                }
            })
            .await;
        Ok(())
    }

    /// Changes the config overrides of consumer group `group` with `change` (the group need
    /// not exist: Kafka keeps configs of groups that have no members yet).
    pub async fn alter_group_configs(
        &self,
        shard: &Rc<Shard>,
        group: &str,
        change: impl FnOnce(&mut GroupConfigOverrides) -> Result<(), InvalidConfig>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let _permit = self.one_change_at_a_time().await?;
        let mut next = self.file.borrow().clone();
        let mut overrides = next.group_configs.remove(group).unwrap_or_default();
        change(&mut overrides)?;
        overrides.check_combination(&shard.config.groups)?;
        if validate_only {
            return Ok(());
        }
        if !overrides.is_empty() {
            next.group_configs.insert(group.to_string(), overrides);
        }
        self.commit(shard, next).await
    }

    /// Persists `next`, then publishes it as the cluster view.
    async fn commit(&self, shard: &Rc<Shard>, next: TopicsFile) -> Result<(), TopicError> {
        topic_store::save(&self.storage, &next)
            .await
            .map_err(|e| TopicError::new(ErrorCode::KafkaStorageError, e.to_string()))?;
        shard.view.publish(build_view(&next, shard)?);
        *self.file.borrow_mut() = next;
        Ok(())
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

/// The cluster view for a topic store.
pub fn build_view(file: &TopicsFile, shard: &Shard) -> Result<ClusterView, TopicError> {
    let mut topics = Vec::with_capacity(file.topics.len());
    for record in &file.topics {
        topics.push(
            record
                .to_info(&shard.config.topic_defaults)
                .map_err(|e| TopicError::new(ErrorCode::UnknownServerError, e.to_string()))?,
        );
    }
    let mut view = ClusterView::new(file.cluster_id.clone(), shard.router.shards(), topics);
    view.group_configs = Arc::new(file.group_configs.clone());
    Ok(view)
}

/// Checks a CreateTopics topic's partitions, assignment, replication factor and configs (after
/// its name and whether it exists), as Kafka does: its partition count and configs. `brokers`
/// are the broker ids a manual assignment may name. Standalone and cluster mode share it.
pub fn check_new_topic(
    topic: &NewTopic,
    default_partitions: i32,
    brokers: &[i32],
) -> Result<(i32, TopicConfig), TopicError> {
    let partitions = partition_count(topic, default_partitions, brokers)?;
    let config = TopicConfig::from_pairs(
        topic
            .configs
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_deref())),
    )?;
    Ok((partitions, config))
}

/// Refuses a partition count of a new topic outside 1..=[`MAX_PARTITIONS`].
pub fn check_partition_range(partitions: i32) -> Result<(), TopicError> {
    if (1..=MAX_PARTITIONS).contains(&partitions) {
        Ok(())
    } else {
        Err(TopicError::new(
            ErrorCode::InvalidPartitions,
            format!("Number of partitions must be between 1 and {MAX_PARTITIONS}."),
        ))
    }
}

/// Checks a CreatePartitions request raising a topic from `current` to `count` partitions,
/// with `assignments` (when given and not empty) naming the replicas of each new partition
/// among `brokers`. Standalone and cluster mode share it.
pub fn check_added_partitions(
    current: i32,
    count: i32,
    assignments: Option<&[Vec<i32>]>,
    brokers: &[i32],
) -> Result<(), TopicError> {
    if count <= current {
        return Err(TopicError::new(
            ErrorCode::InvalidPartitions,
            format!(
                "Topic currently has {current} partitions, which is higher than or equal to the requested {count}."
            ),
        ));
    }
    if count > MAX_PARTITIONS {
        return Err(TopicError::new(
            ErrorCode::InvalidPartitions,
            format!("Number of partitions must be at most {MAX_PARTITIONS}."),
        ));
    }
    if let Some(assignments) = assignments.filter(|a| !a.is_empty()) {
        let added = count - current;
        if usize::try_from(added).ok() != Some(assignments.len()) {
            return Err(TopicError::new(
                ErrorCode::InvalidReplicaAssignment,
                format!(
                    "Attempted to add {added} additional partition(s), but only {} assignment(s) were specified.",
                    assignments.len()
                ),
            ));
        }
        check_replicas(assignments.iter().map(Vec::as_slice), brokers)?;
    }
    Ok(())
}

/// The partition count a CreateTopics topic asks for, from its count or its manual
/// assignment. Any positive replication factor is accepted: kaas keeps the leader only.
fn partition_count(
    topic: &NewTopic,
    default_partitions: i32,
    brokers: &[i32],
) -> Result<i32, TopicError> {
    if !topic.assignments.is_empty() {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err(TopicError::new(
                ErrorCode::InvalidRequest,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
            ));
        }
        return check_topic_assignment(&topic.assignments, brokers);
    }
    if topic.replication_factor == 0 || topic.replication_factor < -1 {
        return Err(TopicError::new(
            ErrorCode::InvalidReplicationFactor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        ));
    }
    match topic.num_partitions {
        -1 => Ok(default_partitions),
        n if n <= 0 => Err(TopicError::new(
            ErrorCode::InvalidPartitions,
            "Number of partitions was set to an invalid non-positive value.",
        )),
        n => Ok(n),
    }
}

/// TOPIC_ALREADY_EXISTS, with Kafka's message.
pub fn already_exists(name: &str) -> TopicError {
    TopicError::new(
        ErrorCode::TopicAlreadyExists,
        format!("Topic '{name}' already exists."),
    )
}

/// UNKNOWN_TOPIC_OR_PARTITION for a topic change, with kaas's message.
pub fn unknown_topic(name: &str) -> TopicError {
    TopicError::new(
        ErrorCode::UnknownTopicOrPartition,
        format!("This server does not host this topic: {name}"),
    )
}

fn shutting_down() -> TopicError {
    TopicError::new(ErrorCode::UnknownServerError, "broker is shutting down")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(
        num_partitions: i32,
        replication_factor: i16,
        assignments: Vec<(i32, Vec<i32>)>,
    ) -> NewTopic {
        NewTopic {
            name: "t".into(),
            num_partitions,
            replication_factor,
            assignments,
            configs: Vec::new(),
        }
    }

    #[test]
    fn any_positive_replication_factor_and_registered_assignments_are_accepted() {
        assert_eq!(partition_count(&topic(3, 3, vec![]), 1, &[0]), Ok(3));
        assert_eq!(partition_count(&topic(-1, -1, vec![]), 4, &[0]), Ok(4));
        assert_eq!(
            partition_count(&topic(-1, -1, vec![(0, vec![0]), (1, vec![0])]), 1, &[0]),
            Ok(2)
        );
        let code = |t: NewTopic| partition_count(&t, 1, &[0]).map_err(|e| e.code);
        assert_eq!(
            code(topic(1, 0, vec![])),
            Err(ErrorCode::InvalidReplicationFactor)
        );
        assert_eq!(
            code(topic(1, -2, vec![])),
            Err(ErrorCode::InvalidReplicationFactor)
        );
        assert_eq!(code(topic(0, 1, vec![])), Err(ErrorCode::InvalidPartitions));
        assert_eq!(
            code(topic(1, -1, vec![(0, vec![0])])),
            Err(ErrorCode::InvalidRequest)
        );
        assert_eq!(
            code(topic(-1, -1, vec![(0, vec![5])])),
            Err(ErrorCode::InvalidReplicaAssignment)
        );
    }
}
