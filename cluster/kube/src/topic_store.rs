//! KafkaTopic resources as the topic list of cluster mode: list, watch (each change gives
//! the whole topic set again), create, patch (partitions, configs, topic id) and delete, by
//! Kafka topic name. What a Kafka admin request means for them (CreateTopics → create,
//! CreatePartitions → a larger `partitions`, ...) is decided by the caller.

use std::collections::BTreeMap;

use futures_util::{Stream, StreamExt};
use kaas_cluster::ids::TopicName;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;

use crate::context::KubeContext;
use crate::error::{describe, is_conflict, is_not_found, request_error, KubeAdapterError};
use crate::kafka_topic::{
    resource_name_for, topic_set, KafkaTopic, KafkaTopicSpec, TopicDescription,
};

const RESOURCE: &str = "kafkatopics.kaas.io";

/// How often a configs replacement is tried when the resource keeps changing under it (each
/// 409 means another change went in first; the API server orders them).
const REPLACE_ATTEMPTS: u32 = 10;

/// The topic set: every KafkaTopic of the namespace, by Kafka name.
pub type TopicSet = BTreeMap<TopicName, TopicDescription>;

/// The result of [`TopicStore::create`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateOutcome {
    /// The resource was created.
    Created(TopicDescription),
    /// A KafkaTopic already names this topic.
    AlreadyExists,
}

/// What a patch changes; `None` fields are left as they are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicPatch {
    /// A new partition count.
    pub partitions: Option<i32>,
    /// A topic id for a resource that has none.
    pub topic_id: Option<String>,
    /// Configs to set (`Some`) or remove (`None`).
    pub configs: BTreeMap<String, Option<String>>,
}

/// The KafkaTopic resources of one namespace.
#[derive(Clone)]
pub struct TopicStore {
    api: Api<KafkaTopic>,
    namespace: String,
}

impl TopicStore {
    /// The KafkaTopics of the context's namespace.
    pub fn new(context: &KubeContext) -> Self {
        Self {
            api: Api::namespaced(context.client.clone(), &context.namespace),
            namespace: context.namespace.clone(),
        }
    }

    fn resource(&self, name: Option<&str>) -> String {
        describe(RESOURCE, name, &self.namespace)
    }

    /// Every topic now.
    pub async fn list(&self) -> Result<TopicSet, KubeAdapterError> {
        let resources = self
            .api
            .list(&ListParams::default())
            .await
            .map_err(request_error("list", self.resource(None)))?;
        Ok(topic_set(&resources.items))
    }

    /// The resource of Kafka topic `topic`: the derived resource name first, else any
    /// resource whose `spec.topicName` names it (one applied by hand under another name).
    pub async fn find(&self, topic: &TopicName) -> Result<Option<KafkaTopic>, KubeAdapterError> {
        let derived = resource_name_for(topic);
        let by_name = self
            .api
            .get_opt(&derived)
            .await
            .map_err(request_error("get", self.resource(Some(&derived))))?;
        if let Some(resource) = by_name.filter(|r| r.kafka_name() == Some(topic.as_str())) {
            return Ok(Some(resource));
        }
        let resources = self
            .api
            .list(&ListParams::default())
            .await
            .map_err(request_error("list", self.resource(None)))?;
        let resource_name = topic_set(&resources.items)
            .remove(topic)
            .map(|found| found.resource_name);
        Ok(resources
            .items
            .into_iter()
            .find(|r| r.metadata.name.is_some() && r.metadata.name == resource_name))
    }

    /// Creates the KafkaTopic of `topic` unless one already names it.
    pub async fn create(
        &self,
        topic: &TopicName,
        partitions: i32,
        topic_id: Option<String>,
        configs: BTreeMap<String, String>,
    ) -> Result<CreateOutcome, KubeAdapterError> {
        if self.find(topic).await?.is_some() {
            return Ok(CreateOutcome::AlreadyExists);
        }
        let resource_name = resource_name_for(topic);
        let resource = KafkaTopic::new(
            &resource_name,
            KafkaTopicSpec {
                topic_name: Some(topic.as_str().to_owned()),
                partitions,
                topic_id,
                configs,
            },
        );
        match self.api.create(&PostParams::default(), &resource).await {
            Ok(created) => Ok(created
                .description()
                .map_or(CreateOutcome::AlreadyExists, CreateOutcome::Created)),
            Err(error) if is_conflict(&error) => Ok(CreateOutcome::AlreadyExists),
            Err(error) => Err(request_error("create", self.resource(Some(&resource_name)))(error)),
        }
    }

