//! Three (or more) `kaas` brokers in cluster mode against a real Kubernetes API server, as a
//! StatefulSet would run them: pod `kaas-<id>`, its own loopback address with the default
//! ports (Kafka 9092, admin 9644, heartbeat 9094), one shared `--data-dir`, and the Lease,
//! EndpointSlice and KafkaTopic sources (`--assignment-source kube`) talking to the API server
//! through `KUBECONFIG` and `POD_NAMESPACE`.
//!
//! The API server is the one of `kaas_test_support::apiserver` (one per test
//! binary); each cluster gets a fresh namespace with the CRDs of `deploy/crds` and the Service
//! `kaas`'s EndpointSlice, one ready endpoint per broker (`targetRef.name` = the pod name),
//! which the test edits the way a kubelet would (a broker not ready, or gone; its address is a
//! stand-in, as the API refuses loopback addresses there). Nothing here
//! decides anything: the brokers' controller does.
//!
//! Addresses: `127.31.<n>.1`, `.2`, `.3` (all of 127/8 is loopback on Linux), `<n>` the first
//! from a per-process start whose default ports are free on every address, so two test
//! binaries (or a developer's broker on 127.0.0.1:9092) never collide.
//!
//! Every process is stopped and its ports seen closed when the cluster is dropped.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kaas_cluster::assignment::Assignment;
use kaas_test_support::apiserver;
use kube::api::{Api, Patch, PatchParams};

use crate::support::cluster::Broker;
use crate::support::http_get;

/// The EndpointSlice of the Service `kaas` the test keeps (the Service's own name, as
/// Kubernetes names the first slice `<service>-<suffix>`).
const SLICE: &str = "kaas-test";

/// How the test shows a broker to the controller in the EndpointSlice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Ready,
    NotReady,
    Absent,
}

/// How the brokers of a [`KubeCluster`] reach the API server and log.
#[derive(Clone, Debug, Default)]
pub struct Reach {
    /// The port on 127.0.0.1 they dial for the API server (a proxy in front of it: the
    /// server's certificate names 127.0.0.1, so TLS works through it); `None`: the server's
    /// own port.
    pub api_port: Option<u16>,
    /// `RUST_LOG` of the brokers; `None`: `warn`.
    pub rust_log: Option<String>,
    /// Each broker's stderr to `<scratch>/kaas-<id>.log` ([`Broker::log_text`]), not the test's.
    pub logs: bool,
}

/// The brokers, their namespace and the shared volume.
pub struct KubeCluster {
    pub namespace: String,
    pub brokers: Vec<Broker>,
    /// The shared `--data-dir`.
    pub data_dir: PathBuf,
    /// Scratch space of the test (files of the clients), removed on drop.
    pub scratch: PathBuf,
    endpoints: BTreeMap<i32, Endpoint>,
    runtime: tokio::runtime::Runtime,
    client: kube::Client,
    _dir: tempfile::TempDir,
}

impl KubeCluster {
    /// A fresh namespace (`<prefix>-<pid>-<n>`) with the CRDs and an EndpointSlice naming
    /// `count` brokers, and `count` brokers started with `flags` (after
    /// `--assignment-source kube`), not yet waited for.
    pub fn start(prefix: &str, count: i32, flags: &[&str]) -> KubeCluster {
        Self::start_with(prefix, count, flags, &Reach::default())
    }

    /// [`KubeCluster::start`], the brokers reaching the API server as `reach` says.
    pub fn start_with(prefix: &str, count: i32, flags: &[&str], reach: &Reach) -> KubeCluster {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let server = apiserver::api_server();
        let client = runtime.block_on(apiserver::admin_client());
        let namespace = runtime.block_on(apiserver::fresh_namespace(&client, prefix));
        runtime.block_on(apiserver::apply_crds(&client));
        let dir = tempfile::Builder::new()
            .prefix("kaas-kube-cluster-")
            .tempdir()
            .expect("tempdir");
        let data_dir = dir.path().join("data");
        let scratch = dir.path().join("scratch");
        std::fs::create_dir_all(kaas_volume::cluster_dir(&data_dir)).expect("data dir");
        std::fs::create_dir_all(&scratch).expect("scratch dir");
        let subnet = free_subnet(count);
        let mut args: Vec<String> = vec!["--assignment-source".into(), "kube".into()];
        args.extend(flags.iter().map(|f| f.to_string()));
        let kubeconfig = match reach.api_port {
            None => server.kubeconfig.clone(),
            Some(port) => {
                let text = std::fs::read_to_string(&server.kubeconfig).expect("kubeconfig");
                let direct = format!("https://127.0.0.1:{}", server.port);
                assert!(text.contains(&direct), "the kubeconfig names {direct}");
                let path = scratch.join("kubeconfig");
                std::fs::write(
                    &path,
                    text.replace(&direct, &format!("https://127.0.0.1:{port}")),
                )
                .expect("write the brokers' kubeconfig");
                path
            }
        };
        let mut env = vec![
            ("KUBECONFIG".to_string(), kubeconfig.display().to_string()),
            ("POD_NAMESPACE".to_string(), namespace.clone()),
        ];
        if let Some(filter) = &reach.rust_log {
            env.push(("RUST_LOG".to_string(), filter.clone()));
        }
        let brokers = (0..count)
            .map(|id| {
                let mut broker = Broker::pod(id, broker_ip(subnet, id), &data_dir, &args, &env);
                if reach.logs {
                    broker.log = Some(scratch.join(format!("kaas-{id}.log")));
                }
                broker
            })
            .collect();
        let mut cluster = KubeCluster {
            namespace,
            brokers,
            data_dir,
            scratch,
            endpoints: (0..count).map(|id| (id, Endpoint::Ready)).collect(),
            runtime,
            client,
            _dir: dir,
        };
        cluster.publish_endpoints();
        for broker in &mut cluster.brokers {
            broker.start();
        }
        cluster
    }

