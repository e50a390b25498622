//! Checks of the environment that run before any shard starts, so that what io_uring and
//! direct I/O meet in containers (seccomp, gVisor, a low memlock limit, tmpfs or ramfs data
//! directories, a "shared" volume that is not shared) is one paragraph naming the cause and
//! the fix, and a distinct exit code, instead of a panic deep in a shard or a silent slowdown.
//!
//! Exit codes (also in src/README.md, "Start-up checks and exit codes"): [`ExitCode`].

mod direct_io;
mod io_uring;
mod memlock;
mod mount_caching;
mod nofile;
mod shared_volume;

use kaas_net::shard::config::BrokerConfig;

/// Why kaas refused to start; the process exits with this code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitCode {
    /// `io_uring_setup` is refused (seccomp, gVisor, `kernel.io_uring_disabled`).
    IoUringUnavailable = 10,
    /// `RLIMIT_MEMLOCK` is below what glommio needs to create its rings.
    MemlockTooLow = 11,
    /// The data directory does not accept `O_DIRECT` files.
    NoDirectIo = 12,
    /// Cluster mode: brokers named by the assignment left no marker on this volume.
    VolumeNotShared = 13,
    /// Cluster mode: the data directory is on NFS mounted so that a stale leader could miss
    /// the partition fence's claims: lookup or directory attribute caching on, `nocto`, or
    /// a version before 4 (the fence needs NFSv4's close-to-open consistency).
    FenceUnsafeCaching = 14,
}

/// A refused start: the code to exit with and the paragraph to print.
#[derive(Debug)]
pub struct Refusal {
    pub code: ExitCode,
    pub message: String,
}

impl Refusal {
    fn new(code: ExitCode, message: String) -> Refusal {
        Refusal { code, message }
    }
}

/// Runs every check that applies to `config`, cheapest first; the first refusal wins.
pub fn run(config: &BrokerConfig) -> Result<(), Refusal> {
    io_uring::check()?;
    memlock::check(config.shards)?;
    nofile::raise_soft_limit();
    if let Some(data_dir) = &config.data_dir {
        direct_io::check(data_dir)?;
        if let Some(cluster) = &config.cluster {
            mount_caching::check(data_dir)?;
            shared_volume::check(data_dir, cluster.broker_id)?;
        }
    }
    Ok(())
}

/// The value of a `Name:` line of `/proc/self/status` (`None` when unreadable).
fn proc_status_field(name: &str) -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key == name).then(|| value.trim().to_string())
    })
}
