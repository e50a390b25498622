//! The cluster core's loop with in-process fakes of the Lease, EndpointSlice and KafkaTopic
//! sources, and everything else real: the heartbeat over tonic on loopback, the files in a
//! temporary directory, and a `FileFollower` reading them as a broker does.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use kaas_cluster::assignment::{Assignment, BrokerEndpoint};
use kaas_cluster::ids::TopicId;
use kaas_cluster::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, LeaderEpoch, TopicName, TopicPartition,
};
use kaas_cluster::view::TopicInfo;
use kaas_cluster_core::{
    BoxFuture, BrokerHooks, ClusterCore, CoreOptions, EndpointSource, LeaseEvent, LeaseSource,
    MirrorSink, Sources, TopicSource,
};
use kaas_cluster_file::{AssignmentSink, FileFollower, FollowerOptions, ASSIGNMENT_FILE};
use kaas_cluster_heartbeat::{ClientOptions, ControllerEndpoint, HeartbeatClient};
use tokio::sync::mpsc;

/// What the fake Lease was asked to do.
#[derive(Default)]
struct LeaseLog {
    published: Option<ControllerEndpoint>,
    released: Vec<ControllerEpoch>,
    take_overs: Vec<ControllerEpoch>,
    /// What the core said of the broker's heartbeat stream to the controller.
    holder_streams: Vec<(ControllerEndpoint, Option<Instant>)>,
    /// The ready sets the core passed on.
    ready: Vec<BTreeSet<BrokerId>>,
}

struct FakeLease {
    events: Option<mpsc::UnboundedReceiver<LeaseEvent>>,
    log: Arc<Mutex<LeaseLog>>,
}

impl LeaseSource for FakeLease {
    fn start(&mut self, heartbeat: ControllerEndpoint) -> mpsc::UnboundedReceiver<LeaseEvent> {
        self.log.lock().expect("log").published = Some(heartbeat);
        self.events.take().expect("started once")
    }

    fn take_over_above(&mut self, highest: ControllerEpoch) {
        self.log.lock().expect("log").take_overs.push(highest);
    }

    fn holder_stream(&mut self, endpoint: ControllerEndpoint, down_since: Option<Instant>) {
        let mut log = self.log.lock().expect("log");
        log.holder_streams.push((endpoint, down_since));
    }

    fn ready_brokers(&mut self, ready: BTreeSet<BrokerId>) {
        self.log.lock().expect("log").ready.push(ready);
    }

    fn release(&mut self, epoch: ControllerEpoch) -> BoxFuture {
        let log = self.log.clone();
        Box::pin(async move {
            // A real release is a request to the API server: let it take a moment.
            tokio::time::sleep(Duration::from_millis(20)).await;
            log.lock().expect("log").released.push(epoch);
        })
    }
}

struct FakeWatch<T>(Option<mpsc::UnboundedReceiver<T>>);

impl EndpointSource for FakeWatch<BTreeSet<BrokerId>> {
    fn start(&mut self) -> mpsc::UnboundedReceiver<BTreeSet<BrokerId>> {
        self.0.take().expect("started once")
    }
}

impl TopicSource for FakeWatch<BTreeMap<TopicName, TopicInfo>> {
    fn start(&mut self) -> mpsc::UnboundedReceiver<BTreeMap<TopicName, TopicInfo>> {
        self.0.take().expect("started once")
    }
}

/// The mirror: the versions published to it, and whether it was started first.
#[derive(Default)]
struct MirrorLog {
    started: bool,
    published: Vec<AssignmentVersion>,
    /// The controller epoch and brokers of each published assignment.
    brokers: Vec<(ControllerEpoch, BTreeSet<BrokerId>)>,
}

struct FakeMirror(Arc<Mutex<MirrorLog>>);

impl MirrorSink for FakeMirror {
    fn start(&mut self) {
        self.0.lock().expect("mirror").started = true;
    }

    fn publish(&mut self, assignment: &Assignment) {
        let mut log = self.0.lock().expect("mirror");
        assert!(log.started, "published before the mirror started");
        log.published.push(assignment.version());
        let brokers = assignment.brokers().keys().copied().collect();
        log.brokers.push((assignment.controller_epoch(), brokers));
    }
}

