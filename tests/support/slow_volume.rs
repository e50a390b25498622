//! A directory mounted again through FUSE by tests/slow-volume (a Go passthrough file system,
//! built here with `go build`), whose fsync and fdatasync the test can make slow: a volume
//! whose flushes stall, where tc netem and device-mapper do not work. Brokers given the
//! mount point as their data directory read and write the directory underneath, through the
//! kernel's FUSE client (O_DIRECT and io_uring included).
//!
//! Needs `/dev/fuse` and root (the server mounts with mount(2) itself). Unmounted when
//! dropped; if the test process dies first, the server sees its standard input close and
//! unmounts by itself.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

/// The mounted volume.
pub struct SlowVolume {
    /// Where the directory is mounted again.
    pub mountpoint: PathBuf,
    delay_file: PathBuf,
    child: Option<Child>,
    _stdin: Option<ChildStdin>,
    _dir: tempfile::TempDir,
}

impl SlowVolume {
    /// Builds the server (into a scratch directory) and mounts `source` through it.
    pub fn mount(source: &Path) -> SlowVolume {
        let dir = tempfile::Builder::new()
            .prefix("kaas-slow-volume-")
            .tempdir()
            .expect("tempdir");
        let binary = dir.path().join("slow-volume");
        let built = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&binary)
            .arg(".")
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/slow-volume"))
            .output()
            .expect("run go build (Go 1.26 or later is needed)");
        assert!(
            built.status.success(),
            "go build of tests/slow-volume failed: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        let mountpoint = dir.path().join("mnt");
        let delay_file = dir.path().join("fsync-delay-ms");
        std::fs::create_dir(&mountpoint).expect("mount point");
        std::fs::write(&delay_file, "0").expect("delay file");
        let mut child = Command::new(&binary)
            .arg("-source")
            .arg(source)
            .arg("-mount")
            .arg(&mountpoint)
            .arg("-delay-file")
            .arg(&delay_file)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start tests/slow-volume");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = ready_tx.send(line);
            }
        });
        let first = ready_rx.recv_timeout(Duration::from_secs(60));
        if first.as_deref() != Ok("READY") {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "tests/slow-volume did not mount {} (needs /dev/fuse and root): {first:?}",
                source.display()
            );
        }
        SlowVolume {
            mountpoint,
            delay_file,
            child: Some(child),
            _stdin: stdin,
            _dir: dir,
        }
    }

    /// From now on every fsync and fdatasync waits `delay` first (zero: none).
    pub fn set_fsync_delay(&self, delay: Duration) {
        let partial = self.delay_file.with_extension("partial");
        std::fs::write(&partial, delay.as_millis().to_string()).expect("write the delay");
        std::fs::rename(&partial, &self.delay_file).expect("rename the delay file");
        // The server reads the file every 50 ms.
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl Drop for SlowVolume {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: plain kill(2) on our own child's pid.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}
