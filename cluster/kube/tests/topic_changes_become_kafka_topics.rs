//! The KafkaTopic service (`topic_requests`) against a real API server with the CRDs of
//! `deploy/crds/`: a broker's topic changes, sent as they are over a channel, create, patch
//! and delete KafkaTopics, and come back with Kafka's answers (TOPIC_ALREADY_EXISTS,
//! UNKNOWN_TOPIC_OR_PARTITION, INVALID_PARTITIONS); `kubectl get kafkatopics` shows what was
//! created, with the broker's topic id; a legacy AlterConfigs replacement is the request's
//! set as a whole, made on the resource itself.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use futures_util::stream;
use kaas_cluster::ids::{TopicId, TopicName};
use kaas_cluster::topic_change::{codes, TopicChange, TopicChangeAnswer, TopicChangeRequest};
use kaas_cluster_kube::topic_requests::serve;
use kaas_cluster_kube::topic_store::TopicStore;
use kaas_cluster_kube::KubeContext;
use kaas_test_support::apiserver::{admin_client, apply_crds, fresh_namespace, kubectl};
use tokio::sync::{mpsc, oneshot};

async fn context(prefix: &str) -> KubeContext {
    let client = admin_client().await;
    apply_crds(&client).await;
    let namespace = fresh_namespace(&client, prefix).await;
    KubeContext::new(client, namespace)
}

fn topic(name: &str) -> TopicName {
    TopicName::new(name).unwrap()
}

/// The broker's end: sends one change and waits for its answer.
struct Broker(mpsc::UnboundedSender<TopicChangeRequest>);

impl Broker {
    async fn ask(&self, change: TopicChange) -> TopicChangeAnswer {
        let (answer, answered) = oneshot::channel();
        let request = TopicChangeRequest::new(change, move |outcome| {
            let _ = answer.send(outcome);
        });
        self.0.send(request).unwrap();
        answered.await.unwrap()
    }

    async fn code(&self, change: TopicChange) -> i16 {
        match self.ask(change).await {
            Ok(()) => 0,
            Err(refusal) => refusal.code,
        }
    }
}

fn start(store: TopicStore) -> Broker {
    let (sender, receiver) = mpsc::unbounded_channel();
    let requests = stream::unfold(receiver, |mut receiver| async move {
        receiver.recv().await.map(|request| (request, receiver))
    });
    tokio::spawn(serve(store, requests));
    Broker(sender)
}

#[tokio::test]
async fn topic_changes_create_patch_and_delete_kafka_topics_with_kafkas_answers() {
    let context = context("topicchanges").await;
    let store = TopicStore::new(&context);
    let broker = start(store.clone());
    let orders = topic("orders");
    let id = TopicId([7; 16]);
    let create = |name: &TopicName, partitions: i32| TopicChange::Create {
        topic: name.clone(),
        partitions,
        topic_id: id,
        configs: BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]),
    };

    assert_eq!(broker.ask(create(&orders, 3)).await, Ok(()));
    let created = store.find(&orders).await.unwrap().unwrap();
    assert_eq!(created.spec.partitions, 3);
    assert_eq!(
        created.spec.topic_id.as_deref(),
        Some(id.to_string().as_str())
    );
    assert_eq!(created.spec.configs["retention.ms"], "1000");
    let listed = kubectl(&["get", "kafkatopics", "-n", &context.namespace]);
    assert!(
        listed.contains("orders") && listed.contains(&id.to_string()),
        "{listed}"
    );

    let duplicate = broker.ask(create(&orders, 1)).await.unwrap_err();
    assert_eq!(duplicate.code, codes::TOPIC_ALREADY_EXISTS);
    assert_eq!(duplicate.message, "Topic 'orders' already exists.");
    // A Kafka name Kubernetes does not allow as a resource name is created under a derived one.
    assert_eq!(broker.code(create(&topic("Orders_EU"), 1)).await, 0);
    let derived = store.find(&topic("Orders_EU")).await.unwrap().unwrap();
    assert_eq!(derived.spec.topic_name.as_deref(), Some("Orders_EU"));

    let add = |name: &TopicName, count: i32| TopicChange::AddPartitions {
        topic: name.clone(),
        count,
    };
    let same = broker.ask(add(&orders, 3)).await.unwrap_err();
    assert_eq!(same.code, codes::INVALID_PARTITIONS);
    assert_eq!(
        same.message,
        "Topic currently has 3 partitions, which is higher than or equal to the requested 3."
    );
    assert_eq!(
        broker.code(add(&orders, 2)).await,
        codes::INVALID_PARTITIONS
    );
    assert_eq!(broker.code(add(&orders, 5)).await, 0);
    assert_eq!(
        store.find(&orders).await.unwrap().unwrap().spec.partitions,
        5
    );

    let alter = |name: &TopicName| TopicChange::AlterConfigs {
        topic: name.clone(),
        configs: BTreeMap::from([
            ("retention.ms".to_string(), None),
            ("cleanup.policy".to_string(), Some("compact".to_string())),
        ]),
    };
    assert_eq!(broker.code(alter(&orders)).await, 0);
    let altered = store.find(&orders).await.unwrap().unwrap();
    assert_eq!(
        altered.spec.configs,
        BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())])
    );
    assert_eq!(
        altered.spec.topic_id.as_deref(),
        Some(id.to_string().as_str())
    );

    let delete = |name: &TopicName| TopicChange::Delete {
        topic: name.clone(),
    };
    assert_eq!(broker.code(delete(&orders)).await, 0);
    assert!(store.find(&orders).await.unwrap().is_none());
    let missing = topic("missing");
    for change in [delete(&orders), add(&missing, 4), alter(&missing)] {
        let refused = broker.ask(change.clone()).await.unwrap_err();
        assert_eq!(
            refused.code,
            codes::UNKNOWN_TOPIC_OR_PARTITION,
            "{change:?}: {refused:?}"
        );
    }
    // Created again after the delete: a new resource, with the new id.
    let recreated = TopicChange::Create {
        topic: orders.clone(),
        partitions: 1,
        topic_id: TopicId([9; 16]),
        configs: BTreeMap::new(),
    };
    assert_eq!(broker.code(recreated).await, 0);
    let again = store.find(&orders).await.unwrap().unwrap();
    assert_eq!(
        again.spec.topic_id.as_deref(),
        Some(TopicId([9; 16]).to_string().as_str())
    );
}

