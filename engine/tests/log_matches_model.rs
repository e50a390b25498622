//! Property: a partition log behaves like a plain in-memory model of it.
//!
//! Random sequences of operations (appends of plain and idempotent batches, producer
//! retries, flushes, reads at random offsets and sizes, time rolls, size rolls, retention by
//! bytes, delete-records, checkpoints, clean reopens and crash-like reopens) run against a
//! real log, in memory and on disk, and against a model that is a vector of batches with
//! their offsets. After every operation the log's start, high watermark and end offsets,
//! its size and segment count and its leader epochs must be what the model says; every read
//! must return whole batches, byte-identical to what was appended (with `baseOffset` and
//! `partitionLeaderEpoch` stamped, and the append time in `LogAppendTime` logs), starting
//! with the batch holding the offset asked for and never past the high watermark; a
//! producer retry must get the original offsets.
//!
//! A crash (dropping the log without closing it) keeps everything flushed and may keep a
//! prefix of what was appended after the last flush; the model adopts whatever prefix the
//! recovered log holds once it has checked that it is one.

mod common;

use std::time::Duration;

use kaas_engine::{EngineError, LogConfig, PartitionLog, Storage, TimestampType};
use proptest::prelude::*;

use common::{batch, partition_dir, record_count, split_batches, ProducerSpec};

const PRODUCERS: usize = 3;
const FIRST_PRODUCER_ID: i64 = 7_000;

#[derive(Clone, Debug)]
enum Op {
    /// Appends one or more plain batches in one request: (records, value length) each.
    Append(Vec<(u8, u16)>),
    /// Appends the next batch of an idempotent producer.
    AppendIdempotent {
        producer: usize,
        records: u8,
        value_len: u16,
    },
    /// Sends the producer's last batch again.
    RetryLast {
        producer: usize,
    },
    Flush,
    Read {
        pick: u32,
        max_bytes: u32,
    },
    ReadOutOfRange {
        below: bool,
        by: u8,
    },
    /// Rolls the active segment through `roll_if_aged` with `segment.ms` = 0.
    Roll,
    /// Retention by bytes with a limit of `percent` of the current size.
    RetainBytes {
        percent: u8,
    },
    DeleteRecords {
        pick: u32,
        beyond_high_watermark: bool,
    },
    Checkpoint,
    Reopen,
    Crash,
    NewLeaderEpoch,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => proptest::collection::vec((1u8..=4, 0u16..700), 1..=3).prop_map(Op::Append),
        6 => (0..PRODUCERS, 1u8..=4, 0u16..500).prop_map(|(producer, records, value_len)| {
            Op::AppendIdempotent { producer, records, value_len }
        }),
        2 => (0..PRODUCERS).prop_map(|producer| Op::RetryLast { producer }),
        3 => Just(Op::Flush),
        7 => (any::<u32>(), 1u32..20_000).prop_map(|(pick, max_bytes)| Op::Read { pick, max_bytes }),
        1 => (any::<bool>(), any::<u8>()).prop_map(|(below, by)| Op::ReadOutOfRange { below, by }),
        2 => Just(Op::Roll),
        1 => (0u8..=100).prop_map(|percent| Op::RetainBytes { percent }),
        1 => (any::<u32>(), proptest::bool::weighted(0.2)).prop_map(|(pick, beyond)| {
            Op::DeleteRecords { pick, beyond_high_watermark: beyond }
        }),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => Just(Op::NewLeaderEpoch),
    ]
}

fn config_strategy() -> impl Strategy<Value = LogConfig> {
    (
        2_048u64..24_576,
        prop_oneof![Just(128u64), Just(1_024), Just(4_096)],
        prop_oneof![Just(4_096usize), Just(8_192), Just(65_536)],
        prop_oneof![Just(0usize), Just(4_096), Just(1 << 20)],
        prop_oneof![Just(0u64), Just(65_536), Just(32 << 20)],
        prop_oneof![
            3 => Just(TimestampType::CreateTime),
            1 => Just(TimestampType::LogAppendTime),
        ],
    )
        .prop_map(
            |(
                segment_bytes,
                index_interval_bytes,
                write_chunk_bytes,
                tail_cache_bytes,
                step,
                timestamp_type,
            )| LogConfig {
                segment_bytes,
                index_interval_bytes,
                write_chunk_bytes,
                tail_cache_bytes,
                preallocate_step: step,
                retention_age: None,
                timestamp_type,
                ..LogConfig::default()
            },
        )
}

#[derive(Clone, Debug)]
struct ModelBatch {
    base: u64,
    next: u64,
    stored: Vec<u8>,
}

#[derive(Clone, Debug)]
struct ModelSegment {
    base: u64,
    size: u64,
}

