//! Property: after its files are damaged between runs, a log reopens ending exactly at the
//! last intact batch before the damage, and loses nothing when only derived files are hit.
//!
//! A log is written on disk (several segments, several leader epochs, an idempotent
//! producer), then closed cleanly or dropped after a flush (a crash), with or without a
//! checkpoint half-way. Then one file is damaged with `std::fs`:
//!
//! - the last segment is cut at a random position (inside a header, inside records);
//! - a bit is flipped in one of the last batches of the last segment, or of a middle
//!   segment (then the later segments must be dropped);
//! - zeros, random bytes or a stale copy of the last batch are written after the last batch;
//! - an `.index` or `.timeindex` file is cut, bit-flipped, extended with garbage or deleted;
//! - the recovery point, the leader-epoch checkpoint or the newest producer snapshot is cut,
//!   bit-flipped, extended or deleted.
//!
//! On reopen the log must end at the last batch wholly before the damage (and with no data
//! lost when an index or a checkpoint file was hit), every offset must read back its batch
//! byte for byte, lookups by time and leader epoch must agree with the batches kept, a
//! producer retry of its last kept batch must be a duplicate, and appends must continue at
//! the next dense offset, also after another restart.
//!
//! Recovery trusts what lies below a valid recovery point (that is the point of having one),
//! so when the damage to batch data falls below it the case also deletes the recovery
//! point, and recovery validates the whole log. Likewise a time index cut exactly between
//! two entries is indistinguishable from a shorter valid one; then only the data and reads
//! are checked, not the lookups by time that depend on the segment's newest timestamp.

mod common;

use std::path::{Path, PathBuf};

use kaas_engine::batch::{scan_batches, BatchHeader, PARTITION_LEADER_EPOCH_POS};
use kaas_engine::{LogConfig, PartitionLog, Storage};
use proptest::prelude::*;

use common::files::{set_len, write_at};
use common::{batch, partition_dir, read_all, split_batches, stamped, ProducerSpec};

const PRODUCER: i64 = 77;

#[derive(Clone, Copy, Debug)]
enum Shutdown {
    Clean,
    Crash,
}

#[derive(Clone, Copy, Debug)]
enum FileDamage {
    Truncate(u32),
    FlipBit(u32),
    Garbage(u16),
    Delete,
}

#[derive(Clone, Copy, Debug)]
enum Damage {
    TruncateLastSegment(u32),
    FlipBitInLastBatches {
        batch: u8,
        bit: u32,
    },
    FlipBitInMiddleSegment {
        segment: u32,
        bit: u32,
    },
    TruncateMiddleSegment {
        segment: u32,
        at: u32,
    },
    WriteAfterLastBatch(Trailer),
    Index {
        time: bool,
        segment: u32,
        how: FileDamage,
    },
    RecoveryPoint(FileDamage),
    LeaderEpochs(FileDamage),
    Snapshot(FileDamage),
}

#[derive(Clone, Copy, Debug)]
enum Trailer {
    Zeros(u16),
    Garbage(u16),
    CopyOfLastBatch,
}

#[derive(Clone, Debug)]
struct Case {
    batches: Vec<(u8, u16, bool)>,
    shutdown: Shutdown,
    checkpoint_half_way: bool,
    damage: Damage,
    seed: u64,
}

