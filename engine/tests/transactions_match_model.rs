//! Property: transactions on a partition log behave like a plain model of Kafka's rules.
//!
//! Random sequences of transactional appends from several producers, non-transactional
//! appends (plain, and idempotent ones from the transactional producers, refused while
//! their transaction is open), COMMIT and ABORT markers (transaction versions 1 and 2:
//! the same epoch, or a bumped one; retries; stale epochs and coordinators, which are
//! refused), flushes, rolls, checkpoints, clean reopens, crashes and takeovers at the next
//! fence epoch run against a real log, in memory and on disk, and against a model that is
//! the list of batches with their offsets. The model replays its batches to know each
//! producer's epoch, sequence and open transaction, every ended transaction, and so the last
//! stable offset: the first offset of the earliest transaction open or whose marker is not
//! durable, capped by the high watermark.
//!
//! After every operation the log's high watermark, end and last stable offset must be the
//! model's. A read-committed read returns whole batches, byte-identical to what was
//! appended, from the one holding the offset asked for, none at or past the last stable
//! offset, and exactly the aborted transactions (producer, first offset) whose marker is at
//! or past the offset and whose first offset is below the last stable offset, in marker
//! order. At the end, a read-committed consumer reading the whole log (each fetch with its
//! own aborted list) sees exactly the non-transactional batches and those of committed
//! transactions below the last stable offset.
//!
//! A crash keeps everything flushed and may keep a prefix of what was appended after the
//! last flush; the model adopts whatever prefix the recovered log holds once it has checked
//! that it is one, and replays it.

mod common;

use std::time::Duration;

use kaas_engine::batch::txn_marker::{self, MarkerRecord, TxnResult};
use kaas_engine::batch::{self, BatchHeader};
use kaas_engine::producer_state::{MarkerEpochCheck, ProducerStateError};
use kaas_engine::{
    AbortedTransaction, EngineError, LogConfig, PartitionLog, Storage, TimestampType, TxnMarker,
};
use proptest::prelude::*;

use common::read_committed::{transactional_batch, visible_batches};
use common::{batch, partition_dir, record_count, split_batches, ProducerSpec};

const PRODUCERS: usize = 3;
const FIRST_PRODUCER_ID: i64 = 9_000;
/// The coordinator epoch of every marker but the stale ones.
const COORDINATOR_EPOCH: i32 = 5;

#[derive(Clone, Debug)]
enum Op {
    /// The producer's next transactional batch (opens a transaction when none is).
    Transactional {
        producer: usize,
        records: u8,
        value_len: u16,
    },
    /// A non-transactional batch of the producer (refused while its transaction is open).
    Idempotent {
        producer: usize,
        records: u8,
    },
    /// A batch of a producer that is not idempotent.
    Plain {
        records: u8,
        value_len: u16,
    },
    /// A marker: `bump` is transaction version 2 (the epoch one above the producer's).
    End {
        producer: usize,
        commit: bool,
        bump: bool,
    },
    /// A version-2 marker at the producer's current epoch: a retry when no transaction is
    /// open (written), stale otherwise.
    RetryEnd {
        producer: usize,
    },
    /// A version-1 marker one epoch below the producer's.
    StaleEnd {
        producer: usize,
    },
    /// A marker from an older coordinator.
    StaleCoordinator {
        producer: usize,
    },
    Flush,
    Roll,
    Checkpoint,
    Reopen,
    Crash,
    Takeover,
    ReadCommitted {
        pick: u32,
        max_bytes: u32,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0..PRODUCERS, 1u8..=4, 0u16..400).prop_map(|(producer, records, value_len)| {
            Op::Transactional { producer, records, value_len }
        }),
        3 => (0..PRODUCERS, 1u8..=3).prop_map(|(producer, records)| Op::Idempotent { producer, records }),
        4 => (1u8..=3, 0u16..400).prop_map(|(records, value_len)| Op::Plain { records, value_len }),
        8 => (0..PRODUCERS, any::<bool>(), any::<bool>()).prop_map(|(producer, commit, bump)| {
            Op::End { producer, commit, bump }
        }),
        1 => (0..PRODUCERS).prop_map(|producer| Op::RetryEnd { producer }),
        1 => (0..PRODUCERS).prop_map(|producer| Op::StaleEnd { producer }),
        1 => (0..PRODUCERS).prop_map(|producer| Op::StaleCoordinator { producer }),
        3 => Just(Op::Flush),
        2 => Just(Op::Roll),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
        2 => Just(Op::Crash),
        1 => Just(Op::Takeover),
        6 => (any::<u32>(), 1u32..12_000).prop_map(|(pick, max_bytes)| Op::ReadCommitted { pick, max_bytes }),
    ]
}