/// One batch an idempotent producer got into the log.
#[derive(Clone, Debug)]
struct ProducedBatch {
    produced: Vec<u8>,
    last_sequence: i32,
    base: u64,
    last: u64,
}

#[derive(Debug)]
struct Model {
    config: LogConfig,
    batches: Vec<ModelBatch>,
    segments: Vec<ModelSegment>,
    log_start: u64,
    high_watermark: u64,
    end: u64,
    /// Whether the active segment has had an append since it was opened or created (only
    /// then can it age).
    active_appended: bool,
    epochs: Vec<(i32, u64)>,
    leader_epoch: i32,
    producers: Vec<Vec<ProducedBatch>>,
    seed: u64,
}

impl Model {
    fn new(config: LogConfig) -> Self {
        Model {
            config,
            batches: Vec::new(),
            segments: vec![ModelSegment { base: 0, size: 0 }],
            log_start: 0,
            high_watermark: 0,
            end: 0,
            active_appended: false,
            epochs: Vec::new(),
            leader_epoch: 0,
            producers: vec![Vec::new(); PRODUCERS],
            seed: 0,
        }
    }

    fn active(&mut self) -> &mut ModelSegment {
        self.segments.last_mut().expect("a segment")
    }

    fn roll(&mut self) {
        self.high_watermark = self.end;
        let end = self.end;
        self.segments.push(ModelSegment { base: end, size: 0 });
        self.active_appended = false;
    }

    /// Accounts for an accepted (non-duplicate) request; returns its first and last offsets.
    fn append(&mut self, request: &[Vec<u8>], now: i64) -> (u64, u64) {
        let log_append_time =
            (self.config.timestamp_type == TimestampType::LogAppendTime).then_some(now);
        let total: u64 = request.iter().map(|b| b.len() as u64).sum();
        let active = self.segments.last().expect("a segment");
        if active.size > 0 && active.size + total > self.config.segment_bytes {
            self.roll();
        }
        let base = self.end;
        if self
            .epochs
            .last()
            .is_none_or(|(e, _)| *e < self.leader_epoch)
        {
            self.epochs.push((self.leader_epoch, base));
        }
        for produced in request {
            let offset = self.end;
            let next = offset + record_count(produced);
            let mut stored = produced.clone();
            kaas_engine::batch::stamp_for_append(
                &mut stored,
                offset as i64,
                self.leader_epoch,
                log_append_time,
            )
            .expect("stamp");
            self.batches.push(ModelBatch {
                base: offset,
                next,
                stored,
            });
            self.active().size += produced.len() as u64;
            self.end = next;
        }
        self.active_appended = true;
        (base, self.end - 1)
    }

    fn size(&self) -> u64 {
        self.segments.iter().map(|s| s.size).sum()
    }

    fn segment_next(&self, index: usize) -> u64 {
        self.segments.get(index + 1).map_or(self.end, |s| s.base)
    }

    fn delete_segments_below_start(&mut self) -> usize {
        let mut deleted = 0;
        while self.segments.len() > 1 && self.segment_next(0) <= self.log_start {
            self.segments.remove(0);
            deleted += 1;
        }
        let first_base = self.segments[0].base;
        self.batches.retain(|b| b.base >= first_base);
        deleted
    }

    fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, u64)> {
        let index = self.epochs.iter().rposition(|(e, _)| *e <= epoch)?;
        let end = self
            .epochs
            .get(index + 1)
            .map_or(self.end, |(_, start)| *start);
        Some((self.epochs[index].0, end))
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
        let active_base = self.segments.last().expect("a segment").base;
        assert!(end >= active_base, "a crash cannot undo a roll");
        self.batches.retain(|b| b.base < end);
        let active_size: u64 = self
            .batches
            .iter()
            .filter(|b| b.base >= active_base)
            .map(|b| b.stored.len() as u64)
            .sum();
        self.active().size = active_size;
        self.end = end;
        self.high_watermark = end;
        self.epochs.retain(|(_, start)| *start < end);
        for history in &mut self.producers {
            history.retain(|b| b.base < end);
        }
    }

    fn next_seed(&mut self) -> u64 {
        self.seed += 1;
        self.seed
    }
}

struct Harness {
    storage: Storage,
    log: Option<PartitionLog>,
    model: Model,
    now_ms: i64,
}

impl Harness {
    fn log(&self) -> &PartitionLog {
        self.log.as_ref().expect("open log")
    }

    async fn open(&mut self) {
        let log = PartitionLog::open(&self.storage, &partition_dir(), self.model.config.clone())
            .await
            .expect("open");
        self.log = Some(log);
        self.model.active_appended = false;
    }