fn file_damage() -> impl Strategy<Value = FileDamage> {
    prop_oneof![
        any::<u32>().prop_map(FileDamage::Truncate),
        any::<u32>().prop_map(FileDamage::FlipBit),
        (1u16..300).prop_map(FileDamage::Garbage),
        Just(FileDamage::Delete),
    ]
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        3 => any::<u32>().prop_map(Damage::TruncateLastSegment),
        3 => (0u8..4, any::<u32>()).prop_map(|(batch, bit)| Damage::FlipBitInLastBatches { batch, bit }),
        2 => (any::<u32>(), any::<u32>()).prop_map(|(segment, bit)| Damage::FlipBitInMiddleSegment { segment, bit }),
        2 => (any::<u32>(), any::<u32>()).prop_map(|(segment, at)| Damage::TruncateMiddleSegment { segment, at }),
        2 => prop_oneof![
            (1u16..9_000).prop_map(Trailer::Zeros),
            (1u16..9_000).prop_map(Trailer::Garbage),
            Just(Trailer::CopyOfLastBatch),
        ].prop_map(Damage::WriteAfterLastBatch),
        3 => (any::<bool>(), any::<u32>(), file_damage()).prop_map(|(time, segment, how)| Damage::Index { time, segment, how }),
        1 => file_damage().prop_map(Damage::RecoveryPoint),
        1 => file_damage().prop_map(Damage::LeaderEpochs),
        1 => file_damage().prop_map(Damage::Snapshot),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        proptest::collection::vec((1u8..=4, 20u16..900, proptest::bool::weighted(0.3)), 25..60),
        prop_oneof![Just(Shutdown::Clean), Just(Shutdown::Crash)],
        any::<bool>(),
        damage(),
        any::<u64>(),
    )
        .prop_map(
            |(batches, shutdown, checkpoint_half_way, damage, seed)| Case {
                batches,
                shutdown,
                checkpoint_half_way,
                damage,
                seed,
            },
        )
}

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 8 << 10,
        index_interval_bytes: 512,
        write_chunk_bytes: 16 << 10,
        tail_cache_bytes: 0,
        preallocate_step: 64 << 10,
        ..LogConfig::default()
    }
}

/// A batch as written, for the checks after recovery.
#[derive(Clone, Debug)]
struct Written {
    base: u64,
    next: u64,
    produced: Vec<u8>,
    epoch: i32,
    timestamp: i64,
    idempotent: bool,
}

impl Written {
    fn stored(&self) -> Vec<u8> {
        stamped(&self.produced, self.base, self.epoch)
    }
}

/// Where a batch lies on disk.
#[derive(Clone, Copy, Debug)]
struct Placement {
    segment: usize,
    position: u64,
    len: u64,
    base: u64,
    next: u64,
}

struct Files {
    dir: PathBuf,
    segments: Vec<(u64, PathBuf)>,
    placements: Vec<Placement>,
}

impl Files {
    fn scan(dir: &Path) -> Files {
        let mut segments: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
            .expect("list")
            .filter_map(|entry| {
                let path = entry.expect("entry").path();
                let name = path.file_name()?.to_str()?.to_owned();
                let base = name.strip_suffix(".log")?.parse().ok()?;
                Some((base, path))
            })
            .collect();
        segments.sort();
        let mut placements = Vec::new();
        for (index, (_, path)) in segments.iter().enumerate() {
            let bytes = std::fs::read(path).expect("read segment");
            for found in scan_batches(&bytes, 0) {
                placements.push(Placement {
                    segment: index,
                    position: found.position,
                    len: found.total_len as u64,
                    base: found.header.base_offset as u64,
                    next: found.header.next_offset() as u64,
                });
            }
        }
        Files {
            dir: dir.to_path_buf(),
            segments,
            placements,
        }
    }

    fn in_segment(&self, segment: usize) -> Vec<Placement> {
        self.placements
            .iter()
            .filter(|p| p.segment == segment)
            .copied()
            .collect()
    }

    fn index_path(&self, segment: usize, time: bool) -> PathBuf {
        let base = self.segments[segment].0;
        self.dir.join(format!(
            "{base:020}.{}",
            if time { "timeindex" } else { "index" }
        ))
    }

    fn newest_snapshot(&self) -> Option<PathBuf> {
        let mut snapshots: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .expect("list")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|e| e == "snapshot"))
            .collect();
        snapshots.sort();
        snapshots.pop()
    }
}

fn damage_small_file(path: &Path, how: FileDamage, rng: &mut u64) {
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    match how {
        FileDamage::Truncate(at) => {
            let len = if bytes.is_empty() {
                0
            } else {
                u64::from(at) % bytes.len() as u64
            };
            set_len(path, len);
        }
        FileDamage::FlipBit(bit) if !bytes.is_empty() => {
            let bit = bit as usize % (bytes.len() * 8);
            flip_bit(path, bit as u64);
        }
        FileDamage::FlipBit(_) => {}
        FileDamage::Garbage(len) => write_at(path, bytes.len() as u64, &garbage(len as usize, rng)),
        FileDamage::Delete => std::fs::remove_file(path).expect("remove"),
    }
}

fn flip_bit(path: &Path, bit: u64) {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[(bit / 8) as usize] ^= 1 << (bit % 8);
    write_at(path, 0, &bytes);
}