/// Legacy AlterConfigs in cluster mode: the request's set replaces the KafkaTopic's configs
/// as a whole, on the resource itself. A key another broker set a moment earlier (which the
/// sending broker's view may not show yet) is reset too; partitions and the topic id stay;
/// replacements racing each other all go through (a lost compare-and-swap is read again and
/// retried) and the result is one of their sets, whole.
#[tokio::test]
async fn replaced_configs_are_the_requests_set_whatever_was_set_in_between() {
    let context = context("replaceconfigs").await;
    let store = TopicStore::new(&context);
    let broker = start(store.clone());
    let orders = topic("orders");
    let id = TopicId([5; 16]);
    let create = TopicChange::Create {
        topic: orders.clone(),
        partitions: 2,
        topic_id: id,
        configs: BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]),
    };
    assert_eq!(broker.ask(create).await, Ok(()));
    // Another broker sets a key; this one's view still shows only retention.ms.
    let other = TopicChange::AlterConfigs {
        topic: orders.clone(),
        configs: BTreeMap::from([("cleanup.policy".to_string(), Some("compact".to_string()))]),
    };
    assert_eq!(broker.ask(other).await, Ok(()));
    let replace = |configs: &[(&str, &str)]| TopicChange::ReplaceConfigs {
        topic: orders.clone(),
        configs: configs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    assert_eq!(
        broker.ask(replace(&[("segment.ms", "60000")])).await,
        Ok(())
    );
    let replaced = store.find(&orders).await.unwrap().unwrap();
    assert_eq!(
        replaced.spec.configs,
        BTreeMap::from([("segment.ms".to_string(), "60000".to_string())]),
        "the request's set, and nothing of what was set before"
    );
    assert_eq!(replaced.spec.partitions, 2);
    assert_eq!(
        replaced.spec.topic_id.as_deref(),
        Some(id.to_string().as_str())
    );
    // An empty set resets every override.
    assert_eq!(broker.ask(replace(&[])).await, Ok(()));
    assert!(store
        .find(&orders)
        .await
        .unwrap()
        .unwrap()
        .spec
        .configs
        .is_empty());

    // Racing replacements of the same resource.
    let sets: Vec<BTreeMap<String, String>> = (0..8)
        .map(|i| {
            BTreeMap::from([
                ("retention.ms".to_string(), format!("{}", 1000 + i)),
                ("segment.ms".to_string(), format!("{}", 60000 + i)),
            ])
        })
        .collect();
    let answers = futures_util::future::join_all(sets.iter().map(|configs| {
        broker.ask(TopicChange::ReplaceConfigs {
            topic: orders.clone(),
            configs: configs.clone(),
        })
    }))
    .await;
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    let last = store.find(&orders).await.unwrap().unwrap();
    assert!(
        sets.contains(&last.spec.configs),
        "one request's whole set: {:?}",
        last.spec.configs
    );

    let missing = broker.ask(TopicChange::ReplaceConfigs {
        topic: topic("missing"),
        configs: BTreeMap::new(),
    });
    assert_eq!(
        missing.await.unwrap_err().code,
        codes::UNKNOWN_TOPIC_OR_PARTITION
    );
}
