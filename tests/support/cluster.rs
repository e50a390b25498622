//! A broker of a cluster-mode test: a real `kaas` process with `MY_POD_NAME` set, sharing a
//! data directory with the others, killed when dropped. [`Broker::new`] follows a file the
//! test writes (`--assignment-source file`, ports picked at random on 127.0.0.1);
//! [`Broker::pod`] is a broker as a pod runs it: its own address, the default ports, and the
//! source and environment the caller gives (tests/support/kube_cluster.rs).

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, http_get};

/// One broker of the cluster, killed when dropped.
pub struct Broker {
    pub id: i32,
    pub kafka: SocketAddr,
    pub admin: SocketAddr,
    /// The heartbeat listener (`--heartbeat-listen`); `None` leaves the flag out.
    pub heartbeat: Option<SocketAddr>,
    data_dir: PathBuf,
    /// `--assignment-source` and any other flags of this broker.
    args: Vec<String>,
    env: Vec<(String, String)>,
    child: Option<Child>,
    /// Between [`Broker::pause`] and [`Broker::resume`].
    pub paused: bool,
    /// Where the process's stderr (its log) goes, appended across restarts; `None`: the
    /// test's own stderr.
    pub log: Option<PathBuf>,
}

impl Broker {
    pub fn new(id: i32, data_dir: &Path) -> Broker {
        Broker {
            id,
            kafka: SocketAddr::from(([127, 0, 0, 1], free_port())),
            admin: SocketAddr::from(([127, 0, 0, 1], free_port())),
            heartbeat: None,
            data_dir: data_dir.to_path_buf(),
            args: vec!["--assignment-source".into(), "file".into()],
            env: Vec::new(),
            child: None,
            paused: false,
            log: None,
        }
    }

    /// Broker `id` as pod `kaas-<id>` runs it: on its own address `ip` with the default ports
    /// (Kafka 9092, admin 9644, heartbeat 9094), with `args` (the assignment source and its
    /// flags) and `env` (e.g. `KUBECONFIG`, `POD_NAMESPACE`).
    pub fn pod(
        id: i32,
        ip: Ipv4Addr,
        data_dir: &Path,
        args: &[String],
        env: &[(String, String)],
    ) -> Broker {
        Broker {
            id,
            kafka: SocketAddr::from((ip, 9092)),
            admin: SocketAddr::from((ip, 9644)),
            heartbeat: Some(SocketAddr::from((ip, 9094))),
            data_dir: data_dir.to_path_buf(),
            args: args.to_vec(),
            env: env.to_vec(),
            child: None,
            paused: false,
            log: None,
        }
    }

    pub fn start(&mut self) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kaas"));
        command
            .env("MY_POD_NAME", format!("kaas-{}", self.id))
            // As the StatefulSet's downward API does: the heartbeat endpoint the controller
            // publishes is this address, not the advertised host.
            .env("MY_POD_IP", self.kafka.ip().to_string())
            .env("RUST_LOG", "warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(["--listen", &self.kafka.to_string()])
            .args(["--admin-listen", &self.admin.to_string()])
            .args(["--advertised-host", &self.kafka.ip().to_string()])
            .args(["--advertised-port", &self.kafka.port().to_string()])
            .args(["--shards", "2"])
            .args(&self.args);
        if let Some(heartbeat) = self.heartbeat {
            command.args(["--heartbeat-listen", &heartbeat.to_string()]);
        }
        let stderr = match &self.log {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .expect("open the broker's log"),
            ),
            None => Stdio::inherit(),
        };
        let child = command
            .arg("--data-dir")
            .arg(&self.data_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn kaas");
        self.child = Some(child);
    }

    /// What the broker logged so far (empty without [`Broker::log`]).
    pub fn log_text(&self) -> String {
        self.log
            .as_ref()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .unwrap_or_default()
    }

