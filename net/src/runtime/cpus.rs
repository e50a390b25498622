//! The CPUs this process may run on, and where each shard's executor goes among them.
//!
//! A container's CPUs are not the host's first ones: the kubelet's static CPU manager puts a
//! Guaranteed pod in a cpuset cgroup such as {4,5}, and `taskset` narrows a process's
//! affinity. glommio's `Placement::Fixed(n)` names host CPU `n`, so pinning shard `i` to CPU
//! `i` is refused inside a cpuset that lacks it (the executor's blocking thread panics on
//! `sched_setaffinity` and the process aborts) and, under an affinity mask alone, silently
//! moves the shard out of it. So every placement comes from the set `sched_getaffinity(0)`
//! gives when the broker starts:
//!
//! - as many shards as allowed CPUs, or fewer: shard `i` is pinned to the `i`-th allowed CPU
//!   (`Placement::Fixed`). glommio binds the executor's blocking thread to the same CPU.
//! - more shards than allowed CPUs: every shard is fenced to the whole allowed set
//!   (`Placement::Fenced`) and the kernel spreads them; glommio binds each blocking thread to
//!   that set too. When glommio cannot read the machine's topology (no `/sys`), the shard is
//!   left unbound, which inherits the affinity of the thread that starts it.
//!
//! Threads kaas starts itself (admin HTTP, the file pool, volume barriers, the cluster core,
//! io_uring's kernel workers) are never pinned: they inherit the affinity of the thread that
//! starts them, which is the process's set or one shard's CPU within it.

use glommio::{CpuSet, Placement};

/// The CPUs this process may run on, in increasing order; never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllowedCpus {
    ids: Vec<usize>,
}

impl AllowedCpus {
    /// The CPUs the calling thread may run on (`sched_getaffinity(0)`): called from the main
    /// thread before any pinning, that is the process's set (its cpuset cgroup and affinity).
    pub fn of_this_process() -> std::io::Result<AllowedCpus> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
        // the size it is given.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: `set` is a live cpu_set_t of `size` bytes.
        if unsafe { libc::sched_getaffinity(0, size, &mut set) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let ids = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `cpu` is below CPU_SETSIZE, the size of `set`.
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
            .collect();
        AllowedCpus::from_ids(ids).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "sched_getaffinity returned no CPU",
            )
        })
    }

    /// The set of `ids` (any order, duplicates ignored); `None` when empty.
    pub fn from_ids(mut ids: Vec<usize>) -> Option<AllowedCpus> {
        ids.sort_unstable();
        ids.dedup();
        (!ids.is_empty()).then_some(AllowedCpus { ids })
    }

    /// The CPU ids, in increasing order.
    pub fn ids(&self) -> &[usize] {
        &self.ids
    }

    /// How many CPUs.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Always false: a process runs on at least one CPU.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Where the executor of shard `index` of `shards` runs: pinned to one allowed CPU of
    /// its own when there are enough, otherwise anywhere in the allowed set.
    pub fn shard_placement(&self, index: usize, shards: usize) -> Placement {
        match self.pinned_cpu(index, shards) {
            Some(cpu) => Placement::Fixed(cpu),
            None => self.anywhere(),
        }
    }

    /// Where a helper executor (not a shard) runs: anywhere in the allowed set.
    pub fn anywhere(&self) -> Placement {
        match CpuSet::online() {
            Ok(online) => {
                let fence = online.filter(|location| self.ids.contains(&location.cpu));
                if fence.is_empty() {
                    Placement::Unbound
                } else {
                    Placement::Fenced(fence)
                }
            }
            Err(_) => Placement::Unbound,
        }
    }

    /// The CPU shard `index` of `shards` is pinned to, if it gets one of its own.
    fn pinned_cpu(&self, index: usize, shards: usize) -> Option<usize> {
        if shards > self.ids.len() {
            return None;
        }
        self.ids.get(index).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(ids: &[usize]) -> AllowedCpus {
        AllowedCpus::from_ids(ids.to_vec()).expect("not empty")
    }

    #[test]
    fn shards_are_pinned_to_the_allowed_cpus_in_order_not_to_the_first_host_cpus() {
        let allowed = cpus(&[5, 4]);
        assert_eq!(allowed.pinned_cpu(0, 2), Some(4));
        assert_eq!(allowed.pinned_cpu(1, 2), Some(5));
        assert_eq!(allowed.pinned_cpu(0, 1), Some(4));
    }

    #[test]
    fn more_shards_than_allowed_cpus_are_not_pinned() {
        let allowed = cpus(&[1]);
        assert_eq!(allowed.pinned_cpu(0, 2), None);
        assert_eq!(allowed.pinned_cpu(1, 2), None);
    }

    #[test]
    fn an_unpinned_executor_is_fenced_to_the_allowed_cpus_that_are_online() {
        let this_process = AllowedCpus::of_this_process().expect("sched_getaffinity");
        let first = this_process.ids()[0];
        let allowed = cpus(&[first]);
        match allowed.anywhere() {
            Placement::Fenced(set) => {
                let fenced: Vec<usize> = set.iter().map(|location| location.cpu).collect();
                assert_eq!(fenced, vec![first]);
            }
            other => panic!("expected a fence around CPU {first}, got {other:?}"),
        }
        assert!(matches!(
            allowed.shard_placement(0, 2),
            Placement::Fenced(_)
        ));
        assert!(matches!(
            allowed.shard_placement(0, 1),
            Placement::Fixed(cpu) if cpu == first
        ));
    }

    #[test]
    fn this_process_may_use_the_cpus_its_status_lists() {
        let allowed = AllowedCpus::of_this_process().expect("sched_getaffinity");
        let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
        let listed = status
            .lines()
            .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim();
        let mut expected = Vec::new();
        for range in listed.split(',') {
            let (first, last) = range.split_once('-').unwrap_or((range, range));
            let (first, last): (usize, usize) = (
                first.parse().expect("cpu id"),
                last.parse().expect("cpu id"),
            );
            expected.extend(first..=last);
        }
        assert_eq!(allowed.ids(), expected.as_slice());
        assert_eq!(allowed.len(), expected.len());
    }

    #[test]
    fn an_empty_set_is_no_set() {
        assert_eq!(AllowedCpus::from_ids(Vec::new()), None);
        assert_eq!(cpus(&[3, 1, 3]).ids(), &[1, 3]);
    }
}