fn config_strategy() -> impl Strategy<Value = LogConfig> {
    (
        1_024u64..8_192,
        prop_oneof![Just(128u64), Just(4_096)],
        prop_oneof![Just(0usize), Just(1 << 20)],
        prop_oneof![
            3 => Just(TimestampType::CreateTime),
            1 => Just(TimestampType::LogAppendTime),
        ],
    )
        .prop_map(
            |(segment_bytes, index_interval_bytes, tail_cache_bytes, timestamp_type)| LogConfig {
                segment_bytes,
                index_interval_bytes,
                tail_cache_bytes,
                retention_age: None,
                timestamp_type,
                ..LogConfig::default()
            },
        )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Plain,
    Data {
        producer: usize,
        transactional: bool,
    },
    Marker {
        producer: usize,
        commit: bool,
    },
}

#[derive(Clone, Debug)]
struct ModelBatch {
    base: u64,
    next: u64,
    stored: Vec<u8>,
    kind: Kind,
}

/// What replaying the batches says of one producer.
#[derive(Clone, Copy, Debug, Default)]
struct ProducerView {
    known: bool,
    epoch: i16,
    next_sequence: i32,
    open: Option<u64>,
    coordinator_epoch: Option<i32>,
}

/// An ended transaction.
#[derive(Clone, Copy, Debug)]
struct Ended {
    producer: usize,
    first: u64,
    marker: u64,
    aborted: bool,
}

#[derive(Debug, Default)]
struct Replayed {
    producers: [ProducerView; PRODUCERS],
    /// In marker order.
    ended: Vec<Ended>,
    /// Base offsets of the data batches a read-committed reader sees once they are stable:
    /// the non-transactional ones and those of transactions that ended with COMMIT.
    committed: Vec<u64>,
}

#[derive(Debug)]
struct Model {
    config: LogConfig,
    batches: Vec<ModelBatch>,
    end: u64,
    high_watermark: u64,
    active_base: u64,
    active_size: u64,
    active_appended: bool,
    seed: u64,
}

impl Model {
    fn replay(&self) -> Replayed {
        let mut out = Replayed::default();
        let mut open_data: Vec<Vec<u64>> = vec![Vec::new(); PRODUCERS];
        for found in &self.batches {
            let header = BatchHeader::parse(&found.stored).expect("header");
            match found.kind {
                Kind::Plain => out.committed.push(found.base),
                Kind::Data {
                    producer,
                    transactional,
                } => {
                    let view = &mut out.producers[producer];
                    view.known = true;
                    view.epoch = header.producer_epoch;
                    view.next_sequence = header.last_sequence() + 1;
                    if transactional {
                        view.open.get_or_insert(found.base);
                        open_data[producer].push(found.base);
                    } else {
                        out.committed.push(found.base);
                    }
                }
                Kind::Marker { producer, commit } => {
                    let view = &mut out.producers[producer];
                    if !view.known || view.epoch != header.producer_epoch {
                        view.epoch = header.producer_epoch;
                        view.next_sequence = 0;
                    }
                    view.known = true;
                    let coordinator_epoch =
                        txn_marker::parse_marker(&header, &found.stored[batch::BATCH_HEADER_LEN..])
                            .expect("a marker")
                            .coordinator_epoch;
                    view.coordinator_epoch = Some(coordinator_epoch);
                    if let Some(first) = view.open.take() {
                        out.ended.push(Ended {
                            producer,
                            first,
                            marker: found.base,
                            aborted: !commit,
                        });
                        let data = std::mem::take(&mut open_data[producer]);
                        if commit {
                            out.committed.extend(data);
                        }
                    }
                }
            }
        }
        out.committed.sort_unstable();
        out
    }

