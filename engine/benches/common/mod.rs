//! Helpers shared by the engine benchmarks: executor, batches, statistics, reports.
//!
//! Each benchmark is a plain `main` (`harness = false`): it measures, prints a table and
//! writes the same numbers as JSON under `<target>/kaas-bench/`. Nothing here asserts on
//! speed.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kaas_engine::batch::{encode_batch_for_tests, TestRecord};

pub const KIB: usize = 1 << 10;
pub const MIB: usize = 1 << 20;
pub const GIB: u64 = 1 << 30;

/// Runs `f` on a fresh glommio executor and waits for it.
pub fn run_on_executor<F, T>(name: &str, f: impl FnOnce() -> F + Send + 'static) -> T
where
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    glommio::LocalExecutorBuilder::default()
        .name(name)
        .spawn(move || async move { f().await })
        .expect("spawning the executor")
        .join()
        .expect("joining the executor")
}

/// Reads an environment variable, or `default` when unset or unparsable.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// A comma-separated list from an environment variable.
pub fn env_list<T: std::str::FromStr + Clone>(name: &str, default: &[T]) -> Vec<T> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            v.split(',').filter_map(|s| s.trim().parse().ok()).collect()
        }
        _ => default.to_vec(),
    }
}

/// A scratch directory for data files, removed when dropped. `KAAS_BENCH_DIR` picks the
/// parent (default `/tmp`); it must be on the disk being measured.
pub fn scratch_dir(label: &str) -> tempfile::TempDir {
    let parent = std::env::var("KAAS_BENCH_DIR").unwrap_or_else(|_| "/tmp".into());
    std::fs::create_dir_all(&parent).expect("creating the bench directory");
    tempfile::Builder::new()
        .prefix(&format!("kaas-bench-{label}-"))
        .tempdir_in(parent)
        .expect("creating a scratch directory")
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A valid, uncompressed v2 batch of exactly `total` bytes, made of records whose values
/// are about `value_len` bytes (the last one takes up the slack).
pub fn exact_batch(total: usize, value_len: usize) -> Vec<u8> {
    let base_timestamp = now_ms();
    let pattern = |len: usize, seed: usize| -> Vec<u8> {
        (0..len)
            .map(|i| ((i * 31 + seed * 7) % 251) as u8)
            .collect()
    };
    let mut count = (total / (value_len + 8)).max(1);
    loop {
        let mut values: Vec<Vec<u8>> = (0..count).map(|i| pattern(value_len, i)).collect();
        for _ in 0..16 {
            let records: Vec<TestRecord<'_>> =
                values.iter().map(|v| (None, Some(v.as_slice()))).collect();
            let encoded = encode_batch_for_tests(&records, base_timestamp, -1, -1, -1);
            if encoded.len() == total {
                return encoded;
            }
            let last = values.last_mut().expect("at least one record");
            let wanted = last.len() as isize + (total as isize - encoded.len() as isize);
            if wanted < 0 {
                break;
            }
            // Varint widths can make the length oscillate around a boundary: nudge by one.
            let wanted = if wanted as usize == last.len() {
                wanted + 1
            } else {
                wanted
            };
            *last = pattern(wanted as usize, count);
        }
        assert!(count > 1, "cannot build a {total}-byte batch");
        count -= 1;
    }
}

/// Median of `values` (mean of the two middle values for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// The `q` quantile (0..=1) of durations, nearest rank.
pub fn quantile(durations: &mut [Duration], q: f64) -> Duration {
    if durations.is_empty() {
        return Duration::ZERO;
    }
    durations.sort_unstable();
    let rank = ((q * durations.len() as f64).ceil() as usize).clamp(1, durations.len());
    durations[rank - 1]
}

/// Bytes per second as MB/s (10^6 bytes).
pub fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / 1e6
}

/// Human size label: 1KiB, 16KiB, 1MiB.
pub fn size_label(bytes: usize) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{}MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{}KiB", bytes / KIB)
    } else {
        format!("{bytes}B")
    }
}

/// One line of `/proc/self/status` in KiB (e.g. `VmRSS`).
pub fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(field)?.strip_prefix(':')?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// Open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// The 1, 5 and 15 minute load averages (other work on the machine skews timings).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where reports go: `<target>/kaas-bench/`, found from the running executable
/// (`<target>/<profile>/deps/<bench>-<hash>`), or `CARGO_TARGET_DIR`.
pub fn report_dir() -> PathBuf {
    let from_exe = std::env::current_exe().ok().and_then(|exe| {
        let deps = exe.parent()?;
        if deps.file_name()? != "deps" {
            return None;
        }
        Some(deps.parent()?.parent()?.to_path_buf())
    });
    let target = from_exe
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("kaas-bench")
}

/// Writes `json` to `<report_dir>/<name>.json` and says where.
pub fn write_report(name: &str, json: &str) {
    let dir = report_dir();
    let path = dir.join(format!("{name}.json"));
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, json)) {
        Ok(()) => println!(
            "\nload average at the end {}\nreport: {}",
            loadavg(),
            path.display()
        ),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
}

/// Facts about the machine, as a JSON object and as text.
pub fn machine_facts(data_dir: &Path) -> (String, String) {
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let device = mount_device(data_dir);
    let load = loadavg();
    let text = format!(
        "cpus {nproc}, kernel {kernel}, data dir {} on {device}, load average {load}",
        data_dir.display()
    );
    let json = format!(
        "{{\"cpus\":{nproc},\"kernel\":{},\"data_dir\":{},\"device\":{},\"loadavg_at_start\":{}}}",
        json_str(&kernel),
        json_str(&data_dir.display().to_string()),
        json_str(&device),
        json_str(&load)
    );
    (json, text)
}

/// The device and file system of the mount holding `path` (longest mount-point prefix).
fn mount_device(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (Some(dev), Some(mount), Some(fs)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if path.starts_with(mount) && best.as_ref().is_none_or(|(len, _)| mount.len() > *len) {
            best = Some((mount.len(), format!("{dev} ({fs}, mounted at {mount})")));
        }
    }
    best.map_or_else(|| "unknown".into(), |(_, d)| d)
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON number (`null` for NaN or infinity).
pub fn json_num(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        "null".into()
    }
}

/// A JSON array of numbers.
pub fn json_nums(xs: &[f64]) -> String {
    let items: Vec<String> = xs.iter().map(|x| json_num(*x)).collect();
    format!("[{}]", items.join(","))
}
