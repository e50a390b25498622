//! Durable append throughput of a partition log next to the physical limit of the disk.
//!
//! For each batch size, on the same disk, in the same run:
//! - `kaas`: `PartitionLog::append_durable`, one batch at a time (append, then wait for the
//!   write and fdatasync that cover it);
//! - `raw`: glommio `DmaFile` O_DIRECT writes of the same bytes at the same positions with an
//!   fdatasync after each, from a reused aligned buffer, with the same `fallocate(KEEP_SIZE)`
//!   32 MiB preallocation steps as the engine. A batch smaller than a page rewrites the page
//!   that holds it (as any O_DIRECT log must), so this is the physical limit for that
//!   durability;
//! - `raw-ow`: the same raw writes over a region of the file that was written (zeros) and
//!   synced beforehand, so no write changes the file size or converts a preallocated
//!   (unwritten) extent and the fdatasync has no metadata to commit. For reference: what a
//!   segment could reach if it were pre-written instead of fallocated.
//!
//! The disk is shared and its fdatasync latency drifts by several times over minutes, so the
//! configurations of one comparison are interleaved finely: a sample opens one log or file
//! per configuration and then gives each configuration a 100 ms slice in turn (rotating the
//! order) until each has had the sample time. Throughput is bytes over the configuration's
//! own slice time; each table shows medians over the samples, and `kaas/raw` is the median
//! of the per-sample ratios.
//!
//! Also measured: the CPU cost of `append()` itself (validation, offset stamping, copies,
//! no waiting) next to CRC-32C and memcpy of the same bytes; the device ceiling (1 MiB
//! O_DIRECT writes, no per-write sync, one fdatasync at the end of each sample, 1 and 4
//! writes in flight); and group commit: 8 concurrent appenders awaiting durability per batch,
//! on one partition and on 8 partitions, next to raw references (8 batches coalesced per
//! write + fdatasync; 8 files written concurrently); and the storage fence's cost: logs
//! opened at fence epoch 1, whose every flush checks for the claim's token after its
//! fdatasync, next to unfenced ones, with 1 and 8 appenders.
//!
//! Knobs (environment): `KAAS_BENCH_DIR` (parent of the scratch directory, default /tmp),
//! `KAAS_BENCH_SAMPLES` (5), `KAAS_BENCH_SAMPLE_SECS` (1.5, per configuration and sample),
//! `KAAS_BENCH_SLICE_MS` (100), `KAAS_BENCH_SAMPLE_MIB` (1024, the byte cap of one
//! configuration in one sample), `KAAS_BENCH_SIZES` (bytes, comma-separated),
//! `KAAS_BENCH_GROUP_SIZES`, `KAAS_BENCH_GROUP_N` (8), `KAAS_BENCH_FENCE_SIZES`,
//! `KAAS_BENCH_SKIP` (any of `single,cpu,ceiling,group,fence`), `KAAS_BENCH_WRITE_CHUNK` (the logs' `write_chunk_bytes`;
//! default: the engine's).

mod common;

use std::cell::Cell;
use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::*;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use kaas_engine::{LogConfig, PartitionLog, Storage};

const PAGE: u64 = 4096;
/// How much of a pre-written file is written ahead at a time (outside the timed slices).
const PREFILL_STEP: u64 = 256 << 20;

#[derive(Clone)]
struct Settings {
    samples: usize,
    sample_time: Duration,
    slice: Duration,
    sample_cap: u64,
    sizes: Vec<usize>,
    group_sizes: Vec<usize>,
    group_n: usize,
    fence_sizes: Vec<usize>,
    skip: Vec<String>,
}

