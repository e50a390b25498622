//! Durable append throughput of a partition log next to the physical limit of the disk.
//!
//! For each batch size, alternating sample by sample on the same disk:
//! - `kaas`: `PartitionLog::append_durable`, one batch at a time (append, then wait for the
//!   write and fdatasync that cover it);
//! - `raw`: glommio `DmaFile` O_DIRECT writes of the same bytes at the same positions with an
//!   fdatasync after each, from a reused aligned buffer, with the same `fallocate(KEEP_SIZE)`
//!   32 MiB preallocation steps as the engine. A batch smaller than a page rewrites the page
//!   that holds it (as any O_DIRECT log must), so this is the physical limit for that
//!   durability;
//! - `raw-ow`: the same raw writes over a file that was written (zeros) and synced
//!   beforehand, so no write changes the file size or converts a preallocated (unwritten)
//!   extent: the fdatasync has no metadata to commit. Shown for reference only; it is what
//!   the segment layout could reach if segments were pre-written rather than fallocated.
//!
//! Then the device ceiling (1 MiB O_DIRECT writes, no per-write sync, one fdatasync at the end
//! of each sample, 1 and 4 writes in flight), and group commit: 8 concurrent appenders
//! awaiting durability per batch, on one partition and on 8 partitions, next to raw
//! references (8 batches coalesced per write + fdatasync; 8 files written concurrently).
//!
//! Knobs (environment): `KAAS_BENCH_DIR` (parent of the scratch directory, default /tmp),
//! `KAAS_BENCH_SAMPLES` (5), `KAAS_BENCH_SAMPLE_SECS` (1.5), `KAAS_BENCH_SAMPLE_MIB` (256,
//! the byte cap of one sample), `KAAS_BENCH_SIZES` (bytes, comma-separated),
//! `KAAS_BENCH_GROUP_SIZES`, `KAAS_BENCH_GROUP_N` (8), `KAAS_BENCH_SKIP` (any of
//! `single,ceiling,group`).

mod common;

use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::*;
use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use kaas_engine::{LogConfig, PartitionLog, Storage};

const PAGE: u64 = 4096;

#[derive(Clone)]
struct Settings {
    samples: usize,
    sample_time: Duration,
    sample_cap: u64,
    sizes: Vec<usize>,
    group_sizes: Vec<usize>,
    group_n: usize,
    skip: Vec<String>,
}

impl Settings {
    fn from_env() -> Self {
        Settings {
            samples: env_or("KAAS_BENCH_SAMPLES", 5usize).max(1),
            sample_time: Duration::from_secs_f64(env_or("KAAS_BENCH_SAMPLE_SECS", 1.5f64)),
            sample_cap: env_or("KAAS_BENCH_SAMPLE_MIB", 256u64) << 20,
            sizes: env_list(
                "KAAS_BENCH_SIZES",
                &[KIB, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB],
            ),
            group_sizes: env_list("KAAS_BENCH_GROUP_SIZES", &[KIB, 16 * KIB, 64 * KIB]),
            group_n: env_or("KAAS_BENCH_GROUP_N", 8usize).max(1),
            skip: env_list("KAAS_BENCH_SKIP", &[]),
        }
    }

    fn runs(&self, part: &str) -> bool {
        !self.skip.iter().any(|s| s == part)
    }
}

/// One measured sample.
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
}

/// Stops a sample at its time or byte budget; shared by concurrent writers.
#[derive(Clone)]
struct Budget {
    started: Instant,
    deadline: Instant,
    cap: u64,
    spent: Rc<Cell<u64>>,
}

impl Budget {
    fn new(settings: &Settings, cap: u64) -> Self {
        Budget {
            started: Instant::now(),
            deadline: Instant::now() + settings.sample_time,
            cap,
            spent: Rc::new(Cell::new(0)),
        }
    }

    /// The same budget, its clock started now.
    fn restart(self) -> Self {
        Budget {
            deadline: Instant::now() + (self.deadline - self.started),
            started: Instant::now(),
            ..self
        }
    }

    /// Claims `bytes`; false once the budget is exhausted.
    fn claim(&self, bytes: u64) -> bool {
        if self.spent.get() >= self.cap || Instant::now() >= self.deadline {
            return false;
        }
        self.spent.set(self.spent.get() + bytes);
        true
    }
}

static NEXT_ID: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn unique(label: &str) -> String {
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{label}-{id}")
}

// ---------------------------------------------------------------------------------------
// kaas

async fn open_log(storage: &Storage, label: &str) -> (PartitionLog, PathBuf) {
    let dir = PathBuf::from("topics").join(unique(label)).join("0");
    let log = PartitionLog::open(storage, &dir, LogConfig::default())
        .await
        .expect("opening a log");
    (log, dir)
}

