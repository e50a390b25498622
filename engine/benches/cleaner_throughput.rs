//! Log cleaner throughput, and what a running cleaner costs produce.
//!
//! 1. Builds a compacted log on disk (`KAAS_CLEANER_LOG_MIB`, default 256 MiB, in 16 MiB
//!    segments) of batches of 16 records with 1 KiB values and keys drawn from
//!    `KAAS_CLEANER_KEYS` (default 20,000) keys, so most records are superseded; in the
//!    codec `KAAS_CLEANER_CODEC` (none, lz4, zstd, gzip, snappy; default none).
//! 2. Times one cleaning pass over it (unthrottled): MB/s of dirty log, bytes written.
//! 3. Produce alone, then produce while a second such log is being cleaned (in a task queue
//!    of its own, as the shard cleaner runs): 8 appenders on another partition of the same
//!    shard, 1 KiB batches, each waiting for durability (acks=all), for
//!    `KAAS_CLEANER_PRODUCE_SECS` (default 5) each; throughput and p50 / p99 latency.
//!
//! Knobs: `KAAS_BENCH_DIR` (default /tmp), the variables above. Data is removed at the end.

mod common;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::*;
use kaas_engine::batch::{self, recompress::recompress_batches};
use kaas_engine::compaction::{self, CleanerConfig, CompactionConfig, Throttle};
use kaas_engine::compression::{Codec, CompressionTarget};
use kaas_engine::{LogConfig, PartitionLog, Storage};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 20,
        retention_age: None,
        compaction: Some(CompactionConfig {
            min_cleanable_dirty_ratio: 0.0,
            ..CompactionConfig::default()
        }),
        ..LogConfig::default()
    }
}

fn codec() -> Codec {
    match std::env::var("KAAS_CLEANER_CODEC").as_deref() {
        Ok("gzip") => Codec::Gzip,
        Ok("snappy") => Codec::Snappy,
        Ok("lz4") => Codec::Lz4,
        Ok("zstd") => Codec::Zstd,
        _ => Codec::None,
    }
}

async fn build(storage: &Storage, dir: &Path, mib: u64, keys: u64, seed: u64) -> PartitionLog {
    let log = PartitionLog::open(storage, dir, config())
        .await
        .expect("open");
    let value = vec![b'v'; 1024];
    let target = CompressionTarget {
        codec: codec(),
        level: None,
    };
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut i = 0u64;
    while log.size_bytes() < mib << 20 {
        let names: Vec<Vec<u8>> = (0..16)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                format!("key-{:08}", state % keys).into_bytes()
            })
            .collect();
        let pairs: Vec<batch::TestRecord<'_>> = names
            .iter()
            .map(|k| (Some(k.as_slice()), Some(value.as_slice())))
            .collect();
        let plain = batch::encode_batch_for_tests(&pairs, now_ms(), -1, 0, -1);
        let produced = recompress_batches(&plain, target, 1 << 20)
            .expect("recompress")
            .unwrap_or(plain);
        log.append(&produced, 0, now_ms()).await.expect("append");
        i += 1;
        if i.is_multiple_of(64) {
            log.flush().await.expect("flush");
        }
    }
    let mut rolled = log.config();
    rolled.segment_bytes = 1;
    log.set_config(rolled);
    log.roll_if_aged(now_ms()).await.expect("roll");
    log.set_config(config());
    log.checkpoint().await.expect("checkpoint");
    log
}

async fn clean(log: &PartitionLog) -> (compaction::PassOutcome, Duration) {
    let cleaner = CleanerConfig::default();
    let config = log.config().compaction.expect("compacted");
    let start = Instant::now();
    let outcome = compaction::clean_log(log, 0, &config, &cleaner, &Throttle::new(None), now_ms())
        .await
        .expect("clean")
        .expect("a pass");
    (outcome, start.elapsed())
}

