//! A broker confined to some of the machine's CPUs starts, serves, and keeps every one of its
//! threads (shards, their blocking threads, helpers) on those CPUs. Confined two ways: by a
//! cpuset cgroup, as the kubelet's static CPU manager confines a Guaranteed pod (pinning
//! outside it is refused by the kernel), and by an affinity mask alone (`taskset`, which a
//! process may widen again by pinning itself elsewhere). Here the allowed set is CPU 1 only,
//! so a shard pinned to "CPU 0" — the first host CPU — is caught either way.
//!
//! Needs root and the cgroup v1 cpuset hierarchy at `/sys/fs/cgroup/cpuset`
//! (/work/shared/ENVIRONMENT.md, "CPU sets and pinning"); it fails, naming what is
//! missing, when they are not there.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kaas_engine::batch::encode_batch_for_tests;
use support::{fetch_at, http_get, Kaas};

const CPUSET_ROOT: &str = "/sys/fs/cgroup/cpuset";

/// A child cpuset cgroup holding CPU 1 only; removed when dropped (its tasks gone by then).
struct CpusetCgroup {
    dir: PathBuf,
}

impl CpusetCgroup {
    fn cpu_1_only(name: &str) -> CpusetCgroup {
        let root = Path::new(CPUSET_ROOT);
        let parent_cpus = std::fs::read_to_string(root.join("cpuset.cpus")).unwrap_or_else(|e| {
            panic!(
                "this test needs the cgroup v1 cpuset hierarchy at {CPUSET_ROOT} (reading \
                 {CPUSET_ROOT}/cpuset.cpus: {e}); mount it (mount -t cgroup -o cpuset cpuset \
                 {CPUSET_ROOT}) or run on a machine that has it"
            )
        });
        assert!(
            cpu_list_contains(parent_cpus.trim(), 1),
            "this test confines kaas to CPU 1, which the root cpuset ({}) does not have",
            parent_cpus.trim()
        );
        let dir = root.join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&dir)
            .unwrap_or_else(|e| panic!("creating the cpuset cgroup {}: {e}", dir.display()));
        let cgroup = CpusetCgroup { dir };
        // A cpuset takes tasks only once it has both CPUs and memory nodes.
        cgroup.write("cpuset.cpus", "1");
        let mems = std::fs::read_to_string(root.join("cpuset.mems")).expect("parent cpuset.mems");
        cgroup.write("cpuset.mems", mems.trim());
        cgroup
    }

    fn write(&self, file: &str, value: &str) {
        let path = self.dir.join(file);
        std::fs::write(&path, value)
            .unwrap_or_else(|e| panic!("writing {value:?} to {}: {e}", path.display()));
    }

    /// A shell that moves itself into this cgroup, then execs kaas (its pid stays kaas's).
    fn launcher(&self) -> Vec<String> {
        vec![
            "sh".into(),
            "-c".into(),
            r#"echo $$ > "$0/tasks" && exec "$@""#.into(),
            self.dir.to_string_lossy().into_owned(),
        ]
    }
}

impl Drop for CpusetCgroup {
    fn drop(&mut self) {
        // The broker was waited for, but the kernel may take a moment to empty the cgroup.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("could not remove the cpuset cgroup {}", self.dir.display());
    }
}

/// Whether a kernel CPU list (`0-3,8`) names `cpu`.
fn cpu_list_contains(list: &str, cpu: usize) -> bool {
    list.split(',').filter(|r| !r.is_empty()).any(|range| {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        match (first.trim().parse::<usize>(), last.trim().parse::<usize>()) {
            (Ok(first), Ok(last)) => (first..=last).contains(&cpu),
            _ => false,
        }
    })
}

/// (thread id, name, `Cpus_allowed_list`) of every thread of `pid` now.
fn threads_of(pid: u32) -> Vec<(String, String, String)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc/<pid>/task");
    let mut threads = Vec::new();
    for task in tasks {
        let task = task.expect("task entry");
        // A thread that ended since the listing has no status any more.
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(|value| value.trim().to_string())
                .unwrap_or_default()
        };
        threads.push((
            task.file_name().to_string_lossy().into_owned(),
            field("Name"),
            field("Cpus_allowed_list"),
        ));
    }
    threads
}