/// The follower's sink: records what this broker applied (for its pings) and hands each
/// accepted assignment to the test.
struct AppliedSink {
    applied: Arc<Mutex<Option<(ControllerEpoch, AssignmentVersion)>>>,
    accepted: std_mpsc::Sender<Arc<Assignment>>,
}

impl AssignmentSink for AppliedSink {
    fn deliver(&mut self, assignment: Arc<Assignment>) -> bool {
        *self.applied.lock().expect("applied") =
            Some((assignment.controller_epoch(), assignment.version()));
        self.accepted.send(assignment).is_ok()
    }
}

/// Broker 0 running the core, its follower, and a runtime for other brokers' clients.
struct Harness {
    _dir: tempfile::TempDir,
    cluster: PathBuf,
    lease: mpsc::UnboundedSender<LeaseEvent>,
    endpoints: mpsc::UnboundedSender<BTreeSet<BrokerId>>,
    topics: mpsc::UnboundedSender<BTreeMap<TopicName, TopicInfo>>,
    log: Arc<Mutex<LeaseLog>>,
    mirror: Arc<Mutex<MirrorLog>>,
    core: Option<ClusterCore>,
    accepted: std_mpsc::Receiver<Arc<Assignment>>,
    /// The epochs the core told the broker of (`BrokerHooks::observe_epoch`).
    observed_epochs: Arc<Mutex<Vec<ControllerEpoch>>>,
    /// What the broker reports fenced (`BrokerHooks::fenced`).
    fenced: Arc<Mutex<Vec<(TopicPartition, LeaderEpoch)>>>,
    _follower: FileFollower,
    others: tokio::runtime::Runtime,
}

fn endpoint(id: i32) -> BrokerEndpoint {
    BrokerEndpoint {
        id: BrokerId(id),
        host: format!("127.0.0.{}", id + 1),
        port: 9092,
    }
}

impl Harness {
    fn start() -> Harness {
        let dir = tempfile::tempdir().expect("temp dir");
        let cluster = kaas_volume::cluster_dir(dir.path());
        Self::start_in(dir, cluster)
    }

    fn start_in(dir: tempfile::TempDir, cluster: PathBuf) -> Harness {
        Self::start_ticking(dir, cluster, Duration::from_millis(200))
    }

    fn start_ticking(dir: tempfile::TempDir, cluster: PathBuf, tick: Duration) -> Harness {
        let (lease, lease_events) = mpsc::unbounded_channel();
        let (endpoints, endpoint_events) = mpsc::unbounded_channel();
        let (topics, topic_events) = mpsc::unbounded_channel();
        let log = Arc::new(Mutex::new(LeaseLog::default()));
        let mirror = Arc::new(Mutex::new(MirrorLog::default()));
        let applied = Arc::new(Mutex::new(None));
        let (accepted_sender, accepted) = std_mpsc::channel();
        let follower = FileFollower::spawn(
            &cluster,
            FollowerOptions::default(),
            AppliedSink {
                applied: applied.clone(),
                accepted: accepted_sender,
            },
        )
        .expect("follower");
        let nudger = follower.nudger();
        let fence = follower.nudger();
        let observed_epochs = Arc::new(Mutex::new(Vec::new()));
        let observed = observed_epochs.clone();
        let fenced = Arc::new(Mutex::new(Vec::new()));
        let fenced_now = fenced.clone();
        let mut options = CoreOptions::new(
            &cluster,
            "127.0.0.1:0".parse().expect("address"),
            "127.0.0.1",
        );
        options.tick = tick;
        let core = ClusterCore::spawn(
            options,
            Sources {
                lease: Box::new(FakeLease {
                    events: Some(lease_events),
                    log: log.clone(),
                }),
                endpoints: Box::new(FakeWatch(Some(endpoint_events))),
                topics: Box::new(FakeWatch(Some(topic_events))),
                mirror: Some(Box::new(FakeMirror(mirror.clone()))),
            },
            BrokerHooks {
                endpoint: endpoint(0),
                applied: Box::new(move || *applied.lock().expect("applied")),
                fenced: Box::new(move || fenced_now.lock().expect("fenced").clone()),
                on_assignment_changed: Box::new(move || nudger.nudge()),
                observe_epoch: Box::new(move |epoch| {
                    fence.observe_epoch(epoch);
                    observed.lock().expect("observed").push(epoch);
                }),
                tasks: Vec::new(),
            },
        )
        .expect("core starts");
        let others = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        Harness {
            _dir: dir,
            cluster,
            lease,
            endpoints,
            topics,
            log,
            mirror,
            core: Some(core),
            accepted,
            observed_epochs,
            fenced,
            _follower: follower,
            others,
        }
    }

