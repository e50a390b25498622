//! Fault injection with a checker: three `kaas` brokers on a real API server
//! (tests/support/kube_cluster.rs), idempotent producers (acks=all) of two client libraries
//! (librdkafka through confluent-kafka, franz-go) and consumer groups of both protocols
//! (librdkafka classic and KIP-848, two members each; franz-go classic) run while a seeded
//! schedule (tests/support/fault_schedule.rs) injects, one after another: kill -9 and SIGSTOP
//! of a broker and of the controller (some pauses longer than the Lease), a broker marked not
//! ready in the EndpointSlice, the API server cut off from one broker (each broker reaches it
//! through a TCP proxy of its own), and a slow volume (the brokers' shared data directory is
//! mounted through a FUSE passthrough, tests/slow-volume, that can delay every fsync). Each
//! fault is undone after its hold time (restart, SIGCONT, ready again, proxy restored, fsync
//! prompt again) and the next comes once the cluster has recovered: every broker in the
//! assignment leading partitions, and both producers acknowledged again on every partition.
//!
//! Afterwards the whole log of every partition is read from offset 0 and the checker
//! (tests/support/fault_checker.rs) compares it with every acknowledgement, poll and commit
//! the clients logged: it asserts no lost write, no duplicate, no inconsistent offset, no
//! non-monotonic send and no offset committed past a record its group had not read, and it
//! prints every unavailability window with the fault it overlaps and the figures per fault
//! kind.
//!
//! The short run here takes `KAAS_FAULT_SECONDS` (default 75) of faults from seed
//! `KAAS_FAULT_SEED` (default 1), with a 3 s Lease renewed every second; with
//! `KAAS_FAULT_LEASE=default` the brokers keep the default Lease (15 s, renewed every 2 s).
//! `KAAS_FAULT_KEEP=<dir>` keeps the clients' event logs, the final log, the broker logs and
//! the report in `<dir>` (a failing run keeps them under the target directory anyway).
//! Needs `tests/clients/prepare.sh` (confluent-kafka, franz-go's modules), Go, `/dev/fuse`
//! and root.

mod support;

#[path = "support/fault_checker.rs"]
mod fault_checker;
#[path = "support/fault_schedule.rs"]
mod fault_schedule;
#[path = "support/slow_volume.rs"]
mod slow_volume;

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fault_checker::{Fault, History};
use fault_schedule::{FaultKind, Schedule, Step};
use kaas_cluster::assignment::Assignment;
use kaas_cluster::ids::BrokerId;
use slow_volume::SlowVolume;
use support::cluster::Broker;
use support::kube_cluster::{Endpoint, KubeCluster, Reach};
use support::tcp_proxy::TcpProxy;

const TOPIC: &str = "ledger";
const PARTITIONS: i32 = 6;
const BROKERS: i32 = 3;
const PRODUCERS: [&str; 2] = ["py", "go"];
/// (group, protocol, members): the librdkafka groups (fault_clients.py) and franz-go's.
const PY_GROUPS: [(&str, &str, [&str; 2]); 2] = [
    ("fault-classic", "classic", ["c1", "c2"]),
    ("fault-kip848", "consumer", ["k1", "k2"]),
];
const GO_GROUP: &str = "fault-go";
const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/clients/python/fault_clients.py"
);
/// Gaps between acknowledgements listed as unavailability windows.
const WINDOW_THRESHOLD_MS: u64 = 1000;
/// Bound of each wait for the cluster to recover or the clients to finish: generous, as the
/// machine may be loaded; never a figure the test asserts on.
const RECOVER: Duration = Duration::from_secs(180);

fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text} is not a number")),
        Err(_) => default,
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

/// Reads the lines a client appends to a file, as they come.
struct Follow {
    path: PathBuf,
    position: u64,
    partial: String,
}

impl Follow {
    fn new(path: PathBuf) -> Follow {
        Follow {
            path,
            position: 0,
            partial: String::new(),
        }
    }