fn garbage(len: usize, rng: &mut u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            *rng as u8
        })
        .collect()
}

/// Flips a bit of `placement`'s batch, anywhere but in `partitionLeaderEpoch` (which is
/// outside the batch CRC by design, so no reader can tell it was changed).
fn flip_in_batch(files: &Files, placement: Placement, bit: u32) {
    let epoch_bits =
        (PARTITION_LEADER_EPOCH_POS as u64 * 8)..((PARTITION_LEADER_EPOCH_POS as u64 + 4) * 8);
    let mut bit = u64::from(bit) % (placement.len * 8 - 32);
    if bit >= epoch_bits.start {
        bit += 32;
    }
    debug_assert!(!epoch_bits.contains(&bit));
    flip_bit(
        &files.segments[placement.segment].1,
        placement.position * 8 + bit,
    );
}

/// What recovery must find.
struct Expected {
    end: u64,
    segments: usize,
    /// False when a time index was cut exactly at an entry boundary: that leaves a valid,
    /// shorter index which nothing short of rescanning every segment could tell from an
    /// intact one, so the segment's newest timestamp may be under-reported (no data is lost).
    timestamps_exact: bool,
}

/// Applies the damage; returns what the reopened log must look like.
fn apply(case: &Case, files: &Files, written: &[Written], checkpointed: Option<u64>) -> Expected {
    let mut rng = case.seed | 1;
    let end = written.last().map_or(0, |w| w.next);
    let all_segments = files.segments.len();
    let last_segment = all_segments - 1;
    let unchanged = Expected {
        end,
        segments: all_segments,
        timestamps_exact: true,
    };
    // Damage to data below the recovery point is found only without one.
    let recovery_point_offset = match case.shutdown {
        Shutdown::Clean => Some(end),
        Shutdown::Crash => checkpointed,
    };
    let expose = |damaged_from: u64| {
        if recovery_point_offset.is_some_and(|point| damaged_from < point) {
            std::fs::remove_file(files.dir.join("recovery-point")).expect("remove recovery point");
        }
    };
    let middle_segment = |pick: u32| {
        // Any segment but the last, when there is one.
        (all_segments > 1).then(|| pick as usize % (all_segments - 1))
    };
    match case.damage {
        Damage::TruncateLastSegment(at) => {
            let placements = files.in_segment(last_segment);
            let data_end = placements.last().map_or(0, |p| p.position + p.len);
            if data_end == 0 {
                return unchanged;
            }
            let cut = u64::from(at) % data_end;
            set_len(&files.segments[last_segment].1, cut);
            let kept = placements.iter().rev().find(|p| p.position + p.len <= cut);
            Expected {
                end: kept.map_or(files.segments[last_segment].0, |p| p.next),
                ..unchanged
            }
        }
        Damage::FlipBitInLastBatches { batch, bit } => {
            let placements = files.in_segment(last_segment);
            let Some(target) = placements.iter().rev().nth(batch as usize).copied() else {
                return unchanged;
            };
            expose(target.base);
            flip_in_batch(files, target, bit);
            Expected {
                end: target.base,
                ..unchanged
            }
        }
        Damage::FlipBitInMiddleSegment { segment, bit } => {
            let Some(segment) = middle_segment(segment) else {
                return unchanged;
            };
            let Some(target) = files.in_segment(segment).last().copied() else {
                return unchanged;
            };
            expose(target.base);
            flip_in_batch(files, target, bit);
            Expected {
                end: target.base,
                segments: segment + 1,
                ..unchanged
            }
        }
        Damage::TruncateMiddleSegment { segment, at } => {
            let Some(segment) = middle_segment(segment) else {
                return unchanged;
            };
            let placements = files.in_segment(segment);
            let size = placements.last().map_or(0, |p| p.position + p.len);
            let cut = u64::from(at) % size;
            let kept = placements.iter().rev().find(|p| p.position + p.len <= cut);
            let cut_end = kept.map_or(files.segments[segment].0, |p| p.next);
            expose(cut_end);
            set_len(&files.segments[segment].1, cut);
            Expected {
                end: cut_end,
                segments: segment + 1,
                ..unchanged
            }
        }
        Damage::WriteAfterLastBatch(trailer) => {
            let placements = files.in_segment(last_segment);
            let data_end = placements.last().map_or(0, |p| p.position + p.len);
            let bytes = match trailer {
                Trailer::Zeros(len) => vec![0; len as usize],
                Trailer::Garbage(len) => garbage(len as usize, &mut rng),
                Trailer::CopyOfLastBatch => match placements.last() {
                    Some(last) => {
                        let segment = std::fs::read(&files.segments[last_segment].1).expect("read");
                        segment[last.position as usize..(last.position + last.len) as usize]
                            .to_vec()
                    }
                    None => return unchanged,
                },
            };
            write_at(&files.segments[last_segment].1, data_end, &bytes);
            unchanged
        }
        Damage::Index { time, segment, how } => {
            let path = files.index_path(segment as usize % all_segments, time);
            let cut_between_entries = match (how, std::fs::metadata(&path)) {
                (FileDamage::Truncate(at), Ok(meta)) if time && meta.len() > 0 => {
                    let cut = u64::from(at) % meta.len();
                    cut > 0 && cut % 16 == 0
                }
                _ => false,
            };
            damage_small_file(&path, how, &mut rng);
            Expected {
                timestamps_exact: !cut_between_entries,
                ..unchanged
            }
        }
        Damage::RecoveryPoint(how) => {
            damage_small_file(&files.dir.join("recovery-point"), how, &mut rng);
            unchanged
        }
        Damage::LeaderEpochs(how) => {
            damage_small_file(&files.dir.join("leader-epoch-checkpoint"), how, &mut rng);
            unchanged
        }
        Damage::Snapshot(how) => {
            if let Some(path) = files.newest_snapshot() {
                damage_small_file(&path, how, &mut rng);
            }
            unchanged
        }
    }
}

