//! A small tmpfs that fills up, for tests of what a full disk does. Mounting needs root
//! (CAP_SYS_ADMIN); without it the test using it fails rather than passing without having
//! run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a fresh directory, unmounted on drop.
pub struct SmallTmpfs {
    _dir: tempfile::TempDir,
    mount_point: PathBuf,
}

impl SmallTmpfs {
    pub fn mount(size: &str) -> SmallTmpfs {
        let dir = tempfile::tempdir().expect("tempdir");
        let mount_point = dir.path().join("volume");
        std::fs::create_dir(&mount_point).expect("mount point");
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&mount_point)
            .status()
            .expect("run mount");
        assert!(
            status.success(),
            "mounting a tmpfs failed ({status}); this test needs root to fill a real file system"
        );
        SmallTmpfs {
            _dir: dir,
            mount_point,
        }
    }

    pub fn grow(&self, size: &str) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.mount_point)
            .status()
            .expect("run mount");
        assert!(status.success(), "remounting the tmpfs failed ({status})");
    }

    pub fn root(&self) -> &Path {
        &self.mount_point
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        // An executor's io_uring lets go of its files shortly after the executor stops.
        for _ in 0..50 {
            let unmounted = Command::new("umount")
                .arg(&self.mount_point)
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if unmounted {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mount_point)
            .status();
    }
}
