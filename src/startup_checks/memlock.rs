//! Is the locked-memory limit high enough? glommio 0.9 refuses to build an executor when
//! `RLIMIT_MEMLOCK` is below 512 KiB (its `MIN_MEMLOCK_LIMIT`); above that it registers
//! 10 MiB of I/O buffers with each of its three rings per shard, which needs either
//! CAP_IPC_LOCK or that much memlock, and otherwise silently runs unregistered (slower, but
//! correct): that case is a warning, the floor a refusal.

use super::{proc_status_field, ExitCode, Refusal};

/// glommio's floor (`sys/uring.rs`, `MIN_MEMLOCK_LIMIT`).
const GLOMMIO_MIN_MEMLOCK: u64 = 512 * 1024;
/// What one shard registers: glommio's default `io_memory` (10 MiB) in three rings.
const REGISTERED_PER_SHARD: u64 = 3 * (10 << 20);
const CAP_IPC_LOCK: u32 = 14;

pub fn check(shards: usize) -> Result<(), Refusal> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return Ok(());
    }
    let soft = limit.rlim_cur;
    if soft < GLOMMIO_MIN_MEMLOCK {
        return Err(Refusal::new(
            ExitCode::MemlockTooLow,
            format!(
                "kaas cannot start: the locked-memory limit (RLIMIT_MEMLOCK, ulimit -l) is {} \
                 KiB, below the {} KiB its io_uring runtime needs to create a ring. Cause: the \
                 container or service manager sets a low memlock limit. Fix: raise it to at \
                 least {} KiB (ideally {} MiB per shard so I/O buffers can be registered, or \
                 unlimited), e.g. `ulimit -l unlimited`, LimitMEMLOCK= in systemd, or the \
                 container runtime's default ulimits on Kubernetes nodes.",
                soft / 1024,
                GLOMMIO_MIN_MEMLOCK / 1024,
                GLOMMIO_MIN_MEMLOCK / 1024,
                REGISTERED_PER_SHARD >> 20,
            ),
        ));
    }
    let wanted = REGISTERED_PER_SHARD.saturating_mul(shards as u64);
    if soft != libc::RLIM_INFINITY && soft < wanted && !has_ipc_lock() {
        tracing::warn!(
            memlock_kib = soft / 1024,
            wanted_kib = wanted / 1024,
            "the locked-memory limit is too low to register I/O buffers and CAP_IPC_LOCK is \
             missing: io_uring runs with unregistered buffers (correct, somewhat slower); \
             raise RLIMIT_MEMLOCK to register them"
        );
    }
    Ok(())
}

fn has_ipc_lock() -> bool {
    proc_status_field("CapEff")
        .and_then(|hex| u64::from_str_radix(&hex, 16).ok())
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}
