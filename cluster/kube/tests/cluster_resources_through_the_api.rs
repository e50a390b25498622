//! The adapters that read and write cluster resources, against a real API server with the
//! CRDs of `deploy/crds/` applied: EndpointSlice readiness becomes broker ids, KafkaTopics
//! are created, listed, patched, watched and deleted by Kafka name, and the assignment
//! mirror shows up through the API and `kubectl get`.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::{BrokerId, TopicName};
use kaas_cluster_kube::assignment_mirror::{
    AssignmentMirror, KafkaClusterAssignments, MIRROR_NAME,
};
use kaas_cluster_kube::endpoint_slices::ServiceEndpoints;
use kaas_cluster_kube::kafka_topic::KafkaTopic;
use kaas_cluster_kube::topic_store::{CreateOutcome, TopicPatch, TopicSet, TopicStore};
use kaas_cluster_kube::KubeContext;
use kaas_test_support::apiserver::{admin_client, apply_crds, fresh_namespace, kubectl};
use kube::api::{Api, PostParams};

async fn context(prefix: &str) -> KubeContext {
    let client = admin_client().await;
    apply_crds(&client).await;
    let namespace = fresh_namespace(&client, prefix).await;
    KubeContext::new(client, namespace)
}

fn slice(name: &str, service: &str, endpoints: serde_json::Value) -> EndpointSlice {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "kafka", "port": 9092, "protocol": "TCP"}],
        "endpoints": endpoints,
    }))
    .unwrap()
}

fn endpoint(ip: &str, pod: &str, ready: Option<bool>) -> serde_json::Value {
    let mut endpoint = serde_json::json!({
        "addresses": [ip],
        "targetRef": {"kind": "Pod", "name": pod, "namespace": "x"},
    });
    if let Some(ready) = ready {
        endpoint["conditions"] = serde_json::json!({"ready": ready});
    }
    endpoint
}

#[tokio::test]
async fn ready_endpoints_of_the_named_service_become_broker_ids() {
    let context = context("endpoints").await;
    let api = Api::<EndpointSlice>::namespaced(context.client.clone(), &context.namespace);
    let create = |s: EndpointSlice| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), &s).await.unwrap() }
    };
    create(slice(
        "kaas-a",
        "kaas",
        serde_json::json!([
            endpoint("10.0.0.1", "kaas-0", Some(true)),
            endpoint("10.0.0.2", "kaas-1", Some(false)),
            endpoint("10.0.0.3", "kaas-2", None),
            endpoint("10.0.0.4", "no-ordinal", Some(true)),
        ]),
    ))
    .await;
    // A second slice of the same Service (and the same pod again) adds broker 5 once.
    create(slice(
        "kaas-b",
        "kaas",
        serde_json::json!([
            endpoint("10.0.0.5", "kaas-5", Some(true)),
            endpoint("10.0.0.1", "kaas-0", Some(true))
        ]),
    ))
    .await;
    // Another Service's slice is not read.
    create(slice(
        "other",
        "other",
        serde_json::json!([endpoint("10.0.0.9", "kaas-9", Some(true))]),
    ))
    .await;

    let ready = ServiceEndpoints::new(&context, "kaas")
        .ready_brokers()
        .await
        .unwrap();
    let expected: BTreeMap<BrokerId, String> = [(0, "kaas-0"), (2, "kaas-2"), (5, "kaas-5")]
        .into_iter()
        .map(|(id, pod)| (BrokerId(id), pod.to_owned()))
        .collect();
    assert_eq!(ready, expected);
    let other = ServiceEndpoints::new(&context, "other")
        .ready_brokers()
        .await
        .unwrap();
    assert_eq!(other.keys().copied().collect::<Vec<_>>(), vec![BrokerId(9)]);
    assert!(ServiceEndpoints::new(&context, "none")
        .ready_brokers()
        .await
        .unwrap()
        .is_empty());
}

fn topic(name: &str) -> TopicName {
    TopicName::new(name).unwrap()
}

/// The next topic set from the watch, failing after 20 s.
async fn next_set(
    watch: &mut (impl futures_util::Stream<Item = Result<TopicSet, kaas_cluster_kube::KubeAdapterError>>
              + Unpin),
) -> TopicSet {
    tokio::time::timeout(Duration::from_secs(20), watch.next())
        .await
        .expect("a watch event within 20 s")
        .expect("the watch does not end")
        .expect("the watch works")
}

/// Reads the watch until `done` holds for the topic set (events may be coalesced).
async fn watch_until(
    watch: &mut (impl futures_util::Stream<Item = Result<TopicSet, kaas_cluster_kube::KubeAdapterError>>
              + Unpin),
    done: impl Fn(&TopicSet) -> bool,
) -> TopicSet {
    loop {
        let set = next_set(watch).await;
        if done(&set) {
            return set;
        }
    }
}

