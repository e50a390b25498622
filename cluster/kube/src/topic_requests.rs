//! The KafkaTopic service: a broker's topic changes ([`TopicChangeRequest`], validated by the
//! broker) carried out on the KafkaTopic resources with [`TopicStore`], and answered with
//! the Kafka error code a Kafka broker would give:
//!
//! | change | done | refused |
//! |---|---|---|
//! | create | `create` (partitions, configs and the broker's topic id in `spec`) | a KafkaTopic names it: TOPIC_ALREADY_EXISTS |
//! | delete | `delete` | none names it: UNKNOWN_TOPIC_OR_PARTITION |
//! | add partitions | `patch` of `spec.partitions` | none names it: UNKNOWN_TOPIC_OR_PARTITION; not above the resource's count: INVALID_PARTITIONS |
//! | alter configs (incremental) | merge `patch` of the changed `spec.configs` keys (a removed key is `null`) | none names it: UNKNOWN_TOPIC_OR_PARTITION |
//! | replace configs (legacy AlterConfigs) | `update` of the resource read, with `spec.configs` the request's set (a 409 from a change in between: read and try again) | none names it: UNKNOWN_TOPIC_OR_PARTITION |
//!
//! A failed API request (unreachable, 403, a schema refusal) is UNKNOWN_SERVER_ERROR with the
//! adapter's message, which names the verb and the resource. Config values and partition
//! counts were checked by the broker before it sent the change (the standalone broker's
//! rules, so there is one rule set), and validate-only requests never come here.
//!
//! Runs on the cluster core's tokio runtime; each request runs in its own task, so a slow
//! API call does not hold up the next (the API server orders concurrent changes).

use futures_util::{Stream, StreamExt};
use kaas_cluster::ids::TopicName;
use kaas_cluster::topic_change::{
    codes, TopicChange, TopicChangeAnswer, TopicChangeRefusal, TopicChangeRequest,
};

use crate::context::SharedContext;
use crate::error::KubeAdapterError;
use crate::topic_store::{CreateOutcome, TopicPatch, TopicStore};

/// Serves `requests` on the KafkaTopics of `context`, the client the cluster core's sources
/// share (made on first use, on the runtime this runs on, as a `kube::Client` must be): one
/// configuration and one connection pool for the Lease, the watches, the mirror and the
/// topic changes. Without a client, every request is answered with the reason.
pub async fn serve_shared<S>(context: SharedContext, requests: S)
where
    S: Stream<Item = TopicChangeRequest> + Send + 'static,
{
    match context.get() {
        Ok(context) => serve(TopicStore::new(&context), requests).await,
        Err(error) => {
            tracing::error!(%error, "topic changes cannot reach the Kubernetes API");
            refuse_all(&error.to_string(), requests).await;
        }
    }
}

/// Answers every request with UNKNOWN_SERVER_ERROR and `message` until the stream ends.
async fn refuse_all<S>(message: &str, requests: S)
where
    S: Stream<Item = TopicChangeRequest>,
{
    let mut requests = std::pin::pin!(requests);
    while let Some(request) = requests.next().await {
        request.answer(Err(TopicChangeRefusal::new(
            codes::UNKNOWN_SERVER_ERROR,
            message.to_owned(),
        )));
    }
}

/// Serves `requests` on `store` until the stream ends (the broker stopped).
pub async fn serve<S>(store: TopicStore, requests: S)
where
    S: Stream<Item = TopicChangeRequest> + Send + 'static,
{
    let mut requests = std::pin::pin!(requests);
    while let Some(request) = requests.next().await {
        let store = store.clone();
        tokio::spawn(async move {
            let answer = carry_out(&store, &request.change).await;
            if let Err(refusal) = &answer {
                tracing::debug!(change = ?request.change, code = refusal.code, message = %refusal.message, "topic change refused");
            }
            request.answer(answer);
        });
    }
}

