//! Kafka's own frameworks from Maven Central, unchanged, run against a real `kaas` process:
//! Kafka Connect in distributed mode with the FileStream connectors (a file → a topic → a file,
//! byte for byte; also with KIP-618 exactly-once source support, in transactions), MirrorMaker 2 copying a topic between two kaas brokers (every record, in
//! order, with keys, headers and timestamps), a Kafka Streams word count (at_least_once, and
//! exactly_once_v2: transactions, read back read_committed) whose changelogged state store
//! gives exact counts, also after a restore from the changelog alone, and a compacted topic the Java consumer reads back as exactly the latest value per key.
//!
//! The runners are in `tests/frameworks/` (built by `tests/clients/prepare.sh`, which
//! `scripts/test.sh` runs); each checks its own results and exits non-zero on a difference.
//! The same runners pass against Apache Kafka 4.4 (`tests/frameworks/README.md`).

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use support::Kaas;

/// The group settings the real-client suites use (and Apache Kafka in tests/kafka/), so a
/// restarted member's old session expires in seconds, not minutes.
const BROKER_SETTINGS: &[&str] = &[
    "--shards",
    "2",
    "--group-initial-rebalance-delay-ms",
    "0",
    "--group-min-session-timeout-ms",
    "6000",
    "--group-max-session-timeout-ms",
    "300000",
];

/// A runner that has not finished by then has hung: it is killed and the test fails.
const RUNNER_TIMEOUT: Duration = Duration::from_secs(180);

/// Each framework runs a JVM with many threads; one at a time keeps the two cores usable.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn frameworks_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/frameworks")
}

/// Runs `kaas.frameworks.<runner>` with `args`; panics unless it exits with success in time.
fn run_runner(runner: &str, args: &[&str]) {
    let dir = frameworks_dir();
    let jar = dir.join("target/kaas-frameworks.jar");
    assert!(
        jar.exists() && dir.join("target/lib").is_dir(),
        "{} is missing: run tests/clients/prepare.sh",
        jar.display()
    );
    let classpath = format!("{}:{}/*", jar.display(), dir.join("target/lib").display());
    let mut child = Command::new("java")
        .arg("-Xmx512m")
        .arg("-cp")
        .arg(classpath)
        .arg(format!("kaas.frameworks.{runner}"))
        .args(args)
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn java (JDK 17 or later)");
    let deadline = Instant::now() + RUNNER_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().expect("wait for java") {
            assert!(
                status.success(),
                "{runner} failed against kaas ({status}); see its output above"
            );
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{runner} did not finish within {RUNNER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `runner` against a fresh broker with `--bootstrap` and a fresh `--work` directory, plus
/// `extra` arguments.
fn run_on_a_fresh_broker(runner: &str, extra: &[&str]) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let data = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir");
    let kaas = Kaas::start(Some(data.path()), BROKER_SETTINGS);
    let bootstrap = kaas.kafka.to_string();
    let work_dir = work.path().display().to_string();
    let mut args = vec!["--bootstrap", &bootstrap, "--work", &work_dir];
    args.extend_from_slice(extra);
    run_runner(runner, &args);
}

#[test]
fn kafka_connect_copies_a_file_through_a_topic_byte_for_byte() {
    run_on_a_fresh_broker("ConnectFileRoundTrip", &[]);
}

#[test]
fn kafka_connect_exactly_once_source_copies_a_file_through_a_topic_byte_for_byte() {
    run_on_a_fresh_broker("ConnectFileRoundTrip", &["--exactly-once", "true"]);
}

#[test]
fn mirror_maker_2_copies_every_record_between_two_brokers() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let source_data = tempfile::tempdir().expect("tempdir");
    let target_data = tempfile::tempdir().expect("tempdir");
    let source = Kaas::start(Some(source_data.path()), BROKER_SETTINGS);
    let target = Kaas::start(Some(target_data.path()), BROKER_SETTINGS);
    run_runner(
        "MirrorMakerCopy",
        &[
            "--source",
            &source.kafka.to_string(),
            "--target",
            &target.kafka.to_string(),
        ],
    );
}

#[test]
fn kafka_streams_word_count_is_exact_and_restores_from_its_changelog() {
    run_on_a_fresh_broker("StreamsWordCount", &[]);
}

#[test]
fn kafka_streams_exactly_once_v2_word_count_is_exact_and_restores_from_its_changelog() {
    run_on_a_fresh_broker("StreamsWordCount", &["--guarantee", "exactly_once_v2"]);
}

/// Sums `name{...}` samples of a Prometheus text page.
fn metric_sum(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|line| {
            line.starts_with(&format!("{name}{{")) || line.starts_with(&format!("{name} "))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn compacted_topic_reads_back_as_the_latest_value_per_key() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let data = tempfile::tempdir().expect("tempdir");
    let mut settings = BROKER_SETTINGS.to_vec();
    // Kafka's 15 s pause between idle cleaner rounds would only make the test slower.
    settings.extend(["--log-cleaner-backoff-ms", "200"]);
    let kaas = Kaas::start(Some(data.path()), &settings);
    let metrics = |kaas: &Kaas| {
        support::http_get(kaas.admin, "/metrics")
            .map(|(_, body)| body)
            .expect("/metrics answers")
    };
    let before = metrics(&kaas);
    assert!(
        before.contains("# TYPE kaas_log_cleaner_passes_total counter"),
        "{before}"
    );
    assert_eq!(metric_sum(&before, "kaas_log_cleaner_passes_total"), 0.0);
    run_runner(
        "CompactedLatestValue",
        &["--bootstrap", &kaas.kafka.to_string()],
    );
    // The shards copy the cleaner's counters to /metrics every second.
    std::thread::sleep(Duration::from_millis(1500));
    let after = metrics(&kaas);
    assert!(
        metric_sum(&after, "kaas_log_cleaner_passes_total") >= 1.0,
        "{after}"
    );
    assert!(
        metric_sum(&after, "kaas_log_cleaner_read_bytes_total") > 0.0,
        "{after}"
    );
    assert!(
        metric_sum(&after, "kaas_log_cleaner_written_bytes_total") > 0.0,
        "{after}"
    );
    let compacted: Vec<&str> = after
        .lines()
        .filter(|l| l.contains("topic=\"compacted-"))
        .collect();
    assert!(
        compacted
            .iter()
            .any(|l| l.starts_with("kaas_log_cleaner_dirty_ratio{")),
        "{after}"
    );
    assert!(
        compacted
            .iter()
            .any(|l| l.starts_with("kaas_log_cleaner_seconds_since_last_clean{")),
        "{after}"
    );
}