    fn last_stable_offset(&self, replayed: &Replayed) -> u64 {
        let open = replayed.producers.iter().filter_map(|p| p.open);
        let ending = replayed
            .ended
            .iter()
            .filter(|e| e.marker >= self.high_watermark)
            .map(|e| e.first);
        open.chain(ending)
            .min()
            .map_or(self.high_watermark, |first| first.min(self.high_watermark))
    }

    /// Accounts for a batch of `len` bytes about to be appended (a roll flushes first).
    fn before_append(&mut self, len: u64) {
        if self.active_size > 0 && self.active_size + len > self.config.segment_bytes {
            self.roll();
        }
    }

    fn roll(&mut self) {
        self.high_watermark = self.end;
        self.active_base = self.end;
        self.active_size = 0;
        self.active_appended = false;
    }

    fn push(&mut self, produced: &[u8], kind: Kind, now: i64) -> u64 {
        let log_append_time =
            (self.config.timestamp_type == TimestampType::LogAppendTime).then_some(now);
        let offset = self.end;
        let mut stored = produced.to_vec();
        batch::stamp_for_append(&mut stored, offset as i64, 0, log_append_time).expect("stamp");
        let next = offset + record_count(produced);
        self.batches.push(ModelBatch {
            base: offset,
            next,
            stored,
            kind,
        });
        self.active_size += produced.len() as u64;
        self.active_appended = true;
        self.end = next;
        offset
    }

    /// Adopts a recovered end: the log lost the unflushed batches from `end` on.
    fn truncate_to(&mut self, end: u64) {
        assert!(
            self.high_watermark <= end && end <= self.end,
            "recovered end {end} outside [{}, {}]",
            self.high_watermark,
            self.end
        );
        assert!(
            end == self.end || self.batches.iter().any(|b| b.base == end),
            "recovered end {end} is not a batch boundary"
        );
        assert!(end >= self.active_base, "a crash cannot undo a roll");
        self.batches.retain(|b| b.base < end);
        self.active_size = self
            .batches
            .iter()
            .filter(|b| b.base >= self.active_base)
            .map(|b| b.stored.len() as u64)
            .sum();
        self.end = end;
        self.high_watermark = end;
    }

    /// The aborted transactions a read-committed fetch from `offset` lists.
    fn aborted_for(&self, replayed: &Replayed, offset: u64, upper: u64) -> Vec<AbortedTransaction> {
        replayed
            .ended
            .iter()
            .filter(|e| e.aborted && e.marker >= offset && e.first < upper)
            .map(|e| AbortedTransaction {
                producer_id: FIRST_PRODUCER_ID + e.producer as i64,
                first_offset: e.first,
            })
            .collect()
    }

    fn next_seed(&mut self) -> u64 {
        self.seed += 1;
        self.seed
    }
}

struct Harness {
    storage: Storage,
    log: Option<PartitionLog>,
    fence_epoch: u32,
    model: Model,
    now_ms: i64,
}

impl Harness {
    fn log(&self) -> &PartitionLog {
        self.log.as_ref().expect("open log")
    }

    async fn open(&mut self) {
        let log = PartitionLog::open_at_epoch(
            &self.storage,
            &partition_dir(),
            self.model.config.clone(),
            self.fence_epoch,
        )
        .await
        .expect("open");
        self.log = Some(log);
        self.model.active_appended = false;
    }

    async fn append(
        &mut self,
        produced: Vec<u8>,
        kind: Kind,
        now: i64,
    ) -> Result<u64, EngineError> {
        let result = self.log().append(&produced, 0, now).await;
        if let Ok(outcome) = &result {
            self.model.before_append(produced.len() as u64);
            let offset = self.model.push(&produced, kind, now);
            assert_eq!(outcome.base_offset, offset);
            assert!(!outcome.duplicate);
        }
        result.map(|outcome| outcome.base_offset)
    }

