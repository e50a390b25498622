//! A second broker never shares what the first one owns: started on the same data directory
//! it refuses to start (naming the first broker's process), and started on the same Kafka
//! port with another directory it refuses too, instead of letting the kernel split the
//! connections between them. The first broker keeps serving throughout.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use support::{free_port, run_to_exit, Kaas};

/// Runs a second `kaas` to its exit (it must exit by itself); returns its status and stderr.
fn run_second(listen: SocketAddr, data_dir: &Path) -> (std::process::ExitStatus, String) {
    let admin = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut command = Command::new(env!("CARGO_BIN_EXE_kaas"));
    command
        .arg("--listen")
        .arg(listen.to_string())
        .arg("--admin-listen")
        .arg(admin.to_string())
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("MY_POD_NAME")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    run_to_exit(
        &mut command,
        "the second broker is still running: it was not refused",
    )
}

fn first_pid_named(stderr: &str, first: &Kaas) -> bool {
    stderr.contains(&format!("pid {}", first.pid()))
}

#[test]
fn a_second_broker_on_the_same_data_directory_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut first = Kaas::start(Some(dir.path()), &[]);
    let other_port = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let (status, stderr) = run_second(other_port, dir.path());
    assert!(!status.success(), "the second broker started: {stderr}");
    assert!(stderr.contains("in use"), "{stderr}");
    assert!(first_pid_named(&stderr, &first), "{stderr}");
    first.client().create_topic("still-served", 1, &[]);
    assert!(first.terminate(), "the first broker stops cleanly");
    // With the first one gone, the directory is free again.
    let mut again = Kaas::start(Some(dir.path()), &[]);
    assert!(again.terminate());
}

#[test]
fn a_second_broker_on_the_same_kafka_port_refuses_to_start() {
    let first_dir = tempfile::tempdir().expect("tempdir");
    let second_dir = tempfile::tempdir().expect("tempdir");
    let mut first = Kaas::start(Some(first_dir.path()), &["--shards", "2"]);
    let (status, stderr) = run_second(first.kafka, second_dir.path());
    assert!(!status.success(), "the second broker started: {stderr}");
    assert!(stderr.contains("already in use"), "{stderr}");
    assert!(first_pid_named(&stderr, &first), "{stderr}");
    // Every connection still reaches the first broker.
    for n in 0..8 {
        first
            .client()
            .create_topic(&format!("only-first-{n}"), 1, &[]);
    }
    assert!(first.terminate());
}
