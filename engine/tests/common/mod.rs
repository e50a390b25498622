//! Helpers shared by the engine's integration tests: an executor runner, batch builders and
//! whole-log readers.

#![allow(dead_code)]

pub mod child_writer;
pub mod files;
pub mod read_committed;
pub mod tmpfs;

use std::future::Future;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use kaas_engine::batch::{self, BatchHeader};
use kaas_engine::{PartitionLog, Storage};

/// Runs `f` on a fresh glommio executor and waits for it.
pub fn run<F: Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move { f().await })
        .expect("executor")
        .join()
        .expect("join");
}

/// Disk storage rooted at `root`, after the per-executor direct-I/O probe work-around.
/// Call from inside the executor that will open logs on it.
pub async fn disk_storage(root: &Path) -> Storage {
    kaas_engine::dma_probe::prepare_executor(root)
        .await
        .expect("direct-I/O probe");
    Storage::disk(root.to_path_buf())
}

/// The partition directory the tests use, relative to the storage root.
pub fn partition_dir() -> PathBuf {
    PathBuf::from("topics/t/0")
}

/// A deterministic value for record `index` of batch `seed`.
pub fn value_for(seed: u64, index: usize, len: usize) -> Vec<u8> {
    let mut state = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(index as u64);
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// Who produced a batch: `None` for a producer that is not idempotent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerSpec {
    pub producer_id: i64,
    pub epoch: i16,
    pub base_sequence: i32,
}

/// An uncompressed batch of `records` records with `value_len`-byte values, all stamped
/// with `timestamp`.
pub fn batch(
    seed: u64,
    records: usize,
    value_len: usize,
    timestamp: i64,
    producer: Option<ProducerSpec>,
) -> Vec<u8> {
    let keys: Vec<Vec<u8>> = (0..records)
        .map(|i| format!("k{seed}-{i}").into_bytes())
        .collect();
    let values: Vec<Vec<u8>> = (0..records)
        .map(|i| value_for(seed, i, value_len))
        .collect();
    let pairs: Vec<batch::TestRecord<'_>> = keys
        .iter()
        .zip(&values)
        .map(|(k, v)| (Some(k.as_slice()), Some(v.as_slice())))
        .collect();
    let (producer_id, epoch, base_sequence) = match producer {
        Some(p) => (p.producer_id, p.epoch, p.base_sequence),
        None => (-1, -1, -1),
    };
    batch::encode_batch_for_tests(&pairs, timestamp, producer_id, epoch, base_sequence)
}

