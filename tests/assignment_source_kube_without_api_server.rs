//! `--assignment-source kube` (the default in cluster mode) runs the cluster core on the
//! Kubernetes API. A broker that cannot reach it at start-up stops before it serves, with an
//! error naming the verb and the resource that failed (here an API server that is not
//! there), or saying that no client configuration exists; and it touches nothing on the
//! shared volume.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use support::run_to_exit;

/// Runs a cluster broker (`MY_POD_NAME=kaas-0`, no `--assignment-source`: the default) with
/// `kubeconfig` as `KUBECONFIG`, to its exit; returns whether it succeeded and its stderr.
fn run_cluster_broker(data: &Path, kubeconfig: &Path) -> (bool, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kaas"));
    command
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args(["--heartbeat-listen", "127.0.0.1:1"])
        .arg("--data-dir")
        .arg(data)
        .env("MY_POD_NAME", "kaas-0")
        .env("POD_NAMESPACE", "kaas-test")
        .env("KUBECONFIG", kubeconfig)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env_remove("KAAS_ASSIGNMENT_SOURCE")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    let (status, stderr) = run_to_exit(
        &mut command,
        "kaas kept running without a Kubernetes API server",
    );
    (status.success(), stderr)
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

#[test]
fn a_cluster_broker_without_an_api_server_stops_and_names_the_request() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
            closed_port()
        ),
    )
    .expect("kubeconfig");
    let data = dir.path().join("data");
    let (succeeded, stderr) = run_cluster_broker(&data, &kubeconfig);
    assert!(!succeeded, "{stderr}");
    assert!(
        stderr.contains(
            r#"cannot get leases.coordination.k8s.io "kaas-controller" in namespace "kaas-test""#
        ),
        "the error names the verb and the resource: {stderr}"
    );
    assert!(
        stderr.contains("--assignment-source kube"),
        "and the flag: {stderr}"
    );
    assert!(
        !kaas_volume::cluster_dir(&data).exists(),
        "stopped before the broker touched the volume"
    );
}

#[test]
fn a_cluster_broker_without_a_client_configuration_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let (succeeded, stderr) = run_cluster_broker(&data, &dir.path().join("no-such-kubeconfig"));
    assert!(!succeeded, "{stderr}");
    assert!(
        stderr.contains("no Kubernetes client configuration"),
        "{stderr}"
    );
    assert!(
        stderr.contains("--assignment-source file"),
        "and the way to run without Kubernetes: {stderr}"
    );
    assert!(!kaas_volume::cluster_dir(&data).exists());
}