/// Carries one change out on the KafkaTopics.
pub async fn carry_out(store: &TopicStore, change: &TopicChange) -> TopicChangeAnswer {
    match change {
        TopicChange::Create {
            topic,
            partitions,
            topic_id,
            configs,
        } => created(
            topic,
            store
                .create(
                    topic,
                    *partitions,
                    Some(topic_id.to_string()),
                    configs.clone(),
                )
                .await,
        ),
        TopicChange::Delete { topic } => deleted(topic, store.delete(topic).await),
        TopicChange::AddPartitions { topic, count } => {
            let current = match store.find(topic).await {
                Ok(found) => found.map(|resource| resource.spec.partitions),
                Err(error) => return Err(api_failure(&error)),
            };
            check_added(topic, current, *count)?;
            let patch = TopicPatch {
                partitions: Some(*count),
                ..TopicPatch::default()
            };
            patched(topic, store.patch(topic, &patch).await.map(|p| p.is_some()))
        }
        TopicChange::AlterConfigs { topic, configs } => {
            let patch = TopicPatch {
                configs: configs.clone(),
                ..TopicPatch::default()
            };
            patched(topic, store.patch(topic, &patch).await.map(|p| p.is_some()))
        }
        TopicChange::ReplaceConfigs { topic, configs } => patched(
            topic,
            store
                .replace_configs(topic, configs)
                .await
                .map(|p| p.is_some()),
        ),
        TopicChange::ReplaceGroupConfigs { group, .. } => Err(group_configs_not_kept(group)),
    }
}

/// The refusal of a consumer-group config change: the KafkaTopic resources keep topics only.
fn group_configs_not_kept(group: &str) -> TopicChangeRefusal {
    TopicChangeRefusal::new(
        codes::INVALID_REQUEST,
        format!(
            "Consumer group configs are not kept in cluster mode yet: group '{group}' keeps the broker's group settings"
        ),
    )
}

/// The answer to a create.
fn created(
    topic: &TopicName,
    outcome: Result<CreateOutcome, KubeAdapterError>,
) -> TopicChangeAnswer {
    match outcome {
        Ok(CreateOutcome::Created(_)) => Ok(()),
        Ok(CreateOutcome::AlreadyExists) => Err(TopicChangeRefusal::new(
            codes::TOPIC_ALREADY_EXISTS,
            format!("Topic '{topic}' already exists."),
        )),
        Err(error) => Err(api_failure(&error)),
    }
}

/// The answer to a delete (`true`: a resource was deleted).
fn deleted(topic: &TopicName, outcome: Result<bool, KubeAdapterError>) -> TopicChangeAnswer {
    patched(topic, outcome)
}

/// The answer to a patch or delete of the resource of `topic` (`true`: it existed).
fn patched(topic: &TopicName, outcome: Result<bool, KubeAdapterError>) -> TopicChangeAnswer {
    match outcome {
        Ok(true) => Ok(()),
        Ok(false) => Err(unknown(topic)),
        Err(error) => Err(api_failure(&error)),
    }
}

/// Refuses raising `topic` to `count` partitions when its resource has `current` (`None`: no
/// resource), with the standalone broker's message.
fn check_added(
    topic: &TopicName,
    current: Option<i32>,
    count: i32,
) -> Result<(), TopicChangeRefusal> {
    match current {
        None => Err(unknown(topic)),
        Some(current) if count <= current => Err(TopicChangeRefusal::new(
            codes::INVALID_PARTITIONS,
            format!(
                "Topic currently has {current} partitions, which is higher than or equal to the requested {count}."
            ),
        )),
        Some(_) => Ok(()),
    }
}

fn unknown(topic: &TopicName) -> TopicChangeRefusal {
    TopicChangeRefusal::new(
        codes::UNKNOWN_TOPIC_OR_PARTITION,
        format!("This server does not host this topic: {topic}"),
    )
}

