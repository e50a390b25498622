//! The shipped seccomp profile `deploy/seccomp/kaas.json`, installed as a filter by
//! `deploy/seccomp/run-under-profile` as a container runtime would: kaas under it serves a
//! real client (librdkafka through confluent-kafka produces and consumes); under the same
//! profile without the three io_uring calls (the container runtime default) it exits with
//! the io_uring diagnosis (exit code 10).

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use support::{free_port, wait_for_healthz};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn under_profile(drop: Option<&str>, data_dir: &Path) -> (Command, u16, u16) {
    let (kafka, admin) = (free_port(), free_port());
    let mut command = Command::new(format!("{ROOT}/deploy/seccomp/run-under-profile"));
    if let Some(drop) = drop {
        command.args(["--drop", drop]);
    }
    command
        .arg(format!("{ROOT}/deploy/seccomp/kaas.json"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_kaas"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{kafka}"))
        .arg("--admin-listen")
        .arg(format!("127.0.0.1:{admin}"))
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--shards", "2"])
        .env_remove("MY_POD_NAME")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    (command, kafka, admin)
}

#[test]
fn kaas_serves_a_real_client_under_the_shipped_profile() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut command, kafka, admin) = under_profile(None, dir.path());
    let mut child = command.stderr(Stdio::inherit()).spawn().expect("spawn");
    let admin = ([127, 0, 0, 1], admin).into();
    let ready = wait_for_healthz(&mut child, admin, "kaas exited under the profile");
    let client = ready.then(|| {
        Command::new("python3")
            .arg(format!("{ROOT}/tests/deploy/produce_consume.py"))
            .arg(format!("127.0.0.1:{kafka}"))
            .arg("200")
            .output()
            .expect("run the python client")
    });
    // SAFETY: kill(2) on our own child (the wrapper exec'd kaas, so it is kaas).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait");
    assert!(ready, "kaas never became ready under the profile");
    let client = client.expect("client ran");
    assert!(
        client.status.success(),
        "client failed: {}{}",
        String::from_utf8_lossy(&client.stdout),
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(status.success(), "kaas did not stop cleanly: {status}");
}

#[test]
fn without_the_io_uring_calls_kaas_explains_and_exits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut command, _, _) = under_profile(
        Some("io_uring_setup,io_uring_enter,io_uring_register"),
        dir.path(),
    );
    let output = command.stderr(Stdio::piped()).output().expect("run kaas");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(10), "{stderr}");
    assert!(stderr.contains("io_uring is unavailable"), "{stderr}");
    assert!(stderr.contains("seccomp filter"), "{stderr}");
    assert!(stderr.contains("deploy/seccomp/kaas.json"), "{stderr}");
}