/// Asserts every thread of `pid` may run on CPU 1 only.
fn every_thread_is_on_cpu_1(pid: u32) {
    let threads = threads_of(pid);
    let outside: Vec<_> = threads.iter().filter(|(_, _, cpus)| cpus != "1").collect();
    assert!(
        outside.is_empty(),
        "threads of kaas (pid {pid}) allowed on CPUs other than 1, as (tid, name, \
         Cpus_allowed_list): {outside:?}; all threads: {threads:?}"
    );
}

/// How many shards the broker runs, as `/healthz` reports them.
fn shards_of(kaas: &Kaas) -> u64 {
    let (code, body) = http_get(kaas.admin, "/healthz").expect("/healthz answers");
    assert_eq!(code, 200, "{body}");
    let count = body.split_once("\"shards\":").map(|(_, rest)| {
        rest.chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
    });
    count
        .and_then(|digits| digits.parse().ok())
        .unwrap_or_else(|| panic!("no shard count in /healthz: {body}"))
}

/// Creates a topic, produces one record and fetches it back.
fn serves_a_produce_and_a_fetch(kaas: &Kaas) {
    let mut client = kaas.client();
    client.create_topic("pinned", 2, &[]);
    for partition in 0..2 {
        let value = format!("record on partition {partition}");
        let batch = encode_batch_for_tests(
            &[(Some(b"key"), Some(value.as_bytes()))],
            1_700_000_000_000,
            -1,
            0,
            -1,
        );
        let answers = client.produce("pinned", vec![(partition, batch)]);
        assert_eq!(answers, vec![(partition, 0, 0)], "produce answers");
        let data = fetch_at(&mut client, "pinned", partition, 0);
        assert_eq!(data.high_watermark, 1, "high watermark of {partition}");
        let records = data.records.unwrap_or_default();
        assert!(
            records.windows(value.len()).any(|w| w == value.as_bytes()),
            "the fetch of partition {partition} returns the record produced"
        );
    }
}

/// The cpuset line of `/proc/<pid>/cgroup` (`3:cpuset:/path`): the cgroup's path.
fn cpuset_cgroup_of(pid: u32) -> String {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup");
    cgroups
        .lines()
        .find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            controllers
                .split(',')
                .any(|c| c == "cpuset")
                .then(|| path.to_string())
        })
        .unwrap_or_default()
}

fn as_strs(launcher: &[String]) -> Vec<&str> {
    launcher.iter().map(String::as_str).collect()
}

#[test]
fn a_broker_in_a_cpuset_cgroup_starts_and_stays_on_its_cpus() {
    let cgroup = CpusetCgroup::cpu_1_only("kaas-cpu-1");
    let dir = tempfile::tempdir().expect("tempdir");
    // No --shards: the default is one shard per CPU the broker may use.
    let mut kaas = Kaas::start_through(&as_strs(&cgroup.launcher()), Some(dir.path()), &[]);
    let name = cgroup.dir.file_name().expect("name").to_string_lossy();
    assert_eq!(
        cpuset_cgroup_of(kaas.pid()),
        format!("/{name}"),
        "kaas runs in the test's cpuset"
    );
    serves_a_produce_and_a_fetch(&kaas);
    every_thread_is_on_cpu_1(kaas.pid());
    assert_eq!(
        shards_of(&kaas),
        1,
        "one shard for the one CPU kaas may use"
    );
    assert!(kaas.terminate(), "kaas stops cleanly");
}

#[test]
fn a_broker_started_with_a_narrow_affinity_stays_on_its_cpus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start_through(&["taskset", "-c", "1"], Some(dir.path()), &[]);
    serves_a_produce_and_a_fetch(&kaas);
    every_thread_is_on_cpu_1(kaas.pid());
    assert_eq!(
        shards_of(&kaas),
        1,
        "one shard for the one CPU kaas may use"
    );
    assert!(kaas.terminate(), "kaas stops cleanly");
}

#[test]
fn more_shards_than_allowed_cpus_share_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start_through(
        &["taskset", "-c", "1"],
        Some(dir.path()),
        &["--shards", "2"],
    );
    serves_a_produce_and_a_fetch(&kaas);
    every_thread_is_on_cpu_1(kaas.pid());
    assert_eq!(shards_of(&kaas), 2, "both shards run, on the one CPU");
    assert!(kaas.terminate(), "kaas stops cleanly");
}
