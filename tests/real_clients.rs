//! Real Kafka clients written by others — the Java client, librdkafka (through
//! confluent-kafka for Python) and franz-go — run their scenario suites (tests/clients/)
//! against a real `kaas` process: thousands of records with keys, headers and every codec,
//! byte-for-byte checks, offsets, timestamps, admin operations and error codes.
//!
//! `tests/clients/prepare.sh` (run by `scripts/test.sh`) installs and builds the suites; a
//! missing suite fails these tests rather than skipping them.

mod support;

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use support::Kaas;

/// The group and transaction settings the suites assume (tests/clients/README.md), as Apache
/// Kafka runs with them in `tests/kafka/start-kafka.sh`.
const GROUP_SETTINGS: &[&str] = &[
    "--shards",
    "2",
    "--group-initial-rebalance-delay-ms",
    "0",
    "--group-min-session-timeout-ms",
    "6000",
    "--group-max-session-timeout-ms",
    "300000",
    "--group-consumer-session-timeout-ms",
    "10000",
    "--group-consumer-heartbeat-interval-ms",
    "1000",
    // Timed-out transactions are looked for every second, as tests/kafka runs Kafka.
    "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
    "1000",
];

/// The suites are heavy; one at a time keeps the two cores for the broker and its client.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn run_suite(suite: &str) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let kaas = Kaas::start(Some(dir.path()), GROUP_SETTINGS);
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
    let status = Command::new(clients.join("run-all.sh"))
        .arg(kaas.kafka.to_string())
        .env("SUITES", suite)
        .env("SUITE_TIMEOUT", "900")
        .status()
        .expect("run tests/clients/run-all.sh");
    assert!(
        status.success(),
        "the {suite} suite failed against kaas (see its output above)"
    );
}

#[test]
fn java_client_suite_passes() {
    run_suite("java");
}

#[test]
fn librdkafka_python_suite_passes() {
    run_suite("python");
}

#[test]
fn franz_go_suite_passes() {
    run_suite("go");
}
