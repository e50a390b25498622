//! Live counters of a run and the thread that prints them once a second.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sample_clock::{Phase, SampleClock};

/// Totals updated by producer and consumer threads (relaxed; read only for display).
#[derive(Default)]
pub struct ProgressProbe {
    pub produced_records: AtomicU64,
    pub produced_bytes: AtomicU64,
    pub consumed_records: AtomicU64,
    pub consumed_bytes: AtomicU64,
    pub errors: AtomicU64,
    /// Largest latency seen in the last interval, in microseconds (reset by the printer).
    pub interval_max_latency_us: AtomicU64,
}

impl ProgressProbe {
    pub fn add_produced(&self, bytes: u64) {
        self.produced_records.fetch_add(1, Ordering::Relaxed);
        self.produced_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn add_consumed(&self, bytes: u64) {
        self.consumed_records.fetch_add(1, Ordering::Relaxed);
        self.consumed_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn add_error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub fn observe_latency(&self, latency_us: u64) {
        self.interval_max_latency_us
            .fetch_max(latency_us, Ordering::Relaxed);
    }
}

/// Prints a progress line per second until dropped.
pub struct ProgressPrinter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressPrinter {
    /// Starts printing `label`-prefixed lines to stderr. With `clock`, lines name the phase.
    pub fn start(label: String, probe: Arc<ProgressProbe>, clock: Option<SampleClock>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || print_loop(&label, &probe, clock, &thread_stop))
            .ok();
        ProgressPrinter { stop, thread }
    }
}

impl Drop for ProgressPrinter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn print_loop(label: &str, probe: &ProgressProbe, clock: Option<SampleClock>, stop: &AtomicBool) {
    let tty = std::io::stderr().is_terminal();
    let began = Instant::now();
    let totals = |probe: &ProgressProbe| {
        (
            probe.produced_records.load(Ordering::Relaxed),
            probe.produced_bytes.load(Ordering::Relaxed),
            probe.consumed_records.load(Ordering::Relaxed),
            probe.consumed_bytes.load(Ordering::Relaxed),
        )
    };
    // Counters may be shared by several printers in turn: rates start from where they are.
    let mut last = totals(probe);
    let mut last_at = began;
    while !stop.load(Ordering::Relaxed) {
        // Sleep in small steps so that stopping is prompt.
        let wake = last_at + Duration::from_secs(1);
        while Instant::now() < wake && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let now = Instant::now();
        let seconds = now.duration_since(last_at).as_secs_f64();
        last_at = now;
        let current = totals(probe);
        let rate = |new: u64, old: u64| (new - old) as f64 / seconds;
        let phase = clock.map_or_else(String::new, |clock| match clock.phase_of(now) {
            Phase::Before => "starting".into(),
            Phase::Warmup => "warm-up".into(),
            Phase::Sample(index) => format!("sample {}/{}", index + 1, clock.samples),
            Phase::After => "draining".into(),
        });
        let max_latency = probe.interval_max_latency_us.swap(0, Ordering::Relaxed);
        let line = format!(
            "[{label}] {:>5.1}s {phase:<12} produced {:>9.0} rec/s {:>8.1} MB/s | consumed {:>9.0} rec/s {:>8.1} MB/s | max latency {:>8.2} ms | errors {}",
            now.duration_since(began).as_secs_f64(),
            rate(current.0, last.0),
            rate(current.1, last.1) / 1e6,
            rate(current.2, last.2),
            rate(current.3, last.3) / 1e6,
            max_latency as f64 / 1000.0,
            probe.errors.load(Ordering::Relaxed),
        );
        last = current;
        let mut err = std::io::stderr().lock();
        let _ = if tty {
            write!(err, "\r\x1b[2K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }
    if tty {
        let _ = writeln!(std::io::stderr());
    }
}