async fn open(storage: &Storage) -> PartitionLog {
    PartitionLog::open(storage, &partition_dir(), config())
        .await
        .expect("open")
}

/// The epochs the kept batches imply: (epoch, first offset) in order.
fn epochs_of(kept: &[Written]) -> Vec<(i32, u64)> {
    let mut epochs: Vec<(i32, u64)> = Vec::new();
    for w in kept {
        if epochs.last().is_none_or(|(e, _)| *e < w.epoch) {
            epochs.push((w.epoch, w.base));
        }
    }
    epochs
}

async fn check_recovered(log: &PartitionLog, kept: &[Written], expected: &Expected) {
    let offsets = log.offsets();
    assert_eq!(
        (
            offsets.log_start_offset,
            offsets.high_watermark,
            offsets.log_end_offset
        ),
        (0, expected.end, expected.end),
        "(start, high watermark, end) after recovery"
    );
    assert_eq!(log.segment_count(), expected.segments, "segments kept");

    let read = read_all(log, 0, 4_096).await;
    assert_eq!(read.len(), kept.len(), "batches kept");
    for (found, w) in read.iter().zip(kept) {
        assert_eq!(found.base_offset, w.base);
        assert!(
            found.bytes[..] == w.stored()[..],
            "batch {} changed",
            w.base
        );
    }
    for w in kept {
        for offset in w.base..w.next {
            let fetched = log.read(offset, 1).await.expect("read");
            let batches = split_batches(&fetched.chunks);
            assert_eq!(batches.len(), 1, "one batch at {offset}");
            assert_eq!(batches[0].base_offset, w.base, "batch holding {offset}");
        }
    }

    for (i, w) in kept
        .iter()
        .enumerate()
        .filter(|_| expected.timestamps_exact)
    {
        let first_at_or_after = kept[i..]
            .iter()
            .find(|later| later.timestamp >= w.timestamp)
            .map(|later| (later.base, later.timestamp));
        assert_eq!(
            log.offset_for_timestamp(w.timestamp)
                .await
                .expect("by time"),
            first_at_or_after,
            "offset for timestamp {}",
            w.timestamp
        );
    }
    let past_max = kept.last().map_or(0, |w| w.timestamp + 1);
    assert_eq!(
        log.offset_for_timestamp(past_max).await.expect("by time"),
        None
    );

    let epochs = epochs_of(kept);
    assert_eq!(log.latest_epoch(), epochs.last().map(|(e, _)| *e));
    for (i, (epoch, _)) in epochs.iter().enumerate() {
        let end = epochs.get(i + 1).map_or(expected.end, |(_, start)| *start);
        assert_eq!(
            log.end_offset_for_epoch(*epoch),
            Some((*epoch, end)),
            "end of epoch {epoch}"
        );
    }

    if let Some(last) = kept.iter().rev().find(|w| w.idempotent) {
        let retry = log.append(&last.produced, 99, 0).await.expect("retry");
        assert!(retry.duplicate, "retry of the producer's last kept batch");
        assert_eq!(
            (retry.base_offset, retry.last_offset),
            (last.base, last.next - 1)
        );
    }
}

