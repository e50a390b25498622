//! Property: a write acknowledged by `append_durable` survives `kill -9`.
//!
//! The test binary runs itself again as a writer process (the environment tells it to).
//! The writer opens a log on disk and appends with `append_durable` from several tasks at
//! once on one executor (so flushes are group commits), optionally with a task taking
//! checkpoints every few milliseconds (so the recovery point lands in the middle of what
//! the writer appends), and prints a line for every acknowledgement: offsets, leader epoch,
//! batch length and a checksum of the records. The parent kills the writer with SIGKILL a
//! random 5–300 ms after its first acknowledgement, reopens the log and checks that
//!
//! - every batch ever acknowledged is at its offsets with the same content;
//! - offsets are dense from the log start and everything up to the high watermark reads
//!   back as whole, intact batches (nothing torn is visible);
//! - the log takes new appends at the next offset;
//! - every segment but the last is sealed: its file holds whole batches and nothing more,
//!   ending at the next segment's base offset.
//!
//! A second configuration uses tiny segments (a few batches each), so the writer rolls many
//! times a second and the kill often lands while a rolled segment is still being sealed in
//! the background.
//!
//! Then the next round starts a new writer on the same log. The random seed is printed
//! and can be replayed with `KAAS_KILL_TEST_SEED`.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use kaas_engine::batch::{scan_batches, BatchHeader, ScanStop, ATTRIBUTES_POS};
use kaas_engine::{LogConfig, PartitionLog, Storage};
use rand::{Rng, SeedableRng};

use common::{batch, partition_dir, read_all};

const CHILD_ROOT: &str = "KAAS_KILL_TEST_WRITER_ROOT";
const CHILD_ROUND: &str = "KAAS_KILL_TEST_WRITER_ROUND";
const CHILD_CHECKPOINT_MS: &str = "KAAS_KILL_TEST_WRITER_CHECKPOINT_MS";
const CHILD_SEGMENT_BYTES: &str = "KAAS_KILL_TEST_WRITER_SEGMENT_BYTES";
const SEED: &str = "KAAS_KILL_TEST_SEED";
const ROUNDS: u64 = 8;
const WRITERS: u64 = 4;

/// Segment size of the first configuration: several segments per round.
const SEGMENT_BYTES: u64 = 192 << 10;
/// Segment size of the second: a roll every few batches.
const TINY_SEGMENT_BYTES: u64 = 12 << 10;

fn config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        write_chunk_bytes: 16 << 10,
        preallocate_step: 1 << 20,
        index_interval_bytes: 4_096,
        tail_cache_bytes: 64 << 10,
        ..LogConfig::default()
    }
}

/// FNV-1a over the part of a batch covered by its CRC (everything the broker does not
/// stamp), so produced and stored bytes give the same value.
fn checksum(batch: &[u8]) -> u64 {
    batch[ATTRIBUTES_POS..]
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

/// One acknowledged batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ack {
    base: u64,
    last: u64,
    epoch: i32,
    len: usize,
    checksum: u64,
}

impl Ack {
    fn line(&self) -> String {
        format!(
            "ACK {} {} {} {} {}\n",
            self.base, self.last, self.epoch, self.len, self.checksum
        )
    }

    fn parse(line: &str) -> Option<Ack> {
        let mut fields = line.strip_prefix("ACK ")?.trim_end().split(' ');
        let mut next = || fields.next()?.parse::<u64>().ok();
        Some(Ack {
            base: next()?,
            last: next()?,
            epoch: i32::try_from(next()?).ok()?,
            len: usize::try_from(next()?).ok()?,
            checksum: next()?,
        })
    }
}

#[test]
fn acked_writes_survive_kill() {
    kill_rounds("acked_writes_survive_kill", SEGMENT_BYTES);
}

#[test]
fn acked_writes_survive_kill_while_rolling_tiny_segments() {
    kill_rounds(
        "acked_writes_survive_kill_while_rolling_tiny_segments",
        TINY_SEGMENT_BYTES,
    );
}

