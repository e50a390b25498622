//! Property: a compacted log keeps exactly the latest value of every key.
//!
//! Random sequences of produces (keys from a small set so they repeat, tombstones, batches
//! in every codec, plain and idempotent producers), interleaved with cleaning passes, rolls,
//! retention by bytes (`compact,delete`), the clock moving on, clean reopens and takeovers at
//! the next fence epoch (after which the passes start from the cleaner checkpoint, which
//! must hold where the last pass ended, and clean inherited segments),
//! run against a real log (in memory and on disk) and against a model: every record
//! produced, by offset. After every operation:
//!
//! - the log start and end offsets are the model's (compaction never moves them; retention
//!   moves the start);
//! - everything readable from the log start parses, offsets strictly increase, and every
//!   record read is the record the model has at that offset (nothing invented or moved);
//! - the latest record of every key whose latest record is at or after the log start is in
//!   the log (its value, or its tombstone while it may still be there);
//! - an idempotent producer's retry of its last batch is still a duplicate.
//!
//! At the end: roll, clean, move the clock past `delete.retention.ms`, clean again: no
//! tombstone is left and the log is exactly the latest value of every live key.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use kaas_engine::batch::{self, recompress::recompress_batches, BatchHeader};
use kaas_engine::compaction::{self, CleanerConfig, CompactionConfig, Throttle};
use kaas_engine::compression::{self, Codec, CompressionTarget};
use kaas_engine::{LogConfig, PartitionLog, Storage};
use proptest::prelude::*;

use common::partition_dir;

const KEYS: u8 = 8;
const PRODUCER_ID: i64 = 4_242;
const DELETE_RETENTION_MS: i64 = 60_000;
const START_MS: i64 = 1_700_000_000_000;

#[derive(Clone, Debug)]
enum Op {
    /// A batch of (key, value) records; value `None` is a tombstone.
    Produce {
        records: Vec<(u8, Option<u8>)>,
        codec: u8,
        idempotent: bool,
    },
    Clean {
        small_map: bool,
    },
    Roll,
    RetainBytes {
        percent: u8,
    },
    Advance {
        ms: u32,
    },
    Reopen,
    /// Close and take the log over at the next fence epoch: every segment is inherited.
    Takeover,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (
            prop::collection::vec((0..KEYS, prop::option::weighted(0.8, any::<u8>())), 1..6),
            0u8..5,
            any::<bool>()
        )
            .prop_map(|(records, codec, idempotent)| Op::Produce {
                records,
                codec,
                idempotent
            }),
        3 => any::<bool>().prop_map(|small_map| Op::Clean { small_map }),
        2 => Just(Op::Roll),
        1 => (10u8..100).prop_map(|percent| Op::RetainBytes { percent }),
        2 => (0u32..90_000).prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Reopen),
        1 => Just(Op::Takeover),
    ]
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1_200,
        segment_age: Duration::from_secs(3_600),
        index_interval_bytes: 256,
        write_chunk_bytes: 4_096,
        preallocate_step: 65_536,
        tail_cache_bytes: 4_096,
        retention_age: None,
        compaction: Some(CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            delete_retention: Duration::from_millis(DELETE_RETENTION_MS as u64),
            ..CompactionConfig::default()
        }),
        ..LogConfig::default()
    }
}

fn codec(id: u8) -> Codec {
    Codec::from_id(id).unwrap_or(Codec::None)
}

/// What the model knows of one produced record.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ModelRecord {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
}

/// A record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ReadRecord {
    offset: u64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
}

fn value_bytes(key: u8, value: u8, offset_hint: usize) -> Vec<u8> {
    format!("v{key}-{value}-{offset_hint}").into_bytes()
}

