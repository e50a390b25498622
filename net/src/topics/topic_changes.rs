//! Topic changes: CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and
//! IncrementalAlterConfigs (on topics and groups), and auto-creation, one way in both modes.
//! Each request is checked here ([`crate::topics::checks`], the topic config validators)
//! against the view of the assignment this broker follows; what passes becomes a
//! [`TopicChange`] sent over the [`TopicChangeLink`] to whoever keeps the topic list — a
//! standalone broker's own [`LocalController`](crate::topics::local_controller), a cluster
//! broker's KafkaTopic service in the cluster core — and once that answers, the broker waits
//! until its view shows the change ([`view_wait`]) before it answers the client (a standalone
//! broker's view shows it before the answer comes). Validate-only requests stop after the
//! checks.
//!
//! The topic id of a new topic is made here (random, never one of the ids Kafka reserves)
//! and sent with the change, so the topic list, and every broker, give the topic that id.
//!
//! The changes live on shard 0, in a slot of their own on its thread
//! ([`install_on_this_shard`], [`on_this_shard`]) rather than in the shard context below this
//! floor; handlers reach them through `handlers::with_topic_changes`, so every topic change
//! hops there.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use kaas_cluster::ids::{TopicId, TopicName};
use kaas_cluster::topic_change::TopicChange;

use crate::model::cluster_view::{ClusterView, TopicInfo};
use crate::model::group_configs::GroupConfigOverrides;
use crate::model::topic_config::{InvalidConfig, TopicConfig};
use crate::protocol::{ErrorCode, Uuid};
use crate::shard::Shard;
use crate::topics::checks::{
    already_exists, check_added_partitions, check_new_topic, check_partition_range, unknown_topic,
    validate_name, NewTopic, TopicError,
};
use crate::topics::topic_change_link::{TopicChangeLink, ANSWER_TIMEOUT};
use crate::topics::view_wait::{self, Expectation};

/// How long a Metadata request that auto-creates a topic waits for it to become visible
/// before it answers LEADER_NOT_AVAILABLE (as Kafka answers a topic it is still creating), so
/// the client asks again.
pub const AUTO_CREATE_WAIT: Duration = Duration::from_secs(5);

thread_local! {
    /// The topic changes of the shard whose executor runs on this thread (shard 0 only).
    static ON_THIS_SHARD: RefCell<Option<Rc<TopicChanges>>> = const { RefCell::new(None) };
}

/// Makes `changes` the topic changes of the shard running on this thread (shard 0, at start;
/// `None` at shut-down).
pub fn install_on_this_shard(changes: Option<TopicChanges>) {
    ON_THIS_SHARD.with(|slot| *slot.borrow_mut() = changes.map(Rc::new));
}

/// The topic changes of the shard running on this thread, if it has them (shard 0).
pub fn on_this_shard() -> Option<Rc<TopicChanges>> {
    ON_THIS_SHARD.with(|slot| slot.borrow().clone())
}

/// How long a config change waits for the view (the APIs carry no timeout).
const CONFIG_WAIT: Duration = Duration::from_secs(30);

/// A broker's topic changes (shard 0).
pub struct TopicChanges {
    link: Arc<TopicChangeLink>,
}

impl TopicChanges {
    /// Changes sent over `link`.
    pub fn new(link: Arc<TopicChangeLink>) -> Self {
        TopicChanges { link }
    }

    /// CreateTopics for one topic.
    pub async fn create_topic(
        &self,
        shard: &Rc<Shard>,
        topic: NewTopic,
        validate_only: bool,
        wait: Duration,
    ) -> Result<Arc<TopicInfo>, TopicError> {
        let view = shard.view.load();
        let name = topic_name(&topic.name)?;
        if view.topic(&topic.name).is_some() {
            return Err(already_exists(&topic.name));
        }
        let (partitions, config) =
            check_new_topic(&topic, shard.config.default_partitions, &brokers(&view))?;
        self.create(shard, name, partitions, config, validate_only, wait)
            .await
    }