    async fn end(
        &mut self,
        producer: usize,
        epoch: i16,
        coordinator_epoch: i32,
        result: TxnResult,
        epoch_check: MarkerEpochCheck,
        now: i64,
    ) -> Result<u64, EngineError> {
        let producer_id = FIRST_PRODUCER_ID + producer as i64;
        let written = self
            .log()
            .append_txn_marker(
                TxnMarker {
                    producer_id,
                    producer_epoch: epoch,
                    coordinator_epoch,
                    result,
                    epoch_check,
                },
                0,
                now,
            )
            .await;
        if let Ok(offset) = written {
            let marker = MarkerRecord {
                result,
                coordinator_epoch,
            };
            let bytes = txn_marker::encode_marker_batch(producer_id, epoch, marker, now);
            self.model.before_append(bytes.len() as u64);
            let expected = self.model.push(
                &bytes,
                Kind::Marker {
                    producer,
                    commit: result == TxnResult::Commit,
                },
                now,
            );
            assert_eq!(offset, expected, "marker offset");
        }
        written
    }

    async fn apply(&mut self, op: &Op) {
        self.now_ms += 10;
        let now = self.now_ms;
        let replayed = self.model.replay();
        match *op {
            Op::Transactional {
                producer,
                records,
                value_len,
            } => {
                let view = replayed.producers[producer];
                let seed = self.model.next_seed();
                let produced = transactional_batch(
                    seed,
                    usize::from(records),
                    usize::from(value_len),
                    now,
                    ProducerSpec {
                        producer_id: FIRST_PRODUCER_ID + producer as i64,
                        epoch: view.epoch,
                        base_sequence: view.next_sequence,
                    },
                );
                let kind = Kind::Data {
                    producer,
                    transactional: true,
                };
                self.append(produced, kind, now)
                    .await
                    .expect("transactional append");
            }
            Op::Idempotent { producer, records } => {
                let view = replayed.producers[producer];
                let seed = self.model.next_seed();
                let produced = batch(
                    seed,
                    usize::from(records),
                    16,
                    now,
                    Some(ProducerSpec {
                        producer_id: FIRST_PRODUCER_ID + producer as i64,
                        epoch: view.epoch,
                        base_sequence: view.next_sequence,
                    }),
                );
                let kind = Kind::Data {
                    producer,
                    transactional: false,
                };
                let result = self.append(produced, kind, now).await;
                match (view.open, result) {
                    (None, Ok(_)) => {}
                    (
                        Some(open),
                        Err(EngineError::ProducerState(ProducerStateError::InvalidTxnState {
                            first_offset,
                            ..
                        })),
                    ) => assert_eq!(first_offset as u64, open),
                    (open, result) => panic!("idempotent append with {open:?} open: {result:?}"),
                }
            }
            Op::Plain { records, value_len } => {
                let seed = self.model.next_seed();
                let produced = batch(
                    seed,
                    usize::from(records),
                    usize::from(value_len),
                    now,
                    None,
                );
                self.append(produced, Kind::Plain, now)
                    .await
                    .expect("plain append");
            }
            Op::End {
                producer,
                commit,
                bump,
            } => {
                let view = replayed.producers[producer];
                let (epoch, check) = if bump {
                    (view.epoch + 1, MarkerEpochCheck::AboveCurrent)
                } else {
                    (view.epoch, MarkerEpochCheck::AtLeastCurrent)
                };
                let result = if commit {
                    TxnResult::Commit
                } else {
                    TxnResult::Abort
                };
                self.end(producer, epoch, COORDINATOR_EPOCH, result, check, now)
                    .await
                    .expect("marker");
            }
            Op::RetryEnd { producer } => {
                let view = replayed.producers[producer];
                let written = self
                    .end(
                        producer,
                        view.epoch,
                        COORDINATOR_EPOCH,
                        TxnResult::Commit,
                        MarkerEpochCheck::AboveCurrent,
                        now,
                    )
                    .await;
                match (view.known && view.open.is_some(), written) {
                    (false, Ok(_)) => {}
                    (
                        true,
                        Err(EngineError::ProducerState(ProducerStateError::ProducerFenced {
                            ..
                        })),
                    ) => {}
                    (open, written) => panic!("retried marker, open {open}: {written:?}"),
                }
            }
            Op::StaleEnd { producer } => {
                let view = replayed.producers[producer];
                if !view.known || view.epoch == 0 {
                    return;
                }
                let written = self
                    .end(
                        producer,
                        view.epoch - 1,
                        COORDINATOR_EPOCH,
                        TxnResult::Abort,
                        MarkerEpochCheck::AtLeastCurrent,
                        now,
                    )
                    .await;
                assert!(
                    matches!(
                        written,
                        Err(EngineError::ProducerState(
                            ProducerStateError::ProducerFenced { .. }
                        ))
                    ),
                    "a stale marker: {written:?}"
                );
            }
            Op::StaleCoordinator { producer } => {
                let view = replayed.producers[producer];
                let stale = COORDINATOR_EPOCH - 1;
                let written = self
                    .end(
                        producer,
                        view.epoch,
                        stale,
                        TxnResult::Abort,
                        MarkerEpochCheck::AtLeastCurrent,
                        now,
                    )
                    .await;
                match (view.coordinator_epoch, written) {
                    (
                        Some(current),
                        Err(EngineError::ProducerState(ProducerStateError::CoordinatorFenced {
                            ..
                        })),
                    ) if current > stale => {}
                    (current, Ok(_)) if current.is_none_or(|c| c <= stale) => {}
                    (current, written) => {
                        panic!("marker of coordinator {stale} after {current:?}: {written:?}")
                    }
                }
            }
            Op::Flush => {
                self.log().flush().await.expect("flush");
                self.model.high_watermark = self.model.end;
            }
            Op::Roll => {
                let config = self.model.config.clone();
                self.log().set_config(LogConfig {
                    segment_age: Duration::ZERO,
                    ..config.clone()
                });
                self.log().roll_if_aged(now).await.expect("roll");
                self.log().set_config(config);
                let rolls = self.model.active_size > 0
                    && (self.model.active_appended
                        || self.model.active_size > self.model.config.segment_bytes);
                if rolls {
                    self.model.roll();
                }
            }
            Op::Checkpoint => {
                self.log().checkpoint().await.expect("checkpoint");
                self.model.high_watermark = self.model.end;
            }
            Op::Reopen => {
                let log = self.log.take().expect("open log");
                log.close().await.expect("close");
                self.model.high_watermark = self.model.end;
                self.open().await;
            }
            Op::Crash => {
                drop(self.log.take());
                // Writes already issued by the dropped log finish on their own; a killed
                // process would not have them land after a restart, so let them land first.
                glommio::timer::sleep(Duration::from_millis(20)).await;
                self.open().await;
                let end = self.log().offsets().log_end_offset;
                self.model.truncate_to(end);
            }
            Op::Takeover => {
                let log = self.log.take().expect("open log");
                log.close_for_takeover().await.expect("close for takeover");
                self.model.high_watermark = self.model.end;
                self.fence_epoch += 1;
                self.open().await;
            }
            Op::ReadCommitted { pick, max_bytes } => {
                let offset = u64::from(pick) % (self.model.end + 1);
                self.check_read_committed(offset, max_bytes as usize).await;
            }
        }
    }

