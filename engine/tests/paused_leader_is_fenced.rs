//! Two real processes: a leader at epoch 1 (this test binary re-run as a child) appends
//! durably and prints each acknowledgement; it is paused with SIGSTOP, a leader at epoch 2
//! in this process takes the partition over and appends, and the child is resumed. Its
//! next flush fails `Fenced`; a takeover at epoch 3 then holds every batch either leader
//! acknowledged (also those the child printed after it resumed), the epoch-2 batches, at
//! most the one child batch that was in flight at the pause, and none the child appended
//! after it.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{batch, disk_storage, partition_dir, read_all, run, stamped};
use kaas_engine::{EngineError, LogConfig, PartitionLog};

const CHILD_ROOT: &str = "KAAS_FENCE_TEST_CHILD_ROOT";
const NOW: i64 = 1_700_000_000_000;
/// Child appends acknowledged before the pause.
const ACKS_BEFORE_PAUSE: usize = 30;
/// Fenced attempts the child makes before it stops.
const FENCED_ATTEMPTS: usize = 3;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 << 10,
        ..LogConfig::default()
    }
}

fn produced(seed: u64) -> Vec<u8> {
    batch(seed, 2, 200, NOW, None)
}

/// The child: appends batches 1, 2, ... durably at epoch 1, printing `ACK <seed> <base>` or
/// `FENCED <seed> <by_epoch>`; stops after a few fenced attempts.
fn child(root: PathBuf) {
    run(move || async move {
        let storage = disk_storage(&root).await;
        let log = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), 1)
            .await
            .expect("child opens at epoch 1");
        let mut fenced = 0;
        for seed in 1u64.. {
            match log.append_durable(&produced(seed), 1, NOW).await {
                Ok(outcome) => println!("ACK {seed} {}", outcome.base_offset),
                Err(EngineError::Fenced { by_epoch, .. }) => {
                    println!("FENCED {seed} {by_epoch}");
                    fenced += 1;
                    if fenced == FENCED_ATTEMPTS {
                        break;
                    }
                }
                Err(other) => panic!("child append failed: {other}"),
            }
        }
        println!("DONE");
    });
}

struct Lines {
    received: mpsc::Receiver<String>,
    all: Vec<String>,
}

impl Lines {
    /// Waits until `done` holds for the lines so far.
    fn wait_for(&mut self, what: &str, done: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done(&self.all) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.received.recv_timeout(left) {
                Ok(line) => self.all.push(line),
                Err(_) => panic!(
                    "timed out waiting for {what}; the child's last lines: {:?}",
                    &self.all[self.all.len().saturating_sub(5)..]
                ),
            }
        }
    }
}

fn acks(lines: &[String]) -> BTreeMap<u64, u64> {
    lines
        .iter()
        .filter_map(|line| {
            let mut fields = line.strip_prefix("ACK ")?.split(' ');
            Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
        })
        .collect()
}

fn fenced(lines: &[String]) -> Vec<(u64, u32)> {
    lines
        .iter()
        .filter_map(|line| {
            let mut fields = line.strip_prefix("FENCED ")?.split(' ');
            Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
        })
        .collect()
}

/// The child process, killed (and resumed first, if paused) when a failed assertion
/// unwinds past it.
struct ChildGuard(std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn signal(pid: u32, signal: libc::c_int) {
    // SAFETY: kill(2) with a child's pid; no memory is involved.
    let result = unsafe { libc::kill(pid as libc::pid_t, signal) };
    assert_eq!(result, 0, "kill({pid}, {signal})");
}

#[test]
fn paused_leader_is_fenced() {
    if let Ok(root) = std::env::var(CHILD_ROOT) {
        child(PathBuf::from(root));
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().to_path_buf();
    let mut process = ChildGuard(
        Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "paused_leader_is_fenced",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ROOT, &root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the child"),
    );
    let pid = process.0.id();
    let stdout = process.0.stdout.take().expect("child stdout");
    let (send, received) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Lines {
        received,
        all: Vec::new(),
    };
    lines.wait_for("acknowledgements", |l| acks(l).len() >= ACKS_BEFORE_PAUSE);
    signal(pid, libc::SIGSTOP);
    let acked_before_claim = acks(&lines.all);

    // The new leader, in this process, while the child is paused.
    let new_batches: Vec<(u64, Vec<u8>)> = {
        let root = root.clone();
        let (send, result) = mpsc::channel();
        run(move || async move {
            let storage = disk_storage(&root).await;
            let log = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), 2)
                .await
                .expect("take over at epoch 2");
            let read = read_all(&log, 0, 1 << 20).await;
            for (seed, base) in &acked_before_claim {
                let expected = stamped(&produced(*seed), *base, 1);
                assert!(
                    read.iter()
                        .any(|b| b.base_offset == *base && b.bytes[..] == expected[..]),
                    "child batch {seed} acknowledged at {base} is missing at epoch 2"
                );
            }
            let mut acked = Vec::new();
            for seed in 1000..1005u64 {
                let outcome = log
                    .append_durable(&produced(seed), 2, NOW)
                    .await
                    .expect("append at epoch 2");
                acked.push((
                    outcome.base_offset,
                    stamped(&produced(seed), outcome.base_offset, 2),
                ));
            }
            log.close().await.expect("close");
            send.send(acked).expect("result");
        });
        result.recv().expect("epoch 2 result")
    };

    signal(pid, libc::SIGCONT);
    lines.wait_for("the child to stop", |l| l.iter().any(|line| line == "DONE"));
    let status = process.0.wait().expect("reap the child");
    assert!(status.success(), "child failed: {status}");
    reader.join().expect("reader thread");
    let child_acks = acks(&lines.all);
    let child_fenced = fenced(&lines.all);
    assert_eq!(child_fenced.len(), FENCED_ATTEMPTS, "{:?}", lines.all);
    assert!(child_fenced.iter().all(|&(_, by)| by == 2));
    // The one batch in flight at the pause may be in the log; later ones never.
    let in_flight = child_fenced[0].0;

    run(move || async move {
        let storage = disk_storage(&root).await;
        let log = PartitionLog::open_at_epoch(&storage, &partition_dir(), config(), 3)
            .await
            .expect("take over at epoch 3");
        let read = read_all(&log, 0, 1 << 20).await;
        let mut child_seen = BTreeMap::new();
        for found in &read {
            if let Some((_, bytes)) = new_batches.iter().find(|(b, _)| *b == found.base_offset) {
                assert!(found.bytes[..] == bytes[..], "epoch-2 batch changed");
                continue;
            }
            let seed = (1..=in_flight)
                .find(|&seed| found.bytes[..] == stamped(&produced(seed), found.base_offset, 1)[..])
                .unwrap_or_else(|| {
                    panic!(
                        "batch at {} is neither acknowledged nor in flight at the pause",
                        found.base_offset
                    )
                });
            child_seen.insert(seed, found.base_offset);
        }
        for (seed, base) in &child_acks {
            assert_eq!(child_seen.get(seed), Some(base), "child ack {seed} lost");
        }
        for (base, _) in &new_batches {
            assert!(
                read.iter().any(|b| b.base_offset == *base),
                "epoch-2 ack lost"
            );
        }
        log.close().await.expect("close");
    });
}