    /// Creates `name` with `partitions` partitions and default configs for a Metadata request
    /// that allows auto-creation; the topic as the view has it. A topic another client
    /// created meanwhile is answered from the view; one not visible yet is
    /// LEADER_NOT_AVAILABLE (the client retries). Without a service (`--assignment-source
    /// file`) a cluster broker does not auto-create, and the topic is unknown.
    pub async fn auto_create(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        partitions: i32,
    ) -> Result<Arc<TopicInfo>, TopicError> {
        if !self.link.is_served() {
            return Err(TopicError::new(
                ErrorCode::UnknownTopicOrPartition,
                "This server does not host this topic.",
            ));
        }
        let topic = topic_name(name)?;
        let created = self
            .create(
                shard,
                topic,
                partitions,
                TopicConfig::default(),
                false,
                AUTO_CREATE_WAIT,
            )
            .await;
        match created {
            Ok(topic) => Ok(topic),
            Err(error) if error.code == ErrorCode::RequestTimedOut => Err(TopicError::new(
                ErrorCode::LeaderNotAvailable,
                error.message,
            )),
            Err(error) if error.code == ErrorCode::TopicAlreadyExists => shard
                .view
                .load()
                .topic(name)
                .cloned()
                .ok_or_else(|| TopicError::new(ErrorCode::LeaderNotAvailable, error.message)),
            Err(error) => Err(error),
        }
    }

    /// Creates the internal topic `name` (`partitions` partitions, `configs`, id `topic_id`)
    /// on a standalone broker, whose own controller keeps it with the user topics; a topic
    /// that exists already counts as created. Waits at most `wait` for the view to show it.
    pub async fn create_internal(
        &self,
        shard: &Rc<Shard>,
        name: TopicName,
        partitions: i32,
        topic_id: TopicId,
        configs: BTreeMap<String, String>,
        wait: Duration,
    ) -> Result<(), TopicError> {
        let change = TopicChange::Create {
            topic: name.clone(),
            partitions,
            topic_id,
            configs,
        };
        match self.link.send(change, ANSWER_TIMEOUT).await {
            Ok(()) => {}
            Err(error) if error.code == ErrorCode::TopicAlreadyExists => return Ok(()),
            Err(error) => return Err(error),
        }
        let expectation = Expectation::Created {
            name: name.as_str().to_string(),
            id: Uuid::from(topic_id),
        };
        if !self.wait(shard, &expectation, wait).await {
            return Err(not_visible(name.as_str(), "created", wait));
        }
        Ok(())
    }

    async fn create(
        &self,
        shard: &Rc<Shard>,
        name: TopicName,
        partitions: i32,
        config: TopicConfig,
        validate_only: bool,
        wait: Duration,
    ) -> Result<Arc<TopicInfo>, TopicError> {
        check_partition_range(partitions)?;
        let id = new_topic_id();
        let info = Arc::new(TopicInfo::of(
            name.clone(),
            Uuid::from(id),
            partitions,
            config,
            &shard.config.topic_defaults,
        ));
        if validate_only {
            return Ok(info);
        }
        let change = TopicChange::Create {
            topic: name.clone(),
            partitions,
            topic_id: id,
            configs: overrides(&info.config),
        };
        self.link.send(change, ANSWER_TIMEOUT).await?;
        let expectation = Expectation::Created {
            name: name.as_str().to_string(),
            id: info.id(),
        };
        if !self.wait(shard, &expectation, wait).await {
            return Err(not_visible(name.as_str(), "created", wait));
        }
        Ok(shard
            .view
            .load()
            .topic(name.as_str())
            .cloned()
            .unwrap_or(info))
    }

    /// DeleteTopics for one topic (resolved from the view by the handler); its id.
    pub async fn delete(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        wait: Duration,
    ) -> Result<Uuid, TopicError> {
        let topic = topic_name(name)?;
        let id = shard
            .view
            .load()
            .topic(name)
            .map_or(Uuid::NIL, |topic| topic.id());
        self.link
            .send(TopicChange::Delete { topic }, ANSWER_TIMEOUT)
            .await?;
        let expectation = Expectation::Deleted {
            name: name.to_string(),
            id,
        };
        if !self.wait(shard, &expectation, wait).await {
            return Err(not_visible(name, "deleted", wait));
        }
        Ok(id)
    }

    /// CreatePartitions for one topic.
    pub async fn add_partitions(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        count: i32,
        assignments: Option<Vec<Vec<i32>>>,
        validate_only: bool,
        wait: Duration,
    ) -> Result<(), TopicError> {
        let view = shard.view.load();
        let Some(current) = view.topic(name).map(|topic| topic.partitions()) else {
            return Err(unknown_topic(name));
        };
        check_added_partitions(current, count, assignments.as_deref(), &brokers(&view))?;
        if validate_only {
            return Ok(());
        }
        let topic = topic_name(name)?;
        self.link
            .send(TopicChange::AddPartitions { topic, count }, ANSWER_TIMEOUT)
            .await?;
        let expectation = Expectation::Partitions {
            name: name.to_string(),
            count,
        };
        if !self.wait(shard, &expectation, wait).await {
            return Err(not_visible(name, "given its new partitions", wait));
        }
        Ok(())
    }