async fn discard_log(storage: &Storage, log: PartitionLog, dir: &Path) {
    log.close().await.expect("closing a log");
    storage
        .remove_dir_all(dir.parent().expect("topic dir"))
        .await
        .expect("removing a log");
}

/// `tasks` appenders on each of `partitions` logs, each awaiting durability per batch.
async fn kaas_sample(
    storage: &Storage,
    batch: Rc<Vec<u8>>,
    partitions: usize,
    tasks_per_partition: usize,
    budget: Budget,
) -> Sample {
    let mut logs = Vec::new();
    for _ in 0..partitions {
        logs.push(open_log(storage, &format!("kaas-{}", batch.len())).await);
    }
    let budget = budget.restart();
    let now = now_ms();
    let start = Instant::now();
    let mut handles = Vec::new();
    for (log, _) in &logs {
        for _ in 0..tasks_per_partition {
            let log = log.clone();
            let batch = batch.clone();
            let budget = budget.clone();
            handles.push(glommio::spawn_local(async move {
                let mut latencies = Vec::new();
                let mut bytes = 0u64;
                while budget.claim(batch.len() as u64) {
                    let t = Instant::now();
                    log.append_durable(&batch, 0, now)
                        .await
                        .expect("durable append");
                    latencies.push(t.elapsed());
                    bytes += batch.len() as u64;
                }
                (bytes, latencies)
            }));
        }
    }
    let mut sample = Sample::default();
    for handle in handles {
        let (bytes, latencies) = handle.await;
        sample.bytes += bytes;
        sample.latencies.extend(latencies);
    }
    sample.elapsed = start.elapsed();
    for (log, dir) in logs {
        discard_log(storage, log, &dir).await;
    }
    sample
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
    /// End of the prefilled (already written) region.
    written_through: u64,
    step: u64,
    /// Reused aligned buffers by length.
    buffers: HashMap<usize, Rc<DmaBuffer>>,
}