    /// The endpoint the core published on the Lease: its heartbeat server.
    fn published(&self) -> ControllerEndpoint {
        let published = self.log.lock().expect("log").published.clone();
        let published = published.expect("the core started the Lease source");
        let addr = self.core.as_ref().expect("running").heartbeat_addr();
        assert_eq!(published.port, addr.port());
        assert_eq!(published.host, "127.0.0.1");
        published
    }

    /// The Lease is won at `epoch` and names this broker's heartbeat endpoint.
    fn win(&self, epoch: u64, renew_deadline: Instant) {
        self.send_lease(LeaseEvent::Acquired {
            epoch: ControllerEpoch(epoch),
            renew_deadline,
            expired_holder: None,
        });
        self.send_lease(LeaseEvent::Holder(Some(self.published())));
    }

    fn send_lease(&self, event: LeaseEvent) {
        self.lease.send(event).expect("core running");
    }

    fn topics(&self, partitions: &[(&str, i32)]) {
        let topics = partitions
            .iter()
            .enumerate()
            .map(|(n, (name, count))| {
                let name = TopicName::new(name).expect("name");
                let mut id = [0x5a; 16];
                id[0] = u8::try_from(n + 1).expect("few topics");
                let info = TopicInfo {
                    name: name.clone(),
                    id: TopicId(id),
                    partitions: *count,
                    configs: BTreeMap::new(),
                };
                (name, info)
            })
            .collect();
        self.topics.send(topics).expect("core running");
    }

    fn ready(&self, ids: &[i32]) {
        let ready = ids.iter().map(|id| BrokerId(*id)).collect();
        self.endpoints.send(ready).expect("core running");
    }

    /// Another broker's heartbeat client, dialing the core.
    fn other_broker(&self, id: i32) -> HeartbeatClient {
        let _runtime = self.others.enter();
        HeartbeatClient::spawn(
            endpoint(id),
            Some(self.published()),
            ClientOptions::default(),
            |_| {},
        )
    }

    /// Waits for the follower to accept an assignment `wanted` says yes to.
    fn accept_until(&self, what: &str, wanted: impl Fn(&Assignment) -> bool) -> Arc<Assignment> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.accepted.recv_timeout(left) {
                Ok(assignment) if wanted(&assignment) => return assignment,
                Ok(_) => {}
                Err(_) => panic!("no accepted assignment {what} within 20 s"),
            }
        }
    }

    fn shutdown(&mut self) {
        if let Some(core) = self.core.take() {
            core.shutdown();
        }
    }
}

/// Partition → leader of every user topic (the controller adds `__consumer_offsets`, whose
/// partitions it places the same way).
fn leaders(assignment: &Assignment) -> BTreeMap<(String, usize), (i32, i32)> {
    assignment
        .topics()
        .iter()
        .filter(|(name, _)| !kaas_cluster::internal_topics::is_internal(name.as_str()))
        .flat_map(|(name, topic)| {
            topic.partitions.iter().enumerate().map(move |(i, leader)| {
                (
                    (name.to_string(), i),
                    (leader.leader.0, leader.leader_epoch.0),
                )
            })
        })
        .collect()
}

fn led_by(assignment: &Assignment) -> BTreeSet<i32> {
    leaders(assignment)
        .values()
        .map(|(leader, _)| *leader)
        .collect()
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(600)
}