    /// AlterConfigs / IncrementalAlterConfigs on a topic: `change` is applied to the overrides
    /// the view has, checked by the topic config rules, and the keys it changed are
    /// sent. The answer waits (at most 30 s) for the view to show the new values; past that
    /// the change is still made, and answered as done, as Kafka answers once it is stored.
    pub async fn alter_configs(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        change: impl FnOnce(&mut TopicConfig) -> Result<(), InvalidConfig>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let (before, after) = edited_configs(shard, name, change)?;
        let configs = config_changes(&before, &after);
        if validate_only || configs.is_empty() {
            return Ok(());
        }
        let topic = topic_name(name)?;
        self.link
            .send(
                TopicChange::AlterConfigs {
                    topic,
                    configs: configs.clone(),
                },
                ANSWER_TIMEOUT,
            )
            .await?;
        self.wait_for_configs(shard, name, configs).await;
        Ok(())
    }

    /// Legacy AlterConfigs on a topic: `change` (which replaces every override) is applied and
    /// checked by the topic config rules, and the resulting full set is sent to replace
    /// the KafkaTopic's configs as a whole. Sent even when this broker's view already shows
    /// that set: the view may lag a key another broker set a moment earlier, which the
    /// replacement must still reset. Waits for the view as [`Self::alter_configs`] does.
    pub async fn replace_configs(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        change: impl FnOnce(&mut TopicConfig) -> Result<(), InvalidConfig>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let (before, after) = edited_configs(shard, name, change)?;
        if validate_only {
            return Ok(());
        }
        let topic = topic_name(name)?;
        let configs = overrides(&after);
        self.link
            .send(
                TopicChange::ReplaceConfigs {
                    topic,
                    configs: configs.clone(),
                },
                ANSWER_TIMEOUT,
            )
            .await?;
        let mut shown: BTreeMap<String, Option<String>> = overrides(&before)
            .into_keys()
            .map(|key| (key, None))
            .collect();
        shown.extend(configs.into_iter().map(|(key, value)| (key, Some(value))));
        self.wait_for_configs(shard, name, shown).await;
        Ok(())
    }

    /// AlterConfigs / IncrementalAlterConfigs on a consumer group: `change` edits the
    /// overrides the view has (the group need not exist: Kafka keeps configs of groups that
    /// have no members yet), checked against the broker's group settings; the group's new set
    /// is sent whole. A standalone broker keeps them in `topics.json`; the KafkaTopic
    /// resources of cluster mode keep none, and refuse the change.
    pub async fn alter_group_configs(
        &self,
        shard: &Rc<Shard>,
        group: &str,
        change: impl FnOnce(&mut GroupConfigOverrides) -> Result<(), InvalidConfig>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let mut overrides = shard
            .view
            .load()
            .group_configs
            .get(group)
            .cloned()
            .unwrap_or_default();
        change(&mut overrides)?;
        overrides.check_combination(&shard.config.groups)?;
        if validate_only {
            return Ok(());
        }
        let change = TopicChange::ReplaceGroupConfigs {
            group: group.to_string(),
            configs: overrides.to_map(),
        };
        self.link.send(change, ANSWER_TIMEOUT).await
    }

    /// Waits (at most [`CONFIG_WAIT`]) for the view to show `configs` (`None`: unset) on
    /// `name`; a change stored but not shown by then is logged, and answered as done.
    async fn wait_for_configs(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        configs: BTreeMap<String, Option<String>>,
    ) {
        let expectation = Expectation::Configs {
            name: name.to_string(),
            configs,
        };
        if !self.wait(shard, &expectation, CONFIG_WAIT).await {
            tracing::warn!(
                topic = name,
                "config change stored, not yet in this broker's view"
            );
        }
    }

    async fn wait(&self, shard: &Rc<Shard>, expectation: &Expectation, bound: Duration) -> bool {
        bound.is_zero() || view_wait::wait_for(&shard.view, expectation, bound).await
    }
}

/// A topic's overrides as the view has them, and after `change`, checked by the topic
/// config rules.
fn edited_configs(
    shard: &Rc<Shard>,
    name: &str,
    change: impl FnOnce(&mut TopicConfig) -> Result<(), InvalidConfig>,
) -> Result<(TopicConfig, TopicConfig), TopicError> {
    let Some(before) = shard.view.load().topic(name).map(|t| t.config.clone()) else {
        return Err(unknown_topic(name));
    };
    let mut after = before.clone();
    change(&mut after)?;
    after.check_combination()?;
    Ok((before, after))
}

