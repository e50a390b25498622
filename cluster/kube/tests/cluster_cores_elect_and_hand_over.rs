//! Two real cluster cores (as two brokers run them: `kube_sources` from a kubeconfig, one
//! shared volume) on the real API server, in one namespace: exactly one wins the
//! `kaas-controller` Lease and writes `assignment.json` at epoch = `leaseTransitions` (the
//! epoch recorded on the volume first), with both brokers once both dial in; a KafkaTopic
//! created through the API appears in the next assignment, which the KafkaClusterAssignments
//! mirror shows; stopping the holder releases the Lease and the other core takes over at
//! once (well before the 20 s lease duration could expire) at a higher epoch.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kaas_cluster::ids::TopicName;
use kaas_cluster_kube::assignment_mirror::{KafkaClusterAssignments, MIRROR_NAME};
use kaas_cluster_kube::lease::ControllerLease;
use kaas_cluster_kube::topic_store::TopicStore;
use kaas_cluster_kube::{KubeContext, KubeEnvironment};
use kaas_test_support::apiserver::{admin_client, admin_config, apply_crds, fresh_namespace};
use kube::api::{Api, PostParams};
use support::controller_core::{file_until, recorded_epoch, start_core};

const LEASE: Duration = Duration::from_secs(20);
const RENEW: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_core_leads_writes_at_the_lease_epoch_and_hands_over_on_release() {
    let admin = admin_client().await;
    apply_crds(&admin).await;
    let namespace = fresh_namespace(&admin, "cores").await;
    let context = KubeContext::new(admin.clone(), namespace.clone());
    let topics = TopicStore::new(&context);
    topics
        .create(&TopicName::new("orders").unwrap(), 3, None, BTreeMap::new())
        .await
        .unwrap();
    // Addresses are data only (the API server refuses loopback ones); nothing dials them.
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "kaas-abc", "labels": {"kubernetes.io/service-name": "kaas"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["192.0.2.1"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "kaas-0"}},
            {"addresses": ["192.0.2.2"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "kaas-1"}},
        ],
    }))
    .unwrap();
    Api::<EndpointSlice>::namespaced(admin.clone(), &namespace)
        .create(&PostParams::default(), &slice)
        .await
        .unwrap();

    let data = tempfile::tempdir().unwrap();
    let cluster = kaas_volume::cluster_dir(data.path());
    let environment = KubeEnvironment {
        config: admin_config().await,
        namespace: namespace.clone(),
    };
    let mut cores: Vec<_> = (0..2)
        .map(|id| Some(start_core(&environment, id, &cluster, LEASE, RENEW)))
        .collect();

    let both = file_until(
        &cluster,
        "naming both brokers",
        Duration::from_secs(20),
        |f| f.brokers == BTreeSet::from([0, 1]) && f.topics.contains("orders"),
    )
    .await;
    let lease = ControllerLease::new(&context);
    let held = lease.read().await.unwrap().expect("the Lease exists");
    let holder = held.holder.clone().expect("someone holds the Lease");
    assert!(holder == "kaas-0" || holder == "kaas-1", "{holder}");
    assert_eq!(
        both.controller_epoch,
        u64::try_from(held.transitions).unwrap()
    );
    assert_eq!(
        recorded_epoch(&cluster),
        Some(format!("{}\n", held.transitions)),
        "the epoch is on the volume"
    );

    topics
        .create(
            &TopicName::new("payments").unwrap(),
            2,
            None,
            BTreeMap::new(),
        )
        .await
        .unwrap();
    let grown = file_until(&cluster, "with payments", Duration::from_secs(15), |f| {
        f.topics.contains("payments")
    })
    .await;
    assert!(grown.assignment_version > both.assignment_version);
    assert_eq!(grown.controller_epoch, both.controller_epoch);

    let mirror = Api::<KafkaClusterAssignments>::namespaced(admin.clone(), &namespace);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let shown = mirror.get_opt(MIRROR_NAME).await.unwrap();
        if shown.as_ref().is_some_and(|m| {
            m.spec.assignment_version == grown.assignment_version
                && m.spec.topics.contains_key("payments")
        }) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the mirror never showed version {}: {shown:?}",
            grown.assignment_version
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Stop the holder: it releases the Lease, and the other takes over without waiting for
    // the 20 s lease duration.
    let (stopped, survivor) = if holder == "kaas-0" { (0, 1) } else { (1, 0) };
    let core = cores[stopped].take().unwrap();
    tokio::task::spawn_blocking(move || core.shutdown())
        .await
        .unwrap();
    let after = file_until(
        &cluster,
        "from the new controller",
        Duration::from_secs(12),
        |f| f.controller_epoch > both.controller_epoch,
    )
    .await;
    let taken = lease.read().await.unwrap().unwrap();
    assert_eq!(
        taken.holder.as_deref(),
        Some(format!("kaas-{survivor}").as_str())
    );
    assert_eq!(
        after.controller_epoch,
        u64::try_from(taken.transitions).unwrap()
    );
    assert!(after.assignment_version > grown.assignment_version);
    assert!(after.topics.contains("orders") && after.topics.contains("payments"));
    assert_eq!(
        recorded_epoch(&cluster),
        Some(format!("{}\n", taken.transitions))
    );
    let alone = file_until(
        &cluster,
        "naming the survivor alone",
        Duration::from_secs(15),
        |f| f.brokers == BTreeSet::from([i64::from(survivor)]),
    )
    .await;
    assert_eq!(alone.controller_epoch, after.controller_epoch);

    let core = cores[survivor as usize].take().unwrap();
    tokio::task::spawn_blocking(move || core.shutdown())
        .await
        .unwrap();
    let released = lease.read().await.unwrap().unwrap();
    assert_eq!(
        released.holder, None,
        "a stopping controller releases the Lease"
    );
    assert_eq!(
        released.transitions, taken.transitions,
        "and keeps its epoch"
    );
}
