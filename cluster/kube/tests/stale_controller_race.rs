//! A deposed controller that wakes up cannot roll the cluster back. Two real controller
//! processes (this test binary run again as a child: the cluster core with the Kubernetes
//! adapters, as the `kaas` binary runs it, on one shared volume) on the real API server.
//! Controller A leads and writes `assignment.json`; B waits. A is SIGSTOPped past its lease
//! (3 s), B takes over at a higher epoch and writes a newer assignment, and a KafkaTopic is
//! added while A sleeps (so A wakes up with work to do). Then A is SIGCONTed: its renew
//! deadline (monotonic clock) has passed, so it writes nothing, and the file on the volume,
//! watched every few milliseconds for the whole test, never goes back in `controller_epoch`
//! or `assignment_version`.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kaas_cluster::ids::TopicName;
use kaas_cluster_kube::lease::ControllerLease;
use kaas_cluster_kube::topic_store::TopicStore;
use kaas_cluster_kube::{KubeContext, KubeEnvironment};

use kaas_test_support::apiserver::{admin_client, api_server, apply_crds, fresh_namespace};
use support::controller_core::{file_until, read_file, start_core};

const TEST_NAME: &str = "a_deposed_controller_that_wakes_up_cannot_roll_the_cluster_back";
/// Set in a child: the broker id it runs the controller of.
const CHILD_ID: &str = "KAAS_STALE_RACE_CHILD_ID";
/// Set in a child: the shared `<data>/__cluster`.
const CHILD_DIR: &str = "KAAS_STALE_RACE_CLUSTER_DIR";
const LEASE: Duration = Duration::from_secs(3);
const RENEW: Duration = Duration::from_millis(500);

#[test]
fn a_deposed_controller_that_wakes_up_cannot_roll_the_cluster_back() {
    if let Ok(id) = std::env::var(CHILD_ID) {
        run_controller_process(id.parse().unwrap());
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(race());
}

/// The child: one broker's cluster core until its stdin closes, then a shut-down that
/// releases the Lease if it holds it.
fn run_controller_process(id: i32) {
    let environment = KubeEnvironment::infer_blocking().unwrap();
    let cluster = PathBuf::from(std::env::var(CHILD_DIR).unwrap());
    let core = start_core(&environment, id, &cluster, LEASE, RENEW);
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    core.shutdown();
}

struct ControllerProcess(Child);

impl ControllerProcess {
    fn start(id: i32, namespace: &str, cluster: &Path) -> Self {
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
            .env(CHILD_ID, id.to_string())
            .env(CHILD_DIR, cluster)
            .env("KUBECONFIG", &api_server().kubeconfig)
            .env("POD_NAMESPACE", namespace)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        ControllerProcess(child)
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.0.id()).unwrap();
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "signal {signal}");
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        // Closing stdin stops it (and releases the Lease); kill it if that takes too long.
        drop(self.0.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every distinct (controller_epoch, assignment_version) the file showed, in order.
fn watch_file(cluster: PathBuf, stop: Arc<AtomicBool>, seen: Arc<Mutex<Vec<(u64, u64)>>>) {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if let Some(file) = read_file(&cluster) {
                let now = (file.controller_epoch, file.assignment_version);
                let mut seen = seen.lock().unwrap();
                if seen.last() != Some(&now) {
                    seen.push(now);
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
}

async fn race() {
    let admin = admin_client().await;
    apply_crds(&admin).await;
    let namespace = fresh_namespace(&admin, "stale").await;
    let context = KubeContext::new(admin.clone(), namespace.clone());
    let topics = TopicStore::new(&context);
    topics
        .create(&TopicName::new("orders").unwrap(), 4, None, BTreeMap::new())
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let cluster = kaas_volume::cluster_dir(data.path());
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));
    watch_file(cluster.clone(), stop.clone(), seen.clone());

    let a = ControllerProcess::start(0, &namespace, &cluster);
    let first = file_until(
        &cluster,
        "from controller A",
        Duration::from_secs(20),
        |f| f.topics.contains("orders"),
    )
    .await;
    let lease = ControllerLease::new(&context);
    assert_eq!(
        lease.read().await.unwrap().unwrap().holder.as_deref(),
        Some("kaas-0")
    );
    let b = ControllerProcess::start(1, &namespace, &cluster);
    // Let B see A's Lease being renewed before A stops.
    tokio::time::sleep(Duration::from_secs(1)).await;

    a.signal(libc::SIGSTOP);
    let taken = file_until(
        &cluster,
        "from controller B",
        Duration::from_secs(20),
        |f| f.controller_epoch > first.controller_epoch,
    )
    .await;
    assert_eq!(
        lease.read().await.unwrap().unwrap().holder.as_deref(),
        Some("kaas-1")
    );
    // Work for A to wake up to: a topic it has not seen.
    topics
        .create(
            &TopicName::new("payments").unwrap(),
            2,
            None,
            BTreeMap::new(),
        )
        .await
        .unwrap();
    let newer = file_until(&cluster, "with payments", Duration::from_secs(15), |f| {
        f.topics.contains("payments")
    })
    .await;
    assert_eq!(newer.controller_epoch, taken.controller_epoch);

    a.signal(libc::SIGCONT);
    // A's watch, tick, Lease renewal and heartbeat server all wake up now.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let last = read_file(&cluster).unwrap();
    stop.store(true, Ordering::Relaxed);
    let seen = seen.lock().unwrap().clone();

    assert!(
        last.controller_epoch == taken.controller_epoch
            && last.assignment_version >= newer.assignment_version,
        "the file went back to {last:?} after {newer:?}; seen {seen:?}"
    );
    for pair in seen.windows(2) {
        let ((epoch_before, version_before), (epoch_after, version_after)) = (pair[0], pair[1]);
        assert!(
            epoch_after >= epoch_before && version_after > version_before,
            "the file went back from {:?} to {:?}; seen {seen:?}",
            pair[0],
            pair[1]
        );
    }
    let from_a_after_b = seen
        .iter()
        .skip_while(|(epoch, _)| *epoch < taken.controller_epoch)
        .any(|(epoch, _)| *epoch < taken.controller_epoch);
    assert!(!from_a_after_b, "A wrote after B took over: {seen:?}");
    assert_eq!(
        lease.read().await.unwrap().unwrap().holder.as_deref(),
        Some("kaas-1"),
        "B still leads"
    );
    drop(b);
    drop(a);
}
