//! The machine's physical limits, measured the same way every time.
//!
//! - O_DIRECT sequential write: a file preallocated with `fallocate` (as a broker
//!   preallocates segments) is written front to back with `pwrite` from 4 KiB-aligned
//!   buffers, by one or more threads each owning a contiguous range, then `fdatasync`ed; the
//!   time includes the `fdatasync`. Several block sizes and thread counts are tried and the
//!   best is the limit. A second figure writes 256 KiB and `fdatasync`s after every write (a
//!   durable append stream with queue depth 1).
//! - O_DIRECT sequential read: a file written and `fdatasync`ed first is read front to back
//!   with `pread` into 4 KiB-aligned buffers, by one or more threads; the best run is the
//!   limit a broker reading its segments with direct I/O (as kaas does) cannot pass.
//! - Loopback TCP: one connection over 127.0.0.1, 256 KiB writes for a few seconds, bytes
//!   counted by the receiver.
//! - memcpy: copying a 64 MiB buffer repeatedly for a second.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::machine::{git_revision, unix_time, MachineInfo};

mod direct_io;

use direct_io::{disk_read, disk_write};

/// `kaas-bench limits` flags.
#[derive(Args, Debug, Clone)]
pub struct LimitsArgs {
    /// Directory on the disk under test (a scratch file is written and removed).
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Bytes written per disk run.
    #[arg(long, default_value_t = 1 << 30)]
    pub file_bytes: u64,
    /// Seconds of loopback TCP traffic.
    #[arg(long, default_value_t = 3.0)]
    pub tcp_seconds: f64,
    /// Where to write the JSON result.
    #[arg(long, default_value = "limits.json")]
    pub out: PathBuf,
}

/// One disk configuration and its result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiskRun {
    pub block_bytes: usize,
    pub threads: usize,
    /// `end`: one fdatasync after all writes; `every-write`: after each write; `none`: reads.
    pub sync: String,
    pub bytes: u64,
    pub seconds: f64,
    pub mb_per_s: f64,
}

/// Everything `limits` measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Limits {
    pub started_at_unix: u64,
    pub git_revision: String,
    pub machine: MachineInfo,
    pub disk_dir: String,
    pub disk_runs: Vec<DiskRun>,
    /// Best of the `end`-synced runs: the O_DIRECT sequential write limit.
    pub o_direct_write_mb_per_s: f64,
    /// 256 KiB writes, each followed by fdatasync.
    pub o_direct_write_fdatasync_each_mb_per_s: f64,
    /// Sequential reads (`sync` is `none`); empty in reports made before it was measured.
    #[serde(default)]
    pub read_runs: Vec<DiskRun>,
    /// Best of `read_runs`: the O_DIRECT sequential read limit (0 when not measured).
    #[serde(default)]
    pub o_direct_read_mb_per_s: f64,
    pub loopback_tcp_mb_per_s: f64,
    pub memcpy_mb_per_s: f64,
}

/// `kaas-bench limits`.
pub fn limits_command(args: &LimitsArgs) -> anyhow::Result<()> {
    let limits = measure_limits(&args.dir, args.file_bytes, args.tcp_seconds)?;
    if let Some(parent) = args.out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&limits)?)
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "O_DIRECT sequential write {:.0} MB/s (fdatasync per 256 KiB write: {:.0} MB/s), read {:.0} MB/s; loopback TCP {:.0} MB/s; memcpy {:.0} MB/s",
        limits.o_direct_write_mb_per_s,
        limits.o_direct_write_fdatasync_each_mb_per_s,
        limits.o_direct_read_mb_per_s,
        limits.loopback_tcp_mb_per_s,
        limits.memcpy_mb_per_s
    );
    eprintln!("limits: {}", args.out.display());
    Ok(())
}

/// Runs every measurement.
pub fn measure_limits(dir: &Path, file_bytes: u64, tcp_seconds: f64) -> anyhow::Result<Limits> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut disk_runs = Vec::new();
    for (block, threads) in [(1 << 20, 1), (1 << 20, 4), (128 << 10, 1), (128 << 10, 4)] {
        let run = disk_write(dir, file_bytes, block, threads, false)?;
        eprintln!(
            "disk: {} KiB blocks x {} thread(s): {:.0} MB/s",
            block >> 10,
            threads,
            run.mb_per_s
        );
        disk_runs.push(run);
    }
    let synced = disk_write(dir, file_bytes.min(256 << 20), 256 << 10, 1, true)?;
    eprintln!(
        "disk: 256 KiB + fdatasync each: {:.0} MB/s",
        synced.mb_per_s
    );
    let best = disk_runs.iter().map(|r| r.mb_per_s).fold(0.0, f64::max);
    let fdatasync_each = synced.mb_per_s;
    disk_runs.push(synced);
    let mut read_runs = Vec::new();
    for threads in [1, 4] {
        let run = disk_read(dir, file_bytes, 1 << 20, threads)?;
        eprintln!(
            "disk: 1024 KiB reads x {threads} thread(s): {:.0} MB/s",
            run.mb_per_s
        );
        read_runs.push(run);
    }
    let best_read = read_runs.iter().map(|r| r.mb_per_s).fold(0.0, f64::max);
    let tcp = loopback_tcp(Duration::from_secs_f64(tcp_seconds))?;
    eprintln!("loopback TCP: {tcp:.0} MB/s");
    let memcpy = memcpy_rate();
    eprintln!("memcpy: {memcpy:.0} MB/s");
    Ok(Limits {
        started_at_unix: unix_time(),
        git_revision: git_revision(),
        machine: MachineInfo::current(),
        disk_dir: dir.display().to_string(),
        disk_runs,
        o_direct_write_mb_per_s: best,
        o_direct_write_fdatasync_each_mb_per_s: fdatasync_each,
        read_runs,
        o_direct_read_mb_per_s: best_read,
        loopback_tcp_mb_per_s: tcp,
        memcpy_mb_per_s: memcpy,
    })
}

fn loopback_tcp(duration: Duration) -> anyhow::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding a loopback listener")?;
    let address = listener.local_addr()?;
    let receiver = std::thread::spawn(move || -> anyhow::Result<(u64, Duration)> {
        let (mut stream, _) = listener.accept()?;
        let mut buffer = vec![0u8; 256 << 10];
        let mut received = 0u64;
        let mut first: Option<Instant> = None;
        loop {
            let n = stream.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            first.get_or_insert_with(Instant::now);
            received += n as u64;
        }
        Ok((received, first.map_or(Duration::ZERO, |f| f.elapsed())))
    });
    let mut stream = TcpStream::connect(address).context("connecting over loopback")?;
    stream.set_nodelay(true)?;
    let buffer = vec![0x5au8; 256 << 10];
    let started = Instant::now();
    while started.elapsed() < duration {
        stream.write_all(&buffer)?;
    }
    drop(stream);
    let (received, seconds) = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("receiver panicked"))??;
    Ok(received as f64 / seconds.as_secs_f64().max(1e-9) / 1e6)
}

fn memcpy_rate() -> f64 {
    let source = vec![0x5au8; 64 << 20];
    let mut target = vec![0u8; 64 << 20];
    let started = Instant::now();
    let mut copied = 0u64;
    while started.elapsed() < Duration::from_secs(1) {
        target.copy_from_slice(&source);
        std::hint::black_box(&mut target);
        copied += source.len() as u64;
    }
    copied as f64 / started.elapsed().as_secs_f64() / 1e6
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn loopback_and_memcpy_measure_something() {
        assert!(loopback_tcp(Duration::from_millis(100)).unwrap() > 0.0);
        assert!(memcpy_rate() > 0.0);
    }
}