    /// The complete lines appended since the last call.
    fn new_lines(&mut self) -> Vec<String> {
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return Vec::new();
        };
        let mut text = String::new();
        if file.seek(SeekFrom::Start(self.position)).is_err()
            || file.read_to_string(&mut text).is_err()
        {
            return Vec::new();
        }
        self.position += text.len() as u64;
        self.partial.push_str(&text);
        let Some(end) = self.partial.rfind('\n') else {
            return Vec::new();
        };
        let complete: String = self.partial.drain(..=end).collect();
        complete.lines().map(str::to_string).collect()
    }
}

/// The latest acknowledgement time of each (producer, partition) and the latest poll time of
/// each group, from the clients' event logs as they grow.
struct Progress {
    follows: Vec<Follow>,
    acked: BTreeMap<(String, i32), u64>,
    polled: BTreeMap<String, u64>,
}

impl Progress {
    fn update(&mut self) {
        for follow in &mut self.follows {
            for line in follow.new_lines() {
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    ["ACK", time, producer, _, partition, _] => {
                        if let (Ok(time), Ok(partition)) = (time.parse(), partition.parse()) {
                            let last = self
                                .acked
                                .entry((producer.to_string(), partition))
                                .or_insert(0);
                            *last = (*last).max(time);
                        }
                    }
                    ["POLL", time, group, ..] => {
                        if let Ok(time) = time.parse::<u64>() {
                            let last = self.polled.entry(group.to_string()).or_insert(0);
                            *last = (*last).max(time);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// (producer, partition) pairs without an acknowledgement at or after `since_ms`.
    fn acks_missing_since(&mut self, since_ms: u64) -> Vec<(String, i32)> {
        self.update();
        PRODUCERS
            .iter()
            .flat_map(|p| (0..PARTITIONS).map(move |partition| (p.to_string(), partition)))
            .filter(|key| self.acked.get(key).is_none_or(|&t| t < since_ms))
            .collect()
    }

    /// Groups that polled nothing at or after `since_ms`.
    fn groups_idle_since(&mut self, since_ms: u64) -> Vec<String> {
        self.update();
        PY_GROUPS
            .iter()
            .map(|(g, _, _)| *g)
            .chain([GO_GROUP])
            .filter(|g| self.polled.get(*g).is_none_or(|&t| t < since_ms))
            .map(str::to_string)
            .collect()
    }
}

/// The client processes, killed when dropped.
struct Clients {
    dir: PathBuf,
    children: Vec<(String, Child)>,
}

impl Clients {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn spawn(&mut self, name: &str, mut command: Command) {
        let out = std::fs::File::create(self.file(&format!("{name}.out"))).expect("stdout file");
        // The clients' own diagnostics (librdkafka logs every refused connection).
        let err =
            std::fs::File::create(self.file(&format!("{name}.err.log"))).expect("stderr file");
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        self.children.push((name.to_string(), child));
    }

    fn start(bootstrap: &str, dir: &Path, go_binary: &Path) -> Clients {
        let mut clients = Clients {
            dir: dir.to_path_buf(),
            children: Vec::new(),
        };
        let partitions = PARTITIONS.to_string();
        let mut producer = python(bootstrap, "produce");
        producer
            .args(["--partitions", &partitions, "--producer", "py"])
            .args(["--until", path(&clients.file("stop-producers"))])
            .args(["--log", path(&clients.file("py-producer.events"))]);
        clients.spawn("py-producer", producer);
        let mut go = Command::new(go_binary);
        go.args(["-bootstrap", bootstrap, "-topic", TOPIC])
            .args(["-partitions", &partitions, "-producer", "go"])
            .args(["-until", path(&clients.file("stop-producers"))])
            .args(["-log", path(&clients.file("go-producer.events"))])
            .args(["-group", GO_GROUP, "-protocol", "classic", "-member", "g1"])
            .args(["-consumer-until", path(&clients.file("stop-consumers"))])
            .args(["-consumer-log", path(&clients.file("go-consumer.events"))]);
        clients.spawn("go", go);
        for (group, protocol, members) in PY_GROUPS {
            for member in members {
                let mut consumer = python(bootstrap, "consume");
                consumer
                    .args(["--group", group, "--protocol", protocol, "--member", member])
                    .args(["--until", path(&clients.file("stop-consumers"))])
                    .args(["--log", path(&clients.file(&format!("{member}.events")))]);
                clients.spawn(member, consumer);
            }
        }
        clients
    }

    fn progress(&self) -> Progress {
        let follows = ["py-producer", "go-producer", "go-consumer"]
            .into_iter()
            .chain(PY_GROUPS.iter().flat_map(|(_, _, members)| *members))
            .map(|name| Follow::new(self.file(&format!("{name}.events"))))
            .collect();
        Progress {
            follows,
            acked: BTreeMap::new(),
            polled: BTreeMap::new(),
        }
    }

    /// Panics if a client exited before it was told to stop.
    fn assert_running(&mut self) {
        for (name, child) in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                let out = std::fs::read_to_string(self.dir.join(format!("{name}.out")))
                    .unwrap_or_default();
                panic!("client {name} exited early ({status}): {out}");
            }
        }
    }

    /// Stops the producers, then the consumers (which read on until idle), and waits for
    /// each client's verdict; returns what each printed.
    fn finish(&mut self) -> Vec<(String, String)> {
        let names: Vec<String> = self.children.iter().map(|(n, _)| n.clone()).collect();
        std::fs::write(self.file("stop-producers"), b"").expect("stop file");
        self.wait_for("py-producer");
        std::fs::write(self.file("stop-consumers"), b"").expect("stop file");
        for name in &names {
            self.wait_for(name);
        }
        names
            .into_iter()
            .map(|name| {
                let out =
                    std::fs::read_to_string(self.file(&format!("{name}.out"))).unwrap_or_default();
                (name, out)
            })
            .collect()
    }

    fn wait_for(&mut self, name: &str) {
        let Some(index) = self.children.iter().position(|(n, _)| n == name) else {
            return;
        };
        let (_, mut child) = self.children.remove(index);
        let deadline = Instant::now() + RECOVER + Duration::from_secs(120);
        let status = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("client {name} did not finish within {RECOVER:?} + 120 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let out = std::fs::read_to_string(self.file(&format!("{name}.out"))).unwrap_or_default();
        assert!(
            status.success() && out.contains("PASS"),
            "client {name} failed ({status}): {out}"
        );
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn python(bootstrap: &str, role: &str) -> Command {
    let mut command = Command::new("python3");
    command
        .arg(SCRIPT)
        .args(["--bootstrap", bootstrap, role, "--topic", TOPIC]);
    command
}

/// Builds the franz-go client (tests/clients/go/faults) into `dir`.
fn build_go_client(dir: &Path) -> PathBuf {
    let binary = dir.join("faults-go");
    let output = Command::new("go")
        .args(["build", "-o", path(&binary), "./faults"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/go"))
        .output()
        .expect("run go build (Go 1.26 or later is needed; see tests/clients/README.md)");
    assert!(
        output.status.success(),
        "go build of tests/clients/go/faults failed (tests/clients/prepare.sh fetches its modules): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    binary
}

fn has_topic(assignment: &Assignment) -> bool {
    assignment.topics().iter().any(|(name, topic)| {
        name.as_str() == TOPIC && topic.partitions.len() == PARTITIONS as usize
    })
}

/// Every broker is in the assignment and leads a partition of the topic.
fn all_lead(assignment: &Assignment) -> bool {
    has_topic(assignment)
        && (0..BROKERS).all(|b| {
            assignment.brokers().contains_key(&BrokerId(b))
                && assignment
                    .partitions()
                    .any(|(_, leader)| leader.leader == BrokerId(b))
        })
}

/// A kubeconfig for the test API server that dials `port` on 127.0.0.1 instead (a proxy).
fn kubeconfig_through(port: u16, file: &Path) -> PathBuf {
    let server = kaas_test_support::apiserver::api_server();
    let text = std::fs::read_to_string(&server.kubeconfig).expect("kubeconfig");
    let direct = format!("https://127.0.0.1:{}", server.port);
    assert!(text.contains(&direct), "the kubeconfig names {direct}");
    std::fs::write(
        file,
        text.replace(&direct, &format!("https://127.0.0.1:{port}")),
    )
    .expect("write a broker's kubeconfig");
    file.to_path_buf()
}

/// Three brokers on the API server, each dialing it through its own proxy in `proxies`, on
/// the cluster's data directory mounted again through [`SlowVolume`].
///
/// KubeCluster gives all its brokers one way to the API server and its own data directory;
/// this starts it with a way that is cut (its brokers stop at once: they cannot reach the
/// server), then replaces each broker with one of its own kubeconfig on the mounted
/// directory, with the same pod name, address and flags.
fn start_cluster(flags: &[&str], proxies: &[TcpProxy]) -> (KubeCluster, SlowVolume) {
    let server = kaas_test_support::apiserver::api_server();
    let mut nowhere = TcpProxy::start(SocketAddr::from(([127, 0, 0, 1], server.port)));
    nowhere.cut();
    let reach = Reach {
        api_port: Some(nowhere.listen.port()),
        rust_log: None,
        logs: true,
    };
    let mut cluster = KubeCluster::start_with("faults", BROKERS, flags, &reach);
    let volume = SlowVolume::mount(&cluster.data_dir);
    let mut args: Vec<String> = vec!["--assignment-source".into(), "kube".into()];
    args.extend(flags.iter().map(|f| f.to_string()));
    for id in 0..BROKERS {
        let kubeconfig = kubeconfig_through(
            proxies[id as usize].listen.port(),
            &cluster.scratch.join(format!("kubeconfig-{id}")),
        );
        let env = vec![
            ("KUBECONFIG".to_string(), path(&kubeconfig).to_string()),
            ("POD_NAMESPACE".to_string(), cluster.namespace.clone()),
        ];
        let ip = cluster.broker(id).kafka.ip();
        let ip = match ip {
            std::net::IpAddr::V4(ip) => ip,
            std::net::IpAddr::V6(_) => panic!("brokers listen on IPv4 loopback"),
        };
        let mut broker = Broker::pod(id, ip, &volume.mountpoint, &args, &env);
        broker.log = Some(cluster.scratch.join(format!("broker-{id}.log")));
        let index = cluster
            .brokers
            .iter()
            .position(|b| b.id == id)
            .expect("a broker of the cluster");
        let mut old = std::mem::replace(&mut cluster.brokers[index], broker);
        old.kill9();
        old.wait_for_ports_closed();
    }
    for broker in &mut cluster.brokers {
        broker.start();
    }
    (cluster, volume)
}

/// What a fault hit, as the report names it.
fn target_name(kind: FaultKind, target: i32) -> String {
    match kind {
        FaultKind::SlowVolume => "volume".into(),
        _ => format!("kaas-{target}"),
    }
}

/// One fault of the run, as it happened.
struct Done {
    step: Step,
    target: i32,
    /// Injected, undone, recovered (wall-clock ms).
    start_ms: u64,
    undone_ms: u64,
    recovered_ms: u64,
}

/// Fields drop in this order: the brokers stop before their volume is unmounted.
struct Run {
    cluster: KubeCluster,
    volume: SlowVolume,
    proxies: Vec<TcpProxy>,
    progress: Progress,
    lease_ms: u64,
}

impl Run {
    fn controller(&self) -> i32 {
        self.cluster
            .lease_holder()
            .expect("a controller holds the Lease")
    }

    /// The broker `step` hits (-1: the volume).
    fn target(&self, step: &Step) -> i32 {
        if step.kind == FaultKind::SlowVolume {
            return -1;
        }
        if step.kind.hits_controller() {
            return self.controller();
        }
        let candidates: Vec<i32> = if step.kind == FaultKind::ApiCut {
            (0..BROKERS).collect()
        } else {
            let controller = self.controller();
            (0..BROKERS).filter(|&b| b != controller).collect()
        };
        candidates[(step.pick % candidates.len() as u64) as usize]
    }

    fn inject(&mut self, step: &Step, target: i32) {
        match step.kind {
            FaultKind::Kill9 | FaultKind::Kill9Controller => self.cluster.broker(target).kill9(),
            FaultKind::Pause | FaultKind::PauseController => self.cluster.broker(target).pause(),
            FaultKind::NotReady => self.cluster.set_endpoint(target, Endpoint::NotReady),
            FaultKind::ApiCut => self.proxies[target as usize].cut(),
            FaultKind::SlowVolume => self
                .volume
                .set_fsync_delay(Duration::from_millis(step.fsync_delay_ms)),
        }
    }

    fn undo(&mut self, kind: FaultKind, target: i32) {
        match kind {
            FaultKind::Kill9 | FaultKind::Kill9Controller => {
                let broker = self.cluster.broker(target);
                broker.wait_for_ports_closed();
                broker.start();
            }
            FaultKind::Pause | FaultKind::PauseController => self.cluster.broker(target).resume(),
            FaultKind::NotReady => self.cluster.set_endpoint(target, Endpoint::Ready),
            FaultKind::ApiCut => self.proxies[target as usize].restore(),
            FaultKind::SlowVolume => self.volume.set_fsync_delay(Duration::ZERO),
        }
    }

    /// Sleeps `ms`, checking every so often that no broker or client died by itself.
    fn hold(&mut self, ms: u64, clients: &mut Clients) {
        let until = Instant::now() + Duration::from_millis(ms);
        while Instant::now() < until {
            self.cluster.assert_none_exited();
            clients.assert_running();
            std::thread::sleep(
                until
                    .saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(200)),
            );
        }
    }

    /// Waits until every broker leads partitions again, all have applied that assignment,
    /// and both producers were acknowledged on every partition since `since_ms`.
    fn wait_for_recovery(&mut self, since_ms: u64, what: &str, clients: &mut Clients) {
        let assignment = self.cluster.wait_for_assignment(what, RECOVER, all_lead);
        self.cluster.wait_until_applied(assignment.version().0);
        let deadline = Instant::now() + RECOVER;
        loop {
            let missing = self.progress.acks_missing_since(since_ms);
            if missing.is_empty() {
                return;
            }
            clients.assert_running();
            self.cluster.assert_none_exited();
            assert!(
                Instant::now() < deadline,
                "{what}: no acknowledgement within {RECOVER:?} for (producer, partition) {missing:?}; assignment {}",
                self.cluster
                    .assignment()
                    .map_or("none".into(), |a| String::from_utf8_lossy(&a.to_json()).into_owned())
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Copies the run's files to a directory that outlives the test (`KAAS_FAULT_KEEP`, or the
/// target directory when the test fails).
struct Keep {
    scratch: PathBuf,
    /// The shared data directory: a failed run keeps its partitions' files too.
    data_dir: PathBuf,
    wanted: Option<PathBuf>,
    seed: u64,
}

impl Keep {
    fn copy_to(&self, dir: &Path) {
        let _ = std::fs::create_dir_all(dir);
        if let Ok(entries) = std::fs::read_dir(&self.scratch) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let keep = name.to_str().is_some_and(|n| {
                    [".events", ".log", ".out", ".txt"]
                        .iter()
                        .any(|e| n.ends_with(e))
                });
                if keep {
                    let _ = std::fs::copy(entry.path(), dir.join(name));
                }
            }
        }
        eprintln!("the run's files are in {}", dir.display());
    }
}

impl Drop for Keep {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let dir = self.wanted.clone().unwrap_or_else(|| {
                Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
                    "cluster_fault_schedule-seed-{}-{}",
                    self.seed,
                    std::process::id()
                ))
            });
            self.copy_to(&dir);
            let topics = self.data_dir.join(kaas_volume::TOPICS_DIR);
            let copied = Command::new("cp")
                .args(["-a", "--sparse=always"])
                .arg(&topics)
                .arg(dir.join("data-topics"))
                .status();
            eprintln!("the partitions' files: {copied:?}");
        } else if let Some(dir) = &self.wanted {
            self.copy_to(dir);
        }
    }
}

#[test]
fn seeded_faults_lose_no_acknowledged_write_and_no_commit_skips_a_record() {
    let seed = env_u64("KAAS_FAULT_SEED", 1);
    let seconds = env_u64("KAAS_FAULT_SECONDS", 75);
    let default_lease = match std::env::var("KAAS_FAULT_LEASE").as_deref() {
        Ok("default") => true,
        Ok("short") | Err(_) => false,
        Ok(other) => panic!("KAAS_FAULT_LEASE={other}: expected short or default"),
    };
    let (flags, lease_ms): (&[&str], u64) = if default_lease {
        (&[], 15_000)
    } else {
        (
            &[
                "--lease-duration-ms",
                "3000",
                "--lease-renew-period-ms",
                "1000",
            ],
            3000,
        )
    };
    eprintln!(
        "fault schedule: seed {seed}, {seconds} s of faults, Lease {} ms{}",
        lease_ms,
        if default_lease { " (default)" } else { "" }
    );
    let started = Instant::now();
    let server = kaas_test_support::apiserver::api_server();
    let api = SocketAddr::from(([127, 0, 0, 1], server.port));
    let proxies: Vec<TcpProxy> = (0..BROKERS).map(|_| TcpProxy::start(api)).collect();
    let (cluster, volume) = start_cluster(flags, &proxies);
    let scratch = cluster.scratch.clone();
    let bootstrap = cluster.bootstrap();
    let go_binary = build_go_client(&scratch);
    cluster.apply_topic(TOPIC, PARTITIONS);
    let mut clients = Clients::start(&bootstrap, &scratch, &go_binary);
    let mut run = Run {
        progress: clients.progress(),
        cluster,
        volume,
        proxies,
        lease_ms,
    };
    // Declared after the cluster (inside `run`), so dropped before it removes the scratch
    // directory.
    let _keep = Keep {
        scratch: scratch.clone(),
        data_dir: run.cluster.data_dir.clone(),
        wanted: std::env::var_os("KAAS_FAULT_KEEP").map(PathBuf::from),
        seed,
    };
    let first =
        run.cluster
            .wait_for_assignment("of three brokers leading the topic", RECOVER, all_lead);
    run.cluster.wait_until_applied(first.version().0);
    run.wait_for_recovery(0, "at the start", &mut clients);
    let deadline = Instant::now() + RECOVER;
    loop {
        let idle = run.progress.groups_idle_since(0);
        if idle.is_empty() {
            break;
        }
        clients.assert_running();
        assert!(
            Instant::now() < deadline,
            "groups {idle:?} polled nothing within {RECOVER:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    let run_start_ms = now_ms();
    let faults_until = Instant::now() + Duration::from_secs(seconds);
    let mut done: Vec<Done> = Vec::new();
    let mut schedule = Schedule::new(seed, run.lease_ms);
    while Instant::now() < faults_until {
        let step = schedule.next().expect("an endless schedule");
        let target = run.target(&step);
        let start_ms = now_ms();
        let name = target_name(step.kind, target);
        eprintln!(
            "[{:>7.1} s] {step} on {name}",
            (start_ms - run_start_ms) as f64 / 1000.0,
        );
        run.inject(&step, target);
        run.hold(step.hold_ms, &mut clients);
        run.undo(step.kind, target);
        let undone_ms = now_ms();
        let what = format!("after {} of {name}", step.kind);
        run.wait_for_recovery(undone_ms, &what, &mut clients);
        let recovered_ms = now_ms();
        eprintln!(
            "[{:>7.1} s]   undone after {} ms, recovered {} ms later",
            (recovered_ms - run_start_ms) as f64 / 1000.0,
            undone_ms - start_ms,
            recovered_ms - undone_ms
        );
        run.hold(step.quiet_ms, &mut clients);
        done.push(Done {
            step,
            target,
            start_ms,
            undone_ms,
            recovered_ms,
        });
    }

    let verdicts = clients.finish();
    let mut dump = python(&bootstrap, "dump");
    dump.args(["--partitions", &PARTITIONS.to_string()])
        .args([
            "--groups",
            &PY_GROUPS
                .iter()
                .map(|(g, _, _)| *g)
                .chain([GO_GROUP])
                .collect::<Vec<_>>()
                .join(","),
        ])
        .args(["--log", path(&scratch.join("final-log.events"))]);
    clients.spawn("dump", dump);
    clients.wait_for("dump");

    let mut history = History::default();
    for entry in std::fs::read_dir(&scratch).expect("scratch dir").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".events") {
            let text = std::fs::read_to_string(entry.path()).expect("read an event log");
            history
                .add_lines(&text)
                .unwrap_or_else(|bad| panic!("{name}: malformed event line {bad:?}"));
        }
    }
    history.faults = done
        .iter()
        .map(|d| Fault {
            kind: d.step.kind.name().to_string(),
            target: target_name(d.step.kind, d.target),
            start_ms: d.start_ms,
            end_ms: d.recovered_ms,
        })
        .collect();
    let mut report = fault_checker::check(&history, WINDOW_THRESHOLD_MS);
    report.origin_ms = run_start_ms;

    let mut text = format!(
        "fault schedule: seed {seed}, {seconds} s of faults, Lease {lease_ms} ms{}, {} faults survived, {:?} in all\n",
        if default_lease { " (default)" } else { "" },
        done.len(),
        started.elapsed()
    );
    for d in &done {
        text.push_str(&format!(
            "  t={:>7.1} s {} {}: held {} ms, recovered {} ms after undo\n",
            (d.start_ms - run_start_ms) as f64 / 1000.0,
            d.step.kind,
            target_name(d.step.kind, d.target),
            d.undone_ms - d.start_ms,
            d.recovered_ms - d.undone_ms
        ));
    }
    for (name, out) in &verdicts {
        text.push_str(&format!("  client {name}: {}\n", out.trim()));
    }
    text.push_str(&report.to_string());
    eprintln!("{text}");
    std::fs::write(scratch.join("report.txt"), &text).expect("write the report");

    for producer in PRODUCERS {
        assert!(
            history.acks.iter().any(|a| a.producer == producer),
            "producer {producer} had nothing acknowledged"
        );
    }
    for group in PY_GROUPS.iter().map(|(g, _, _)| *g).chain([GO_GROUP]) {
        assert!(
            history.commits.iter().any(|c| c.group == group),
            "group {group} committed nothing"
        );
    }
    assert!(!done.is_empty(), "no fault was injected");
    assert!(
        report.lost.is_empty(),
        "lost writes (seed {seed}):\n{report}"
    );
    assert!(
        report.duplicates.is_empty(),
        "duplicates (seed {seed}):\n{report}"
    );
    assert!(
        report.inconsistent.is_empty(),
        "inconsistent offsets (seed {seed}):\n{report}"
    );
    assert!(
        report.non_monotonic.is_empty(),
        "non-monotonic sends (seed {seed}):\n{report}"
    );
    assert!(
        report.committed_unread.is_empty(),
        "committed but unread (seed {seed}):\n{report}"
    );
    drop(clients);
    run.cluster.stop();
}