impl Settings {
    fn from_env() -> Self {
        Settings {
            samples: env_or("KAAS_BENCH_SAMPLES", 5usize).max(1),
            sample_time: Duration::from_secs_f64(env_or("KAAS_BENCH_SAMPLE_SECS", 1.5f64)),
            slice: Duration::from_millis(env_or("KAAS_BENCH_SLICE_MS", 100u64).max(1)),
            sample_cap: env_or("KAAS_BENCH_SAMPLE_MIB", 1024u64) << 20,
            sizes: env_list(
                "KAAS_BENCH_SIZES",
                &[KIB, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB],
            ),
            group_sizes: env_list("KAAS_BENCH_GROUP_SIZES", &[KIB, 16 * KIB, 64 * KIB]),
            group_n: env_or("KAAS_BENCH_GROUP_N", 8usize).max(1),
            fence_sizes: env_list("KAAS_BENCH_FENCE_SIZES", &[KIB, 16 * KIB, 256 * KIB]),
            skip: env_list("KAAS_BENCH_SKIP", &[]),
        }
    }

    fn runs(&self, part: &str) -> bool {
        !self.skip.iter().any(|s| s == part)
    }
}

/// One measured sample of one configuration.
#[derive(Default)]
struct Sample {
    bytes: u64,
    elapsed: Duration,
    /// Per-operation latencies (append → durable, or write + fdatasync).
    latencies: Vec<Duration>,
}

impl Sample {
    fn mb_s(&self) -> f64 {
        mb_per_s(self.bytes, self.elapsed)
    }
}

/// Samples of one configuration.
#[derive(Default)]
struct Series {
    throughput: Vec<f64>,
    latencies: Vec<Duration>,
}

impl Series {
    fn push(&mut self, sample: Sample) {
        self.throughput.push(sample.mb_s());
        self.latencies.extend(sample.latencies);
    }

    fn median(&self) -> f64 {
        median(&self.throughput)
    }

    fn latency_us(&mut self, q: f64) -> f64 {
        quantile(&mut self.latencies, q).as_secs_f64() * 1e6
    }

    fn json(&mut self) -> String {
        format!(
            "{{\"median_mb_s\":{},\"samples_mb_s\":{},\"p50_us\":{},\"p99_us\":{},\"ops\":{}}}",
            json_num(self.median()),
            json_nums(&self.throughput),
            json_num(self.latency_us(0.5)),
            json_num(self.latency_us(0.99)),
            self.latencies.len()
        )
    }

    /// Median of the per-sample ratios `self / other`.
    fn ratio_to(&self, other: &Series) -> f64 {
        let ratios: Vec<f64> = self
            .throughput
            .iter()
            .zip(&other.throughput)
            .map(|(a, b)| a / b)
            .collect();
        median(&ratios)
    }
}

/// The engine's default settings, except `write_chunk_bytes` when `KAAS_BENCH_WRITE_CHUNK`
/// (bytes) is set.
fn log_config() -> LogConfig {
    let default = LogConfig::default();
    LogConfig {
        write_chunk_bytes: env_or("KAAS_BENCH_WRITE_CHUNK", default.write_chunk_bytes),
        ..default
    }
}

static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn unique(label: &str) -> String {
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{label}-{id}")
}

/// Where a sample writes.
struct Ctx {
    storage: Storage,
    raw_dir: PathBuf,
}

// ---------------------------------------------------------------------------------------
// raw O_DIRECT

/// Sequential O_DIRECT appends to one file, preallocated like a segment.
struct RawWriter {
    file: Rc<DmaFile>,
    path: PathBuf,
    /// Logical end (bytes appended).
    end: u64,
    reserved: u64,
    /// End of the pre-written region (0 when the file is only fallocated).
    written_through: u64,
    prefilled: bool,
    step: u64,
    /// Reused aligned buffers by length.
    buffers: HashMap<usize, Rc<DmaBuffer>>,
}

impl RawWriter {
    async fn create(dir: &Path, label: &str, prefilled: bool) -> Self {
        let path = dir.join(format!("{}.raw", unique(label)));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .dma_open(&path)
            .await
            .expect("opening a raw file");
        RawWriter {
            file: Rc::new(file),
            path,
            end: 0,
            reserved: 0,
            written_through: 0,
            prefilled,
            step: LogConfig::default().preallocate_step,
            buffers: HashMap::new(),
        }
    }