    async fn apply(&mut self, op: &Op) {
        self.now_ms += 10;
        let now = self.now_ms;
        match op {
            Op::Append(specs) => {
                let request: Vec<Vec<u8>> = specs
                    .iter()
                    .map(|(records, value_len)| {
                        let seed = self.model.next_seed();
                        batch(seed, *records as usize, *value_len as usize, now, None)
                    })
                    .collect();
                let bytes = request.concat();
                let outcome = self
                    .log()
                    .append(&bytes, self.model.leader_epoch, now)
                    .await
                    .expect("append");
                let (base, last) = self.model.append(&request, now);
                assert_eq!((outcome.base_offset, outcome.last_offset), (base, last));
                assert!(!outcome.duplicate);
                assert_eq!(outcome.log_start_offset, self.model.log_start);
                let log_append_time =
                    self.model.config.timestamp_type == TimestampType::LogAppendTime;
                assert_eq!(outcome.log_append_time, log_append_time.then_some(now));
            }
            Op::AppendIdempotent {
                producer,
                records,
                value_len,
            } => {
                let history = &self.model.producers[*producer];
                let sequence = history.last().map_or(0, |b| b.last_sequence + 1);
                let seed = self.model.next_seed();
                let produced = batch(
                    seed,
                    *records as usize,
                    *value_len as usize,
                    now,
                    Some(ProducerSpec {
                        producer_id: FIRST_PRODUCER_ID + *producer as i64,
                        epoch: 0,
                        base_sequence: sequence,
                    }),
                );
                let outcome = self
                    .log()
                    .append(&produced, self.model.leader_epoch, now)
                    .await
                    .expect("idempotent append");
                let (base, last) = self.model.append(std::slice::from_ref(&produced), now);
                assert_eq!((outcome.base_offset, outcome.last_offset), (base, last));
                assert!(!outcome.duplicate);
                self.model.producers[*producer].push(ProducedBatch {
                    produced,
                    last_sequence: sequence + i32::from(*records) - 1,
                    base,
                    last,
                });
            }
            Op::RetryLast { producer } => {
                let Some(last) = self.model.producers[*producer].last().cloned() else {
                    return;
                };
                if last.last < self.model.log_start {
                    // Below the log start the producer may or may not be remembered.
                    return;
                }
                let outcome = self
                    .log()
                    .append(&last.produced, self.model.leader_epoch + 1, now)
                    .await
                    .expect("retry");
                assert!(outcome.duplicate, "a retry must be recognised: {outcome:?}");
                assert_eq!(
                    (outcome.base_offset, outcome.last_offset),
                    (last.base, last.last)
                );
            }
            Op::Flush => {
                self.log().flush().await.expect("flush");
                self.model.high_watermark = self.model.end;
            }
            Op::Read { pick, max_bytes } => {
                let span = self.model.end - self.model.log_start + 1;
                let offset = self.model.log_start + u64::from(*pick) % span;
                self.check_read(offset, *max_bytes as usize).await;
            }
            Op::ReadOutOfRange { below, by } => {
                let offset = if *below {
                    if self.model.log_start == 0 {
                        return;
                    }
                    u64::from(*by) % self.model.log_start
                } else {
                    self.model.end + 1 + u64::from(*by)
                };
                let result = self.log().read(offset, 1 << 20).await;
                assert!(
                    matches!(result, Err(EngineError::OffsetOutOfRange { .. })),
                    "read at {offset} outside the log: {result:?}"
                );
            }
            Op::Roll => {
                let config = self.model.config.clone();
                self.log().set_config(LogConfig {
                    segment_age: Duration::ZERO,
                    ..config.clone()
                });
                self.log().roll_if_aged(now).await.expect("roll");
                self.log().set_config(config);
                let active = self.model.segments.last().expect("a segment");
                let rolls = active.size > 0
                    && (self.model.active_appended
                        || active.size > self.model.config.segment_bytes);
                if rolls {
                    self.model.roll();
                }
            }
            Op::RetainBytes { percent } => {
                let limit = self.model.size() * u64::from(*percent) / 100;
                let config = self.model.config.clone();
                self.log().set_config(LogConfig {
                    retention_bytes: Some(limit),
                    ..config.clone()
                });
                let deleted = self.log().enforce_retention(now).await.expect("retention");
                self.log().set_config(config);
                let model = &mut self.model;
                let mut total = model.size();
                let mut new_start = model.log_start;
                for index in 0..model.segments.len() - 1 {
                    let size = model.segments[index].size;
                    if total - size < limit {
                        break;
                    }
                    total -= size;
                    new_start = new_start.max(model.segment_next(index));
                }
                let expected = if new_start == model.log_start {
                    0
                } else {
                    model.log_start = new_start;
                    model.high_watermark = model.end;
                    model.delete_segments_below_start()
                };
                assert_eq!(deleted, expected, "segments deleted by retention");
            }
            Op::DeleteRecords {
                pick,
                beyond_high_watermark,
            } => {
                let hw = self.model.high_watermark;
                if *beyond_high_watermark {
                    let offset = hw + 1 + u64::from(*pick % 3);
                    let result = self.log().delete_records(offset).await;
                    assert!(
                        matches!(result, Err(EngineError::OffsetOutOfRange { .. })),
                        "delete-records past the high watermark: {result:?}"
                    );
                    return;
                }
                let offset = u64::from(*pick) % (hw + 1);
                let start = self.log().delete_records(offset).await.expect("delete");
                let model = &mut self.model;
                model.log_start = model.log_start.max(offset);
                model.high_watermark = model.end;
                model.delete_segments_below_start();
                assert_eq!(start, model.log_start);
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
            Op::NewLeaderEpoch => self.model.leader_epoch += 1,
        }
    }

    async fn check_read(&self, offset: u64, max_bytes: usize) {
        let model = &self.model;
        let fetched = self.log().read(offset, max_bytes).await.expect("read");
        assert_eq!(fetched.high_watermark, model.high_watermark);
        assert_eq!(fetched.log_start_offset, model.log_start);
        let batches = split_batches(&fetched.chunks);
        if offset >= model.high_watermark {
            assert!(
                batches.is_empty(),
                "read at {offset} past the high watermark"
            );
            return;
        }
        assert!(!batches.is_empty(), "read at {offset} returned nothing");
        let first = model
            .batches
            .iter()
            .position(|b| b.base <= offset && offset < b.next)
            .expect("model batch holding the offset");
        let total: usize = batches.iter().map(|b| b.bytes.len()).sum();
        assert!(
            total <= max_bytes || batches.len() == 1,
            "read of {total} bytes with max_bytes {max_bytes}"
        );
        for (found, expected) in batches.iter().zip(&model.batches[first..]) {
            assert_eq!(found.base_offset, expected.base, "batch order at {offset}");
            assert!(found.next_offset <= model.high_watermark);
            assert!(
                found.bytes[..] == expected.stored[..],
                "batch at {} differs from what was appended",
                expected.base
            );
        }
        assert!(first + batches.len() <= model.batches.len());
    }

    fn check_offsets(&self) {
        let log = self.log();
        let model = &self.model;
        let offsets = log.offsets();
        assert_eq!(
            (
                offsets.log_start_offset,
                offsets.high_watermark,
                offsets.log_end_offset
            ),
            (model.log_start, model.high_watermark, model.end),
            "(start, high watermark, end)"
        );
        assert_eq!(log.segment_count(), model.segments.len(), "segment count");
        assert_eq!(log.size_bytes(), model.size(), "log size");
        assert_eq!(log.latest_epoch(), model.epochs.last().map(|(e, _)| *e));
        for epoch in -1..=model.leader_epoch + 1 {
            assert_eq!(
                log.end_offset_for_epoch(epoch),
                model.end_offset_for_epoch(epoch),
                "end offset for epoch {epoch}"
            );
        }
    }

    async fn check_everything(&self) {
        let model = &self.model;
        let read = common::read_all(self.log(), model.log_start, 16 << 10).await;
        let first = model
            .batches
            .iter()
            .position(|b| b.next > model.log_start)
            .unwrap_or(model.batches.len());
        let durable: Vec<&ModelBatch> = model.batches[first..]
            .iter()
            .filter(|b| b.next <= model.high_watermark)
            .collect();
        assert_eq!(read.len(), durable.len(), "number of readable batches");
        for (found, expected) in read.iter().zip(durable) {
            assert_eq!(found.base_offset, expected.base);
            assert!(
                found.bytes[..] == expected.stored[..],
                "batch {}",
                expected.base
            );
        }
    }
}

async fn execute(storage: Storage, config: LogConfig, ops: Vec<Op>) {
    let mut harness = Harness {
        storage,
        log: None,
        model: Model::new(config),
        now_ms: 1_000_000,
    };
    harness.open().await;
    for op in &ops {
        harness.apply(op).await;
        harness.check_offsets();
    }
    harness.check_everything().await;
    harness.apply(&Op::Reopen).await;
    harness.check_offsets();
    harness.check_everything().await;
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
    proptest::collection::vec(op_strategy(), 1..80)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

    #[test]
    fn in_memory_log_matches_model(config in config_strategy(), ops in ops_strategy()) {
        common::run(move || execute(Storage::memory(), config, ops));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), ..ProptestConfig::default() })]

    #[test]
    fn disk_log_matches_model(config in config_strategy(), ops in ops_strategy()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        common::run(move || async move {
            let storage = common::disk_storage(&root).await;
            execute(storage, config, ops).await;
        });
    }
}
