//! One real Kubernetes API server (kube-apiserver v1.37.2 with an embedded etcd, built from
//! `tests/kube-apiserver` by `scripts/kube-apiserver.sh`) per test binary, shared by its
//! tests; each test gets its own namespace.
//!
//! The server is started on first use and stopped when the test binary exits, however it
//! exits: it reads its stdin, a pipe whose write end only this process holds, and stops at
//! end of file, which the kernel delivers when this process dies (even by kill -9). It then
//! removes its directory (certificates, etcd data, the kubeconfig).
//!
//! Any crate's integration tests use it through `kaas_test_support::apiserver` (a
//! dev-dependency). A missing Go toolchain or a failed build fails the test; nothing is
//! skipped.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// The running server.
pub struct ApiServer {
    /// The admin kubeconfig (client certificate of group system:masters).
    pub kubeconfig: PathBuf,
    /// The HTTPS port on 127.0.0.1.
    pub port: u16,
    /// The binary, which also runs kubectl (`<binary> kubectl ...`).
    pub binary: PathBuf,
    /// Held, never written: the server stops when this closes (at process exit).
    _stdin: Mutex<ChildStdin>,
    _child: Mutex<Child>,
}

static SERVER: OnceLock<ApiServer> = OnceLock::new();
static NAMESPACES: AtomicU32 = AtomicU32::new(0);

/// The workspace root: the nearest directory above this crate (`test-support/`) that holds
/// `scripts/kube-apiserver.sh`. It does not depend on which crate's tests call it, so the
/// build script and `deploy/crds` are found from every test directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("scripts/kube-apiserver.sh").is_file())
        .expect("the workspace root holds scripts/kube-apiserver.sh")
        .to_owned()
}

/// The shared server, started (and built, if its sources changed) on first use.
pub fn api_server() -> &'static ApiServer {
    SERVER.get_or_init(start)
}

fn start() -> ApiServer {
    let root = workspace_root();
    let build = Command::new(root.join("scripts/kube-apiserver.sh"))
        .current_dir(&root)
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/kube-apiserver.sh");
    assert!(
        build.status.success(),
        "scripts/kube-apiserver.sh failed ({}): the test API server cannot be built",
        build.status
    );
    let binary = root.join(String::from_utf8_lossy(&build.stdout).trim());
    let dir = tempfile::Builder::new()
        .prefix("kaas-kube-apiserver-")
        .tempdir()
        .expect("temporary directory")
        .keep();
    let log_path = dir.with_extension("log");
    let log = std::fs::File::create(&log_path).expect("create the server log");
    let mut child = Command::new(&binary)
        .arg("--dir")
        .arg(&dir)
        .arg("--cleanup")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = child.stdout.take().expect("piped stdout");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("READY ") {
                let _ = ready_tx.send(rest.to_owned());
                break;
            }
        }
        // Keep draining so the server never blocks on a full pipe.
        for _ in lines {}
    });
    let ready = ready_rx.recv_timeout(Duration::from_secs(180));
    let Ok(ready) = ready else {
        let _ = child.kill();
        let _ = child.wait();
        let mut text = String::new();
        let _ = std::fs::File::open(&log_path).and_then(|mut f| f.read_to_string(&mut text));
        let _ = std::fs::remove_file(&log_path);
        let _ = std::fs::remove_dir_all(&dir);
        let tail: String = text
            .chars()
            .rev()
            .take(4000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        panic!("the test API server did not print READY within 180 s; its log ends:\n{tail}");
    };
    // The log is no longer needed once the server runs: keep disk clean.
    let _ = std::fs::remove_file(&log_path);
    let mut fields = ready.split_whitespace();
    let port = fields
        .next()
        .and_then(|p| p.parse().ok())
        .expect("READY <port> <kubeconfig>");
    let kubeconfig = PathBuf::from(fields.next().expect("READY <port> <kubeconfig>"));
    ApiServer {
        kubeconfig,
        port,
        binary,
        _stdin: Mutex::new(stdin),
        _child: Mutex::new(child),
    }
}

/// The admin's client configuration.
pub async fn admin_config() -> kube::Config {
    let server = api_server();
    let kubeconfig = kube::config::Kubeconfig::read_from(&server.kubeconfig).expect("kubeconfig");
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .expect("admin configuration")
}

/// A client authenticating as the admin (a new one per runtime: clients are tied to the
/// tokio runtime they were made on).
pub async fn admin_client() -> kube::Client {
    kube::Client::try_from(admin_config().await).expect("admin client")
}

/// A client authenticating with a bearer token (a ServiceAccount's, from TokenRequest).
pub async fn token_client(token: &str) -> kube::Client {
    let server = api_server();
    let admin = std::fs::read_to_string(&server.kubeconfig).expect("kubeconfig");
    let ca = admin
        .lines()
        .find_map(|line| line.trim().strip_prefix("certificate-authority-data: "))
        .expect("certificate-authority-data in the kubeconfig");
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
        server.port
    );
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).expect("token kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("token configuration");
    kube::Client::try_from(config).expect("token client")
}

/// A new namespace of its own for one test (`<prefix>-<pid>-<n>`), created as the admin.
/// Namespaces are never deleted: this API server has no controller to finish a deletion,
/// and the whole server goes away with the test binary.
pub async fn fresh_namespace(client: &kube::Client, prefix: &str) -> String {
    let name = format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NAMESPACES.fetch_add(1, Ordering::Relaxed)
    );
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("namespace");
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
    name
}

/// Applies the CRDs of `deploy/crds/` (server-side apply, idempotent) and waits until the
/// API server serves them.
pub async fn apply_crds(client: &kube::Client) {
    let dir = workspace_root().join("deploy/crds");
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("deploy/crds") {
        let path = entry.expect("deploy/crds entry").path();
        if path.extension().is_none_or(|ext| ext != "yaml") || path.ends_with("kustomization.yaml")
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a CRD");
        let crd: CustomResourceDefinition = serde_yaml_ng::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not a CRD: {e}", path.display()));
        let name = crd.metadata.name.clone().expect("CRD name");
        api.patch(
            &name,
            &PatchParams::apply("kaas-tests").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("apply {}: {e}", path.display()));
        names.push(name);
    }
    assert!(names.len() >= 2, "deploy/crds holds the CRDs");
    for name in names {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let crd = api.get(&name).await.expect("get CRD");
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "CRD {name} not established in 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Runs kubectl (from the server's binary) as the admin; returns stdout, panics on failure.
pub fn kubectl(args: &[&str]) -> String {
    let server = api_server();
    let output = Command::new(&server.binary)
        .arg("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(args)
        .output()
        .expect("run kubectl");
    assert!(
        output.status.success(),
        "kubectl {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}