    fn buffer(&mut self, len: usize) -> Rc<DmaBuffer> {
        let file = self.file.clone();
        self.buffers
            .entry(len)
            .or_insert_with(|| {
                let mut buffer = file.alloc_dma_buffer(len);
                for (i, b) in buffer.as_bytes_mut().iter_mut().enumerate() {
                    *b = (i % 251) as u8;
                }
                Rc::new(buffer)
            })
            .clone()
    }

    /// For a pre-written file: writes zeros ahead (and syncs) when the next `len` bytes
    /// would pass the pre-written region. Returns the time spent, which is not measured.
    async fn prefill_for(&mut self, len: u64) -> Duration {
        if !self.prefilled || self.end + len + PAGE <= self.written_through {
            return Duration::ZERO;
        }
        let started = Instant::now();
        let chunk = MIB as u64;
        let zeros = Rc::new(self.file.alloc_dma_buffer(chunk as usize));
        let target = (self.end + len).div_ceil(PREFILL_STEP) * PREFILL_STEP + PREFILL_STEP;
        let mut position = self.written_through;
        while position < target {
            self.file
                .write_rc_at(zeros.clone(), position)
                .await
                .expect("prefill write");
            position += chunk;
        }
        self.file.fdatasync().await.expect("prefill fdatasync");
        self.written_through = position;
        self.reserved = self.reserved.max(position);
        started.elapsed()
    }

    /// Writes the pages covering the next `len` logical bytes (a partial last page is
    /// rewritten by the next call, as the engine does), then fdatasyncs.
    async fn durable_write(&mut self, len: u64) {
        let start = self.end / PAGE * PAGE;
        let end = (self.end + len).div_ceil(PAGE) * PAGE;
        if end > self.reserved {
            let target = end.div_ceil(self.step) * self.step;
            self.file
                .pre_allocate(target, true)
                .await
                .expect("preallocating");
            self.reserved = target;
        }
        let buffer = self.buffer((end - start) as usize);
        let written = self
            .file
            .write_rc_at(buffer, start)
            .await
            .expect("raw write");
        assert_eq!(written as u64, end - start, "short raw write");
        self.end += len;
        self.file.fdatasync().await.expect("raw fdatasync");
    }

    async fn discard(self) {
        let RawWriter { file, path, .. } = self;
        let _ = file.close_rc().await;
        let _ = std::fs::remove_file(path);
    }
}

// ---------------------------------------------------------------------------------------
// configurations, run slice by slice

#[derive(Clone, Copy)]
enum Variant {
    /// `appenders` tasks on each of `partitions` logs, each awaiting durability per batch;
    /// logs opened at `fence_epoch` (0: unfenced, as standalone).
    Kaas {
        partitions: usize,
        appenders: usize,
        fence_epoch: u32,
    },
    /// `files` files written concurrently, `coalesce` batches per write + fdatasync.
    Raw {
        files: usize,
        coalesce: usize,
        prefilled: bool,
    },
}

impl Variant {
    fn name(&self) -> String {
        match *self {
            Variant::Kaas {
                partitions,
                appenders,
                fence_epoch,
            } => {
                let kaas = if fence_epoch > 0 {
                    "kaas fenced"
                } else {
                    "kaas"
                };
                match (partitions, appenders) {
                    (1, 1) => format!("{kaas}, 1 appender, 1 partition"),
                    (1, appenders) => format!("{kaas}, {appenders} appenders, 1 partition"),
                    (partitions, _) => format!("{kaas}, {partitions} partitions, 1 appender each"),
                }
            }
            Variant::Raw {
                files: 1,
                coalesce: 1,
                prefilled,
            } => format!(
                "raw, write+fdatasync{}",
                if prefilled { ", pre-written file" } else { "" }
            ),
            Variant::Raw {
                files: 1, coalesce, ..
            } => format!("raw, {coalesce} batches per write+fdatasync"),
            Variant::Raw { files, .. } => format!("raw, {files} files, write+fdatasync each"),
        }
    }
}

enum Target {
    Kaas(Vec<(PartitionLog, PathBuf)>),
    Raw(Vec<RawWriter>),
}

/// One configuration during one sample.
struct Run {
    variant: Variant,
    target: Target,
    sample: Sample,
}