    async fn check_read_committed(&self, offset: u64, max_bytes: usize) {
        let model = &self.model;
        let replayed = model.replay();
        let stable = model.last_stable_offset(&replayed);
        let read = self
            .log()
            .read_committed(offset, max_bytes)
            .await
            .expect("read committed");
        assert_eq!(
            read.last_stable_offset, stable,
            "last stable offset of a read"
        );
        assert_eq!(read.records.high_watermark, model.high_watermark);
        let batches = split_batches(&read.records.chunks);
        if offset >= stable {
            assert!(
                batches.is_empty(),
                "read at {offset} at or past the LSO {stable}"
            );
            assert!(read.aborted.is_empty());
            return;
        }
        assert!(
            !batches.is_empty(),
            "read at {offset} below the LSO {stable} returned nothing"
        );
        let first = model
            .batches
            .iter()
            .position(|b| b.base <= offset && offset < b.next)
            .expect("model batch holding the offset");
        let total: usize = batches.iter().map(|b| b.bytes.len()).sum();
        assert!(total <= max_bytes || batches.len() == 1);
        for (found, expected) in batches.iter().zip(&model.batches[first..]) {
            assert_eq!(found.base_offset, expected.base, "batch order at {offset}");
            assert!(found.next_offset <= stable, "a batch at or past the LSO");
            assert!(
                found.bytes[..] == expected.stored[..],
                "batch at {}",
                expected.base
            );
        }
        assert_eq!(
            read.aborted,
            model.aborted_for(&replayed, offset, stable),
            "aborted transactions of a fetch from {offset}"
        );
    }

