//! Is io_uring available to this process? One `io_uring_setup` with a one-entry ring, closed
//! at once. Container runtimes' default seccomp profiles answer EPERM, gVisor and very old
//! kernels ENOSYS, and `kernel.io_uring_disabled` (1 for unprivileged users outside
//! `kernel.io_uring_group`, 2 for everyone) EPERM.

use super::{proc_status_field, ExitCode, Refusal};

pub fn check() -> Result<(), Refusal> {
    // `struct io_uring_params` is 120 bytes; all zero asks for the defaults.
    let mut params = [0u32; 30];
    // SAFETY: io_uring_setup reads and writes only the 120-byte params block passed to it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_io_uring_setup,
            1u32,
            params.as_mut_ptr() as *mut libc::c_void,
        )
    };
    if fd >= 0 {
        // SAFETY: fd is the ring just created and owned by nobody else.
        unsafe { libc::close(fd as libc::c_int) };
        return Ok(());
    }
    let error = std::io::Error::last_os_error();
    Err(Refusal::new(ExitCode::IoUringUnavailable, explain(&error)))
}

fn explain(error: &std::io::Error) -> String {
    let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(0);
    let seccomp = proc_status_field("Seccomp").is_some_and(|mode| mode == "2");
    let cause = if disabled > 0 {
        format!(
            "the kernel has io_uring turned off (sysctl kernel.io_uring_disabled={disabled}). \
             Fix: set kernel.io_uring_disabled=0 on the node (or, for 1, add kaas's group to \
             kernel.io_uring_group)"
        )
    } else if error.raw_os_error() == Some(libc::ENOSYS) {
        "the kernel or sandbox does not implement io_uring (gVisor, or a kernel older than \
         5.8, or a seccomp filter answering ENOSYS). Fix: run kaas on a regular Linux kernel \
         ≥ 5.8 (on Kubernetes not in a gVisor RuntimeClass) with io_uring allowed"
            .to_string()
    } else if seccomp {
        "a seccomp filter blocks the io_uring system calls (container runtimes' default \
         profiles do). Fix: run kaas under a profile that allows io_uring_setup, \
         io_uring_enter and io_uring_register, e.g. deploy/seccomp/kaas.json installed on \
         the node and named by securityContext.seccompProfile (type Localhost)"
            .to_string()
    } else {
        "the kernel refused to create a ring. Fix: check the node's kernel.io_uring_disabled \
         sysctl, its seccomp or LSM policy, and the locked-memory limit"
            .to_string()
    };
    format!(
        "kaas cannot start: io_uring is unavailable (io_uring_setup failed: {error}). kaas does \
         all network and disk I/O through io_uring. Cause: {cause}."
    )
}