#[tokio::test]
async fn kafka_topics_are_created_patched_watched_and_deleted_by_kafka_name() {
    let context = context("topics").await;
    let store = TopicStore::new(&context);
    let mut watch = Box::pin(store.watch());
    assert!(
        next_set(&mut watch).await.is_empty(),
        "the initial set of a new namespace"
    );

    let configs: BTreeMap<String, String> =
        [("retention.ms".to_owned(), "86400000".to_owned())].into();
    let created = store
        .create(
            &topic("orders"),
            3,
            Some("ASNFZ4mrze_-3LqYdlQyEA".into()),
            configs.clone(),
        )
        .await
        .unwrap();
    let CreateOutcome::Created(orders) = created else {
        panic!("{created:?}")
    };
    assert_eq!(
        (orders.resource_name.as_str(), orders.partitions),
        ("orders", 3)
    );
    let set = watch_until(&mut watch, |s| s.contains_key(&topic("orders"))).await;
    assert_eq!(set[&topic("orders")].configs, configs);
    assert_eq!(
        set[&topic("orders")].topic_id.as_deref(),
        Some("ASNFZ4mrze_-3LqYdlQyEA")
    );

    // A Kafka name Kubernetes does not allow gets a derived resource name.
    let CreateOutcome::Created(upper) = store
        .create(&topic("Audit_Log"), 1, None, BTreeMap::new())
        .await
        .unwrap()
    else {
        panic!("Audit_Log not created")
    };
    assert!(
        upper.resource_name.starts_with("audit-log-"),
        "{}",
        upper.resource_name
    );
    assert_eq!(
        store
            .create(&topic("orders"), 5, None, BTreeMap::new())
            .await
            .unwrap(),
        CreateOutcome::AlreadyExists
    );
    assert_eq!(
        store
            .create(&topic("Audit_Log"), 5, None, BTreeMap::new())
            .await
            .unwrap(),
        CreateOutcome::AlreadyExists
    );

    // A KafkaTopic applied by hand (kubectl) under another name appears as its topic.
    let by_hand = std::env::temp_dir().join(format!("kaas-kt-{}.yaml", std::process::id()));
    std::fs::write(
        &by_hand,
        "apiVersion: kaas.io/v1\nkind: KafkaTopic\nmetadata:\n  name: payments-topic\nspec:\n  topicName: Payments\n  partitions: 2\n",
    )
    .unwrap();
    let applied = kubectl(&[
        "apply",
        "-n",
        &context.namespace,
        "-f",
        by_hand.to_str().unwrap(),
    ]);
    std::fs::remove_file(&by_hand).unwrap();
    assert!(applied.contains("payments-topic created"), "{applied}");
    let set = watch_until(&mut watch, |s| s.contains_key(&topic("Payments"))).await;
    assert_eq!(
        set.keys().map(TopicName::as_str).collect::<BTreeSet<_>>(),
        ["Audit_Log", "Payments", "orders"].into()
    );
    assert_eq!(store.list().await.unwrap(), set);
    assert_eq!(
        store
            .find(&topic("Payments"))
            .await
            .unwrap()
            .unwrap()
            .metadata
            .name
            .as_deref(),
        Some("payments-topic")
    );

    // Patches: more partitions, a config set and one removed, a topic id given.
    let patched = store
        .patch(
            &topic("orders"),
            &TopicPatch {
                partitions: Some(6),
                configs: [
                    ("retention.ms".to_owned(), None),
                    ("cleanup.policy".to_owned(), Some("compact".to_owned())),
                ]
                .into(),
                ..TopicPatch::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(patched.partitions, 6);
    assert_eq!(
        patched.configs,
        [("cleanup.policy".to_owned(), "compact".to_owned())].into()
    );
    let given = store
        .patch(
            &topic("Payments"),
            &TopicPatch {
                topic_id: Some("AAAAAAAAAAAAAAAAAAAAAA".into()),
                ..TopicPatch::default()
            },
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(given.topic_id.as_deref(), Some("AAAAAAAAAAAAAAAAAAAAAA"));
    let set = watch_until(&mut watch, |s| {
        s.get(&topic("orders")).is_some_and(|t| t.partitions == 6)
            && s.get(&topic("Payments"))
                .is_some_and(|t| t.topic_id.is_some())
    })
    .await;
    assert!(!set[&topic("orders")].configs.contains_key("retention.ms"));

    // The CRD's schema refuses what Kafka would refuse: fewer partitions, a changed id.
    let shrink = store
        .patch(
            &topic("orders"),
            &TopicPatch {
                partitions: Some(2),
                ..TopicPatch::default()
            },
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        shrink.contains("partitions can only grow") && shrink.contains("cannot patch"),
        "{shrink}"
    );
    assert!(store
        .patch(
            &topic("missing"),
            &TopicPatch {
                partitions: Some(2),
                ..TopicPatch::default()
            }
        )
        .await
        .unwrap()
        .is_none());

    // Deletes by Kafka name, whatever the resource's name.
    assert!(store.delete(&topic("Payments")).await.unwrap());
    assert!(store.delete(&topic("Audit_Log")).await.unwrap());
    assert!(!store.delete(&topic("Payments")).await.unwrap());
    let set = watch_until(&mut watch, |s| s.len() == 1).await;
    assert_eq!(set.keys().next(), Some(&topic("orders")));
    let left = Api::<KafkaTopic>::namespaced(context.client.clone(), &context.namespace)
        .list(&Default::default())
        .await
        .unwrap();
    assert_eq!(left.items.len(), 1);
}

const ASSIGNMENT: &str = r#"{"format": 1, "controller_epoch": 3, "assignment_version": 17,
 "brokers": [{"id": 0, "host": "kaas-0.kaas", "port": 9092}, {"id": 1, "host": "kaas-1.kaas", "port": 9092}],
 "topics": {"orders": {"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": 2}},
 "partitions": {"orders": [{"leader": 0, "leader_epoch": 3}, {"leader": 1, "leader_epoch": 2}]},
 "consumerGroups": {"billing": 1}}"#;

#[tokio::test]
async fn the_assignment_mirror_shows_the_newest_assignment() {
    let context = context("mirror").await;
    let first = Assignment::from_json(ASSIGNMENT.as_bytes()).unwrap();
    let newer = Assignment::from_json(
        ASSIGNMENT
            .replace("\"assignment_version\": 17", "\"assignment_version\": 18")
            .replace(
                "{\"leader\": 1, \"leader_epoch\": 2}",
                "{\"leader\": 0, \"leader_epoch\": 4}",
            )
            .as_bytes(),
    )
    .unwrap();
    let handle = AssignmentMirror::new(&context).start();
    handle.publish(&first);
    handle.publish(&newer);

    let api =
        Api::<KafkaClusterAssignments>::namespaced(context.client.clone(), &context.namespace);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let mirrored = loop {
        if let Some(found) = api.get_opt(MIRROR_NAME).await.unwrap() {
            if found.spec.assignment_version == 18 {
                break found;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "mirror not at version 18 in 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(mirrored.spec, (&newer).into());
    assert_eq!(mirrored.spec.controller_epoch, 3);
    assert_eq!(mirrored.spec.partitions["orders"][1].leader, 0);
    assert_eq!(mirrored.spec.consumer_groups["billing"], 1);
    assert_eq!(mirrored.spec.brokers.len(), 2);

    let table = kubectl(&["get", "kafkaclusterassignments", "-n", &context.namespace]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "EPOCH", "VERSION", "AGE"], "{table}");
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["kaas", "3", "18"], "{table}");
    drop(handle);
}

#[tokio::test]
async fn the_crds_pass_a_server_side_dry_run_of_their_kustomization() {
    let client = admin_client().await;
    apply_crds(&client).await;
    let crds = kaas_test_support::apiserver::workspace_root().join("deploy/crds");
    let output = kubectl(&["apply", "--dry-run=server", "-k", crds.to_str().unwrap()]);
    for crd in ["kafkatopics.kaas.io", "kafkaclusterassignments.kaas.io"] {
        assert!(
            output.contains(&format!(
                "customresourcedefinition.apiextensions.k8s.io/{crd}"
            )),
            "{output}"
        );
    }
    assert!(output.contains("(server dry run)"), "{output}");
}

#[tokio::test]
async fn every_manifest_of_deploy_passes_a_server_side_dry_run() {
    let client = admin_client().await;
    apply_crds(&client).await;
    let namespace = fresh_namespace(&client, "deploy").await;
    let deploy = kaas_test_support::apiserver::workspace_root().join("deploy");
    let output = kubectl(&[
        "apply",
        "--dry-run=server",
        "-n",
        &namespace,
        "-k",
        deploy.to_str().unwrap(),
    ]);
    for object in [
        "statefulset.apps/kaas",
        "service/kaas",
        "persistentvolumeclaim/",
        "role.rbac.authorization.k8s.io/",
        "rolebinding.rbac.authorization.k8s.io/",
        "serviceaccount/",
        "poddisruptionbudget.policy/",
        "daemonset.apps/",
        "customresourcedefinition.apiextensions.k8s.io/kafkatopics.kaas.io",
    ] {
        assert!(output.contains(object), "{object} missing from:\n{output}");
    }
    assert!(output.contains("(server dry run)"), "{output}");
}