impl Run {
    async fn start(variant: Variant, ctx: &Ctx, batch_len: usize) -> Run {
        let target = match variant {
            Variant::Kaas {
                partitions,
                fence_epoch,
                ..
            } => {
                let mut logs = Vec::new();
                for _ in 0..partitions {
                    let dir = PathBuf::from("topics")
                        .join(unique(&format!("kaas-{batch_len}")))
                        .join("0");
                    let log =
                        PartitionLog::open_at_epoch(&ctx.storage, &dir, log_config(), fence_epoch)
                            .await
                            .expect("opening a log");
                    logs.push((log, dir));
                }
                Target::Kaas(logs)
            }
            Variant::Raw {
                files, prefilled, ..
            } => {
                let mut writers = Vec::new();
                for _ in 0..files {
                    writers.push(
                        RawWriter::create(&ctx.raw_dir, &format!("raw-{batch_len}"), prefilled)
                            .await,
                    );
                }
                Target::Raw(writers)
            }
        };
        Run {
            variant,
            target,
            sample: Sample::default(),
        }
    }

    fn done(&self, settings: &Settings) -> bool {
        self.sample.elapsed >= settings.sample_time || self.sample.bytes >= settings.sample_cap
    }

    /// Runs the configuration for about `slice`.
    async fn slice(&mut self, batch: &Rc<Vec<u8>>, slice: Duration) {
        let started = Instant::now();
        let deadline = started + slice;
        let mut paused = Duration::ZERO;
        match (&mut self.target, self.variant) {
            (Target::Kaas(logs), Variant::Kaas { appenders, .. }) => {
                let now = now_ms();
                let mut tasks = Vec::new();
                for (log, _) in logs.iter() {
                    for _ in 0..appenders {
                        let (log, batch) = (log.clone(), batch.clone());
                        tasks.push(glommio::spawn_local(async move {
                            let mut latencies = Vec::new();
                            while Instant::now() < deadline {
                                let t = Instant::now();
                                log.append_durable(&batch, 0, now)
                                    .await
                                    .expect("durable append");
                                latencies.push(t.elapsed());
                            }
                            latencies
                        }));
                    }
                }
                for task in tasks {
                    let latencies = task.await;
                    self.sample.bytes += (latencies.len() * batch.len()) as u64;
                    self.sample.latencies.extend(latencies);
                }
            }
            (Target::Raw(writers), Variant::Raw { coalesce, .. }) => {
                let write_len = (batch.len() * coalesce) as u64;
                let tasks: Vec<_> = std::mem::take(writers)
                    .into_iter()
                    .map(|mut writer| {
                        glommio::spawn_local(async move {
                            let mut latencies = Vec::new();
                            let mut paused = Duration::ZERO;
                            while Instant::now() < deadline {
                                paused += writer.prefill_for(write_len).await;
                                let t = Instant::now();
                                writer.durable_write(write_len).await;
                                latencies.push(t.elapsed());
                            }
                            (writer, latencies, paused)
                        })
                    })
                    .collect();
                for task in tasks {
                    let (writer, latencies, writer_paused) = task.await;
                    self.sample.bytes += latencies.len() as u64 * write_len;
                    self.sample.latencies.extend(latencies);
                    paused = paused.max(writer_paused);
                    writers.push(writer);
                }
            }
            _ => unreachable!("target matches its variant"),
        }
        self.sample.elapsed += started.elapsed().saturating_sub(paused);
    }

    async fn finish(self, ctx: &Ctx) -> Sample {
        match self.target {
            Target::Kaas(logs) => {
                for (log, dir) in logs {
                    log.close().await.expect("closing a log");
                    ctx.storage
                        .remove_dir_all(dir.parent().expect("topic dir"))
                        .await
                        .expect("removing a log");
                }
            }
            Target::Raw(writers) => {
                for writer in writers {
                    writer.discard().await;
                }
            }
        }
        self.sample
    }
}

