//! A broker of a cluster-mode test: a real `kaas` process with `MY_POD_NAME` set, sharing a
//! data directory with the others, killed when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, http_get};

/// One broker of the cluster, killed when dropped.
pub struct Broker {
    pub id: i32,
    pub kafka: SocketAddr,
    pub admin: SocketAddr,
    data_dir: PathBuf,
    child: Option<Child>,
}

impl Broker {
    pub fn new(id: i32, data_dir: &Path) -> Broker {
        Broker {
            id,
            kafka: SocketAddr::from(([127, 0, 0, 1], free_port())),
            admin: SocketAddr::from(([127, 0, 0, 1], free_port())),
            data_dir: data_dir.to_path_buf(),
            child: None,
        }
    }

    pub fn start(&mut self) {
        let child = Command::new(env!("CARGO_BIN_EXE_kaas"))
            .env("MY_POD_NAME", format!("kaas-{}", self.id))
            .env("RUST_LOG", "warn")
            .args(["--listen", &self.kafka.to_string()])
            .args(["--admin-listen", &self.admin.to_string()])
            .args(["--advertised-host", "127.0.0.1"])
            .args(["--advertised-port", &self.kafka.port().to_string()])
            .args(["--assignment-source", "file", "--shards", "2"])
            .arg("--data-dir")
            .arg(&self.data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn kaas");
        self.child = Some(child);
    }

    /// Waits until the broker's `/healthz` reports assignment `version` (panics after 30 s).
    pub fn wait_for_version(&mut self, version: u64) {
        let wanted = format!("\"assignment_version\":{version}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!("broker {} exited: {status}", self.id);
            }
            if http_get(self.admin, "/healthz").is_some_and(|(_, body)| body.contains(&wanted)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("broker {} never applied assignment {version}", self.id);
    }

    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM and a clean exit.
    pub fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                assert!(status.success(), "broker {} exited with {status}", self.id);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("broker {} did not stop on SIGTERM", self.id);
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.kill9();
    }
}
