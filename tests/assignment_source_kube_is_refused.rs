//! `--assignment-source kube` runs the cluster core, whose Lease, EndpointSlice and
//! KafkaTopic sources are the Kubernetes adapters. A build without them refuses the value
//! with a message saying so, before the broker listens, rather than running a broker that no
//! controller will ever write for.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_cluster_broker_with_the_kube_source_refuses_to_start_and_says_why() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kaas"))
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .args([
            "--heartbeat-listen",
            "127.0.0.1:1",
            "--assignment-source",
            "kube",
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .env("MY_POD_NAME", "kaas-0")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kaas");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("kaas kept running with --assignment-source kube");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        use std::io::Read;
        let _ = pipe.read_to_string(&mut stderr);
    }
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("--assignment-source kube") && stderr.contains("--assignment-source file"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("__cluster").exists(),
        "refused before the broker touched the volume"
    );
}
