//! Recovery time of a partition log as a function of its size, with a fixed unflushed tail.
//!
//! For each log size (default 1 GiB and 8 GiB, 1 GiB segments, 1 MiB batches): append until
//! 64 MiB remain, `checkpoint()` (the recovery point), append the last 64 MiB, `flush()`, and
//! drop the log without `close()`, so the recovery point stays 64 MiB behind the end. Then
//! time `PartitionLog::open` (which validates everything after the recovery point) several
//! times, alternating the sizes, dropping each opened log without closing it; recovery
//! writes no checkpoint, so every sample scans the same 64 MiB. The recovery-point file is
//! compared before and after to make sure. The data is deleted at the end.
//!
//! Knobs (environment): `KAAS_BENCH_DIR` (parent of the scratch directory, default /tmp),
//! `KAAS_RECOVERY_SIZES_MIB` (1024,8192), `KAAS_RECOVERY_TAIL_MIB` (64),
//! `KAAS_RECOVERY_OPENS` (7).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use kaas_engine::{LogConfig, PartitionLog, Storage};

const BATCH: usize = MIB;

struct Built {
    size_mib: u64,
    dir: PathBuf,
    end_offset: u64,
    segments: usize,
    build_mb_s: f64,
    opens: Vec<Duration>,
}

async fn append_mib(log: &PartitionLog, batch: &[u8], mib: u64) {
    let now = now_ms();
    for i in 0..mib {
        log.append(batch, 0, now).await.expect("append");
        // Bound the write-behind: an append does not wait for its chunk writes.
        if i % 16 == 15 {
            log.flush().await.expect("flush");
        }
    }
}

async fn build(storage: &Storage, size_mib: u64, tail_mib: u64, batch: &[u8]) -> Built {
    let dir = PathBuf::from("topics")
        .join(format!("recovery-{size_mib}"))
        .join("0");
    let log = PartitionLog::open(storage, &dir, LogConfig::default())
        .await
        .expect("open");
    let start = Instant::now();
    append_mib(&log, batch, size_mib - tail_mib).await;
    log.checkpoint().await.expect("checkpoint");
    append_mib(&log, batch, tail_mib).await;
    log.flush().await.expect("flush");
    let elapsed = start.elapsed();
    let end_offset = log.offsets().log_end_offset;
    let segments = log.segment_count();
    drop(log); // no close(): the recovery point stays `tail_mib` behind
    Built {
        size_mib,
        dir,
        end_offset,
        segments,
        build_mb_s: mb_per_s(size_mib << 20, elapsed),
        opens: Vec::new(),
    }
}

fn recovery_point(root: &Path, dir: &Path) -> Vec<u8> {
    std::fs::read(root.join(dir).join("recovery-point")).expect("reading the recovery point")
}

async fn bench() -> String {
    let sizes: Vec<u64> = env_list("KAAS_RECOVERY_SIZES_MIB", &[1024, 8192]);
    let tail_mib: u64 = env_or("KAAS_RECOVERY_TAIL_MIB", 64);
    let opens: usize = env_or("KAAS_RECOVERY_OPENS", 7usize).max(1);
    let scratch = scratch_dir("recovery");
    let root = scratch.path().to_path_buf();
    kaas_engine::dma_probe::prepare_executor(&root)
        .await
        .expect("direct-I/O probe");
    let storage = Storage::disk(root.clone());
    let (machine_json, machine_text) = machine_facts(&root);
    println!("recovery_time: {machine_text}");
    let batch = exact_batch(BATCH, 1000);

    let mut logs = Vec::new();
    for &size in &sizes {
        assert!(size > tail_mib, "log must be larger than the tail");
        let built = build(&storage, size, tail_mib, &batch).await;
        println!(
            "built {} MiB log: {} segments, end offset {}, {:.0} MB/s",
            built.size_mib, built.segments, built.end_offset, built.build_mb_s
        );
        logs.push(built);
    }
    let points: Vec<Vec<u8>> = logs.iter().map(|b| recovery_point(&root, &b.dir)).collect();

    for round in 0..opens {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..logs.len()).collect()
        } else {
            (0..logs.len()).rev().collect()
        };
        for i in order {
            let built = &mut logs[i];
            let start = Instant::now();
            let log = PartitionLog::open(&storage, &built.dir, LogConfig::default())
                .await
                .expect("recovering open");
            let elapsed = start.elapsed();
            assert_eq!(
                log.offsets().log_end_offset,
                built.end_offset,
                "recovered end"
            );
            drop(log);
            assert_eq!(
                recovery_point(&root, &built.dir),
                points[i],
                "recovery moved the recovery point; samples would not be comparable"
            );
            built.opens.push(elapsed);
        }
    }

    println!(
        "\n-- open (recovery) time, {tail_mib} MiB after the recovery point, {opens} opens each --"
    );
    println!(
        "{:>9} {:>9} {:>12} {:>12} {:>12} {:>10}",
        "log", "segments", "median ms", "min ms", "max ms", "tail GB/s"
    );
    let ms = |d: &Duration| d.as_secs_f64() * 1e3;
    let mut rows = Vec::new();
    let mut medians = Vec::new();
    for built in &logs {
        let values: Vec<f64> = built.opens.iter().map(ms).collect();
        let med = median(&values);
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(0.0, f64::max);
        let tail_gb_s = (tail_mib << 20) as f64 / (med / 1e3) / 1e9;
        println!(
            "{:>5} MiB {:>9} {:>12.1} {:>12.1} {:>12.1} {:>10.2}",
            built.size_mib, built.segments, med, min, max, tail_gb_s
        );
        medians.push(med);
        rows.push(format!(
            "{{\"log_mib\":{},\"segments\":{},\"tail_mib\":{},\"median_ms\":{},\"samples_ms\":{},\"build_mb_s\":{}}}",
            built.size_mib,
            built.segments,
            tail_mib,
            json_num(med),
            json_nums(&values),
            json_num(built.build_mb_s)
        ));
    }
    if medians.len() >= 2 {
        println!(
            "ratio largest/smallest: {:.3}",
            medians[medians.len() - 1] / medians[0]
        );
    }
    let ratio = if medians.len() >= 2 {
        medians[medians.len() - 1] / medians[0]
    } else {
        f64::NAN
    };
    drop(scratch); // deletes the logs
    format!(
        "{{\"bench\":\"recovery_time\",\"unix_time\":{},\"machine\":{},\"batch_bytes\":{},\"opens\":{},\"logs\":[{}],\"ratio_largest_over_smallest\":{}}}\n",
        now_ms() / 1000,
        machine_json,
        BATCH,
        opens,
        rows.join(","),
        json_num(ratio)
    )
}

fn main() {
    let json = run_on_executor("recovery-time", bench);
    write_report("recovery_time", &json);
}