async fn read_records(log: &PartitionLog) -> Vec<ReadRecord> {
    let offsets = log.offsets();
    let mut out = Vec::new();
    let mut offset = offsets.log_start_offset;
    while offset < offsets.high_watermark {
        let fetched = log.read(offset, 1 << 16).await.expect("read");
        let mut next = offset;
        for chunk in &fetched.chunks {
            let mut scan = batch::scan_batches(chunk, 0);
            for found in scan.by_ref() {
                let header = found.header;
                let bytes = &chunk[found.position as usize..][..found.total_len];
                let codec = header.codec().expect("codec");
                let mut plain = Vec::new();
                compression::decompress(
                    codec,
                    &bytes[batch::BATCH_HEADER_LEN..],
                    &mut plain,
                    1 << 24,
                )
                .expect("decompress");
                let records =
                    compaction::records::walk(&plain, header.records_count).expect("records parse");
                for record in records {
                    let at = header.base_offset as u64 + record.offset_delta as u64;
                    let value = if record.tombstone {
                        None
                    } else {
                        Some(value_of(record.body))
                    };
                    if at >= offset {
                        out.push(ReadRecord {
                            offset: at,
                            key: record.key.map(<[u8]>::to_vec),
                            value,
                        });
                    }
                }
                next = next.max(header.next_offset() as u64);
            }
            assert_eq!(
                scan.stop(),
                Some(&batch::ScanStop::EndOfData),
                "whole batches"
            );
        }
        assert!(next > offset, "no progress reading at {offset}");
        offset = next;
    }
    out
}

