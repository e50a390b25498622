//! Property: an open transaction stays open across `kill -9`, and ended ones stay ended.
//!
//! The test binary runs itself again as a writer process (the environment tells it to).
//! In the first round the writer opens a transaction of producer P and acknowledges its
//! first batch; every round it then adds one more batch to P's transaction and, until it is
//! killed, has producer Q run one-batch transactions that it ends (alternately ABORT and
//! COMMIT) and appends plain batches, each acknowledged only after `flush_to`, while a task
//! checkpoints every few milliseconds (so recovery starts from a producer snapshot taken
//! long after P's transaction opened) and small segments roll and seal all the time. The
//! parent kills it with SIGKILL 20–250 ms after its first acknowledgement, reopens the log
//! and checks that
//!
//! - P's transaction is still open at its first offset, and the last stable offset is that
//!   offset (unchanged by every round);
//! - a read-committed read stops there;
//! - every acknowledged ABORT is listed among the aborted transactions with its first
//!   offset, and no acknowledged COMMIT is;
//! - every acknowledged plain batch is there.
//!
//! At the end the parent commits P's transaction: a read-committed consumer then sees P's
//! batches, the plain ones and Q's committed ones, and none of Q's aborted ones. The seed is
//! printed and can be replayed with `KAAS_TXN_KILL_TEST_SEED`.

mod common;

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use kaas_engine::batch::txn_marker::TxnResult;
use kaas_engine::producer_state::MarkerEpochCheck;
use kaas_engine::{AbortedTransaction, LogConfig, PartitionLog, Storage, TxnMarker};
use rand::{Rng, SeedableRng};

use common::read_committed::{transactional_batch, visible_batches};
use common::{batch, partition_dir, read_all, split_batches, ProducerSpec};

const CHILD_ROOT: &str = "KAAS_TXN_KILL_TEST_WRITER_ROOT";
const CHILD_ROUND: &str = "KAAS_TXN_KILL_TEST_WRITER_ROUND";
const SEED: &str = "KAAS_TXN_KILL_TEST_SEED";
const ROUNDS: u64 = 5;
const P: i64 = 5_000;
const Q: i64 = 6_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        write_chunk_bytes: 16 << 10,
        preallocate_step: 64 << 10,
        index_interval_bytes: 1_024,
        ..LogConfig::default()
    }
}

fn end(producer_id: i64, epoch: i16, result: TxnResult) -> TxnMarker {
    TxnMarker {
        producer_id,
        producer_epoch: epoch,
        coordinator_epoch: 0,
        result,
        epoch_check: MarkerEpochCheck::AtLeastCurrent,
    }
}

/// What the writer acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ack {
    /// A batch of P's transaction at this offset.
    Open(u64),
    /// Q's one-batch transaction at `first`, ended by a marker at `marker`.
    Ended {
        first: u64,
        marker: u64,
        abort: bool,
    },
    /// A plain batch.
    Plain(u64),
}

impl Ack {
    fn line(&self) -> String {
        match *self {
            Ack::Open(base) => format!("OPEN {base}\n"),
            Ack::Ended {
                first,
                marker,
                abort,
            } => format!("ENDED {first} {marker} {}\n", u8::from(abort)),
            Ack::Plain(base) => format!("PLAIN {base}\n"),
        }
    }

    /// Reads an acknowledgement line (the first one follows the test harness's own output
    /// on the same line).
    fn parse(line: &str) -> Option<Ack> {
        let start = ["OPEN ", "ENDED ", "PLAIN "]
            .iter()
            .filter_map(|keyword| line.find(keyword))
            .min()?;
        let mut fields = line[start..].trim_end().split(' ');
        let kind = fields.next()?;
        let mut next = || fields.next()?.parse::<u64>().ok();
        match kind {
            "OPEN" => Some(Ack::Open(next()?)),
            "ENDED" => Some(Ack::Ended {
                first: next()?,
                marker: next()?,
                abort: next()? == 1,
            }),
            "PLAIN" => Some(Ack::Plain(next()?)),
            _ => None,
        }
    }
}

