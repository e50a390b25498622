//! Raises the open-file limit's soft value to its hard value. Every open partition keeps
//! its active segment file open (and every older segment of its log), so a broker leading
//! 10,000 partitions needs more than 10,000 descriptors, and a broker taking many over needs
//! them at once. Many systems start services with a soft limit of 1,024 below a much higher
//! hard limit; a process may raise its own soft limit up to the hard one without privileges,
//! which is what this does (Apache Kafka's documentation asks operators for a high
//! `nofile` instead). Never refuses to start: a low limit is a warning naming the figure.

/// Descriptors below which the warning is printed: about a thousand idle partitions.
const FEW_DESCRIPTORS: u64 = 4_096;

pub fn raise_soft_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit struct we own; raising the soft limit up to
        // the hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            tracing::debug!(
                from = limit.rlim_cur,
                to = limit.rlim_max,
                "raised the open-file limit"
            );
            limit = raised;
        }
    }
    if limit.rlim_cur != libc::RLIM_INFINITY && limit.rlim_cur < FEW_DESCRIPTORS {
        tracing::warn!(
            nofile = limit.rlim_cur,
            "the open-file limit (RLIMIT_NOFILE, ulimit -n) is low: each open partition holds \
             one descriptor per segment file, so opening many partitions will fail with \
             \"Too many open files\"; raise the hard limit (LimitNOFILE= in systemd, the \
             container runtime's default ulimits)"
        );
    }
}