fn api_failure(error: &KubeAdapterError) -> TopicChangeRefusal {
    TopicChangeRefusal::new(codes::UNKNOWN_SERVER_ERROR, error.to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::kafka_topic::TopicDescription;

    fn topic() -> TopicName {
        TopicName::new("orders").unwrap()
    }

    #[test]
    fn group_config_changes_are_refused_with_a_reason() {
        let refusal = group_configs_not_kept("g");
        assert_eq!(refusal.code, codes::INVALID_REQUEST);
        assert!(
            refusal.message.contains("cluster mode"),
            "{}",
            refusal.message
        );
        assert!(refusal.message.contains("'g'"), "{}", refusal.message);
    }

    fn failure() -> KubeAdapterError {
        KubeAdapterError::Namespace {
            path: "/nowhere".into(),
            source: std::io::Error::other("gone"),
        }
    }

    #[test]
    fn creates_map_to_kafka_answers() {
        let description = TopicDescription {
            name: topic(),
            resource_name: "orders".into(),
            uid: None,
            partitions: 1,
            topic_id: None,
            configs: Default::default(),
        };
        assert_eq!(
            created(&topic(), Ok(CreateOutcome::Created(description))),
            Ok(())
        );
        let exists = created(&topic(), Ok(CreateOutcome::AlreadyExists));
        assert_eq!(
            exists,
            Err(TopicChangeRefusal::new(
                codes::TOPIC_ALREADY_EXISTS,
                "Topic 'orders' already exists."
            ))
        );
        let failed = created(&topic(), Err(failure())).unwrap_err();
        assert_eq!(failed.code, codes::UNKNOWN_SERVER_ERROR);
        assert_eq!(failed.message, failure().to_string());
    }

    #[test]
    fn deletes_and_patches_of_missing_topics_are_unknown() {
        assert_eq!(deleted(&topic(), Ok(true)), Ok(()));
        assert_eq!(
            deleted(&topic(), Ok(false)).unwrap_err().code,
            codes::UNKNOWN_TOPIC_OR_PARTITION
        );
        assert_eq!(patched(&topic(), Ok(true)), Ok(()));
        assert_eq!(
            patched(&topic(), Ok(false)).unwrap_err().code,
            codes::UNKNOWN_TOPIC_OR_PARTITION
        );
        assert_eq!(
            patched(&topic(), Err(failure())).unwrap_err().code,
            codes::UNKNOWN_SERVER_ERROR
        );
    }

    #[tokio::test]
    async fn without_a_client_every_change_is_refused_with_the_reason() {
        let (sender, answers) = std::sync::mpsc::channel();
        let requests: Vec<TopicChangeRequest> = (0..2)
            .map(|_| {
                let sender = sender.clone();
                TopicChangeRequest::new(TopicChange::Delete { topic: topic() }, move |answer| {
                    let _ = sender.send(answer);
                })
            })
            .collect();
        refuse_all("no client here", futures_util::stream::iter(requests)).await;
        drop(sender);
        let answers: Vec<TopicChangeAnswer> = answers.iter().collect();
        assert_eq!(
            answers,
            vec![
                Err(TopicChangeRefusal::new(
                    codes::UNKNOWN_SERVER_ERROR,
                    "no client here"
                ));
                2
            ]
        );
    }

    #[test]
    fn partition_counts_only_rise() {
        assert_eq!(check_added(&topic(), Some(2), 3), Ok(()));
        let same = check_added(&topic(), Some(3), 3).unwrap_err();
        assert_eq!(same.code, codes::INVALID_PARTITIONS);
        assert_eq!(
            same.message,
            "Topic currently has 3 partitions, which is higher than or equal to the requested 3."
        );
        assert_eq!(
            check_added(&topic(), Some(4), 3).unwrap_err().code,
            codes::INVALID_PARTITIONS
        );
        assert_eq!(
            check_added(&topic(), None, 3).unwrap_err().code,
            codes::UNKNOWN_TOPIC_OR_PARTITION
        );
    }
}