#[test]
fn open_transaction_survives_kill() {
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
    let mut acked: Vec<Ack> = Vec::new();
    let mut first_of_p = None;
    for round in 1..=ROUNDS {
        let delay = Duration::from_millis(rng.random_range(20..=250));
        let printed = common::child_writer::run_and_kill(
            "open_transaction_survives_kill",
            &[
                (CHILD_ROOT, root.display().to_string()),
                (CHILD_ROUND, round.to_string()),
            ],
            &root.join(format!("writer-{round}.stderr")),
            round,
            delay,
            |line| matches!(Ack::parse(line), Some(Ack::Open(_))),
        );
        let acks: Vec<Ack> = printed.iter().filter_map(|line| Ack::parse(line)).collect();
        if first_of_p.is_none() {
            first_of_p = acks.iter().find_map(|ack| match ack {
                Ack::Open(base) => Some(*base),
                _ => None,
            });
        }
        eprintln!(
            "round {round}: {} acknowledgements, killed {delay:?} after the first",
            acks.len()
        );
        acked.extend(acks);
        let first = first_of_p.expect("P's transaction opened");
        verify(&root, round, first, &acked, round == ROUNDS);
    }
}

/// Reopens the log after a kill and checks it (see the module doc); after the last round,
/// ends the transactions and checks what a read-committed consumer sees.
fn verify(root: &Path, round: u64, first: u64, acked: &[Ack], last: bool) {
    let root = root.to_path_buf();
    let acked = acked.to_vec();
    let (done, finished) = mpsc::channel();
    common::run(move || async move {
        let storage = common::disk_storage(&root).await;
        let log = PartitionLog::open(&storage, &partition_dir(), config())
            .await
            .expect("open after kill");
        let offsets = log.offsets();
        assert_eq!(
            offsets.last_stable_offset, first,
            "round {round}: the last stable offset is P's first offset"
        );
        let p = log
            .producers()
            .into_iter()
            .find(|e| e.producer_id() == P)
            .expect("P is known");
        assert_eq!(p.open_transaction(), Some(first as i64), "round {round}");
        let read = log
            .read_committed(0, 64 << 20)
            .await
            .expect("read committed");
        let below: Vec<u64> = split_batches(&read.records.chunks)
            .iter()
            .map(|b| b.next_offset)
            .collect();
        assert!(below.iter().all(|next| *next <= first));
        let aborted = log
            .aborted_transactions(0, offsets.high_watermark)
            .expect("aborted");
        let present: BTreeSet<u64> = read_all(&log, 0, 1 << 20)
            .await
            .iter()
            .map(|b| b.base_offset)
            .collect();
        for ack in &acked {
            match *ack {
                Ack::Open(base) | Ack::Plain(base) => {
                    assert!(present.contains(&base), "round {round}: {ack:?} is gone")
                }
                Ack::Ended {
                    first: q_first,
                    marker,
                    abort,
                } => {
                    assert!(present.contains(&marker), "round {round}: {ack:?} is gone");
                    let listed = aborted.contains(&AbortedTransaction {
                        producer_id: Q,
                        first_offset: q_first,
                    });
                    assert_eq!(listed, abort, "round {round}: {ack:?} listed {listed}");
                }
            }
        }
        if last {
            finish(&log, first, &acked).await;
        }
        log.close().await.expect("close");
        done.send(()).expect("done");
    });
    finished.recv().expect("verification finished");
}