/// Runs `variants` against each other for `settings.samples` samples, interleaved by slices.
async fn compare(
    ctx: &Ctx,
    settings: &Settings,
    batch: &Rc<Vec<u8>>,
    variants: &[Variant],
) -> Vec<Series> {
    let mut series: Vec<Series> = variants.iter().map(|_| Series::default()).collect();
    for _ in 0..settings.samples {
        let mut runs = Vec::new();
        for &variant in variants {
            runs.push(Run::start(variant, ctx, batch.len()).await);
        }
        let mut round = 0;
        while runs.iter().any(|r| !r.done(settings)) {
            let count = runs.len();
            for j in 0..count {
                let run = &mut runs[(round + j) % count];
                if !run.done(settings) {
                    run.slice(batch, settings.slice).await;
                }
            }
            round += 1;
        }
        for (k, run) in runs.into_iter().enumerate() {
            series[k].push(run.finish(ctx).await);
        }
    }
    series
}

// ---------------------------------------------------------------------------------------
// CPU cost of append(), and the device ceiling

/// Median microseconds per batch over 5 repetitions of `f` run for ~0.2 s each.
async fn micros_per_op(mut f: impl AsyncFnMut() -> Duration) -> f64 {
    let mut per_op = Vec::new();
    for _ in 0..5 {
        let mut spent = Duration::ZERO;
        let mut ops = 0u64;
        while spent < Duration::from_millis(200) {
            spent += f().await;
            ops += 1;
        }
        per_op.push(spent.as_secs_f64() * 1e6 / ops as f64);
    }
    median(&per_op)
}

struct CpuRow {
    size: usize,
    append_us: f64,
    validate_us: f64,
    crc_us: f64,
    memcpy_us: f64,
}

/// Time inside `append()` (validation, stamping, copies; not the writes, which run in the
/// background, nor the flushes, which are untimed), next to its parts done by hand.
async fn cpu_costs(ctx: &Ctx, size: usize) -> CpuRow {
    let batch = exact_batch(size, 1000);
    let dir = PathBuf::from("topics").join(unique("cpu")).join("0");
    let log = PartitionLog::open(&ctx.storage, &dir, log_config())
        .await
        .expect("opening a log");
    let now = now_ms();
    let mut pending = 0usize;
    let append_us = micros_per_op(async || {
        let t = Instant::now();
        log.append(&batch, 0, now).await.expect("append");
        let spent = t.elapsed();
        pending += batch.len();
        if pending >= 8 << 20 {
            log.flush().await.expect("flush");
            pending = 0;
        }
        spent
    })
    .await;
    log.close().await.expect("closing a log");
    ctx.storage
        .remove_dir_all(dir.parent().expect("topic dir"))
        .await
        .expect("removing a log");
    let validate_us = micros_per_op(async || {
        let t = Instant::now();
        black_box(kaas_engine::batch::validate_batches(black_box(&batch), usize::MAX).is_ok());
        t.elapsed()
    })
    .await;
    let crc_us = micros_per_op(async || {
        let t = Instant::now();
        black_box(kaas_engine::batch::compute_crc(black_box(&batch)));
        t.elapsed()
    })
    .await;
    let mut target = vec![0u8; size];
    let memcpy_us = micros_per_op(async || {
        let t = Instant::now();
        target.copy_from_slice(black_box(&batch));
        black_box(&mut target);
        t.elapsed()
    })
    .await;
    CpuRow {
        size,
        append_us,
        validate_us,
        crc_us,
        memcpy_us,
    }
}