async fn execute(root: PathBuf, case: Case) {
    let storage = common::disk_storage(&root).await;
    let log = open(&storage).await;
    let mut written: Vec<Written> = Vec::new();
    let mut sequence = 0i32;
    let mut checkpointed = None;
    for (i, (records, value_len, idempotent)) in case.batches.iter().enumerate() {
        let epoch = 1 + (i / 10) as i32;
        let timestamp = 10_000 + 10 * i as i64;
        let producer = idempotent.then_some(ProducerSpec {
            producer_id: PRODUCER,
            epoch: 0,
            base_sequence: sequence,
        });
        let produced = batch(
            i as u64,
            *records as usize,
            *value_len as usize,
            timestamp,
            producer,
        );
        let outcome = log.append(&produced, epoch, 0).await.expect("append");
        if *idempotent {
            sequence += i32::from(*records);
        }
        written.push(Written {
            base: outcome.base_offset,
            next: outcome.last_offset + 1,
            produced,
            epoch,
            timestamp,
            idempotent: *idempotent,
        });
        if case.checkpoint_half_way && i == case.batches.len() / 2 {
            log.checkpoint().await.expect("checkpoint");
            checkpointed = Some(outcome.last_offset + 1);
        }
    }
    match case.shutdown {
        Shutdown::Clean => log.close().await.expect("close"),
        Shutdown::Crash => {
            log.flush().await.expect("flush");
            drop(log);
        }
    }

    let dir = root.join(partition_dir());
    let files = Files::scan(&dir);
    assert_eq!(files.placements.len(), written.len(), "every batch on disk");
    assert!(files.segments.len() >= 3, "several segments");
    let expected = apply(&case, &files, &written, checkpointed);
    let kept: Vec<Written> = written
        .iter()
        .filter(|w| w.next <= expected.end)
        .cloned()
        .collect();
    assert_eq!(kept.last().map_or(0, |w| w.next), expected.end);

    let log = open(&storage).await;
    check_recovered(&log, &kept, &expected).await;

    // Appends carry on at the next dense offset, and survive another restart.
    let more = batch(1_000, 3, 100, 20_000, None);
    let outcome = log
        .append(&more, 50, 0)
        .await
        .expect("append after recovery");
    assert_eq!(outcome.base_offset, expected.end);
    log.close().await.expect("close");
    let log = open(&storage).await;
    assert_eq!(log.offsets().log_end_offset, expected.end + 3);
    let fetched = log.read(expected.end, 1 << 20).await.expect("read");
    let batches = split_batches(&fetched.chunks);
    assert_eq!(&batches[0].bytes[..], &stamped(&more, expected.end, 50)[..]);
    let read = read_all(&log, 0, 1 << 20).await;
    assert_eq!(read.len(), kept.len() + 1);
    log.close().await.expect("close");

    // Nothing torn is left behind in the files either.
    let files = Files::scan(&dir);
    for (index, (_, path)) in files.segments.iter().enumerate() {
        let bytes = std::fs::read(path).expect("read");
        let mut scan = scan_batches(&bytes, 0);
        let last = scan.by_ref().last();
        if index + 1 < files.segments.len() {
            assert_eq!(
                scan.stop(),
                Some(&kaas_engine::batch::ScanStop::EndOfData),
                "sealed segment {} ends with a whole batch",
                path.display()
            );
        }
        if let Some(last) = last {
            let header = BatchHeader::parse(&bytes[last.position as usize..]).expect("header");
            assert!(header.next_offset() as u64 <= expected.end + 3);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(40),
        ..ProptestConfig::default()
    })]

    #[test]
    fn damaged_log_recovers_to_last_intact_batch(case in case()) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        common::run(move || execute(root, case));
    }
}
