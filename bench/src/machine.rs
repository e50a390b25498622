//! What a report says about where it ran: machine, kernel, client library, git revision.

use std::process::Command;

use serde::{Deserialize, Serialize};

/// The machine a run happened on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MachineInfo {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    /// CPUs this process may use.
    pub cpus: usize,
    pub memory_bytes: u64,
    /// librdkafka version the client was built with.
    pub librdkafka: String,
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|text| text.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

impl MachineInfo {
    pub fn current() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim() == "model name").then(|| value.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|line| {
                let rest = line.strip_prefix("MemTotal:")?;
                let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
                Some(kib * 1024)
            })
            .unwrap_or(0);
        MachineInfo {
            hostname: read_trimmed("/proc/sys/kernel/hostname"),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes,
            librdkafka: rdkafka::util::get_rdkafka_version().1,
        }
    }
}

/// The git revision of the working directory's repository (`-dirty` if it has uncommitted
/// changes to tracked files), or `KAAS_BENCH_GIT_REVISION` if set, or "unknown".
pub fn git_revision() -> String {
    if let Ok(revision) = std::env::var("KAAS_BENCH_GIT_REVISION") {
        return revision;
    }
    let run = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
    };
    match run(&["rev-parse", "HEAD"]) {
        Some(head) => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|status| !status.is_empty());
            if dirty {
                format!("{head}-dirty")
            } else {
                head
            }
        }
        None => "unknown".into(),
    }
}

/// Seconds since the Unix epoch.
pub fn unix_time() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}