/// Large sequential O_DIRECT writes, `depth` in flight, one fdatasync at the end (timed).
async fn ceiling_sample(dir: &Path, depth: usize, settings: &Settings) -> Sample {
    const WRITE: u64 = MIB as u64;
    let writer = RawWriter::create(dir, "ceiling", false).await;
    let file = writer.file.clone();
    let step = writer.step;
    let mut buffer = file.alloc_dma_buffer(WRITE as usize);
    for (i, b) in buffer.as_bytes_mut().iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let buffer = Rc::new(buffer);
    let next = Rc::new(Cell::new(0u64));
    let reserved = Rc::new(Cell::new(0u64));
    let cap = settings.sample_cap.max(2 * GIB);
    let start = Instant::now();
    let deadline = start + settings.sample_time;
    let handles: Vec<_> = (0..depth)
        .map(|_| {
            let (file, buffer, next, reserved) =
                (file.clone(), buffer.clone(), next.clone(), reserved.clone());
            glommio::spawn_local(async move {
                let mut bytes = 0u64;
                while Instant::now() < deadline && next.get() < cap {
                    let position = next.get();
                    next.set(position + WRITE);
                    if position + WRITE > reserved.get() {
                        let target = (position + WRITE).div_ceil(step) * step;
                        reserved.set(target);
                        file.pre_allocate(target, true)
                            .await
                            .expect("preallocating");
                    }
                    let written = file
                        .write_rc_at(buffer.clone(), position)
                        .await
                        .expect("ceiling write");
                    assert_eq!(written as u64, WRITE, "short ceiling write");
                    bytes += WRITE;
                }
                bytes
            })
        })
        .collect();
    let mut sample = Sample::default();
    for handle in handles {
        sample.bytes += handle.await;
    }
    file.fdatasync().await.expect("ceiling fdatasync");
    sample.elapsed = start.elapsed();
    drop((file, buffer));
    writer.discard().await;
    sample
}

// ---------------------------------------------------------------------------------------

