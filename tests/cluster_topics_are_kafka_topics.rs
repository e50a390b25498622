//! Topics of a kube-sourced cluster are KafkaTopic resources, end to end: one `kaas` broker
//! in cluster mode (`MY_POD_NAME=kaas-0`, the default `--assignment-source kube`) on a real
//! API server with the CRDs of `deploy/crds/`. A librdkafka AdminClient (python
//! confluent-kafka) creates a topic and sees it in Metadata right after CreateTopics
//! answers; `kubectl get kafkatopics` shows it with its id; a KafkaTopic applied with
//! kubectl appears as a topic; DeleteTopics deletes the resource.

mod support;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kaas_net::protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
use kaas_net::protocol::Response;
use kaas_test_support::apiserver;
use support::{free_port, http_get, wait_until, WireClient};

const ADMIN: &str = r#"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
admin = AdminClient({"bootstrap.servers": sys.argv[1]})
verb, topic = sys.argv[2], sys.argv[3]
if verb == "create":
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=3, config={"retention.ms": "86400000"})],
        operation_timeout=30, request_timeout=60)
    futures[topic].result(timeout=90)
    described = admin.list_topics(topic=topic, timeout=10).topics[topic]
    print("created", described.error, len(described.partitions))
else:
    admin.delete_topics([topic], operation_timeout=30, request_timeout=60)[topic].result(timeout=90)
    print("deleted")
"#;

fn admin(bootstrap: &str, verb: &str, topic: &str) -> String {
    let output = Command::new("python3")
        .args(["-c", ADMIN, bootstrap, verb, topic])
        .output()
        .expect("run python3");
    assert!(
        output.status.success(),
        "AdminClient {verb} {topic}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// Applies `json` (one manifest) with kubectl in `namespace`.
fn apply(namespace: &str, json: serde_json::Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("manifest.json");
    std::fs::write(&file, json.to_string()).expect("write manifest");
    apiserver::kubectl(&[
        "apply",
        "-n",
        namespace,
        "-f",
        file.to_str().expect("utf-8"),
    ]);
}

/// The partition count Metadata gives `topic` (`None`: an error for it).
fn partitions(kafka: SocketAddr, topic: &str) -> Option<usize> {
    let request = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: Some(topic.into()),
            ..Default::default()
        }]),
        allow_auto_topic_creation: false,
        ..Default::default()
    };
    let Some(Response::Metadata(response)) = WireClient::connect(kafka).try_call(12, &request)
    else {
        return None;
    };
    let found = &response.topics[0];
    (found.error_code == 0).then_some(found.partitions.len())
}

struct Stop(Child);

impl Drop for Stop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn kafka_admin_topic_changes_are_kafka_topics_and_kafka_topics_are_topics() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let namespace = runtime.block_on(async {
        let client = apiserver::admin_client().await;
        apiserver::apply_crds(&client).await;
        apiserver::fresh_namespace(&client, "topics").await
    });
    let server = apiserver::api_server();
    let kafka = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let admin_http = SocketAddr::from(([127, 0, 0, 1], free_port()));
    apply(
        &namespace,
        serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kaas-brokers", "labels": {"kubernetes.io/service-name": "kaas"}},
            "addressType": "IPv4",
            // Matched to the pod by targetRef.name; the API server refuses loopback addresses.
            "ports": [{"name": "kafka", "port": kafka.port(), "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true},
                           "targetRef": {"kind": "Pod", "name": "kaas-0", "namespace": namespace}}],
        }),
    );
    let data = tempfile::tempdir().expect("tempdir");
    let child = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["--listen", &kafka.to_string()])
        .args(["--admin-listen", &admin_http.to_string()])
        .args(["--advertised-host", "127.0.0.1"])
        .args(["--advertised-port", &kafka.port().to_string()])
        .args(["--heartbeat-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--shards", "1"])
        .args([
            "--lease-duration-ms",
            "3000",
            "--lease-renew-period-ms",
            "1000",
        ])
        .arg("--data-dir")
        .arg(data.path())
        .env("MY_POD_NAME", "kaas-0")
        .env("POD_NAMESPACE", &namespace)
        .env("KUBECONFIG", &server.kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("KAAS_ASSIGNMENT_SOURCE")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn kaas");
    let _kaas = Stop(child);
    wait_until(
        "the broker applies a first assignment",
        Duration::from_secs(60),
        || http_get(admin_http, "/readyz").is_some_and(|(status, _)| status == 200),
    );
    let bootstrap = kafka.to_string();

    // CreateTopics through a Kafka admin client: Metadata has it as soon as it answers.
    assert_eq!(admin(&bootstrap, "create", "orders"), "created None 3");
    let listed = apiserver::kubectl(&["get", "kafkatopics", "-n", &namespace]);
    let row = listed
        .lines()
        .find(|line| line.starts_with("orders "))
        .unwrap_or_else(|| panic!("no KafkaTopic orders: {listed}"));
    let id_column = row.split_whitespace().nth(3).unwrap_or_default();
    assert_eq!(id_column.len(), 22, "{row}");
    let retention = apiserver::kubectl(&[
        "get",
        "kafkatopic",
        "orders",
        "-n",
        &namespace,
        "-o",
        "jsonpath={.spec.configs.retention\\.ms}",
    ]);
    assert_eq!(retention, "86400000");

    // A KafkaTopic applied with kubectl becomes a topic.
    apply(
        &namespace,
        serde_json::json!({
            "apiVersion": "kaas.io/v1", "kind": "KafkaTopic",
            "metadata": {"name": "payments"},
            "spec": {"partitions": 2},
        }),
    );
    wait_until("payments in Metadata", Duration::from_secs(30), || {
        partitions(kafka, "payments") == Some(2)
    });

    // DeleteTopics deletes the resource, and Metadata no longer has the topic.
    assert_eq!(admin(&bootstrap, "delete", "orders"), "deleted");
    let remaining = apiserver::kubectl(&["get", "kafkatopics", "-n", &namespace]);
    assert!(!remaining.contains("orders "), "{remaining}");
    assert_eq!(partitions(kafka, "orders"), None);
}