#[test]
fn a_win_writes_a_file_the_follower_accepts_and_a_departure_moves_its_partitions() {
    let mut harness = Harness::start();
    harness.topics(&[("orders", 4), ("payments", 2)]);
    harness.ready(&[0, 1]);
    harness.win(1, far());
    let broker_1 = harness.other_broker(1);
    let both = harness.accept_until("led by brokers 0 and 1", |a| {
        led_by(a) == BTreeSet::from([0, 1])
    });
    assert_eq!(both.controller_epoch(), ControllerEpoch(1));
    assert_eq!(
        both.topics().len(),
        3,
        "the two topics and __consumer_offsets"
    );
    assert_eq!(
        std::fs::read(harness.cluster.join("controller-epoch")).expect("epoch file"),
        b"1\n",
        "the epoch is recorded before anything is written at it"
    );
    let before = leaders(&both);
    assert_eq!(
        before.values().filter(|(leader, _)| *leader == 1).count(),
        3
    );

    harness.others.block_on(broker_1.stop());
    let after = harness.accept_until("led by broker 0 alone", |a| {
        led_by(a) == BTreeSet::from([0])
    });
    assert!(after.version() > both.version());
    assert_eq!(after.controller_epoch(), ControllerEpoch(1));
    assert!(!after.brokers().contains_key(&BrokerId(1)));
    // Mirrored right after the write, which the follower may have seen first.
    wait_for("the newest assignment mirrored", || {
        harness.mirror.lock().expect("mirror").published.last() == Some(&after.version())
    });
    let mirrored = harness.mirror.lock().expect("mirror").published.clone();
    assert!(
        mirrored.contains(&both.version()),
        "every written assignment is mirrored: {mirrored:?}"
    );
    for (partition, (leader, epoch)) in leaders(&after) {
        let (old_leader, old_epoch) = before[&partition];
        if old_leader == 0 {
            assert_eq!(epoch, old_epoch, "{partition:?} stayed: same epoch");
        } else {
            assert_eq!(leader, 0);
            assert!(epoch > old_epoch, "{partition:?} moved: a new epoch");
        }
    }
    harness.shutdown();
    assert_eq!(
        harness.log.lock().expect("log").released,
        vec![ControllerEpoch(1)]
    );
}

#[test]
fn a_silent_broker_on_an_open_stream_ages_out_by_the_controllers_clock() {
    // Ticks ten minutes apart (the first at start-up), and the heartbeat server reports no
    // age-out (the silent broker's stream stays open throughout): the controller ages it out
    // by its own clock, woken at the age-out (or by the next ping of broker 0's own client).
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = kaas_volume::cluster_dir(dir.path());
    let mut harness = Harness::start_ticking(dir, cluster, Duration::from_secs(600));
    harness.topics(&[("orders", 4)]);
    harness.ready(&[0, 1]);
    harness.win(1, far());
    let broker_1 = harness.other_broker(1);
    let both = harness.accept_until("led by brokers 0 and 1", |a| {
        led_by(a) == BTreeSet::from([0, 1])
    });
    broker_1.set_pings_paused(true);
    let after = harness.accept_until("led by broker 0 alone", |a| {
        led_by(a) == BTreeSet::from([0])
    });
    assert!(after.version() > both.version());
    assert!(!after.brokers().contains_key(&BrokerId(1)));
    assert!(
        matches!(
            *broker_1.state().borrow(),
            kaas_cluster_heartbeat::ClientState::Connected { .. }
        ),
        "the silent broker's stream stayed open"
    );
    harness.others.block_on(broker_1.stop());
    harness.shutdown();
}

#[test]
fn no_file_is_written_past_the_renew_deadline_until_a_renewal() {
    let mut harness = Harness::start();
    harness.topics(&[("orders", 2)]);
    harness.ready(&[0]);
    harness.win(1, Instant::now());
    let file = harness.cluster.join(ASSIGNMENT_FILE);
    // Broker 0 connects within a second and the start-up grace is 2 s: well past both.
    std::thread::sleep(Duration::from_secs(3));
    assert!(!file.exists(), "written after the renew deadline");
    assert_eq!(
        std::fs::read(harness.cluster.join("controller-epoch")).expect("epoch file"),
        b"1\n"
    );
    harness.send_lease(LeaseEvent::Renewed {
        renew_deadline: far(),
    });
    let written = harness.accept_until("after the renewal", |_| true);
    assert_eq!(written.controller_epoch(), ControllerEpoch(1));
    assert_eq!(led_by(&written), BTreeSet::from([0]));
    harness.shutdown();
}