/// Runs the rounds of writer, kill and verification; `test_name` is the test calling this,
/// which the writer process runs again.
fn kill_rounds(test_name: &str, segment_bytes: u64) {
    if let Ok(root) = std::env::var(CHILD_ROOT) {
        writer(PathBuf::from(root));
        return;
    }
    let seed = std::env::var(SEED)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{SEED}={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().to_path_buf();
    let mut acked: BTreeMap<u64, Ack> = BTreeMap::new();
    for round in 1..=ROUNDS {
        let checkpoint_ms = if round % 2 == 0 {
            rng.random_range(2..30u64)
        } else {
            0
        };
        let delay = Duration::from_millis(rng.random_range(5..=300));
        let writer = Writer {
            test_name,
            round,
            checkpoint_ms,
            segment_bytes,
        };
        let acks = run_writer_and_kill(&root, &writer, delay);
        assert!(
            !acks.is_empty(),
            "round {round}: the writer acknowledged nothing"
        );
        eprintln!(
            "round {round}: {} batches acknowledged, checkpoint every {checkpoint_ms} ms, \
             killed {delay:?} after the first",
            acks.len()
        );
        for ack in acks {
            assert!(
                acked.insert(ack.base, ack).is_none(),
                "offset {} acknowledged twice",
                ack.base
            );
        }
        acked = verify_and_append(&root, round, segment_bytes, acked);
    }
}

/// One writer process to start.
struct Writer<'a> {
    test_name: &'a str,
    round: u64,
    checkpoint_ms: u64,
    segment_bytes: u64,
}

/// Starts a writer, waits for its first acknowledgement, lets it run for `delay`, kills it
/// and returns every acknowledgement it printed in full.
fn run_writer_and_kill(root: &Path, writer: &Writer<'_>, delay: Duration) -> Vec<Ack> {
    let round = writer.round;
    let printed = common::child_writer::run_and_kill(
        writer.test_name,
        &[
            (CHILD_ROOT, root.display().to_string()),
            (CHILD_ROUND, round.to_string()),
            (CHILD_CHECKPOINT_MS, writer.checkpoint_ms.to_string()),
            (CHILD_SEGMENT_BYTES, writer.segment_bytes.to_string()),
        ],
        &root.join(format!("writer-{round}.stderr")),
        round,
        delay,
        |line| Ack::parse(line).is_some(),
    );
    printed.iter().filter_map(|line| Ack::parse(line)).collect()
}

/// Reopens the log, checks every acknowledged batch and the log's shape, appends one more
/// batch durably and closes it. Returns the acknowledged batches including the new one.
fn verify_and_append(
    root: &Path,
    round: u64,
    segment_bytes: u64,
    acked: BTreeMap<u64, Ack>,
) -> BTreeMap<u64, Ack> {
    let root = root.to_path_buf();
    let unsealed_at_kill = unsealed_earlier_segments(&root.join(partition_dir()));
    if !unsealed_at_kill.is_empty() {
        eprintln!("round {round}: killed while segments {unsealed_at_kill:?} were unsealed");
    }
    let (sender, result) = mpsc::channel();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let log = PartitionLog::open(&storage, &partition_dir(), config(segment_bytes))
            .await
            .expect("open after kill");
        let unsealed = unsealed_earlier_segments(&root.join(partition_dir()));
        assert!(
            unsealed.is_empty(),
            "round {round}: segments {unsealed:?} are not sealed after recovery"
        );
        let mut acked = acked;
        let offsets = log.offsets();
        assert_eq!(
            offsets.high_watermark, offsets.log_end_offset,
            "recovered end is durable"
        );
        assert_eq!(offsets.log_start_offset, 0);
        // Dense, whole and intact from the start to the high watermark.
        let read = read_all(&log, 0, 256 << 10).await;
        assert_eq!(
            read.last().map_or(0, |b| b.next_offset),
            offsets.high_watermark,
            "round {round}: batches do not reach the high watermark"
        );
        let by_base: BTreeMap<u64, &common::ReadBatch> =
            read.iter().map(|b| (b.base_offset, b)).collect();
        for ack in acked.values() {
            let found = by_base.get(&ack.base).unwrap_or_else(|| {
                panic!(
                    "round {round}: acknowledged batch at {} is gone (log end {})",
                    ack.base, offsets.log_end_offset
                )
            });
            let header = BatchHeader::parse(&found.bytes).expect("header");
            assert_eq!(
                found.next_offset,
                ack.last + 1,
                "batch at {} changed",
                ack.base
            );
            assert_eq!(header.partition_leader_epoch, ack.epoch);
            assert_eq!(found.bytes.len(), ack.len, "batch at {} changed", ack.base);
            assert_eq!(
                checksum(&found.bytes),
                ack.checksum,
                "batch at {} changed",
                ack.base
            );
        }

        let produced = batch(u64::MAX - round, 3, 500, 5_000, None);
        let epoch = 1_000 + round as i32;
        let outcome = log
            .append_durable(&produced, epoch, 0)
            .await
            .expect("append after recovery");
        assert_eq!(
            outcome.base_offset, offsets.log_end_offset,
            "next dense offset"
        );
        let stored = common::stamped(&produced, outcome.base_offset, epoch);
        acked.insert(
            outcome.base_offset,
            Ack {
                base: outcome.base_offset,
                last: outcome.last_offset,
                epoch,
                len: stored.len(),
                checksum: checksum(&stored),
            },
        );
        log.close().await.expect("close");
        sender.send(acked).expect("result");
    });
    result.recv().expect("verification result")
}