fn put_varlong(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8 & 0x7f) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// An uncompressed, non-idempotent batch whose record `i` has timestamp
/// `base_timestamp + deltas[i]` (each with a small value).
pub fn batch_with_timestamps(seed: u64, base_timestamp: i64, deltas: &[i64]) -> Vec<u8> {
    assert!(!deltas.is_empty());
    let mut body = Vec::new();
    for (index, delta) in deltas.iter().enumerate() {
        let value = value_for(seed, index, 32);
        let mut record = vec![0u8]; // attributes
        put_varlong(&mut record, *delta);
        put_varlong(&mut record, index as i64);
        put_varlong(&mut record, -1); // null key
        put_varlong(&mut record, value.len() as i64);
        record.extend_from_slice(&value);
        put_varlong(&mut record, 0); // no headers
        put_varlong(&mut body, record.len() as i64);
        body.extend_from_slice(&record);
    }
    let count = deltas.len() as i32;
    let header = BatchHeader {
        base_offset: 0,
        batch_length: (batch::BATCH_HEADER_LEN - batch::LOG_OVERHEAD + body.len()) as i32,
        partition_leader_epoch: -1,
        magic: batch::MAGIC_V2,
        crc: 0,
        attributes: 0,
        last_offset_delta: count - 1,
        base_timestamp,
        max_timestamp: base_timestamp + deltas.iter().copied().max().unwrap_or(0),
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
        records_count: count,
    };
    let mut out = header.encode().to_vec();
    out.extend_from_slice(&body);
    let crc = batch::compute_crc(&out);
    out[batch::CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The bytes the log stores for `produced` appended at `base_offset` in `leader_epoch`.
pub fn stamped(produced: &[u8], base_offset: u64, leader_epoch: i32) -> Vec<u8> {
    let mut bytes = produced.to_vec();
    batch::stamp_for_append(&mut bytes, base_offset as i64, leader_epoch, None).expect("stamp");
    bytes
}

/// Number of records in a produced batch.
pub fn record_count(produced: &[u8]) -> u64 {
    BatchHeader::parse(produced).expect("header").records_count as u64
}

/// One batch read back from a log.
#[derive(Clone, Debug)]
pub struct ReadBatch {
    pub base_offset: u64,
    pub next_offset: u64,
    pub bytes: Bytes,
}

/// Splits fetched chunks into batches, checking each is intact (framing, CRC, records).
pub fn split_batches(chunks: &[Bytes]) -> Vec<ReadBatch> {
    let mut out = Vec::new();
    for chunk in chunks {
        let mut scan = batch::scan_batches(chunk, 0).with_record_walk(true);
        for found in scan.by_ref() {
            let start = found.position as usize;
            out.push(ReadBatch {
                base_offset: found.header.base_offset as u64,
                next_offset: found.header.next_offset() as u64,
                bytes: chunk.slice(start..start + found.total_len),
            });
        }
        assert_eq!(
            scan.stop(),
            Some(&batch::ScanStop::EndOfData),
            "a read returned something other than whole intact batches"
        );
    }
    out
}

/// Reads every batch from `from` to the high watermark, checking offsets are dense.
pub async fn read_all(log: &PartitionLog, from: u64, max_bytes: usize) -> Vec<ReadBatch> {
    let high_watermark = log.offsets().high_watermark;
    let mut out: Vec<ReadBatch> = Vec::new();
    let mut offset = from;
    while offset < high_watermark {
        let fetched = log.read(offset, max_bytes).await.expect("read");
        let batches = split_batches(&fetched.chunks);
        assert!(
            !batches.is_empty(),
            "no data at {offset} below {high_watermark}"
        );
        for found in batches {
            match out.last() {
                Some(last) => assert_eq!(found.base_offset, last.next_offset, "offset gap"),
                None => assert!(found.base_offset <= offset && offset < found.next_offset),
            }
            assert!(
                found.next_offset <= high_watermark,
                "read past the high watermark"
            );
            offset = found.next_offset;
            out.push(found);
        }
    }
    out
}

/// Appends each of `batches` durably at `epoch`; returns, for each, its offset and the bytes
/// the log must hold for it (stamped with the offset and epoch).
pub async fn append_acked_batches(
    log: &PartitionLog,
    batches: impl IntoIterator<Item = Vec<u8>>,
    epoch: i32,
    now_ms: i64,
) -> Vec<(u64, Vec<u8>)> {
    let mut acked = Vec::new();
    for records in batches {
        let outcome = log
            .append_durable(&records, epoch, now_ms)
            .await
            .expect("append");
        acked.push((
            outcome.base_offset,
            stamped(&records, outcome.base_offset, epoch),
        ));
    }
    acked
}

/// The log holds exactly `expected` (offset, bytes), densely from offset 0, and its high
/// watermark is the end of the last of them.
pub async fn assert_holds(log: &PartitionLog, expected: &[(u64, Vec<u8>)]) {
    let got: Vec<(u64, Vec<u8>)> = read_all(log, 0, 4 << 20)
        .await
        .iter()
        .map(|b| (b.base_offset, b.bytes.to_vec()))
        .collect();
    assert_eq!(got.len(), expected.len(), "batch count");
    for (got, want) in got.iter().zip(expected) {
        assert_eq!(got.0, want.0, "offset");
        assert!(got.1 == want.1, "bytes at offset {}", want.0);
    }
    assert_eq!(
        log.offsets().high_watermark,
        expected.last().map_or(0, |(offset, bytes)| {
            offset + BatchHeader::parse(bytes).expect("header").records_count as u64
        })
    );
}