#[test]
fn an_epoch_not_above_the_volume_s_is_refused_and_taken_over_above_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = kaas_volume::cluster_dir(dir.path());
    std::fs::create_dir_all(&cluster).expect("dir");
    std::fs::write(cluster.join("controller-epoch"), b"5\n").expect("epoch file");
    let mut harness = Harness::start_in(dir, cluster);
    harness.topics(&[("orders", 1)]);
    harness.ready(&[0]);
    harness.win(3, far());
    wait_for("a take-over request", || {
        harness.log.lock().expect("log").take_overs == vec![ControllerEpoch(5)]
    });
    assert!(!harness.cluster.join(ASSIGNMENT_FILE).exists());
    harness.win(6, far());
    let written = harness.accept_until("at epoch 6", |_| true);
    assert_eq!(written.controller_epoch(), ControllerEpoch(6));
    assert_eq!(
        std::fs::read(harness.cluster.join("controller-epoch")).expect("epoch file"),
        b"6\n"
    );
    harness.shutdown();
    assert_eq!(
        harness.log.lock().expect("log").released,
        vec![ControllerEpoch(6)]
    );
}

#[test]
fn a_volume_that_stalls_longer_than_the_age_out_costs_no_live_broker_its_place() {
    let mut harness = Harness::start();
    harness.topics(&[("orders", 4)]);
    harness.ready(&[0, 1]);
    let _broker_1 = harness.other_broker(1);
    harness.win(1, far());
    harness.accept_until("led by brokers 0 and 1", |a| {
        led_by(a) == BTreeSet::from([0, 1])
    });
    // The volume stalls: the epoch file's lock is held (as a hung NFS server would hold the
    // controller's flock) across a new term, for longer than the 3 s age-out. Broker 1 keeps
    // pinging the whole time.
    let lock = std::fs::OpenOptions::new()
        .write(true)
        .open(harness.cluster.join("controller-epoch.lock"))
        .expect("the epoch file's lock exists");
    lock.lock().expect("hold the lock");
    harness.send_lease(LeaseEvent::Lost);
    harness.win(2, far());
    std::thread::sleep(Duration::from_secs(5));
    drop(lock);
    let second = harness.accept_until("at epoch 2", |a| a.controller_epoch() == ControllerEpoch(2));
    assert_eq!(led_by(&second), BTreeSet::from([0, 1]));
    // A tick later: no assignment of the new term ever left broker 1 out.
    std::thread::sleep(Duration::from_millis(500));
    let published = harness.mirror.lock().expect("mirror").brokers.clone();
    for (epoch, brokers) in published.iter().filter(|(e, _)| *e == ControllerEpoch(2)) {
        assert!(
            brokers.contains(&BrokerId(1)),
            "an assignment at epoch {epoch:?} left out broker 1, which kept pinging: {published:?}"
        );
    }
    harness.shutdown();
}

#[test]
fn shutting_down_without_the_lease_releases_nothing() {
    let mut harness = Harness::start();
    harness.topics(&[("orders", 1)]);
    harness.send_lease(LeaseEvent::Holder(Some(harness.published())));
    std::thread::sleep(Duration::from_millis(300));
    harness.shutdown();
    assert!(harness.log.lock().expect("log").released.is_empty());
    assert!(!harness.cluster.join(ASSIGNMENT_FILE).exists());
}

#[test]
fn a_partition_the_broker_reports_fenced_gets_an_epoch_above_the_claim() {
    let mut harness = Harness::start();
    harness.topics(&[("orders", 2)]);
    harness.ready(&[0]);
    harness.win(1, far());
    let first = harness.accept_until("led by broker 0", |a| led_by(a) == BTreeSet::from([0]));
    let orders_0 = TopicPartition::new(TopicName::new("orders").expect("name"), 0);
    let (_, epoch) = leaders(&first)[&("orders".to_string(), 0)];
    // Its open found a claim 5 above the epoch it was given (a deposed controller's file).
    let claim = LeaderEpoch(epoch + 5);
    *harness.fenced.lock().expect("fenced") = vec![(orders_0, claim)];
    let repaired = harness.accept_until("orders-0 above the claim", |a| {
        leaders(a)[&("orders".to_string(), 0)].1 > claim.0
    });
    assert_eq!(
        leaders(&repaired)[&("orders".to_string(), 1)],
        leaders(&first)[&("orders".to_string(), 1)],
        "the other partition keeps its epoch"
    );
    harness.shutdown();
}