/// Commits P's transaction (and aborts Q's if the kill left one open) and checks what a
/// read-committed consumer sees.
async fn finish(log: &PartitionLog, first: u64, acked: &[Ack]) {
    let epoch_of = |producer_id: i64| {
        log.producers()
            .into_iter()
            .find(|e| e.producer_id() == producer_id)
            .map(|e| (e.epoch(), e.open_transaction()))
    };
    let (p_epoch, _) = epoch_of(P).expect("P");
    log.append_txn_marker(end(P, p_epoch, TxnResult::Commit), 0, 0)
        .await
        .expect("commit P");
    if let Some((q_epoch, Some(_))) = epoch_of(Q) {
        log.append_txn_marker(end(Q, q_epoch, TxnResult::Abort), 0, 0)
            .await
            .expect("abort Q");
    }
    log.flush().await.expect("flush");
    let offsets = log.offsets();
    assert_eq!(offsets.last_stable_offset, offsets.high_watermark);
    let mut visible = BTreeSet::new();
    let mut offset = 0;
    while offset < offsets.last_stable_offset {
        let read = log.read_committed(offset, 256 << 10).await.expect("read");
        let batches = split_batches(&read.records.chunks);
        offset = batches.last().expect("batches").next_offset;
        visible.extend(visible_batches(&batches, &read.aborted));
    }
    assert!(visible.contains(&first));
    for ack in acked {
        match *ack {
            Ack::Open(base) | Ack::Plain(base) => {
                assert!(visible.contains(&base), "{ack:?} is not visible")
            }
            Ack::Ended {
                first: q_first,
                abort,
                ..
            } => assert_eq!(visible.contains(&q_first), !abort, "{ack:?}"),
        }
    }
}

/// The writer process: appends until it is killed.
fn writer(root: PathBuf) {
    let round: u64 = std::env::var(CHILD_ROUND)
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("round");
    common::run(move || async move {
        let storage: Storage = common::disk_storage(&root).await;
        let log = PartitionLog::open(&storage, &partition_dir(), config())
            .await
            .expect("writer open");
        let out = Rc::new(std::cell::RefCell::new(std::io::stdout()));
        let print = |ack: Ack| {
            let mut out = out.borrow_mut();
            out.write_all(ack.line().as_bytes()).expect("stdout");
            out.flush().expect("stdout");
        };
        let next_sequence = |producer_id: i64| {
            log.producers()
                .into_iter()
                .find(|e| e.producer_id() == producer_id)
                .map_or(0, |e| e.last_batch().map_or(0, |b| b.last_seq + 1))
        };
        // Q's transaction a kill left open ends first.
        let q_open = log
            .producers()
            .into_iter()
            .find(|e| e.producer_id() == Q)
            .and_then(|e| e.open_transaction());
        if q_open.is_some() {
            let marker = log
                .append_txn_marker(end(Q, 0, TxnResult::Abort), 0, 0)
                .await
                .expect("abort Q");
            log.flush_to(marker + 1).await.expect("flush");
        }
        let p_batch = transactional_batch(
            round << 32,
            2,
            200,
            1_000,
            ProducerSpec {
                producer_id: P,
                epoch: 0,
                base_sequence: next_sequence(P),
            },
        );
        let outcome = log.append_durable(&p_batch, 0, 0).await.expect("P's batch");
        print(Ack::Open(outcome.base_offset));
        let checkpoints = {
            let log = log.clone();
            glommio::spawn_local(async move {
                loop {
                    glommio::timer::sleep(Duration::from_millis(3)).await;
                    log.checkpoint().await.expect("checkpoint");
                }
            })
        };
        for n in 0u64.. {
            let seed = (round << 32) | (n + 1);
            let q_batch = transactional_batch(
                seed,
                1,
                300,
                1_000,
                ProducerSpec {
                    producer_id: Q,
                    epoch: 0,
                    base_sequence: next_sequence(Q),
                },
            );
            let first = log
                .append_durable(&q_batch, 0, 0)
                .await
                .expect("Q's batch")
                .base_offset;
            let abort = n % 2 == 0;
            let result = if abort {
                TxnResult::Abort
            } else {
                TxnResult::Commit
            };
            let marker = log
                .append_txn_marker(end(Q, 0, result), 0, 0)
                .await
                .expect("Q's marker");
            log.flush_to(marker + 1).await.expect("flush");
            print(Ack::Ended {
                first,
                marker,
                abort,
            });
            let plain = batch(seed | (1 << 31), 2, 400, 1_000, None);
            let outcome = log.append_durable(&plain, 0, 0).await.expect("plain");
            print(Ack::Plain(outcome.base_offset));
        }
        checkpoints.await;
    });
}
