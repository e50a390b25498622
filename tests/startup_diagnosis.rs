//! Start-up diagnosis: each environment problem is provoked for real (a memlock limit set
//! with `prlimit`, a ramfs data directory, an assignment naming brokers that never wrote to
//! this volume, the mount table of an NFS mount with its default caching) and the real binary
//! must exit with that problem's code and a message naming
//! the cause and the fix, before any shard starts. The seccomp case is in
//! `seccomp_profile.rs` (it needs the profile wrapper).

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use support::{free_port, run_to_exit, wait_for_healthz};

/// A kaas command on fresh loopback ports; `data_dir` as given.
fn kaas(program: &[&str], data_dir: &Path) -> (Command, std::net::SocketAddr) {
    let admin = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut command = Command::new(program[0]);
    command
        .args(&program[1..])
        .arg(env!("CARGO_BIN_EXE_kaas"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .arg("--admin-listen")
        .arg(admin.to_string())
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--shards", "1"])
        .env_remove("MY_POD_NAME")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    (command, admin)
}

/// Starts `command`, waits for `/healthz` on `admin`, then stops it with SIGTERM.
fn starts_and_stops(command: &mut Command, admin: std::net::SocketAddr) {
    let mut child = command.stderr(Stdio::inherit()).spawn().expect("spawn");
    let ready = wait_for_healthz(&mut child, admin, "kaas exited during start-up");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().expect("wait");
    assert!(ready, "kaas never became ready");
    assert!(status.success(), "kaas did not stop cleanly: {status}");
}

#[test]
fn a_memlock_limit_below_glommios_floor_is_explained() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 511 KiB: one byte under what glommio 0.9 needs to build a ring.
    let (mut command, _) = kaas(&["prlimit", "--memlock=523264"], dir.path());
    let (status, stderr) = run_to_exit(&mut command, "kaas did not exit within 30 s");
    assert_eq!(status.code(), Some(11), "{stderr}");
    assert!(stderr.contains("locked-memory limit"), "{stderr}");
    assert!(stderr.contains("511 KiB"), "{stderr}");
    assert!(stderr.contains("Fix:"), "{stderr}");
    // At the floor itself kaas runs (with unregistered buffers).
    let (mut command, admin) = kaas(&["prlimit", "--memlock=524288"], dir.path());
    starts_and_stops(&mut command, admin);
}

/// A ramfs mount (tmpfs takes O_DIRECT since Linux 6.6, ramfs never does), unmounted on drop.
struct Ramfs(tempfile::TempDir);

impl Ramfs {
    fn mount() -> Ramfs {
        let dir = tempfile::tempdir().expect("tempdir");
        let status = Command::new("mount")
            .args(["-t", "ramfs", "ramfs"])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(status.success(), "mount -t ramfs needs root: {status}");
        Ramfs(dir)
    }
}

impl Drop for Ramfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_data_directory_without_direct_io_is_explained() {
    let ramfs = Ramfs::mount();
    let data = ramfs.0.path().join("data");
    let (mut command, _) = kaas(&["env"], &data);
    let (status, stderr) = run_to_exit(&mut command, "kaas did not exit within 30 s");
    assert_eq!(status.code(), Some(12), "{stderr}");
    assert!(stderr.contains("does not support direct I/O"), "{stderr}");
    assert!(stderr.contains("ramfs"), "{stderr}");
    // The probe leaves nothing behind.
    let left: Vec<_> = std::fs::read_dir(&data).expect("read").flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}

const ASSIGNMENT: &str = r#"{"format": 1, "controller_epoch": 1, "assignment_version": 1,
 "brokers": [{"id": 0, "host": "127.0.0.1", "port": 19090},
             {"id": 1, "host": "127.0.0.1", "port": 19091},
             {"id": 2, "host": "127.0.0.1", "port": 19092}],
 "topics": {}, "partitions": {}, "consumerGroups": {}}"#;

fn write_assignment(data: &Path, age: Duration) {
    let cluster = kaas_volume::cluster_dir(data);
    std::fs::create_dir_all(&cluster).expect("mkdir");
    let path = cluster.join("assignment.json");
    std::fs::write(&path, ASSIGNMENT).expect("write");
    let file = std::fs::File::options()
        .write(true)
        .open(&path)
        .expect("open");
    file.set_modified(SystemTime::now() - age).expect("mtime");
}

#[test]
fn a_volume_without_the_other_brokers_markers_is_not_shared() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    // A minute-old assignment naming brokers 1 and 2, which never wrote to this volume.
    write_assignment(&data, Duration::from_secs(60));
    let (mut command, _) = kaas(
        &["env", "MY_POD_NAME=kaas-0", "KAAS_ASSIGNMENT_SOURCE=file"],
        &data,
    );
    let (status, stderr) = run_to_exit(&mut command, "kaas did not exit within 30 s");
    assert_eq!(status.code(), Some(13), "{stderr}");
    assert!(stderr.contains("does not look shared"), "{stderr}");
    assert!(stderr.contains("broker(s) 1, 2"), "{stderr}");
    assert!(stderr.contains("ReadWriteMany"), "{stderr}");
    // The refused broker still left its own marker, so the others can see it.
    assert!(data
        .join(kaas_volume::CLUSTER_DIR)
        .join(kaas_volume::BROKER_MARKERS_DIR)
        .join("0")
        .exists());

    // Once broker 1 and 2 have been here (their markers), broker 0 starts.
    for other in [1, 2] {
        let marker = kaas_volume::cluster_dir(&data)
            .join(kaas_volume::BROKER_MARKERS_DIR)
            .join(other.to_string());
        std::fs::write(marker, "x\n").expect("marker");
    }
    let (mut command, admin) = kaas(
        &["env", "MY_POD_NAME=kaas-0", "KAAS_ASSIGNMENT_SOURCE=file"],
        &data,
    );
    starts_and_stops(&mut command, admin);

    // A fresh assignment may name brokers still starting: no refusal.
    let fresh = tempfile::tempdir().expect("tempdir");
    let fresh_data = fresh.path().join("data");
    write_assignment(&fresh_data, Duration::ZERO);
    let (mut command, admin) = kaas(
        &["env", "MY_POD_NAME=kaas-0", "KAAS_ASSIGNMENT_SOURCE=file"],
        &fresh_data,
    );
    starts_and_stops(&mut command, admin);
}

