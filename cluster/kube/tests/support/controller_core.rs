//! A cluster core wired to the real API server the way the `kaas` binary wires it
//! (`kube_sources` from a [`KubeEnvironment`], the Lease campaign, the EndpointSlice and
//! KafkaTopic watches, the mirror), on a shared cluster directory, and what a test reads
//! back from that directory.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::ids::BrokerId;
use kaas_cluster_core::{BrokerHooks, ClusterCore, CoreOptions};
use kaas_cluster_kube::lease_campaign::CampaignOptions;
use kaas_cluster_kube::{kube_sources, KubeEnvironment, SharedContext};

/// Starts the core of broker `kaas-<id>` on `cluster_dir` (`<data>/__cluster`), its heartbeat
/// server on a free loopback port.
pub fn start_core(
    environment: &KubeEnvironment,
    id: i32,
    cluster_dir: &Path,
    lease_duration: Duration,
    renew_period: Duration,
) -> ClusterCore {
    let campaign = CampaignOptions::new(&format!("kaas-{id}"), lease_duration, renew_period);
    let sources = kube_sources(
        SharedContext::from_environment(environment.clone()),
        campaign,
        "kaas",
    );
    let options = CoreOptions::new(
        cluster_dir,
        "127.0.0.1:0".parse().expect("address"),
        "127.0.0.1",
    );
    let hooks = BrokerHooks {
        endpoint: BrokerEndpoint {
            id: BrokerId(id),
            host: "127.0.0.1".into(),
            port: 19_092 + u16::try_from(id).expect("small id"),
        },
        applied: Box::new(|| None),
        fenced: Box::new(Vec::new),
        on_assignment_changed: Box::new(|| {}),
        observe_epoch: Box::new(|_| {}),
        tasks: Vec::new(),
    };
    ClusterCore::spawn(options, sources, hooks).expect("the cluster core starts")
}

/// What a test needs of `assignment.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileState {
    pub controller_epoch: u64,
    pub assignment_version: u64,
    pub brokers: BTreeSet<i64>,
    pub topics: BTreeSet<String>,
}

/// `<cluster_dir>/assignment.json` now; `None` while there is none.
pub fn read_file(cluster_dir: &Path) -> Option<FileState> {
    let bytes = std::fs::read(cluster_dir.join("assignment.json")).ok()?;
    let json: serde_json::Value = serde_json::from_slice(&bytes).expect("assignment.json is JSON");
    Some(FileState {
        controller_epoch: json["controller_epoch"].as_u64().expect("controller_epoch"),
        assignment_version: json["assignment_version"]
            .as_u64()
            .expect("assignment_version"),
        brokers: json["brokers"]
            .as_array()
            .expect("brokers")
            .iter()
            .map(|b| b["id"].as_i64().expect("broker id"))
            .collect(),
        topics: json["topics"]
            .as_object()
            .expect("topics")
            .keys()
            .cloned()
            .collect(),
    })
}

/// `<cluster_dir>/controller-epoch` now.
pub fn recorded_epoch(cluster_dir: &Path) -> Option<String> {
    std::fs::read_to_string(cluster_dir.join("controller-epoch")).ok()
}

/// Polls the file until `wanted` holds (at most `within`).
pub async fn file_until(
    cluster_dir: &Path,
    what: &str,
    within: Duration,
    wanted: impl Fn(&FileState) -> bool,
) -> FileState {
    let deadline = Instant::now() + within;
    loop {
        let state = read_file(cluster_dir);
        if let Some(state) = state.as_ref().filter(|s| wanted(s)) {
            return state.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no assignment.json {what} within {within:?}; last seen {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
