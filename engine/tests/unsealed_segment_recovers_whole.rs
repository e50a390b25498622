//! Property: a crash while a rolled segment is still being sealed loses nothing, and a
//! really torn earlier segment still ends the log.
//!
//! A roll makes the old segment's batches durable and creates the next segment, then seals
//! the old one in the background (cut the file to its exact size, write and sync its index
//! files). A crash before the seal ends leaves the old segment longer than its batches and
//! its index files missing, incomplete or stale. These tests build that state by hand: a
//! log of two segments is written and closed, then the older segment's file is extended
//! with zero padding (or other bytes) and its index files are deleted or cut, with the
//! recovery point deleted or left where it is (in the newer segment, beyond the damage).
//!
//! - When the older segment's batches end exactly at the newer segment's base offset, every
//!   batch of both segments must read back byte for byte, the older file must be cut to its
//!   batches, and appends must continue at the log end, also after another restart.
//! - When they end before it (a batch is cut short), the log must end at the last intact
//!   batch of the older segment and the newer segment must be gone.

mod common;

use std::path::{Path, PathBuf};

use kaas_engine::{LogConfig, PartitionLog, Storage};

use common::files::{set_len, write_at};
use common::{batch, partition_dir, read_all, record_count, stamped};

const EPOCH: i32 = 3;
/// Batches written: the first `PER_SEGMENT` fill the older segment, the rest the newer one.
const BATCHES: u64 = 9;
const PER_SEGMENT: u64 = 6;

#[derive(Clone, Copy, Debug)]
enum Tail {
    /// The write-behind buffer's zero padding up to the page, then preallocated space.
    ZeroPadding,
    /// Bytes that are not batches (never written by the log, but nothing in the older
    /// segment can lie past a batch reaching the next base, whatever the bytes are).
    Garbage,
}

#[derive(Clone, Copy, Debug)]
enum Indexes {
    /// Left as the clean close wrote them.
    Kept,
    /// Both deleted, as when the seal never wrote them.
    Deleted,
    /// Cut at an entry boundary, so they look like valid shorter indexes.
    CutAtEntry,
    /// Cut inside an entry.
    CutInsideEntry,
}

#[derive(Clone, Copy, Debug)]
enum RecoveryPoint {
    Deleted,
    /// The clean close's recovery point, in the newer segment.
    Beyond,
}

fn produced(n: u64) -> Vec<u8> {
    batch(100 + n, 2, 500, 1_000 + n as i64, None)
}

fn config() -> LogConfig {
    let batch_len = produced(0).len() as u64;
    LogConfig {
        segment_bytes: PER_SEGMENT * batch_len + 10,
        index_interval_bytes: 2 * batch_len,
        write_chunk_bytes: 16 << 10,
        preallocate_step: 1 << 20,
        ..LogConfig::default()
    }
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).expect("metadata").len()
}

/// What a seal that never finished leaves after the batches ending at `size`.
fn leave_unsealed_tail(log_file: &Path, size: u64, tail: Tail) {
    match tail {
        Tail::ZeroPadding => set_len(log_file, size.next_multiple_of(4096) + (1 << 20)),
        Tail::Garbage => write_at(log_file, size, &[0x5a; 300]),
    }
}

fn damage_indexes(log_file: &Path, how: Indexes) {
    // Offset-index entries are 12 bytes, time-index entries 16.
    for (path, entry_len) in [
        (log_file.with_extension("index"), 12),
        (log_file.with_extension("timeindex"), 16),
    ] {
        let len = file_len(&path);
        assert!(
            len > entry_len,
            "{} has more than one entry",
            path.display()
        );
        match how {
            Indexes::Kept => {}
            Indexes::Deleted => std::fs::remove_file(&path).expect("remove index"),
            Indexes::CutAtEntry => set_len(&path, entry_len),
            Indexes::CutInsideEntry => set_len(&path, len - 5),
        }
    }
}

/// Writes `BATCHES` batches into two segments and closes the log. Returns the produced
/// batches with their offsets.
async fn write_two_segments(storage: &Storage) -> Vec<(u64, Vec<u8>)> {
    let log = PartitionLog::open(storage, &partition_dir(), config())
        .await
        .expect("open");
    let mut written = Vec::new();
    for n in 0..BATCHES {
        let bytes = produced(n);
        let outcome = log.append_durable(&bytes, EPOCH, 0).await.expect("append");
        written.push((outcome.base_offset, bytes));
    }
    assert_eq!(log.segment_count(), 2, "the writes span two segments");
    log.close().await.expect("close");
    written
}

async fn reopen(storage: &Storage) -> PartitionLog {
    PartitionLog::open(storage, &partition_dir(), config())
        .await
        .expect("reopen")
}

/// Checks that exactly `kept` reads back, then that an append continues after it.
async fn check_log(log: &PartitionLog, kept: &[(u64, Vec<u8>)]) -> (u64, Vec<u8>) {
    let end = kept
        .last()
        .map_or(0, |(base, bytes)| base + record_count(bytes));
    let offsets = log.offsets();
    assert_eq!(offsets.log_end_offset, end, "log end");
    assert_eq!(offsets.high_watermark, end, "high watermark");
    let read = read_all(log, 0, 1 << 20).await;
    assert_eq!(read.len(), kept.len(), "batches read back");
    for (found, (base, bytes)) in read.iter().zip(kept) {
        assert_eq!(found.base_offset, *base);
        assert_eq!(&found.bytes[..], &stamped(bytes, *base, EPOCH)[..]);
    }
    let more = produced(1_000);
    let outcome = log
        .append_durable(&more, EPOCH, 0)
        .await
        .expect("append after recovery");
    assert_eq!(outcome.base_offset, end, "appends continue at the log end");
    (outcome.base_offset, more)
}