/// A checked topic name.
fn topic_name(name: &str) -> Result<TopicName, TopicError> {
    validate_name(name)?;
    TopicName::new(name)
        .map_err(|error| TopicError::new(ErrorCode::InvalidTopicException, error.to_string()))
}

/// The broker ids a manual assignment may name: the assignment's brokers (a standalone
/// broker's own assignment names it alone).
fn brokers(view: &ClusterView) -> Vec<i32> {
    view.cluster
        .as_ref()
        .map(|cluster| cluster.brokers().keys().map(|id| id.0).collect())
        .unwrap_or_default()
}

/// A new random topic id, never one Kafka reserves.
fn new_topic_id() -> TopicId {
    loop {
        let id = TopicId(rand::random());
        if id != TopicId::ZERO && id != TopicId::METADATA {
            return id;
        }
    }
}

/// The overrides of `config` as the KafkaTopic keeps them.
fn overrides(config: &TopicConfig) -> BTreeMap<String, String> {
    config
        .overrides()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect()
}

/// The keys whose override differs between `before` and `after`: set to the new value, or
/// `None` where `after` has none.
fn config_changes(before: &TopicConfig, after: &TopicConfig) -> BTreeMap<String, Option<String>> {
    let before = overrides(before);
    let after = overrides(after);
    let mut changes: BTreeMap<String, Option<String>> = before
        .keys()
        .filter(|key| !after.contains_key(*key))
        .map(|key| (key.clone(), None))
        .collect();
    for (key, value) in after {
        if before.get(&key) != Some(&value) {
            changes.insert(key, Some(value));
        }
    }
    changes
}

/// REQUEST_TIMED_OUT for a change made but not yet in this broker's view after `wait`.
fn not_visible(name: &str, done: &str, wait: Duration) -> TopicError {
    TopicError::new(
        ErrorCode::RequestTimedOut,
        format!(
            "Topic '{name}' was {done}, but this broker's metadata does not show it yet after {} ms",
            wait.as_millis()
        ),
    )
}

/// The wait bound of a request's `timeout_ms`: none when it is zero or negative (Kafka
/// answers at once then), at most [`MAX_WAIT`].
pub fn wait_of_timeout(timeout_ms: i32) -> Duration {
    let millis = u64::try_from(timeout_ms).unwrap_or(0);
    Duration::from_millis(millis).min(MAX_WAIT)
}

/// The longest a topic change waits for the view, whatever timeout the request gives.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> TopicConfig {
        TopicConfig::from_pairs(pairs.iter().map(|(k, v)| (*k, Some(*v)))).expect("valid")
    }

    #[test]
    fn only_changed_keys_are_sent() {
        let before = config(&[("retention.ms", "1000"), ("segment.ms", "60000")]);
        let after = config(&[("segment.ms", "60000"), ("cleanup.policy", "compact")]);
        assert_eq!(
            config_changes(&before, &after),
            BTreeMap::from([
                ("cleanup.policy".to_string(), Some("compact".to_string())),
                ("retention.ms".to_string(), None),
            ])
        );
        assert!(config_changes(&after, &after).is_empty());
        assert_eq!(
            overrides(&after),
            BTreeMap::from([
                ("cleanup.policy".to_string(), "compact".to_string()),
                ("segment.ms".to_string(), "60000".to_string()),
            ])
        );
    }

    #[test]
    fn new_ids_print_as_assignment_json_wants() {
        let id = new_topic_id();
        let text = id.to_string();
        assert_eq!(text.len(), 22);
        assert_eq!(TopicId::parse(&text), Ok(id));
        assert_ne!(new_topic_id(), id);
    }

    #[test]
    fn names_are_checked_with_kafkas_message() {
        assert!(topic_name("orders").is_ok());
        let error = topic_name("no/slash").expect_err("illegal");
        assert_eq!(error.code, ErrorCode::InvalidTopicException);
        assert!(error
            .message
            .starts_with("Topic name \"no/slash\" is illegal"));
    }

    #[test]
    fn the_request_timeout_bounds_the_wait() {
        assert_eq!(wait_of_timeout(0), Duration::ZERO);
        assert_eq!(wait_of_timeout(-5), Duration::ZERO);
        assert_eq!(wait_of_timeout(1500), Duration::from_millis(1500));
        assert_eq!(wait_of_timeout(i32::MAX), MAX_WAIT);
    }
}
