//! Real `kaas` processes in cluster mode for benchmarks, and the `assignment.json` they
//! follow.
//!
//! A broker runs with `MY_POD_NAME=kaas-<id>` and `--assignment-source file`, its own Kafka
//! and admin ports, and the data directory it shares with the others; the benchmark writes
//! `<data>/__cluster/assignment.json` as an operator would (temporary file, fsync, rename,
//! directory fsync), in the shape kaas-cluster documents.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// A Kafka topic id (base64url, 22 characters) for the benchmark's topic.
pub const TOPIC_ID: &str = "ASNFZ4mrze_-3LqYdlQyEA";

/// A free port on loopback (the kernel's choice).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One broker process, stopped when dropped.
pub struct ClusterBroker {
    pub id: i32,
    pub kafka: SocketAddr,
    pub admin: SocketAddr,
    child: Option<Child>,
}

impl ClusterBroker {
    /// Starts broker `id` of a cluster sharing `data_dir`.
    pub fn start(kaas: &Path, id: i32, data_dir: &Path, shards: usize) -> anyhow::Result<Self> {
        let kafka = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let admin = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let child = Command::new(kaas)
            .env("MY_POD_NAME", format!("kaas-{id}"))
            .env("RUST_LOG", "warn")
            .args(["--listen", &kafka.to_string()])
            .args(["--admin-listen", &admin.to_string()])
            .args(["--advertised-host", "127.0.0.1"])
            .args(["--advertised-port", &kafka.port().to_string()])
            .args(["--assignment-source", "file"])
            .args(["--shards", &shards.to_string()])
            .arg("--data-dir")
            .arg(data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", kaas.display()))?;
        Ok(ClusterBroker {
            id,
            kafka,
            admin,
            child: Some(child),
        })
    }

    /// Waits until `/healthz` reports assignment `version` (at most `timeout`).
    pub fn wait_for_version(&mut self, version: u64, timeout: Duration) -> anyhow::Result<()> {
        let wanted = format!("\"assignment_version\":{version}");
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut() {
                if let Some(status) = child.try_wait()? {
                    bail!("broker {} exited: {status}", self.id);
                }
            }
            if http_get(self.admin, "/healthz").is_some_and(|body| body.contains(&wanted)) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("broker {} never applied assignment {version}", self.id)
    }

    /// Descriptors the process has open now (`/proc/<pid>/fd`); `None` once stopped.
    pub fn open_descriptors(&self) -> Option<usize> {
        let pid = self.child.as_ref()?.id();
        Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
    }

    /// CPU time the process has used so far, user plus system (`/proc/<pid>/stat`);
    /// `None` once stopped or when unreadable.
    pub fn cpu_time(&self) -> Option<Duration> {
        let pid = self.child.as_ref()?.id();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        (per_second > 0).then(|| Duration::from_secs_f64(ticks as f64 / per_second as f64))
    }

    /// SIGKILL (a broker that dies), then waits for the exit.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then waits for the exit (kill -9 after 60 s).
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for ClusterBroker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text.split("\r\n\r\n").nth(1).unwrap_or("").to_string())
}

/// Writes `<data>/__cluster/assignment.json`: `brokers` (all live), one topic of
/// `partitions` partitions, every one led by `leader` at `leader_epoch`.
pub fn write_assignment(
    data_dir: &Path,
    brokers: &[&ClusterBroker],
    version: u64,
    topic: &str,
    partitions: usize,
    leader: i32,
    leader_epoch: i32,
) -> anyhow::Result<()> {
    let brokers: Vec<String> = brokers
        .iter()
        .map(|b| {
            format!(
                r#"{{"id": {}, "host": "127.0.0.1", "port": {}}}"#,
                b.id,
                b.kafka.port()
            )
        })
        .collect();
    let leaders =
        vec![format!(r#"{{"leader": {leader}, "leader_epoch": {leader_epoch}}}"#); partitions];
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
  "brokers": [{}],
  "topics": {{"{topic}": {{"id": "{TOPIC_ID}", "partitions": {partitions}}}}},
  "partitions": {{"{topic}": [{}]}},
  "consumerGroups": {{}}}}"#,
        brokers.join(", "),
        leaders.join(", ")
    );
    let dir = cluster_dir(data_dir);
    std::fs::create_dir_all(&dir)?;
    let tmp = dir.join("assignment.json.tmp");
    {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
    }
    std::fs::rename(&tmp, dir.join("assignment.json"))?;
    std::fs::File::open(&dir)?.sync_all()?;
    Ok(())
}

fn cluster_dir(data_dir: &Path) -> PathBuf {
    kaas_volume::cluster_dir(data_dir)
}