async fn bench(settings: Settings) -> String {
    let scratch = scratch_dir("append");
    let root = scratch.path().to_path_buf();
    kaas_engine::dma_probe::prepare_executor(&root)
        .await
        .expect("direct-I/O probe");
    let raw_dir = root.join("raw");
    std::fs::create_dir_all(&raw_dir).expect("raw dir");
    let ctx = Ctx {
        storage: Storage::disk(root.clone()),
        raw_dir,
    };
    let (machine_json, machine_text) = machine_facts(&root);
    println!("append_throughput: {machine_text}");
    println!(
        "{} samples; in each, every configuration runs {:.1} s (or {} MiB) in {} ms slices, interleaved; medians",
        settings.samples,
        settings.sample_time.as_secs_f64(),
        settings.sample_cap >> 20,
        settings.slice.as_millis()
    );

    // Warm-up (discarded): wakes the disk path, the allocator and the blocking pool.
    {
        let warm = Settings {
            samples: 1,
            sample_time: Duration::from_millis(300),
            ..settings.clone()
        };
        let batch = Rc::new(exact_batch(16 * KIB, 1000));
        let single = [
            Variant::Kaas {
                partitions: 1,
                appenders: 1,
                fence_epoch: 0,
            },
            Variant::Raw {
                files: 1,
                coalesce: 1,
                prefilled: false,
            },
        ];
        compare(&ctx, &warm, &batch, &single).await;
    }

    let mut single_json = Vec::new();
    if settings.runs("single") {
        println!(
            "\n-- one appender, durable per batch: kaas append_durable vs raw write+fdatasync --"
        );
        println!(
            "{:>7} {:>10} {:>10} {:>9} {:>17} {:>17} {:>12}",
            "batch",
            "kaas MB/s",
            "raw MB/s",
            "kaas/raw",
            "kaas p50/p99 us",
            "raw p50/p99 us",
            "raw-ow MB/s"
        );
        let variants = [
            Variant::Kaas {
                partitions: 1,
                appenders: 1,
                fence_epoch: 0,
            },
            Variant::Raw {
                files: 1,
                coalesce: 1,
                prefilled: false,
            },
            Variant::Raw {
                files: 1,
                coalesce: 1,
                prefilled: true,
            },
        ];
        for &size in &settings.sizes {
            let batch = Rc::new(exact_batch(size, 1000));
            let mut s = compare(&ctx, &settings, &batch, &variants).await;
            let ratio = s[0].ratio_to(&s[1]);
            let (kaas_p50, kaas_p99) = (s[0].latency_us(0.5), s[0].latency_us(0.99));
            let (raw_p50, raw_p99) = (s[1].latency_us(0.5), s[1].latency_us(0.99));
            println!(
                "{:>7} {:>10.1} {:>10.1} {:>8.1}% {:>8.0}/{:<8.0} {:>8.0}/{:<8.0} {:>12.1}",
                size_label(size),
                s[0].median(),
                s[1].median(),
                100.0 * ratio,
                kaas_p50,
                kaas_p99,
                raw_p50,
                raw_p99,
                s[2].median(),
            );
            single_json.push(format!(
                "{{\"batch_bytes\":{},\"kaas\":{},\"raw\":{},\"raw_prewritten\":{},\"kaas_over_raw\":{}}}",
                size,
                s[0].json(),
                s[1].json(),
                s[2].json(),
                json_num(ratio)
            ));
        }
    }

    let mut cpu_json = Vec::new();
    if settings.runs("cpu") {
        println!("\n-- CPU per batch: inside append() (no waiting) vs its parts by hand --");
        println!(
            "{:>7} {:>11} {:>10} {:>13} {:>10} {:>10} {:>12}",
            "batch", "append() us", "GB/s", "validate us", "crc us", "memcpy us", "append/memcpy"
        );
        for &size in &settings.sizes {
            let row = cpu_costs(&ctx, size).await;
            println!(
                "{:>7} {:>11.2} {:>10.2} {:>13.2} {:>10.2} {:>10.2} {:>12.1}x",
                size_label(row.size),
                row.append_us,
                row.size as f64 / row.append_us / 1e3,
                row.validate_us,
                row.crc_us,
                row.memcpy_us,
                row.append_us / row.memcpy_us
            );
            cpu_json.push(format!(
                "{{\"batch_bytes\":{},\"append_us\":{},\"validate_us\":{},\"crc32c_us\":{},\"memcpy_us\":{}}}",
                row.size,
                json_num(row.append_us),
                json_num(row.validate_us),
                json_num(row.crc_us),
                json_num(row.memcpy_us)
            ));
        }
    }

    let mut ceiling_json = Vec::new();
    if settings.runs("ceiling") {
        println!("\n-- device ceiling: 1 MiB O_DIRECT writes, one fdatasync per sample --");
        println!("{:>16} {:>11}", "writes in flight", "MB/s");
        let depths = [1usize, 4];
        let mut series = [Series::default(), Series::default()];
        for i in 0..settings.samples {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                series[k].push(ceiling_sample(&ctx.raw_dir, depths[k], &settings).await);
            }
        }
        for (depth, mut s) in depths.into_iter().zip(series) {
            println!("{:>16} {:>11.1}", depth, s.median());
            ceiling_json.push(format!(
                "{{\"write_bytes\":{MIB},\"in_flight\":{depth},\"result\":{}}}",
                s.json()
            ));
        }
    }

    let mut group_json = Vec::new();
    if settings.runs("group") {
        let n = settings.group_n;
        println!(
            "\n-- group commit: {n} concurrent appenders, each awaiting durability per batch --"
        );
        println!(
            "{:>7} {:<44} {:>10} {:>10} {:>17}",
            "batch", "configuration", "MB/s", "vs 1 app.", "p50/p99 us"
        );
        let variants = [
            Variant::Kaas {
                partitions: 1,
                appenders: 1,
                fence_epoch: 0,
            },
            Variant::Kaas {
                partitions: 1,
                appenders: n,
                fence_epoch: 0,
            },
            Variant::Kaas {
                partitions: n,
                appenders: 1,
                fence_epoch: 0,
            },
            Variant::Raw {
                files: 1,
                coalesce: n,
                prefilled: false,
            },
            Variant::Raw {
                files: n,
                coalesce: 1,
                prefilled: false,
            },
        ];
        for &size in &settings.group_sizes {
            let batch = Rc::new(exact_batch(size, 1000));
            let mut s = compare(&ctx, &settings, &batch, &variants).await;
            let mut rows = Vec::new();
            for k in 0..variants.len() {
                let vs_one = s[k].ratio_to(&s[0]);
                let (p50, p99) = (s[k].latency_us(0.5), s[k].latency_us(0.99));
                println!(
                    "{:>7} {:<44} {:>10.1} {:>9.2}x {:>8.0}/{:<8.0}",
                    size_label(size),
                    variants[k].name(),
                    s[k].median(),
                    vs_one,
                    p50,
                    p99,
                );
                rows.push(format!(
                    "{{\"configuration\":{},\"vs_one_appender\":{},\"result\":{}}}",
                    json_str(&variants[k].name()),
                    json_num(vs_one),
                    s[k].json()
                ));
            }
            group_json.push(format!(
                "{{\"batch_bytes\":{size},\"appenders\":{n},\"configurations\":[{}]}}",
                rows.join(",")
            ));
        }
    }

    let mut fence_json = Vec::new();
    if settings.runs("fence") {
        let n = settings.group_n;
        println!(
            "\n-- storage fence: logs opened at fence epoch 1 (a token check after every fdatasync) vs unfenced --"
        );
        println!(
            "{:>7} {:<44} {:>10} {:>15} {:>17}",
            "batch", "configuration", "MB/s", "fenced/unfenced", "p50/p99 us"
        );
        let kaas = |appenders, fence_epoch| Variant::Kaas {
            partitions: 1,
            appenders,
            fence_epoch,
        };
        // The check alone, as a flush runs it: an io_uring open and close of `claims/<E>.live`.
        let dir = PathBuf::from("topics")
            .join(unique("fence-check"))
            .join("0");
        let log = PartitionLog::open_at_epoch(&ctx.storage, &dir, log_config(), 1)
            .await
            .expect("opening a fenced log");
        let check_us = micros_per_op(async || {
            let start = Instant::now();
            kaas_engine::fence::check(&ctx.storage, &dir, 1)
                .await
                .expect("not fenced");
            start.elapsed()
        })
        .await;
        log.close().await.expect("close");
        println!(
            "one fence check (io_uring open and close of the claim's token): {check_us:.1} us"
        );
        fence_json.push(format!("{{\"check_us\":{}}}", json_num(check_us)));
        let variants = [kaas(1, 0), kaas(1, 1), kaas(n, 0), kaas(n, 1)];
        for &size in &settings.fence_sizes {
            let batch = Rc::new(exact_batch(size, 1000));
            let mut s = compare(&ctx, &settings, &batch, &variants).await;
            let mut rows = Vec::new();
            for k in 0..variants.len() {
                let vs_unfenced = s[k].ratio_to(&s[k & !1]);
                let (p50, p99) = (s[k].latency_us(0.5), s[k].latency_us(0.99));
                println!(
                    "{:>7} {:<44} {:>10.1} {:>14.1}% {:>8.0}/{:<8.0}",
                    size_label(size),
                    variants[k].name(),
                    s[k].median(),
                    100.0 * vs_unfenced,
                    p50,
                    p99,
                );
                rows.push(format!(
                    "{{\"configuration\":{},\"vs_unfenced\":{},\"result\":{}}}",
                    json_str(&variants[k].name()),
                    json_num(vs_unfenced),
                    s[k].json()
                ));
            }
            fence_json.push(format!(
                "{{\"batch_bytes\":{size},\"configurations\":[{}]}}",
                rows.join(",")
            ));
        }
    }

    drop(scratch);
    format!(
        "{{\"bench\":\"append_throughput\",\"unix_time\":{},\"machine\":{},\"samples\":{},\"sample_secs\":{},\"slice_ms\":{},\"sample_cap_bytes\":{},\"single\":[{}],\"cpu\":[{}],\"ceiling\":[{}],\"group_commit\":[{}],\"fence\":[{}]}}\n",
        now_ms() / 1000,
        machine_json,
        settings.samples,
        json_num(settings.sample_time.as_secs_f64()),
        settings.slice.as_millis(),
        settings.sample_cap,
        single_json.join(","),
        cpu_json.join(","),
        ceiling_json.join(","),
        group_json.join(","),
        fence_json.join(",")
    )
}

fn main() {
    let settings = Settings::from_env();
    let json = run_on_executor("append-throughput", move || bench(settings));
    write_report("append_throughput", &json);
}