    /// `host:port` of every broker's Kafka listener.
    pub fn bootstrap(&self) -> String {
        self.brokers
            .iter()
            .map(|b| b.kafka.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn broker(&mut self, id: i32) -> &mut Broker {
        self.brokers
            .iter_mut()
            .find(|b| b.id == id)
            .expect("a broker of this cluster")
    }

    /// Shows broker `id` to the controller as `endpoint` in the EndpointSlice.
    pub fn set_endpoint(&mut self, id: i32, endpoint: Endpoint) {
        self.endpoints.insert(id, endpoint);
        self.publish_endpoints();
    }

    fn publish_endpoints(&self) {
        let endpoints: Vec<serde_json::Value> = self
            .brokers
            .iter()
            .filter_map(|b| {
                let ready = match self.endpoints.get(&b.id) {
                    Some(Endpoint::Ready) => true,
                    Some(Endpoint::NotReady) => false,
                    _ => return None,
                };
                // The API server refuses loopback addresses in an EndpointSlice; the
                // controller matches endpoints to brokers by `targetRef.name`, so each gets
                // a stand-in pod address (TEST-NET-1).
                Some(serde_json::json!({
                    "addresses": [format!("192.0.2.{}", b.id + 1)],
                    "conditions": {"ready": ready},
                    "targetRef": {"kind": "Pod", "name": format!("kaas-{}", b.id),
                                  "namespace": self.namespace},
                }))
            })
            .collect();
        let slice = serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": SLICE, "labels": {"kubernetes.io/service-name": "kaas"}},
            "addressType": "IPv4",
            "ports": [{"name": "kafka", "port": 9092, "protocol": "TCP"}],
            "endpoints": endpoints,
        });
        let api = Api::<EndpointSlice>::namespaced(self.client.clone(), &self.namespace);
        self.runtime
            .block_on(api.patch(
                SLICE,
                &PatchParams::apply("kaas-tests").force(),
                &Patch::Apply(&slice),
            ))
            .expect("apply the EndpointSlice");
    }

    /// The broker holding the Lease `kaas-controller` (by its holder identity, the pod
    /// name), whether or not the holder is still alive.
    pub fn lease_holder(&self) -> Option<i32> {
        let api = Api::<Lease>::namespaced(self.client.clone(), &self.namespace);
        let lease = self
            .runtime
            .block_on(api.get_opt("kaas-controller"))
            .expect("read the Lease")?;
        let holder = lease.spec?.holder_identity?;
        holder.strip_prefix("kaas-")?.parse().ok()
    }

    /// The Lease's `metadata.resourceVersion` (it changes with every renewal), `None` when
    /// there is no Lease.
    pub fn lease_version(&self) -> Option<String> {
        let api = Api::<Lease>::namespaced(self.client.clone(), &self.namespace);
        self.runtime
            .block_on(api.get_opt("kaas-controller"))
            .expect("read the Lease")?
            .metadata
            .resource_version
    }

    /// The Lease's `leaseTransitions` (the controller epoch), 0 when there is no Lease.
    pub fn lease_transitions(&self) -> i32 {
        let api = Api::<Lease>::namespaced(self.client.clone(), &self.namespace);
        self.runtime
            .block_on(api.get_opt("kaas-controller"))
            .expect("read the Lease")
            .and_then(|l| l.spec?.lease_transitions)
            .unwrap_or(0)
    }

    /// `assignment.json` as it is on the shared volume now.
    pub fn assignment(&self) -> Option<Assignment> {
        kaas_cluster_file::read_assignment(
            &self
                .data_dir
                .join(kaas_volume::CLUSTER_DIR)
                .join(kaas_volume::ASSIGNMENT_FILE),
        )
        .ok()
    }