    /// Applies `patch` to the KafkaTopic of `topic` (a JSON merge patch of `spec`); `None`
    /// when no KafkaTopic names the topic.
    pub async fn patch(
        &self,
        topic: &TopicName,
        patch: &TopicPatch,
    ) -> Result<Option<TopicDescription>, KubeAdapterError> {
        let Some(resource_name) = self.find(topic).await?.and_then(|r| r.metadata.name) else {
            return Ok(None);
        };
        let mut spec = serde_json::Map::new();
        if let Some(partitions) = patch.partitions {
            spec.insert("partitions".into(), partitions.into());
        }
        if let Some(topic_id) = &patch.topic_id {
            spec.insert("topicId".into(), topic_id.clone().into());
        }
        if !patch.configs.is_empty() {
            let configs: serde_json::Map<String, serde_json::Value> = patch
                .configs
                .iter()
                .map(|(key, value)| (key.clone(), value.clone().into()))
                .collect();
            spec.insert("configs".into(), configs.into());
        }
        let body = serde_json::json!({ "spec": spec });
        match self
            .api
            .patch(
                &resource_name,
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .await
        {
            Ok(patched) => Ok(patched.description()),
            Err(error) if is_not_found(&error) => Ok(None),
            Err(error) => Err(request_error("patch", self.resource(Some(&resource_name)))(
                error,
            )),
        }
    }

    /// Replaces the `spec.configs` of the KafkaTopic of `topic` with `configs` as a whole
    /// (legacy AlterConfigs), keeping the rest of the resource; `None` when no KafkaTopic
    /// names the topic. A read-modify-write of the resource itself: the update carries the
    /// `resourceVersion` it read, so a change another broker made in between is a 409 and the
    /// replacement is made again on the newer resource, never on a stale copy.
    pub async fn replace_configs(
        &self,
        topic: &TopicName,
        configs: &BTreeMap<String, String>,
    ) -> Result<Option<TopicDescription>, KubeAdapterError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let Some(mut resource) = self.find(topic).await? else {
                return Ok(None);
            };
            let Some(resource_name) = resource.metadata.name.clone() else {
                return Ok(None);
            };
            resource.spec.configs = configs.clone();
            match self
                .api
                .replace(&resource_name, &PostParams::default(), &resource)
                .await
            {
                Ok(replaced) => return Ok(replaced.description()),
                Err(error) if is_not_found(&error) => return Ok(None),
                Err(error) if is_conflict(&error) && attempt < REPLACE_ATTEMPTS => continue,
                Err(error) => {
                    return Err(request_error("update", self.resource(Some(&resource_name)))(error))
                }
            }
        }
    }

    /// Deletes the KafkaTopic of `topic`; false when none named it.
    pub async fn delete(&self, topic: &TopicName) -> Result<bool, KubeAdapterError> {
        let Some(resource_name) = self.find(topic).await?.and_then(|r| r.metadata.name) else {
            return Ok(false);
        };
        match self
            .api
            .delete(&resource_name, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(true),
            Err(error) if is_not_found(&error) => Ok(false),
            Err(error) => Err(request_error("delete", self.resource(Some(&resource_name)))(error)),
        }
    }

    /// Watches the KafkaTopics: yields the whole topic set once the initial list is in, then
    /// again after every change. A failed watch yields an error and is retried with
    /// back-off; the stream never ends by itself.
    pub fn watch(&self) -> impl Stream<Item = Result<TopicSet, KubeAdapterError>> + Send + 'static {
        let resource = self.resource(None);
        let mut current: BTreeMap<String, KafkaTopic> = BTreeMap::new();
        let mut pending: Option<BTreeMap<String, KafkaTopic>> = None;
        watcher::watcher(self.api.clone(), watcher::Config::default())
            .default_backoff()
            .filter_map(move |event| {
                let item = match event {
                    Err(source) => Some(Err(KubeAdapterError::Watch {
                        resource: resource.clone(),
                        source,
                    })),
                    Ok(Event::Init) => {
                        pending = Some(BTreeMap::new());
                        None
                    }
                    Ok(Event::InitApply(resource)) => {
                        if let (Some(pending), Some(name)) =
                            (pending.as_mut(), resource.metadata.name.clone())
                        {
                            pending.insert(name, resource);
                        }
                        None
                    }
                    Ok(Event::InitDone) => {
                        current = pending.take().unwrap_or_default();
                        Some(Ok(topic_set(current.values())))
                    }
                    Ok(Event::Apply(resource)) => {
                        if let Some(name) = resource.metadata.name.clone() {
                            current.insert(name, resource);
                        }
                        Some(Ok(topic_set(current.values())))
                    }
                    Ok(Event::Delete(resource)) => {
                        if let Some(name) = &resource.metadata.name {
                            current.remove(name);
                        }
                        Some(Ok(topic_set(current.values())))
                    }
                };
                std::future::ready(item)
            })
    }
}
