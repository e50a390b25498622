//! Time to take over many partitions at a new fence epoch (engine only, no broker).
//!
//! Prepares `KAAS_TAKEOVER_PARTITIONS` partitions (default 1000) at fence epoch 1, each with
//! one 1 KiB batch appended durably and then closed, as a leader that hands them over
//! cleanly leaves them. Then, per round, every partition is opened at the next epoch
//! (`PartitionLog::open_at_epoch`: claim, inherit, recover, record, checkpoint) with
//! `KAAS_TAKEOVER_CONCURRENCY` opens in flight (a list, default `1,16,64`), then closed again;
//! each round's epoch is one above the last, so every open is a real takeover. Prints the
//! wall time per round and per partition, and the median over `KAAS_BENCH_SAMPLES` rounds (3)
//! per concurrency; writes `<target>/kaas-bench/takeover_open.json`.
//!
//! What the broker adds on top (routing the commands to their shards, the view) is measured by
//! `kaas-bench takeover` with real processes.

mod common;

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use common::*;
use kaas_engine::{LogConfig, PartitionLog, Storage};

fn partition_dir(i: usize) -> PathBuf {
    PathBuf::from("topics").join("moved").join(i.to_string())
}

/// Runs `job(i)` for every `i` in `0..count`, `concurrency` at a time.
async fn for_each_concurrently<F, Fut>(count: usize, concurrency: usize, job: F)
where
    F: Fn(usize) -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let next = Rc::new(std::cell::Cell::new(0));
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (next, job) = (next.clone(), job.clone());
            glommio::spawn_local(async move {
                loop {
                    let i = next.get();
                    if i >= count {
                        break;
                    }
                    next.set(i + 1);
                    job(i).await;
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await;
    }
}

/// Opens every partition at `epoch`, `concurrency` at a time, and closes them again; returns
/// the seconds the opens took.
async fn takeover_round(
    storage: &Storage,
    config: &LogConfig,
    partitions: usize,
    concurrency: usize,
    epoch: u32,
    batch: Option<Rc<Vec<u8>>>,
) -> f64 {
    let logs = Rc::new(std::cell::RefCell::new(Vec::with_capacity(partitions)));
    let started = Instant::now();
    {
        let (storage, config, logs) = (storage.clone(), config.clone(), logs.clone());
        for_each_concurrently(partitions, concurrency, move |i| {
            let (storage, config, logs, batch) =
                (storage.clone(), config.clone(), logs.clone(), batch.clone());
            async move {
                let log = PartitionLog::open_at_epoch(&storage, &partition_dir(i), config, epoch)
                    .await
                    .expect("open at epoch");
                if let Some(batch) = batch {
                    log.append_durable(&batch, epoch as i32, now_ms())
                        .await
                        .expect("append");
                }
                logs.borrow_mut().push(log);
            }
        })
        .await;
    }
    let secs = started.elapsed().as_secs_f64();
    let logs: Vec<PartitionLog> = std::mem::take(&mut *logs.borrow_mut());
    for log in logs {
        log.close().await.expect("close");
    }
    secs
}

async fn bench() -> String {
    let partitions: usize = env_or("KAAS_TAKEOVER_PARTITIONS", 1000usize);
    let concurrencies: Vec<usize> = env_list("KAAS_TAKEOVER_CONCURRENCY", &[1, 16, 64]);
    let samples: usize = env_or("KAAS_BENCH_SAMPLES", 3usize).max(1);
    let scratch = scratch_dir("takeover");
    let root = scratch.path().to_path_buf();
    kaas_engine::dma_probe::prepare_executor(&root)
        .await
        .expect("direct-I/O probe");
    let storage = Storage::disk(root.clone());
    let (machine_json, machine_text) = machine_facts(&root);
    println!("takeover_open: {machine_text}");
    // Small preallocation: the bench holds thousands of one-batch segments.
    let config = LogConfig {
        preallocate_step: 1 << 20,
        ..LogConfig::default()
    };
    let batch = Rc::new(exact_batch(KIB, 1000));
    let prepare = takeover_round(&storage, &config, partitions, 64, 1, Some(batch)).await;
    println!("prepared {partitions} partitions at epoch 1 in {prepare:.2} s");
    let mut epoch = 1;
    let mut rows = Vec::new();
    println!(
        "\n{:>11} {:>10} {:>10} {:>10} {:>14}",
        "concurrency", "median s", "min s", "max s", "µs / partition"
    );
    for &concurrency in &concurrencies {
        let mut secs = Vec::new();
        for _ in 0..samples {
            epoch += 1;
            secs.push(
                takeover_round(
                    &storage,
                    &config,
                    partitions,
                    concurrency.max(1),
                    epoch,
                    None,
                )
                .await,
            );
        }
        let median_secs = median(&secs);
        let min = secs.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = secs.iter().cloned().fold(0.0, f64::max);
        println!(
            "{concurrency:>11} {median_secs:>10.3} {min:>10.3} {max:>10.3} {:>14.0}",
            median_secs * 1e6 / partitions as f64
        );
        rows.push(format!(
            "{{\"concurrency\":{concurrency},\"median_s\":{median_secs},\"min_s\":{min},\"max_s\":{max},\"samples_s\":{secs:?}}}"
        ));
    }
    format!(
        "{{\"bench\":\"takeover_open\",\"machine\":{machine_json},\"partitions\":{partitions},\"load\":{},\"rounds\":[{}]}}",
        json_str(&loadavg()),
        rows.join(",")
    )
}

fn main() {
    let json = run_on_executor("takeover-open", bench);
    write_report("takeover_open", &json);
}