    /// Waits (at most `limit`) for an `assignment.json` that `wanted` accepts; panics with
    /// `what` and the last one seen.
    pub fn wait_for_assignment(
        &mut self,
        what: &str,
        limit: Duration,
        wanted: impl Fn(&Assignment) -> bool,
    ) -> Assignment {
        let deadline = Instant::now() + limit;
        let mut last = None;
        while Instant::now() < deadline {
            self.assert_none_exited();
            if let Some(assignment) = self.assignment() {
                if wanted(&assignment) {
                    return assignment;
                }
                last = Some(assignment);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "no assignment {what} within {limit:?}; last: {}",
            last.map_or("none".into(), |a| String::from_utf8_lossy(&a.to_json())
                .into_owned())
        );
    }

    /// Panics when a broker the test did not stop has exited (it failed).
    pub fn assert_none_exited(&mut self) {
        for broker in &mut self.brokers {
            if let Some(status) = broker.exited() {
                panic!("broker {} exited by itself: {status}", broker.id);
            }
        }
    }

    /// Waits until every running broker that is not paused shows assignment `version` or a
    /// later one on `/healthz` (at most 30 s).
    pub fn wait_until_applied(&mut self, version: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for broker in &mut self.brokers {
            if !broker.is_running() || broker.paused {
                continue;
            }
            loop {
                if let Some(status) = broker.exited() {
                    panic!("broker {} exited by itself: {status}", broker.id);
                }
                let applied = http_get(broker.admin, "/healthz")
                    .and_then(|(_, body)| healthz_field(&body, "assignment_version"));
                if applied.is_some_and(|v| v >= version) {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "broker {} never applied assignment {version} (shows {applied:?})",
                    broker.id
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Runs kubectl as the admin in this cluster's namespace.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", &self.namespace];
        all.extend_from_slice(args);
        apiserver::kubectl(&all)
    }

    /// Applies a `KafkaTopic` for `topic` with `kubectl apply`, as an operator would.
    pub fn apply_topic(&self, topic: &str, partitions: i32) {
        let manifest = self.scratch.join(format!("{topic}.kafkatopic.yaml"));
        std::fs::write(
            &manifest,
            format!(
                "apiVersion: kaas.io/v1\nkind: KafkaTopic\nmetadata:\n  name: {topic}\nspec:\n  topicName: {topic}\n  partitions: {partitions}\n"
            ),
        )
        .expect("write the KafkaTopic manifest");
        self.kubectl(&["apply", "-f", &manifest.display().to_string()]);
    }

    /// The mirror `kubectl get kafkaclusterassignments -o json` shows: (controller epoch,
    /// assignment version) of each item.
    pub fn mirrored_assignments(&self) -> Vec<(u64, u64)> {
        let text = self.kubectl(&["get", "kafkaclusterassignments", "-o", "json"]);
        let list: serde_json::Value = serde_json::from_str(&text).expect("kubectl's JSON");
        list["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| {
                        let spec = &item["spec"];
                        Some((
                            spec["controllerEpoch"].as_u64()?,
                            spec["assignmentVersion"].as_u64()?,
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Stops every broker (SIGKILL, which also ends a paused one) and waits until its ports
    /// are closed.
    pub fn stop(&mut self) {
        for broker in &mut self.brokers {
            broker.kill9();
        }
        for broker in &self.brokers {
            broker.wait_for_ports_closed();
        }
    }
}

impl Drop for KubeCluster {
    fn drop(&mut self) {
        for broker in &mut self.brokers {
            broker.kill9();
        }
        if !std::thread::panicking() {
            for broker in &self.brokers {
                broker.wait_for_ports_closed();
            }
        }
    }
}

/// A numeric field of a `/healthz` body (`"name":123`).
pub fn healthz_field(body: &str, name: &str) -> Option<u64> {
    let key = format!("\"{name}\":");
    let rest = &body[body.find(&key)? + key.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Broker `id`'s address in `127.31.<subnet>.0/24`.
pub fn broker_ip(subnet: u8, id: i32) -> Ipv4Addr {
    Ipv4Addr::new(
        127,
        31,
        subnet,
        u8::try_from(id + 1).expect("a small broker id"),
    )
}

/// A `127.31.<n>.0/24` where the default ports of `count` brokers are all free, starting the
/// search at a place of this process's own.
fn free_subnet(count: i32) -> u8 {
    let start = std::process::id() % 250;
    (0..250)
        .map(|i| ((start + i) % 250 + 1) as u8)
        .find(|&subnet| {
            (0..count).all(|id| {
                [9092, 9094, 9644].iter().all(|&port| {
                    TcpListener::bind(SocketAddr::from((broker_ip(subnet, id), port))).is_ok()
                })
            })
        })
        .expect("a loopback subnet with the default ports free")
}