struct ProduceResult {
    mb_s: f64,
    p50: Duration,
    p99: Duration,
}

async fn produce_for(log: &PartitionLog, duration: Duration) -> ProduceResult {
    let batch = Rc::new(exact_batch(KIB, 900));
    let latencies = Rc::new(RefCell::new(Vec::new()));
    let bytes = Rc::new(RefCell::new(0u64));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (log, batch, latencies, bytes) =
            (log.clone(), batch.clone(), latencies.clone(), bytes.clone());
        tasks.push(glommio::spawn_local(async move {
            while start.elapsed() < duration {
                let sent = Instant::now();
                log.append_durable(&batch, 0, now_ms())
                    .await
                    .expect("append");
                latencies.borrow_mut().push(sent.elapsed());
                *bytes.borrow_mut() += batch.len() as u64;
            }
        }));
    }
    for task in tasks {
        task.await;
    }
    let elapsed = start.elapsed();
    let mut latencies = latencies.take();
    let total = *bytes.borrow();
    ProduceResult {
        mb_s: mb_per_s(total, elapsed),
        p50: quantile(&mut latencies, 0.5),
        p99: quantile(&mut latencies, 0.99),
    }
}

fn main() {
    let mib: u64 = env_or("KAAS_CLEANER_LOG_MIB", 256);
    let keys: u64 = env_or("KAAS_CLEANER_KEYS", 20_000);
    let seconds: u64 = env_or("KAAS_CLEANER_PRODUCE_SECS", 5);
    let scratch = scratch_dir("cleaner");
    let root: PathBuf = scratch.path().to_path_buf();
    println!("load average at start: {}", loadavg());
    run_on_executor("cleaner-bench", move || async move {
        kaas_engine::dma_probe::prepare_executor(&root)
            .await
            .expect("probe");
        let storage = Storage::disk(root.clone());
        let first = build(&storage, Path::new("topics/c/0"), mib, keys, 1).await;
        let dirty = first.size_bytes();
        let (outcome, elapsed) = clean(&first).await;
        println!(
            "clean pass: {:.1} MiB dirty log ({:?}) in {:.2} s = {:.1} MB/s; wrote {:.1} MiB, {} segments swapped; log now {:.1} MiB",
            dirty as f64 / MIB as f64,
            codec(),
            elapsed.as_secs_f64(),
            mb_per_s(dirty, elapsed),
            outcome.bytes_written as f64 / MIB as f64,
            outcome.segments_swapped,
            first.size_bytes() as f64 / MIB as f64,
        );
        first.close().await.expect("close");

        let second = build(&storage, Path::new("topics/c/1"), mib, keys, 2).await;
        let produce = PartitionLog::open(&storage, Path::new("topics/p/0"), LogConfig::default())
            .await
            .expect("open produce log");
        let duration = Duration::from_secs(seconds);
        let alone = produce_for(&produce, duration).await;
        let queue = glommio::executor().create_task_queue(
            glommio::Shares::Static(50),
            glommio::Latency::NotImportant,
            "bench-cleaner",
        );
        let cleaning = {
            let second = second.clone();
            glommio::spawn_local_into(async move { clean(&second).await }, queue).expect("spawn")
        };
        let during = produce_for(&produce, duration).await;
        let (_, clean_elapsed) = cleaning.await;
        println!(
            "produce alone:          {:.2} MB/s, p50 {:?}, p99 {:?}",
            alone.mb_s, alone.p50, alone.p99
        );
        println!(
            "produce while cleaning: {:.2} MB/s, p50 {:?}, p99 {:?} ({:.2}x throughput); the pass took {:.2} s",
            during.mb_s,
            during.p50,
            during.p99,
            during.mb_s / alone.mb_s,
            clean_elapsed.as_secs_f64()
        );
        second.close().await.expect("close");
        produce.close().await.expect("close");
    });
    println!("load average at end: {}", loadavg());
    drop(scratch);
}