    fn check_offsets(&self) {
        let offsets = self.log().offsets();
        let model = &self.model;
        let replayed = model.replay();
        assert_eq!(
            (
                offsets.high_watermark,
                offsets.log_end_offset,
                offsets.last_stable_offset
            ),
            (
                model.high_watermark,
                model.end,
                model.last_stable_offset(&replayed)
            ),
            "(high watermark, end, last stable offset)"
        );
        assert_eq!(self.log().last_stable_offset(), offsets.last_stable_offset);
        for (producer, view) in replayed.producers.iter().enumerate() {
            let entry = self
                .log()
                .producers()
                .into_iter()
                .find(|e| e.producer_id() == FIRST_PRODUCER_ID + producer as i64);
            assert_eq!(
                entry.as_ref().and_then(|e| e.open_transaction()),
                view.open.map(|first| first as i64),
                "open transaction of producer {producer}"
            );
        }
    }

    /// A read-committed consumer reading the whole log sees exactly the committed batches.
    async fn check_consumer(&self) {
        let model = &self.model;
        let replayed = model.replay();
        let stable = model.last_stable_offset(&replayed);
        let mut seen = Vec::new();
        let mut offset = 0;
        while offset < stable {
            let read = self
                .log()
                .read_committed(offset, 3_000)
                .await
                .expect("read committed");
            let batches = split_batches(&read.records.chunks);
            let last = batches.last().expect("a batch below the LSO");
            offset = last.next_offset;
            seen.extend(visible_batches(&batches, &read.aborted));
        }
        let expected: Vec<u64> = replayed
            .committed
            .iter()
            .copied()
            .filter(|base| *base < stable)
            .collect();
        assert_eq!(seen, expected, "batches a read-committed consumer sees");
        let all_aborted = self
            .log()
            .aborted_transactions(0, stable)
            .expect("aborted transactions");
        assert_eq!(all_aborted, model.aborted_for(&replayed, 0, stable));
    }
}

async fn execute(storage: Storage, config: LogConfig, ops: Vec<Op>) {
    let mut harness = Harness {
        storage,
        log: None,
        fence_epoch: 0,
        model: Model {
            config,
            batches: Vec::new(),
            end: 0,
            high_watermark: 0,
            active_base: 0,
            active_size: 0,
            active_appended: false,
            seed: 0,
        },
        now_ms: 1_000_000,
    };
    harness.open().await;
    let without_producer = TxnMarker {
        producer_id: -1,
        producer_epoch: 0,
        coordinator_epoch: 0,
        result: TxnResult::Commit,
        epoch_check: MarkerEpochCheck::AtLeastCurrent,
    };
    assert!(matches!(
        harness
            .log()
            .append_txn_marker(without_producer, 0, 0)
            .await,
        Err(EngineError::InvalidBatch(_))
    ));
    for op in &ops {
        harness.apply(op).await;
        harness.check_offsets();
    }
    harness.check_consumer().await;
    harness.apply(&Op::Crash).await;
    harness.check_offsets();
    harness.check_consumer().await;
    harness.apply(&Op::Reopen).await;
    harness.check_offsets();
    harness.check_consumer().await;
    harness.log().close().await.expect("close");
}

/// `PROPTEST_CASES` overrides the case count, for longer runs.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn ops_strategy() -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op_strategy(), 1..90)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    #[test]
    fn in_memory_transactions_match_model(config in config_strategy(), ops in ops_strategy()) {
        common::run(move || execute(Storage::memory(), config, ops));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(32), ..ProptestConfig::default() })]

    #[test]
    fn disk_transactions_match_model(config in config_strategy(), ops in ops_strategy()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        common::run(move || async move {
            let storage = common::disk_storage(&root).await;
            execute(storage, config, ops).await;
        });
    }
}