/// The base offsets of the segment files, but the last, that are not sealed: their file
/// does not hold exactly whole intact batches ending at the next file's base offset.
/// Read with plain file reads, before or after recovery.
fn unsealed_earlier_segments(dir: &Path) -> Vec<u64> {
    let mut bases: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .expect("list the partition")
        .map(|entry| entry.expect("entry").path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let base = name.strip_suffix(".log")?.parse().ok()?;
            Some((base, path))
        })
        .collect();
    bases.sort();
    let mut unsealed = Vec::new();
    for pair in bases.windows(2) {
        let ((base, path), (next_base, _)) = (&pair[0], &pair[1]);
        let bytes = std::fs::read(path).expect("read a segment");
        let mut scan = scan_batches(&bytes, 0);
        let end = scan.by_ref().last().map(|found| found.header.next_offset());
        if scan.stop() != Some(&ScanStop::EndOfData) || end != Some(*next_base as i64) {
            unsealed.push(*base);
        }
    }
    unsealed
}

/// The writer process: appends until it is killed.
fn writer(root: PathBuf) {
    let round: u64 = std::env::var(CHILD_ROUND)
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("round");
    let checkpoint_ms: u64 = std::env::var(CHILD_CHECKPOINT_MS)
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("checkpoint interval");
    let segment_bytes: u64 = std::env::var(CHILD_SEGMENT_BYTES)
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("segment bytes");
    common::run(move || async move {
        let storage: Storage = common::disk_storage(&root).await;
        let log = PartitionLog::open(&storage, &partition_dir(), config(segment_bytes))
            .await
            .expect("writer open");
        let out = Rc::new(std::cell::RefCell::new(std::io::stdout()));
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let log = log.clone();
            let out = out.clone();
            tasks.push(glommio::spawn_local(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(round * 1_000 + writer);
                for n in 0u64.. {
                    let seed = (round << 40) | (writer << 32) | n;
                    let records = rng.random_range(1..=5);
                    let value_len = rng.random_range(10..3_000);
                    let produced = batch(seed, records, value_len, 1_000, None);
                    let outcome = log
                        .append_durable(&produced, round as i32, 0)
                        .await
                        .expect("durable append");
                    let ack = Ack {
                        base: outcome.base_offset,
                        last: outcome.last_offset,
                        epoch: round as i32,
                        len: produced.len(),
                        checksum: checksum(&produced),
                    };
                    let mut out = out.borrow_mut();
                    out.write_all(ack.line().as_bytes()).expect("stdout");
                    out.flush().expect("stdout");
                }
            }));
        }
        if checkpoint_ms > 0 {
            let log = log.clone();
            tasks.push(glommio::spawn_local(async move {
                loop {
                    glommio::timer::sleep(Duration::from_millis(checkpoint_ms)).await;
                    log.checkpoint().await.expect("checkpoint");
                }
            }));
        }
        for task in tasks {
            task.await;
        }
    });
}
