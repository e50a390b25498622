//! Topic changes behind one interface, with two implementations: a standalone broker's
//! [`TopicAdmin`] (it keeps `__cluster/topics.json` and publishes the view itself), and a
//! cluster broker's [`ClusterTopicChanges`] (it validates, sends the change to the cluster
//! core's KafkaTopic service and waits until the followed assignment shows it).
//!
//! Both live on shard 0, in a slot of their own on its thread ([`install_on_this_shard`],
//! [`on_this_shard`]) rather than in the shard context below this floor; handlers reach them
//! through `handlers::with_topic_admin`, so every topic change hops there.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use crate::model::cluster_view::TopicInfo;
use crate::model::group_configs::GroupConfigOverrides;
use crate::model::topic_config::{InvalidConfig, TopicConfig};
use crate::protocol::{ErrorCode, Uuid};
use crate::shard::Shard;
use crate::topics::cluster_topic_changes::ClusterTopicChanges;
use crate::topics::topic_admin::{NewTopic, TopicAdmin, TopicError};

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

/// Where topic changes go.
pub enum TopicChanges {
    /// A standalone broker: `topics.json` and the view, on shard 0.
    Standalone(TopicAdmin),
    /// A broker of a cluster: the cluster core's KafkaTopic service.
    Cluster(ClusterTopicChanges),
}

impl TopicChanges {
    /// CreateTopics for one topic. `wait` (the request's timeout) bounds how long a cluster
    /// broker waits for the new topic to reach its view before it answers.
    pub async fn create_topic(
        &self,
        shard: &Rc<Shard>,
        topic: NewTopic,
        validate_only: bool,
        wait: Duration,
    ) -> Result<Arc<TopicInfo>, TopicError> {
        match self {
            TopicChanges::Standalone(admin) => {
                admin.create_topic(shard, topic, validate_only).await
            }
            TopicChanges::Cluster(cluster) => {
                cluster
                    .create_topic(shard, topic, validate_only, wait)
                    .await
            }
        }
    }

    /// Creates `name` with `partitions` partitions and default configs for a Metadata request
    /// that allows auto-creation; the topic as the view has it. A topic another client
    /// created meanwhile is answered from the view; one not visible yet is
    /// LEADER_NOT_AVAILABLE (the client retries).
    pub async fn auto_create(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        partitions: i32,
    ) -> Result<Arc<TopicInfo>, TopicError> {
        let created = match self {
            TopicChanges::Standalone(admin) => {
                admin
                    .create(shard, name, partitions, TopicConfig::default(), false)
                    .await
            }
            TopicChanges::Cluster(cluster) => cluster.auto_create(shard, name, partitions).await,
        };
        match created {
            Ok(topic) => Ok(topic),
            Err(error) if error.code == ErrorCode::TopicAlreadyExists => shard
                .view
                .load()
                .topic(name)
                .cloned()
                .ok_or_else(|| TopicError::new(ErrorCode::LeaderNotAvailable, error.message)),
            Err(error) => Err(error),
        }
    }

    /// DeleteTopics for one topic; its id.
    pub async fn delete(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        wait: Duration,
    ) -> Result<Uuid, TopicError> {
        match self {
            TopicChanges::Standalone(admin) => admin.delete(shard, name).await,
            TopicChanges::Cluster(cluster) => cluster.delete(shard, name, wait).await,
        }
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
        match self {
            TopicChanges::Standalone(admin) => {
                admin
                    .add_partitions(shard, name, count, assignments, validate_only)
                    .await
            }
            TopicChanges::Cluster(cluster) => {
                cluster
                    .add_partitions(shard, name, count, assignments, validate_only, wait)
                    .await
            }
        }
    }

    /// AlterConfigs / IncrementalAlterConfigs on a topic: `change` edits its overrides.
    pub async fn alter_configs(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        change: impl FnOnce(&mut TopicConfig) -> Result<(), InvalidConfig>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        match self {
            TopicChanges::Standalone(admin) => {
                admin
                    .alter_configs(shard, name, change, validate_only)
                    .await
            }
            TopicChanges::Cluster(cluster) => {
                cluster
                    .alter_configs(shard, name, change, validate_only)
                    .await
            }
        }
    }

    /// Legacy AlterConfigs on a topic: `change` replaces its overrides as a whole. In cluster
    /// mode the new full set replaces the KafkaTopic's configs (see
    /// [`ClusterTopicChanges::replace_configs`]), not a diff against this broker's view.
    pub async fn replace_configs(
        &self,
        shard: &Rc<Shard>,
        name: &str,
        change: impl FnOnce(&mut TopicConfig) -> Result<(), InvalidConfig>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        match self {
            TopicChanges::Standalone(admin) => {
                admin
                    .alter_configs(shard, name, change, validate_only)
                    .await
            }
            TopicChanges::Cluster(cluster) => {
                cluster
                    .replace_configs(shard, name, change, validate_only)
                    .await
            }
        }
    }

    /// AlterConfigs / IncrementalAlterConfigs on a consumer group: `change` edits its
    /// overrides. Refused in cluster mode (see [`ClusterTopicChanges::alter_group_configs`]).
    pub async fn alter_group_configs(
        &self,
        shard: &Rc<Shard>,
        group: &str,
        change: impl FnOnce(&mut GroupConfigOverrides) -> Result<(), InvalidConfig>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        match self {
            TopicChanges::Standalone(admin) => {
                admin
                    .alter_group_configs(shard, group, change, validate_only)
                    .await
            }
            TopicChanges::Cluster(_) => Err(ClusterTopicChanges::alter_group_configs(group)),
        }
    }
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

    #[test]
    fn the_request_timeout_bounds_the_wait() {
        assert_eq!(wait_of_timeout(0), Duration::ZERO);
        assert_eq!(wait_of_timeout(-5), Duration::ZERO);
        assert_eq!(wait_of_timeout(1500), Duration::from_millis(1500));
        assert_eq!(wait_of_timeout(i32::MAX), MAX_WAIT);
    }
}