impl RawWriter {
    async fn create(dir: &Path, label: &str) -> Self {
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

    /// Writes `bytes` of zeros and syncs, so that later writes below it overwrite written
    /// blocks inside the file size: an fdatasync then has no metadata to commit.
    async fn prefill(&mut self, bytes: u64) {
        let chunk = MIB as u64;
        let zeros = Rc::new(self.file.alloc_dma_buffer(chunk as usize));
        let mut position = 0;
        while position < bytes {
            self.file
                .write_rc_at(zeros.clone(), position)
                .await
                .expect("prefill write");
            position += chunk;
        }
        self.file.fdatasync().await.expect("prefill fdatasync");
        self.reserved = position;
        self.written_through = position;
    }

    /// Writes the pages covering the next `len` logical bytes (a partial last page is
    /// rewritten by the next call, as the engine does).
    async fn write(&mut self, len: u64) {
        let start = self.end / PAGE * PAGE;
        let end = (self.end + len).div_ceil(PAGE) * PAGE;
        if end > self.reserved.max(self.written_through) {
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
    }

    async fn sync(&self) {
        self.file.fdatasync().await.expect("raw fdatasync");
    }

    async fn discard(self) {
        let RawWriter { file, path, .. } = self;
        let _ = file.close_rc().await;
        let _ = std::fs::remove_file(path);
    }
}

/// `writers` files, each appending `coalesce` batches per write, fdatasync after each write.
async fn raw_sample(
    dir: &Path,
    batch_len: usize,
    writers: usize,
    coalesce: usize,
    prefill: bool,
    budget: Budget,
) -> Sample {
    let mut files = Vec::new();
    for _ in 0..writers {
        let mut writer = RawWriter::create(dir, &format!("raw-{batch_len}")).await;
        if prefill {
            writer.prefill(budget.cap.div_ceil(writers as u64)).await;
        }
        files.push(writer);
    }
    let budget = budget.restart();
    let write_len = (batch_len * coalesce) as u64;
    let start = Instant::now();
    let handles: Vec<_> = files
        .into_iter()
        .map(|mut writer| {
            let budget = budget.clone();
            glommio::spawn_local(async move {
                let mut latencies = Vec::new();
                let mut bytes = 0u64;
                while budget.claim(write_len) {
                    let t = Instant::now();
                    writer.write(write_len).await;
                    writer.sync().await;
                    latencies.push(t.elapsed());
                    bytes += write_len;
                }
                (bytes, latencies, writer)
            })
        })
        .collect();
    let mut sample = Sample::default();
    let mut writers_back = Vec::new();
    for handle in handles {
        let (bytes, latencies, writer) = handle.await;
        sample.bytes += bytes;
        sample.latencies.extend(latencies);
        writers_back.push(writer);
    }
    sample.elapsed = start.elapsed();
    for writer in writers_back {
        writer.discard().await;
    }
    sample
}

/// Large sequential O_DIRECT writes, `depth` in flight, one fdatasync at the end (timed).
async fn ceiling_sample(dir: &Path, depth: usize, budget: Budget) -> Sample {
    const WRITE: u64 = MIB as u64;
    let writer = RawWriter::create(dir, "ceiling").await;
    let file = writer.file.clone();
    let step = writer.step;
    let mut buffer = file.alloc_dma_buffer(WRITE as usize);
    for (i, b) in buffer.as_bytes_mut().iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let buffer = Rc::new(buffer);
    let next = Rc::new(Cell::new(0u64));
    let reserved = Rc::new(Cell::new(0u64));
    let start = Instant::now();
    let handles: Vec<_> = (0..depth)
        .map(|_| {
            let (file, buffer, next, reserved, budget) = (
                file.clone(),
                buffer.clone(),
                next.clone(),
                reserved.clone(),
                budget.clone(),
            );
            glommio::spawn_local(async move {
                let mut bytes = 0u64;
                while budget.claim(WRITE) {
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

struct SingleRow {
    size: usize,
    kaas: Series,
    raw: Series,
    /// Raw writes over an already written file (no metadata for fdatasync to commit).
    overwrite: Series,
}

struct GroupRow {
    size: usize,
    variants: Vec<(String, Series)>,
}

async fn bench(settings: Settings) -> String {
    let scratch = scratch_dir("append");
    let root = scratch.path().to_path_buf();
    kaas_engine::dma_probe::prepare_executor(&root)
        .await
        .expect("direct-I/O probe");
    let storage = Storage::disk(root.clone());
    let raw_dir = root.join("raw");
    std::fs::create_dir_all(&raw_dir).expect("raw dir");
    let (machine_json, machine_text) = machine_facts(&root);
    println!("append_throughput: {machine_text}");
    println!(
        "{} samples per configuration, each {:.1} s or {} MiB, whichever comes first; medians",
        settings.samples,
        settings.sample_time.as_secs_f64(),
        settings.sample_cap >> 20
    );

    // Warm-up (discarded): wakes the disk path, the allocator and the blocking pool.
    {
        let warm = Settings {
            sample_time: Duration::from_millis(300),
            ..settings.clone()
        };
        let batch = Rc::new(exact_batch(16 * KIB, 1000));
        kaas_sample(&storage, batch, 1, 1, Budget::new(&warm, warm.sample_cap)).await;
        raw_sample(
            &raw_dir,
            16 * KIB,
            1,
            1,
            false,
            Budget::new(&warm, warm.sample_cap),
        )
        .await;
    }

    let mut single = Vec::new();
    if settings.runs("single") {
        println!(
            "\n-- one appender, durable per batch (kaas append_durable vs raw write+fdatasync) --"
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
        for &size in &settings.sizes {
            let batch = Rc::new(exact_batch(size, 1000));
            let mut row = SingleRow {
                size,
                kaas: Series::default(),
                raw: Series::default(),
                overwrite: Series::default(),
            };
            for i in 0..settings.samples {
                for j in 0..3 {
                    let budget = Budget::new(&settings, settings.sample_cap);
                    match (i + j) % 3 {
                        0 => row
                            .kaas
                            .push(kaas_sample(&storage, batch.clone(), 1, 1, budget).await),
                        1 => row
                            .raw
                            .push(raw_sample(&raw_dir, size, 1, 1, false, budget).await),
                        _ => row
                            .overwrite
                            .push(raw_sample(&raw_dir, size, 1, 1, true, budget).await),
                    }
                }
            }
            println!(
                "{:>7} {:>10.1} {:>10.1} {:>8.1}% {:>8.0}/{:<8.0} {:>8.0}/{:<8.0} {:>12.1}",
                size_label(size),
                row.kaas.median(),
                row.raw.median(),
                100.0 * row.kaas.median() / row.raw.median(),
                row.kaas.latency_us(0.5),
                row.kaas.latency_us(0.99),
                row.raw.latency_us(0.5),
                row.raw.latency_us(0.99),
                row.overwrite.median(),
            );
            single.push(row);
        }
    }

    let mut ceiling = Vec::new();
    if settings.runs("ceiling") {
        println!("\n-- device ceiling: 1 MiB O_DIRECT writes, one fdatasync per sample --");
        println!("{:>16} {:>11}", "writes in flight", "MB/s");
        let mut series = [Series::default(), Series::default()];
        let depths = [1usize, 4];
        for i in 0..settings.samples {
            let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
            for k in order {
                let depth = depths[k];
                let budget = Budget::new(&settings, settings.sample_cap.max(2 * GIB));
                series[k].push(ceiling_sample(&raw_dir, depth, budget).await);
            }
        }
        for (depth, mut s) in depths.into_iter().zip(series) {
            println!("{:>16} {:>11.1}", depth, s.median());
            ceiling.push((depth, s.json()));
        }
    }

    let mut group = Vec::new();
    if settings.runs("group") {
        let n = settings.group_n;
        println!(
            "\n-- group commit: {n} concurrent appenders, each awaiting durability per batch --"
        );
        println!(
            "{:>7} {:<44} {:>10} {:>10} {:>17}",
            "batch", "variant", "MB/s", "vs 1 app.", "p50/p99 us"
        );
        for &size in &settings.group_sizes {
            let batch = Rc::new(exact_batch(size, 1000));
            let names = [
                "kaas, 1 appender, 1 partition".to_string(),
                format!("kaas, {n} appenders, 1 partition"),
                format!("kaas, {n} partitions, 1 appender each"),
                format!("raw, {n} batches per write+fdatasync"),
                format!("raw, {n} files, write+fdatasync each"),
            ];
            let mut variants: Vec<(String, Series)> = names
                .iter()
                .map(|n| (n.clone(), Series::default()))
                .collect();
            for i in 0..settings.samples {
                for j in 0..variants.len() {
                    let v = (i + j) % variants.len();
                    let budget = Budget::new(&settings, settings.sample_cap);
                    let sample = match v {
                        0 => kaas_sample(&storage, batch.clone(), 1, 1, budget).await,
                        1 => kaas_sample(&storage, batch.clone(), 1, n, budget).await,
                        2 => kaas_sample(&storage, batch.clone(), n, 1, budget).await,
                        3 => raw_sample(&raw_dir, size, 1, n, false, budget).await,
                        _ => raw_sample(&raw_dir, size, n, 1, false, budget).await,
                    };
                    variants[v].1.push(sample);
                }
            }
            let base = variants[0].1.median();
            for (name, series) in &mut variants {
                println!(
                    "{:>7} {:<44} {:>10.1} {:>9.2}x {:>8.0}/{:<8.0}",
                    size_label(size),
                    name,
                    series.median(),
                    series.median() / base,
                    series.latency_us(0.5),
                    series.latency_us(0.99),
                );
            }
            group.push(GroupRow { size, variants });
        }
    }

    // JSON report.
    let single_json: Vec<String> = single
        .iter_mut()
        .map(|row| {
            let ratio = row.kaas.median() / row.raw.median();
            format!(
                "{{\"batch_bytes\":{},\"kaas\":{},\"raw\":{},\"raw_overwrite\":{},\"kaas_over_raw\":{}}}",
                row.size,
                row.kaas.json(),
                row.raw.json(),
                row.overwrite.json(),
                json_num(ratio)
            )
        })
        .collect();
    let ceiling_json: Vec<String> = ceiling
        .iter()
        .map(|(depth, json)| {
            format!("{{\"write_bytes\":{MIB},\"in_flight\":{depth},\"result\":{json}}}")
        })
        .collect();
    let group_json: Vec<String> = group
        .iter_mut()
        .map(|row| {
            let variants: Vec<String> = row
                .variants
                .iter_mut()
                .map(|(name, series)| {
                    format!(
                        "{{\"variant\":{},\"result\":{}}}",
                        json_str(name),
                        series.json()
                    )
                })
                .collect();
            format!(
                "{{\"batch_bytes\":{},\"appenders\":{},\"variants\":[{}]}}",
                row.size,
                settings.group_n,
                variants.join(",")
            )
        })
        .collect();
    drop(scratch);
    format!(
        "{{\"bench\":\"append_throughput\",\"unix_time\":{},\"machine\":{},\"samples\":{},\"sample_secs\":{},\"sample_cap_bytes\":{},\"single\":[{}],\"ceiling\":[{}],\"group_commit\":[{}]}}\n",
        now_ms() / 1000,
        machine_json,
        settings.samples,
        json_num(settings.sample_time.as_secs_f64()),
        settings.sample_cap,
        single_json.join(","),
        ceiling_json.join(","),
        group_json.join(",")
    )
}

fn main() {
    let settings = Settings::from_env();
    let json = run_on_executor("append-throughput", move || bench(settings));
    write_report("append_throughput", &json);
}