fn whole_older_segment_is_kept(tail: Tail, indexes: Indexes, point: RecoveryPoint) {
    let root = tempfile::tempdir().expect("tempdir");
    let root_path = root.path().to_path_buf();
    common::run(move || async move {
        let storage = common::disk_storage(&root_path).await;
        let mut written = write_two_segments(&storage).await;
        let dir = root_path.join(partition_dir());
        let files = segment_files(&dir);
        let older = files[0].clone();
        let sealed_size = file_len(&older);
        let older_len: u64 = written[..PER_SEGMENT as usize]
            .iter()
            .map(|(_, bytes)| bytes.len() as u64)
            .sum();
        assert_eq!(sealed_size, older_len, "a clean close seals exactly");

        leave_unsealed_tail(&older, sealed_size, tail);
        damage_indexes(&older, indexes);
        if let RecoveryPoint::Deleted = point {
            std::fs::remove_file(dir.join("recovery-point")).expect("remove recovery point");
        }

        let log = reopen(&storage).await;
        assert_eq!(log.segment_count(), 2, "the newer segment is kept");
        assert_eq!(
            file_len(&older),
            sealed_size,
            "the older file is cut to its batches"
        );
        written.push(check_log(&log, &written).await);
        log.close().await.expect("close");

        // The seal recovery did is durable and complete: another restart agrees.
        let log = reopen(&storage).await;
        assert_eq!(file_len(&older), sealed_size);
        assert!(
            file_len(&older.with_extension("index")) > 0,
            "offset index written"
        );
        assert!(
            file_len(&older.with_extension("timeindex")) > 0,
            "time index written"
        );
        check_log(&log, &written).await;
        log.close().await.expect("close");
    });
}

fn torn_older_segment_ends_the_log(point: RecoveryPoint) {
    let root = tempfile::tempdir().expect("tempdir");
    let root_path = root.path().to_path_buf();
    common::run(move || async move {
        let storage = common::disk_storage(&root_path).await;
        let written = write_two_segments(&storage).await;
        let dir = root_path.join(partition_dir());
        let files = segment_files(&dir);
        let older = files[0].clone();
        let sealed_size = file_len(&older);
        // The older segment's last batch is cut short, then padding follows.
        let last_len = written[PER_SEGMENT as usize - 1].1.len() as u64;
        let cut = sealed_size - last_len / 2;
        set_len(&older, cut);
        leave_unsealed_tail(&older, cut, Tail::ZeroPadding);
        if let RecoveryPoint::Deleted = point {
            std::fs::remove_file(dir.join("recovery-point")).expect("remove recovery point");
        }

        let log = reopen(&storage).await;
        let kept = &written[..PER_SEGMENT as usize - 1];
        assert_eq!(log.segment_count(), 1, "the newer segment is dropped");
        assert!(!files[1].exists(), "the newer segment's file is deleted");
        assert_eq!(
            file_len(&older),
            sealed_size - last_len,
            "cut at the torn batch"
        );
        let more = check_log(&log, kept).await;
        log.close().await.expect("close");

        let log = reopen(&storage).await;
        let mut kept = kept.to_vec();
        kept.push(more);
        check_log(&log, &kept).await;
        log.close().await.expect("close");
    });
}

#[test]
fn zero_padding_without_recovery_point() {
    whole_older_segment_is_kept(Tail::ZeroPadding, Indexes::Kept, RecoveryPoint::Deleted);
}

#[test]
fn zero_padding_beyond_recovery_point() {
    whole_older_segment_is_kept(Tail::ZeroPadding, Indexes::Kept, RecoveryPoint::Beyond);
}

#[test]
fn zero_padding_and_deleted_indexes() {
    whole_older_segment_is_kept(Tail::ZeroPadding, Indexes::Deleted, RecoveryPoint::Deleted);
    whole_older_segment_is_kept(Tail::ZeroPadding, Indexes::Deleted, RecoveryPoint::Beyond);
}

#[test]
fn zero_padding_and_cut_indexes() {
    for indexes in [Indexes::CutAtEntry, Indexes::CutInsideEntry] {
        for point in [RecoveryPoint::Deleted, RecoveryPoint::Beyond] {
            whole_older_segment_is_kept(Tail::ZeroPadding, indexes, point);
        }
    }
}

#[test]
fn other_bytes_after_batches_reaching_the_next_base() {
    for point in [RecoveryPoint::Deleted, RecoveryPoint::Beyond] {
        whole_older_segment_is_kept(Tail::Garbage, Indexes::Kept, point);
    }
}

#[test]
fn torn_older_segment_without_recovery_point() {
    torn_older_segment_ends_the_log(RecoveryPoint::Deleted);
}

#[test]
fn torn_older_segment_below_recovery_point() {
    torn_older_segment_ends_the_log(RecoveryPoint::Beyond);
}