    /// Whether the process runs (paused counts as running).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// How the process ended, if it was started and has ended by itself (not by
    /// [`Broker::kill9`] or [`Broker::terminate`], which forget it).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Waits (at most 30 s) until nothing accepts connections on this broker's ports any
    /// more: a stopped broker's listeners are gone before the next one binds them.
    pub fn wait_for_ports_closed(&self) {
        let ports = [Some(self.kafka), Some(self.admin), self.heartbeat];
        let deadline = Instant::now() + Duration::from_secs(30);
        for addr in ports.into_iter().flatten() {
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                assert!(
                    Instant::now() < deadline,
                    "broker {}: {addr} still accepts connections",
                    self.id
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
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

    /// SIGSTOP: the process stays, frozen, with its sockets, files and memory (a broker the
    /// kernel paused, as a long GC pause or a stalled VM would).
    pub fn pause(&mut self) {
        self.signal(libc::SIGSTOP);
        self.paused = true;
        self.wait_until_stopped();
    }

    /// kill(2) returns once SIGSTOP is queued, not once every thread has stopped: a thread
    /// still running on another core could answer a request sent right after `pause`. Waits
    /// until `/proc` shows every thread of the broker stopped (state `T`).
    fn wait_until_stopped(&self) {
        let pid = self.child.as_ref().expect("broker running").id();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc tasks");
            let running = tasks.filter_map(Result::ok).any(|task| {
                let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
                // The state follows the parenthesised command name.
                let state = stat
                    .rsplit_once(") ")
                    .and_then(|(_, rest)| rest.chars().next());
                state.is_some_and(|state| state != 'T' && state != 't')
            });
            if !running {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "broker {} did not stop within 10 s of SIGSTOP",
                self.id
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGCONT after [`Broker::pause`]: it carries on where it stopped, still believing
    /// whatever it believed.
    pub fn resume(&mut self) {
        self.signal(libc::SIGCONT);
        self.paused = false;
    }

    fn signal(&mut self, signal: i32) {
        let child = self.child.as_ref().expect("broker running");
        // SAFETY: plain kill(2) on our own child's pid.
        let sent = unsafe { libc::kill(child.id() as i32, signal) };
        assert_eq!(sent, 0, "signal {signal} to broker {}", self.id);
    }

    /// Waits until the broker's `/healthz` shows `field` (e.g. `"partitions_open":2`), panics
    /// after 30 s with what it showed.
    pub fn wait_for_health(&mut self, field: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some((_, body)) = http_get(self.admin, "/healthz") {
                if body.contains(field) {
                    return;
                }
                last = body;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("broker {} never showed {field}: {last}", self.id);
    }

    pub fn kill9(&mut self) {
        self.paused = false;
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
        // A paused process is killed by SIGKILL as well.
        self.kill9();
    }
}

/// A broker's entry in an assignment: id and Kafka port (host 127.0.0.1).
pub fn endpoint(broker: &Broker) -> (i32, u16) {
    (broker.id, broker.kafka.port())
}

/// Every broker's entry in an assignment (see [`endpoint`]).
pub fn endpoints(brokers: &[Broker]) -> Vec<(i32, u16)> {
    brokers.iter().map(endpoint).collect()
}

/// The brokers' Kafka addresses as a client's bootstrap list (`host:port,host:port,...`).
pub fn bootstrap(brokers: &[Broker]) -> String {
    brokers
        .iter()
        .map(|b| b.kafka.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Brokers `0..count` on the one data directory `data_dir` they share, following its
/// assignment file; creates `<data_dir>/__cluster`. None is started yet.
pub fn file_brokers(count: i32, data_dir: &Path) -> Vec<Broker> {
    std::fs::create_dir_all(kaas_volume::cluster_dir(data_dir)).expect("cluster dir");
    (0..count).map(|id| Broker::new(id, data_dir)).collect()
}

/// Starts every broker, then waits until each has applied assignment `version` (all are
/// started before the first wait, so their start-ups overlap).
pub fn start_all(brokers: &mut [Broker], version: u64) {
    for broker in brokers.iter_mut() {
        broker.start();
    }
    for broker in brokers.iter_mut() {
        broker.wait_for_version(version);
    }
}

/// Writes `assignment.json` into `cluster_dir` (atomically, with kaas-cluster-file's writer):
/// assignment `version` of controller epoch 1 with `brokers`, one topic `topic` (a fixed
/// topic id) whose partition `i` is led by `leaders[i]` = (broker, leader epoch), and
/// `groups` = (group, coordinator).
pub fn write_assignment(
    cluster_dir: &Path,
    version: u64,
    brokers: &[(i32, u16)],
    topic: &str,
    leaders: &[(i32, i32)],
    groups: &[(&str, i32)],
) {
    let brokers: Vec<String> = brokers
        .iter()
        .map(|(id, port)| format!(r#"{{"id": {id}, "host": "127.0.0.1", "port": {port}}}"#))
        .collect();
    let partitions: Vec<String> = leaders
        .iter()
        .map(|(leader, epoch)| format!(r#"{{"leader": {leader}, "leader_epoch": {epoch}}}"#))
        .collect();
    let groups: Vec<String> = groups
        .iter()
        .map(|(group, broker)| format!(r#""{group}": {broker}"#))
        .collect();
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
            "brokers": [{}],
            "topics": {{"{topic}": {{"id": "ASNFZ4mrze_-3LqYdlQyEA", "partitions": {}}}}},
            "partitions": {{"{topic}": [{}]}},
            "consumerGroups": {{{}}}}}"#,
        brokers.join(", "),
        leaders.len(),
        partitions.join(", "),
        groups.join(", ")
    );
    let assignment =
        kaas_cluster::assignment::Assignment::from_json(text.as_bytes()).expect("valid");
    kaas_cluster_file::write_assignment(cluster_dir, &assignment).expect("write assignment.json");
}

/// Makes `private` a data directory that shares every file of the data directory `shared`
/// (partitions, groups, producer-id blocks, the cluster id: symlinks) except
/// `__cluster/assignment.json`, its own. A broker on it follows only the assignments written
/// there: a broker whose view of the assignment lags for as long as the test wants, while it
/// still writes the same volume as the others.
pub fn lagging_view_dir(shared: &Path, private: &Path) {
    let blocks = kaas_volume::in_cluster_dir(kaas_volume::PRODUCER_ID_BLOCKS_DIR);
    let cluster_id_file = kaas_volume::in_cluster_dir(kaas_volume::CLUSTER_ID_FILE);
    let topics = Path::new(kaas_volume::TOPICS_DIR);
    let groups = Path::new(kaas_volume::GROUPS_DIR);
    for dir in [topics, groups, &blocks] {
        std::fs::create_dir_all(shared.join(dir)).expect("shared dir");
    }
    std::fs::create_dir_all(kaas_volume::cluster_dir(private)).expect("private dir");
    let cluster_id = shared.join(&cluster_id_file);
    if !cluster_id.exists() {
        std::fs::write(&cluster_id, "q83vEjRWeJCrze8SNFZ4kA").expect("cluster id");
    }
    for name in [topics, groups, &blocks, &cluster_id_file] {
        std::os::unix::fs::symlink(shared.join(name), private.join(name)).expect("symlink");
    }
}

/// tests/clients/python/cluster_moves.py (librdkafka phases of the cluster tests) against
/// `bootstrap`, for `topic`, with the phase and its `args`.
pub fn cluster_moves(bootstrap: &str, topic: &str, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new("python3");
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/clients/python/cluster_moves.py"
        ))
        .args(["--bootstrap", bootstrap])
        .args(args)
        .args(["--topic", topic])
        .stdout(Stdio::piped());
    command
}

/// Waits for a cluster_moves.py phase and asserts it passed.
pub fn finish(child: Child, what: &str) {
    let output = child.wait_with_output().expect("wait for python3");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("PASS"),
        "{what} failed: {stdout}"
    );
}

/// Runs a cluster_moves.py phase to completion and asserts it passed.
pub fn run(mut command: std::process::Command, what: &str) {
    finish(command.spawn().expect("spawn python3"), what);
}

/// A real-client process of a cluster test (the Java or franz-go `cluster-moves` scenario),
/// its stdout collected line by line while it runs; killed when dropped.
pub struct ClientRun {
    what: String,
    child: Option<Child>,
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// What a client printed in cluster_moves.py's file formats: its `ACKED` lines as
/// "partition offset value" lines, its `COMMITTED` lines as "partition offset" lines.
pub struct ClientLines {
    pub acked: String,
    pub committed: String,
}

impl ClientRun {
    pub fn spawn(mut command: Command, what: &str) -> ClientRun {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {what} (built by tests/clients/prepare.sh): {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = lines.clone();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        ClientRun {
            what: what.to_string(),
            child: Some(child),
            lines,
            reader: Some(reader),
        }
    }

    /// Waits until the client printed `line` (panics after 60 s, or if it exited first).
    pub fn wait_for_line(&mut self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.printed().iter().any(|l| l == line) {
                return;
            }
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            assert!(
                exited.is_none() && Instant::now() < deadline,
                "{} never printed {line} (exit {exited:?}): {}",
                self.what,
                self.summary()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the client, asserts it passed, and returns what it acknowledged and committed.
    pub fn finish(mut self) -> ClientLines {
        let status = self
            .child
            .take()
            .expect("running")
            .wait()
            .expect("wait for the client");
        if let Some(reader) = self.reader.take() {
            reader.join().expect("stdout reader");
        }
        let lines = self.printed();
        assert!(
            status.success() && lines.iter().any(|l| l.starts_with("PASS ")),
            "{} failed ({status}): {}",
            self.what,
            self.summary()
        );
        let collect = |prefix: &str| {
            lines
                .iter()
                .filter_map(|l| l.strip_prefix(prefix))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
        };
        ClientLines {
            acked: collect("ACKED "),
            committed: collect("COMMITTED "),
        }
    }

    fn printed(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Everything printed but the records.
    fn summary(&self) -> String {
        self.printed()
            .into_iter()
            .filter(|l| !l.starts_with("ACKED "))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for ClientRun {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The Java `cluster-moves` scenario (tests/clients/java, ClusterMoves.java): an idempotent
/// producer of `records` records and a consumer in `group`, on `topic`, at once.
pub fn java_cluster_moves(bootstrap: &str, topic: &str, group: &str, records: usize) -> ClientRun {
    java_cluster_moves_paced(bootstrap, topic, group, records, 4)
}

/// [`java_cluster_moves`] with `pace_ms` between two sends (`kaas.cluster.pace-ms`), so the
/// run spans as long as the test needs (about `records × pace_ms`).
pub fn java_cluster_moves_paced(
    bootstrap: &str,
    topic: &str,
    group: &str,
    records: usize,
    pace_ms: u64,
) -> ClientRun {
    let jar = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients/java/target/kaas-java-scenarios.jar");
    let mut command = Command::new("java");
    command
        .arg(format!("-Dkaas.cluster.topic={topic}"))
        .arg(format!("-Dkaas.cluster.group={group}"))
        .arg(format!("-Dkaas.cluster.pace-ms={pace_ms}"))
        .arg("-jar")
        .arg(jar)
        .args(["--bootstrap", bootstrap, "--scenario", "cluster-moves"])
        .args(["--records", &records.to_string()]);
    ClientRun::spawn(command, "the Java cluster-moves client")
}

/// The franz-go `cluster-moves` phase (tests/clients/go/cluster_moves.go): the same as
/// [`java_cluster_moves`] with franz-go.
pub fn go_cluster_moves(bootstrap: &str, topic: &str, group: &str, records: usize) -> ClientRun {
    let mut command =
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/go/scenarios"));
    command
        .args(["-bootstrap", bootstrap, "-scenario", "cluster-moves"])
        .args(["-topic", topic, "-group", group])
        .args(["-records", &records.to_string()]);
    ClientRun::spawn(command, "the franz-go cluster-moves client")
}

/// Appends `lines` (one record or commit a line) to the file at `path`.
pub fn append_lines(path: &Path, lines: &str) {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(lines.as_bytes()))
        .expect("append to the records file");
}

/// The first group id `<prefix>-<n>` that the fallback rule places on broker 1 of brokers
/// 0 and 1, so the assignment need not name it for both to agree it is broker 1's.
pub fn group_whose_fallback_is_broker_1(prefix: &str) -> String {
    use kaas_cluster::ids::{BrokerId, GroupId};
    use kaas_cluster::placement::fallback_coordinator;
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .find(|group| {
            fallback_coordinator(&GroupId::new(group), [BrokerId(0), BrokerId(1)])
                == Some(BrokerId(1))
        })
        .expect("some group hashes to broker 1")
}