/// The value bytes of a record body (attributes, timestamp delta, offset delta, key, value).
fn value_of(body: &[u8]) -> Vec<u8> {
    let mut pos = 1;
    let varint = |pos: &mut usize| -> i64 {
        let mut raw = 0u64;
        let mut shift = 0;
        loop {
            let byte = body[*pos];
            *pos += 1;
            raw |= u64::from(byte & 0x7f) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        ((raw >> 1) as i64) ^ -((raw & 1) as i64)
    };
    varint(&mut pos); // timestamp delta
    varint(&mut pos); // offset delta
    let key_len = varint(&mut pos);
    if key_len > 0 {
        pos += key_len as usize;
    }
    let value_len = varint(&mut pos);
    body[pos..pos + value_len as usize].to_vec()
}

struct Harness {
    storage: Storage,
    log: PartitionLog,
    epoch: u32,
    now: i64,
    first_dirty: u64,
    model: BTreeMap<u64, ModelRecord>,
    next_sequence: i32,
    last_idempotent: Option<(Vec<u8>, u64)>,
}

impl Harness {
    async fn produce(&mut self, records: &[(u8, Option<u8>)], codec_id: u8, idempotent: bool) {
        let base = self.log.offsets().log_end_offset;
        let keys: Vec<Vec<u8>> = records
            .iter()
            .map(|(k, _)| format!("key-{k}").into_bytes())
            .collect();
        let values: Vec<Option<Vec<u8>>> = records
            .iter()
            .enumerate()
            .map(|(i, (k, v))| v.map(|v| value_bytes(*k, v, base as usize + i)))
            .collect();
        let pairs: Vec<batch::TestRecord<'_>> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (Some(k.as_slice()), v.as_deref()))
            .collect();
        let (producer_id, sequence) = if idempotent {
            (PRODUCER_ID, self.next_sequence)
        } else {
            (-1, -1)
        };
        let plain = batch::encode_batch_for_tests(&pairs, self.now, producer_id, 0, sequence);
        let target = CompressionTarget {
            codec: codec(codec_id),
            level: None,
        };
        let produced = recompress_batches(&plain, target, 1 << 20)
            .expect("recompress")
            .unwrap_or(plain);
        let outcome = self
            .log
            .append_durable(&produced, 0, self.now)
            .await
            .expect("append");
        assert_eq!(outcome.base_offset, base);
        for (i, (key, value)) in keys.into_iter().zip(values).enumerate() {
            self.model
                .insert(base + i as u64, ModelRecord { key, value });
        }
        if idempotent {
            self.next_sequence += records.len() as i32;
            self.last_idempotent = Some((produced, base));
        }
    }

    async fn clean(&mut self, small_map: bool) {
        let cleaner = CleanerConfig {
            dedupe_buffer_bytes: if small_map { 200 } else { 1 << 20 },
            ..CleanerConfig::default()
        };
        let config = self.log.config().compaction.expect("compacted");
        let first_dirty = self.first_dirty.max(self.log.offsets().log_start_offset);
        let outcome = compaction::clean_log(
            &self.log,
            first_dirty,
            &config,
            &cleaner,
            &Throttle::new(None),
            self.now,
        )
        .await
        .expect("clean");
        if let Some(outcome) = outcome {
            assert!(outcome.cleaned_up_to >= first_dirty);
            self.first_dirty = outcome.cleaned_up_to;
        }
    }

    /// Closes the log and opens it at `epoch` (the same: a reopen; the next: a takeover).
    async fn reopen_at(&mut self, epoch: u32) {
        self.log.close().await.expect("close");
        self.epoch = epoch;
        self.log = PartitionLog::open_at_epoch(&self.storage, &partition_dir(), config(), epoch)
            .await
            .expect("reopen");
        // The next pass starts where the last one ended, from the cleaner checkpoint (and
        // everything the model checks afterwards still holds).
        let loaded = compaction::load_checkpoint(&self.log)
            .await
            .expect("cleaner checkpoint")
            .cleaned_up_to;
        assert_eq!(
            loaded,
            self.first_dirty.max(self.log.offsets().log_start_offset),
            "the checkpoint holds where the last pass ended"
        );
        self.first_dirty = loaded;
    }

    /// The latest record of every key at or after the log start.
    fn latest(&self) -> BTreeMap<Vec<u8>, (u64, Option<Vec<u8>>)> {
        let start = self.log.offsets().log_start_offset;
        let mut latest = BTreeMap::new();
        for (offset, record) in &self.model {
            latest.insert(record.key.clone(), (*offset, record.value.clone()));
        }
        latest.retain(|_, (offset, _)| *offset >= start);
        latest
    }

    async fn check(&self) {
        let offsets = self.log.offsets();
        let end = self.model.keys().next_back().map_or(0, |o| o + 1);
        assert_eq!(offsets.log_end_offset, end, "the log end never moves");
        assert_eq!(offsets.high_watermark, end);
        let read = read_records(&self.log).await;
        let mut previous = None;
        for record in &read {
            assert!(
                previous.is_none_or(|p| record.offset > p),
                "offsets increase"
            );
            previous = Some(record.offset);
            assert!(record.offset >= offsets.log_start_offset);
            let model = self.model.get(&record.offset).expect("a produced offset");
            assert_eq!(
                record.key.as_deref(),
                Some(model.key.as_slice()),
                "key at {}",
                record.offset
            );
            assert_eq!(record.value, model.value, "value at {}", record.offset);
        }
        let by_offset: BTreeMap<u64, &ReadRecord> = read.iter().map(|r| (r.offset, r)).collect();
        for (key, (offset, value)) in self.latest() {
            let present = by_offset.contains_key(&offset);
            let name = String::from_utf8_lossy(&key);
            // A tombstone may go once its delete horizon has passed, a value never.
            assert!(
                present || value.is_none(),
                "latest record of {name} at {offset} is gone"
            );
            let older = read
                .iter()
                .filter(|r| r.key.as_deref() == Some(key.as_slice()) && r.offset < offset)
                .count();
            // A gone tombstone leaves nothing older of its key behind (no value comes back).
            assert!(
                present || older == 0,
                "an older value of deleted {name} came back"
            );
        }
        if let Some((produced, base)) = &self.last_idempotent {
            let retry = self.log.append(produced, 0, self.now).await.expect("retry");
            assert!(retry.duplicate, "the producer's last batch is remembered");
            assert_eq!(retry.base_offset, *base);
        }
    }

    /// Rolls a non-empty active segment (also one recovered at open, which has no append
    /// time for `segment.ms`): with `segment.bytes` at 1 any non-empty segment is too big.
    async fn roll(&self) {
        let mut config = self.log.config();
        let segment_bytes = config.segment_bytes;
        config.segment_bytes = 1;
        self.log.set_config(config.clone());
        self.log.roll_if_aged(self.now).await.expect("roll");
        config.segment_bytes = segment_bytes;
        self.log.set_config(config);
    }

    async fn finish(&mut self) {
        self.roll().await;
        // The rolled segment is cleanable once its seal has ended; a checkpoint waits for it.
        self.log.checkpoint().await.expect("checkpoint");
        self.clean(false).await;
        self.now += DELETE_RETENTION_MS + 1;
        self.clean(false).await;
        self.check().await;
        let read = read_records(&self.log).await;
        let live: BTreeMap<Vec<u8>, (u64, Vec<u8>)> = self
            .latest()
            .into_iter()
            .filter_map(|(key, (offset, value))| Some((key, (offset, value?))))
            .collect();
        let got: BTreeMap<Vec<u8>, (u64, Vec<u8>)> = read
            .iter()
            .map(|r| {
                let value = r
                    .value
                    .clone()
                    .expect("no tombstone after delete.retention.ms");
                (r.key.clone().expect("key"), (r.offset, value))
            })
            .collect();
        assert_eq!(got.len(), read.len(), "one record per key");
        assert_eq!(got, live, "exactly the latest value of every live key");
    }
}

fn run_ops(ops: Vec<Op>, on_disk: bool) {
    common::run(move || async move {
        let temp = tempfile::tempdir().expect("tempdir");
        let storage = if on_disk {
            common::disk_storage(temp.path()).await
        } else {
            Storage::memory()
        };
        let log = PartitionLog::open(&storage, &partition_dir(), config())
            .await
            .expect("open");
        let mut h = Harness {
            storage,
            log,
            epoch: 0,
            now: START_MS,
            first_dirty: 0,
            model: BTreeMap::new(),
            next_sequence: 0,
            last_idempotent: None,
        };
        for op in ops {
            match op {
                Op::Produce {
                    records,
                    codec,
                    idempotent,
                } => h.produce(&records, codec, idempotent).await,
                Op::Clean { small_map } => h.clean(small_map).await,
                Op::Roll => h.roll().await,
                Op::RetainBytes { percent } => {
                    let mut config = h.log.config();
                    config.retention_bytes = Some(h.log.size_bytes() * u64::from(percent) / 100);
                    h.log.set_config(config);
                    h.log.enforce_retention(h.now).await.expect("retention");
                    // Retention keeps the producer state of batches it deleted (KIP-360, as
                    // Kafka does), so the last idempotent batch stays a duplicate: the check
                    // at the end retries it whether or not its records are still here.
                    let mut config = h.log.config();
                    config.retention_bytes = None;
                    h.log.set_config(config);
                }
                Op::Advance { ms } => h.now += i64::from(ms),
                Op::Reopen => h.reopen_at(h.epoch).await,
                Op::Takeover => h.reopen_at(h.epoch + 1).await,
            }
            h.check().await;
        }
        h.finish().await;
        h.log.close().await.expect("close");
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compacted_log_in_memory_matches_the_model(ops in prop::collection::vec(op(), 1..60)) {
        run_ops(ops, false);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn compacted_log_on_disk_matches_the_model(ops in prop::collection::vec(op(), 1..60)) {
        run_ops(ops, true);
    }
}

#[test]
fn a_fetch_from_a_removed_offset_returns_the_next_batch() {
    common::run(|| async {
        let storage = Storage::memory();
        let log = PartitionLog::open(&storage, &partition_dir(), config())
            .await
            .expect("open");
        let key = b"k".as_slice();
        for value in [b"1".as_slice(), b"2", b"3"] {
            let produced =
                batch::encode_batch_for_tests(&[(Some(key), Some(value))], START_MS, -1, 0, -1);
            log.append_durable(&produced, 0, START_MS)
                .await
                .expect("append");
        }
        log.roll_if_aged(START_MS + 7_200_000).await.expect("roll");
        let config = log.config().compaction.expect("compacted");
        compaction::clean_log(
            &log,
            0,
            &config,
            &CleanerConfig::default(),
            &Throttle::new(None),
            START_MS,
        )
        .await
        .expect("clean")
        .expect("a pass");
        let offsets = log.offsets();
        assert_eq!((offsets.log_start_offset, offsets.log_end_offset), (0, 3));
        // Offsets 0 and 1 are gone; reading at 0 serves the batch at 2.
        let fetched = log.read(0, 1 << 16).await.expect("read");
        let header = BatchHeader::parse(&fetched.chunks[0]).expect("header");
        assert_eq!(header.base_offset, 2);
        assert_eq!(log.end_offset_for_epoch(0), Some((0, 3)));
    });
}