#[test]
fn the_lease_source_hears_when_the_stream_to_the_controller_breaks_and_who_is_ready() {
    let harness = Harness::start();
    harness.ready(&[0, 2]);
    let (server, _events) = harness.others.block_on(async {
        kaas_cluster_heartbeat::HeartbeatServer::bind(
            "127.0.0.1:0".parse().expect("address"),
            kaas_cluster_heartbeat::ServerOptions::default(),
        )
        .await
        .expect("bind")
    });
    let controller = ControllerEndpoint {
        host: "127.0.0.1".into(),
        port: server.local_addr().port(),
    };
    harness.send_lease(LeaseEvent::Holder(Some(controller.clone())));
    let streams = || harness.log.lock().expect("log").holder_streams.clone();
    wait_for("the stream reported open", || {
        streams().last() == Some(&(controller.clone(), None))
    });
    assert_eq!(
        harness.log.lock().expect("log").ready.last(),
        Some(&BTreeSet::from([BrokerId(0), BrokerId(2)]))
    );
    // The controller dies: the stream breaks, and the redials fail.
    let before = Instant::now();
    harness.others.block_on(server.shutdown());
    wait_for("the stream reported down", || {
        streams()
            .last()
            .is_some_and(|(endpoint, down)| *endpoint == controller && down.is_some())
    });
    let (_, down_since) = streams().last().cloned().expect("reported");
    assert!(down_since.expect("down") >= before);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        streams().last().map(|(_, down)| *down),
        Some(down_since),
        "failed redials keep the time it went down"
    );
}

#[test]
fn a_broker_that_learnt_a_newer_epoch_refuses_the_deposed_controllers_later_files() {
    let harness = Harness::start();
    std::fs::create_dir_all(&harness.cluster).expect("cluster directory");
    let file = |epoch: u64, version: u64| {
        let text = format!(
            r#"{{"format": 1, "controller_epoch": {epoch}, "assignment_version": {version},
            "brokers": [{{"id": 0, "host": "127.0.0.1", "port": 9092}}],
            "topics": {{}}, "partitions": {{}}}}"#
        );
        let assignment = Assignment::from_json(text.as_bytes()).expect("valid");
        kaas_cluster_file::write_assignment(&harness.cluster, &assignment).expect("write");
    };
    let quiet = |what: &str| {
        if let Ok(applied) = harness.accepted.recv_timeout(Duration::from_millis(500)) {
            panic!(
                "{what}: applied ({:?}, {:?})",
                applied.controller_epoch(),
                applied.version()
            );
        }
    };
    // Gives the core the time to pass the epoch on (the refusal below is the assertion).
    let observed = |epoch: u64| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline
            && !harness
                .observed_epochs
                .lock()
                .expect("observed")
                .contains(&ControllerEpoch(epoch))
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Another broker controls at epoch 3.
    file(3, 17);
    harness.accept_until("at epoch 3", |a| a.controller_epoch() == ControllerEpoch(3));

    // (a) The Lease adapter sees the Lease at epoch 4 (taken over); the deposed controller
    // renames one more file afterwards.
    harness.send_lease(LeaseEvent::Epoch(ControllerEpoch(4)));
    observed(4);
    file(3, 18);
    quiet("the deposed controller's file after the Lease showed epoch 4");
    file(4, 18);
    harness.accept_until("at epoch 4", |a| a.controller_epoch() == ControllerEpoch(4));

    // (b) The controller of epoch 5 pushes ASSIGNMENT_CHANGED before this broker reads its
    // file; the one of epoch 4 renames one more.
    let (server, _events) = harness.others.block_on(async {
        kaas_cluster_heartbeat::HeartbeatServer::bind(
            "127.0.0.1:0".parse().expect("address"),
            kaas_cluster_heartbeat::ServerOptions::default(),
        )
        .await
        .expect("bind")
    });
    let controller = ControllerEndpoint {
        host: "127.0.0.1".into(),
        port: server.local_addr().port(),
    };
    harness.send_lease(LeaseEvent::Holder(Some(controller)));
    wait_for("broker 0's stream to the controller of epoch 5", || {
        server.brokers().iter().any(|b| b.broker.id == BrokerId(0))
    });
    let _guard = harness.others.enter();
    server.push_assignment_changed(
        AssignmentVersion(19),
        ControllerEpoch(5),
        &BTreeSet::from([BrokerId(0)]),
    );
    observed(5);
    file(4, 19);
    quiet("the deposed controller's file after the push of epoch 5");
    file(5, 19);
    harness.accept_until("at epoch 5", |a| a.controller_epoch() == ControllerEpoch(5));
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "no {what} within 20 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}