/// A kaas command (cluster mode, file source) that sees `mount_table` as its
/// `/proc/self/mountinfo`: bind-mounted over it in a private mount namespace, then exec'd,
/// so the real binary reads the table an NFS mount of its data directory would show. (This
/// kernel has no NFS client, so a real NFS mount cannot be made here.)
fn kaas_seeing_mounts(mount_table: &Path, data: &Path) -> (Command, std::net::SocketAddr) {
    let table = mount_table.to_str().expect("utf-8 path");
    kaas(
        &[
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            r#"mount --bind "$0" /proc/$$/mountinfo && exec "$@""#,
            table,
            "env",
            "MY_POD_NAME=kaas-0",
            "KAAS_ASSIGNMENT_SOURCE=file",
        ],
        data,
    )
}

/// This machine's mount table plus an NFSv4 mount of `point` with `options`.
fn mount_table_with_nfs(dir: &Path, point: &Path, options: &str) -> std::path::PathBuf {
    mount_table_with(dir, point, "nfs4", options)
}

/// This machine's mount table plus a mount of type `fs_type` at `point` with `options`.
fn mount_table_with(dir: &Path, point: &Path, fs_type: &str, options: &str) -> std::path::PathBuf {
    let mut table = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let point = std::fs::canonicalize(point).expect("canonical");
    table.push_str(&format!(
        "4242 1 0:4242 / {} rw,relatime shared:4242 - {fs_type} nfs.example:/kaas {options}\n",
        point.display()
    ));
    let path = dir.join(format!("mountinfo-{}", table.len()));
    std::fs::write(&path, table).expect("write mount table");
    path
}

#[test]
fn an_nfs_volume_with_lookup_caching_is_refused_in_cluster_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");

    // NFS's defaults: lookupcache=all and directory attribute caching, as mountinfo lists them.
    let defaults = mount_table_with_nfs(
        dir.path(),
        &data,
        "rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys",
    );
    let (mut command, _) = kaas_seeing_mounts(&defaults, &data);
    let (status, stderr) = run_to_exit(&mut command, "kaas did not exit within 30 s");
    assert_eq!(status.code(), Some(14), "{stderr}");
    assert!(stderr.contains("breaks the partition fence"), "{stderr}");
    assert!(stderr.contains("lookupcache=none"), "{stderr}");
    assert!(stderr.contains("actimeo=0"), "{stderr}");

    // Only the lookup cache turned off: the attribute caching is still named.
    let lookups_off = mount_table_with_nfs(dir.path(), &data, "rw,vers=4.2,lookupcache=none");
    let (mut command, _) = kaas_seeing_mounts(&lookups_off, &data);
    let (status, stderr) = run_to_exit(&mut command, "kaas did not exit within 30 s");
    assert_eq!(status.code(), Some(14), "{stderr}");
    assert!(!stderr.contains("it lacks lookupcache=none"), "{stderr}");
    assert!(stderr.contains("actimeo=0"), "{stderr}");

    // Mounted as deploy/README.md asks (lookupcache=none,actimeo=0): kaas starts.
    let coherent = mount_table_with_nfs(
        dir.path(),
        &data,
        "rw,vers=4.2,hard,acregmin=0,acregmax=0,acdirmin=0,acdirmax=0,lookupcache=none",
    );
    let (mut command, admin) = kaas_seeing_mounts(&coherent, &data);
    starts_and_stops(&mut command, admin);
}

#[test]
fn an_nfs_volume_without_nfsv4_close_to_open_is_refused_in_cluster_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    // Caching off as deploy/README.md asks, so only the version or nocto is wrong.
    let coherent = "hard,acregmin=0,acregmax=0,acdirmin=0,acdirmax=0,lookupcache=none";

    // NFSv3: the kernel lists it as type nfs with vers=3.
    let v3 = mount_table_with(
        dir.path(),
        &data,
        "nfs",
        &format!("rw,vers=3,{coherent},mountvers=3,mountproto=udp"),
    );
    let (mut command, _) = kaas_seeing_mounts(&v3, &data);
    let (status, stderr) = run_to_exit(&mut command, "kaas did not exit within 30 s");
    assert_eq!(status.code(), Some(14), "{stderr}");
    assert!(stderr.contains("it is NFS vers=3"), "{stderr}");
    assert!(stderr.contains("close-to-open"), "{stderr}");
    assert!(stderr.contains("vers=4.1 or vers=4.2"), "{stderr}");
    assert!(!stderr.contains("it lacks"), "{stderr}");

    // NFSv4 with nocto.
    let nocto = mount_table_with_nfs(dir.path(), &data, &format!("rw,vers=4.2,{coherent},nocto"));
    let (mut command, _) = kaas_seeing_mounts(&nocto, &data);
    let (status, stderr) = run_to_exit(&mut command, "kaas did not exit within 30 s");
    assert_eq!(status.code(), Some(14), "{stderr}");
    assert!(stderr.contains("mounted with nocto"), "{stderr}");
    assert!(stderr.contains("without nocto"), "{stderr}");
    assert!(!stderr.contains("it is NFS vers"), "{stderr}");
}
