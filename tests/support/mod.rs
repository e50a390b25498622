//! Shared by the integration tests: a real `kaas` process and a minimal blocking Kafka
//! client built on kaas-net's codec (for byte-level cases real clients cannot send).

#![allow(dead_code)]

pub mod cluster;
pub mod cluster_load;
pub mod kube_cluster;
pub mod offsets_topic;
pub mod tcp_proxy;
pub mod transactions;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kaas_net::protocol::messages::create_topics::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kaas_net::protocol::messages::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kaas_net::protocol::messages::incremental_alter_configs::{
    AlterConfigsResource, AlterConfigsResourceResponse, AlterableConfig,
    IncrementalAlterConfigsRequest,
};
use kaas_net::protocol::messages::init_producer_id::InitProducerIdRequest;
use kaas_net::protocol::messages::produce::{
    PartitionProduceData, ProduceRequest, TopicProduceData,
};
use kaas_net::protocol::{decode_response, encode_request, ApiMessage, RequestHeader, Response};

/// A loopback port no listener holds now, below the kernel's ephemeral range (Linux hands
/// out 32768 and up): a port taken from that range, released and bound again later by a
/// broker can meanwhile become the local port of some outgoing connection (a client's, a
/// broker's), and the broker's bind then fails with "address in use". Ports are taken in
/// turn from a start that differs per test process, so two tests of one process never get
/// the same one.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 10_000;
    const SPAN: u32 = 22_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let start = std::process::id().wrapping_mul(7_919) % SPAN;
    let _ = NEXT.compare_exchange(u32::MAX, start, Ordering::Relaxed, Ordering::Relaxed);
    for _ in 0..SPAN {
        let port = u16::try_from(FIRST + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN)
            .expect("below 32000");
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port between {FIRST} and {}", FIRST + SPAN);
}

/// A `kaas` broker process, killed when dropped.
pub struct Kaas {
    child: Option<Child>,
    pub kafka: SocketAddr,
    pub admin: SocketAddr,
    pub data_dir: Option<PathBuf>,
    extra: Vec<String>,
    /// A command (and its arguments) that runs kaas as its last arguments: empty to run
    /// kaas directly, `taskset -c 1` to start it with a narrower CPU affinity.
    launcher: Vec<String>,
}

impl Kaas {
    /// Starts a broker on `data_dir` (in memory when `None`) and waits until it is ready.
    pub fn start(data_dir: Option<&Path>, extra: &[&str]) -> Kaas {
        Kaas::start_through(&[], data_dir, extra)
    }

    /// Starts a broker as [`Kaas::start`] does, but as the last arguments of `launcher`
    /// (`["taskset", "-c", "1"]`), which must end by exec'ing it: the pid is then the
    /// broker's own.
    pub fn start_through(launcher: &[&str], data_dir: Option<&Path>, extra: &[&str]) -> Kaas {
        let mut kaas = Kaas {
            child: None,
            kafka: SocketAddr::from(([127, 0, 0, 1], free_port())),
            admin: SocketAddr::from(([127, 0, 0, 1], free_port())),
            data_dir: data_dir.map(Path::to_path_buf),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            launcher: launcher.iter().map(|s| s.to_string()).collect(),
        };
        kaas.launch();
        kaas
    }

    fn launch(&mut self) {
        let binary = env!("CARGO_BIN_EXE_kaas");
        let mut command = match self.launcher.split_first() {
            None => Command::new(binary),
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary);
                command
            }
        };
        command
            .arg("--listen")
            .arg(self.kafka.to_string())
            .arg("--admin-listen")
            .arg(self.admin.to_string())
            .args(&self.extra)
            .env_remove("MY_POD_NAME")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        match &self.data_dir {
            Some(dir) => command.arg("--data-dir").arg(dir),
            None => command.arg("--in-memory"),
        };
        let child = self.child.insert(command.spawn().expect("spawn kaas"));
        if !wait_for_healthz(child, self.admin, "kaas exited during start-up") {
            panic!("kaas did not become ready");
        }
    }

    /// Sends SIGTERM and waits for a clean exit; returns whether it exited with success.
    pub fn terminate(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        false
    }

    /// SIGKILL: no flush, no checkpoint.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the broker again on the same ports and data directory.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the broker first");
        self.launch();
    }

    /// The broker's process id (0 once stopped).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// A connected protocol client.
    pub fn client(&self) -> WireClient {
        WireClient::connect(self.kafka)
    }
}

impl Drop for Kaas {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Waits up to 30 s for `/healthz` on `admin` to answer 200; returns whether it did. Panics
/// with `exited` and the status if `child` exits first.
pub fn wait_for_healthz(child: &mut Child, admin: SocketAddr, exited: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait") {
            panic!("{exited}: {status}");
        }
        if http_get(admin, "/healthz").is_some_and(|(code, _)| code == 200) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Runs `command` (a kaas expected to stop by itself) with stderr piped until it exits: its
/// status and stderr. After 30 s it is killed and the test fails with `still_running`.
pub fn run_to_exit(command: &mut Command, still_running: &str) -> (ExitStatus, String) {
    let mut child = command.stderr(Stdio::piped()).spawn().expect("spawn kaas");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if child.try_wait().expect("wait").is_some() {
            let output = child.wait_with_output().expect("output");
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            return (output.status, stderr);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{still_running}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `done` every 100 ms until it holds; fails the test, naming `what`, after `bound`.
pub fn wait_until(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: not within {bound:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET path` on the admin endpoint: (status code, body).
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    Some((code, body))
}

/// A blocking Kafka protocol client over one connection.
pub struct WireClient {
    pub stream: TcpStream,
    correlation_id: i32,
}

impl WireClient {
    pub fn connect(addr: SocketAddr) -> WireClient {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        // A request goes out in several writes; without this, Nagle's algorithm holds the
        // last one until the broker's delayed ACK (40 ms) for every request.
        stream.set_nodelay(true).expect("nodelay");
        WireClient {
            stream,
            correlation_id: 0,
        }
    }

    /// Sends `body` at `version` and returns the decoded response.
    pub fn call<R: ApiMessage>(&mut self, version: i16, body: &R) -> Response {
        self.try_call(version, body).expect("a response")
    }

    /// Like [`WireClient::call`], but `None` when the connection fails.
    pub fn try_call<R: ApiMessage>(&mut self, version: i16, body: &R) -> Option<Response> {
        let correlation_id = self.send(version, body)?;
        self.receive(R::API_KEY, version, correlation_id)
    }

    /// Sends `body` at `version` without waiting for the answer (requests pipeline; read the
    /// answers in order with [`WireClient::receive`]); its correlation id, `None` when the
    /// connection fails.
    pub fn send<R: ApiMessage>(&mut self, version: i16, body: &R) -> Option<i32> {
        self.correlation_id += 1;
        let header = RequestHeader {
            api_key: R::API_KEY,
            api_version: version,
            correlation_id: self.correlation_id,
            client_id: Some("kaas-tests".into()),
        };
        for chunk in encode_request(&header, body) {
            self.stream.write_all(&chunk).ok()?;
        }
        Some(self.correlation_id)
    }

    /// Reads the answer to the request [`WireClient::send`] sent as `correlation_id` (API
    /// `api_key` at `version`); `None` when the connection fails or times out.
    pub fn receive(&mut self, api_key: i16, version: i16, correlation_id: i32) -> Option<Response> {
        let frame = self.read_frame()?;
        let (answered, response) =
            decode_response(api_key, version, frame).expect("decodable response");
        assert_eq!(answered, correlation_id, "answers come in request order");
        Some(response)
    }

    /// Produces `batches` (partition, batch bytes) to `topic` with acks=all; returns each
    /// partition's (index, error code, base offset).
    pub fn produce(&mut self, topic: &str, batches: Vec<(i32, Vec<u8>)>) -> Vec<(i32, i16, i64)> {
        match self.call(9, &produce_request(topic, batches)) {
            Response::Produce(r) => r.responses[0]
                .partition_responses
                .iter()
                .map(|p| (p.index, p.error_code, p.base_offset))
                .collect(),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A new idempotent producer: InitProducerId without a transactional id, asserting it
    /// succeeded; returns (producer id, epoch).
    pub fn init_producer(&mut self) -> (i64, i16) {
        let request = InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            ..Default::default()
        };
        match self.call(4, &request) {
            Response::InitProducerId(r) => {
                assert_eq!(r.error_code, 0, "{r:?}");
                (r.producer_id, r.producer_epoch)
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Creates a topic (replication factor 1) with `configs`, asserting it was created.
    pub fn create_topic(&mut self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let request = CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: name.into(),
                num_partitions: partitions,
                replication_factor: 1,
                configs: configs
                    .iter()
                    .map(|(k, v)| CreatableTopicConfig {
                        name: k.to_string(),
                        value: Some(v.to_string()),
                    })
                    .collect(),
                ..Default::default()
            }],
            timeout_ms: 10_000,
            ..Default::default()
        };
        match self.call(7, &request) {
            Response::CreateTopics(r) => {
                assert_eq!(r.topics[0].error_code, 0, "{:?}", r.topics[0])
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// A tool's commit of `offset` on partition 0 of `topic` for `group` (OffsetCommit v9,
    /// generation -1, no member: a group that does not exist is created Empty with the
    /// offset); the partition's error code.
    pub fn simple_commit(&mut self, group: &str, topic: &str, offset: i64) -> i16 {
        use kaas_net::protocol::messages::offset_commit::{
            OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        let request = OffsetCommitRequest {
            group_id: group.into(),
            generation_id_or_member_epoch: -1,
            member_id: String::new(),
            topics: vec![OffsetCommitRequestTopic {
                name: topic.into(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: offset,
                    committed_leader_epoch: -1,
                    committed_metadata: None,
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let Response::OffsetCommit(committed) = self.call(9, &request) else {
            panic!("not OffsetCommit")
        };
        committed.topics[0].partitions[0].error_code
    }

    /// The error code of `group` and its committed offset of `topic`'s partition `partition`
    /// (OffsetFetch v8, every topic of the group), `None` when it has none.
    pub fn committed_offset(
        &mut self,
        group: &str,
        topic: &str,
        partition: i32,
    ) -> (i16, Option<i64>) {
        use kaas_net::protocol::messages::offset_fetch::{
            OffsetFetchRequest, OffsetFetchRequestGroup,
        };
        let request = OffsetFetchRequest {
            groups: vec![OffsetFetchRequestGroup {
                group_id: group.into(),
                topics: None,
                ..Default::default()
            }],
            ..Default::default()
        };
        let Response::OffsetFetch(fetched) = self.call(8, &request) else {
            panic!("not OffsetFetch")
        };
        let group = &fetched.groups[0];
        let offset = group
            .topics
            .iter()
            .filter(|t| t.name == topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == partition)
            .map(|p| p.committed_offset);
        (group.error_code, offset)
    }

    /// Metadata v12 of `topic`: its error code, whether it is internal, and the (leader,
    /// leader epoch) of each partition in partition order.
    pub fn topic_leaders(&mut self, topic: &str) -> (i16, bool, Vec<(i32, i32)>) {
        use kaas_net::protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
        let request = MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                name: Some(topic.into()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let Response::Metadata(metadata) = self.call(12, &request) else {
            panic!("not Metadata")
        };
        let topic = &metadata.topics[0];
        let mut leaders: Vec<(i32, (i32, i32))> = topic
            .partitions
            .iter()
            .map(|p| (p.partition_index, (p.leader_id, p.leader_epoch)))
            .collect();
        leaders.sort_unstable();
        (
            topic.error_code,
            topic.is_internal,
            leaders.into_iter().map(|(_, leader)| leader).collect(),
        )
    }

    /// IncrementalAlterConfigs setting `key` to `value` on resource `name` of
    /// `resource_type` (2: topic, 32: group); the resource's answer.
    pub fn set_config(
        &mut self,
        resource_type: i8,
        name: &str,
        key: &str,
        value: &str,
    ) -> AlterConfigsResourceResponse {
        let request = IncrementalAlterConfigsRequest {
            resources: vec![AlterConfigsResource {
                resource_type,
                resource_name: name.into(),
                configs: vec![AlterableConfig {
                    name: key.into(),
                    config_operation: 0,
                    value: Some(value.into()),
                }],
            }],
            validate_only: false,
        };
        match self.call(1, &request) {
            Response::IncrementalAlterConfigs(mut r) => r.responses.remove(0),
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// Reads one response frame (without its size prefix); `None` on EOF or error.
    pub fn read_frame(&mut self) -> Option<Bytes> {
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut frame).ok()?;
        Some(Bytes::from(frame))
    }

    /// True when the broker closed the connection (EOF or reset) within the read timeout.
    pub fn is_closed_by_peer(&mut self) -> bool {
        self.stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0) | Err(_))
    }
}

/// One Fetch (no wait, up to 50 MiB) of `topic`-`partition` from `fetch_offset`; the
/// partition's answer, which must carry no error.
pub fn fetch_at(
    client: &mut WireClient,
    topic: &str,
    partition: i32,
    fetch_offset: i64,
) -> kaas_net::protocol::messages::fetch::PartitionData {
    use kaas_net::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
    let request = FetchRequest {
        max_wait_ms: 0,
        min_bytes: 0,
        max_bytes: 50 << 20,
        topics: vec![FetchTopic {
            topic: topic.into(),
            partitions: vec![FetchPartition {
                partition,
                fetch_offset,
                partition_max_bytes: 50 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::Fetch(mut response) = client.call(12, &request) else {
        panic!("not a fetch response")
    };
    let data = response.responses.swap_remove(0).partitions.swap_remove(0);
    assert_eq!(
        data.error_code, 0,
        "fetching {topic}-{partition} at {fetch_offset} (log start {}, high watermark {})",
        data.log_start_offset, data.high_watermark
    );
    data
}

/// The headers of every batch of `topic`'s `partition` at the broker `client` talks to, from
/// offset 0 to the high watermark (one fetch per round, no waiting). A stored batch keeps the
/// producer's CRC (the base offset and leader epoch the broker stamps are outside it), so the
/// CRC tells which batch was sent.
pub fn fetch_batches(
    client: &mut WireClient,
    topic: &str,
    partition: i32,
) -> Vec<kaas_engine::batch::BatchHeader> {
    let mut headers: Vec<kaas_engine::batch::BatchHeader> = Vec::new();
    loop {
        let fetch_offset = headers.last().map_or(0, |h| h.next_offset());
        let data = fetch_at(client, topic, partition, fetch_offset);
        let records = data.records.clone().unwrap_or_default();
        let before = headers.len();
        headers.extend(kaas_engine::batch::scan_batches(&records, 0).map(|b| b.header));
        if headers.len() == before
            || headers.last().map(|h| h.next_offset()) >= Some(data.high_watermark)
        {
            return headers;
        }
    }
}

/// A Produce request (acks=all, 10 s timeout) of `batches` (partition, batch bytes) to `topic`.
pub fn produce_request(topic: &str, batches: Vec<(i32, Vec<u8>)>) -> ProduceRequest {
    ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: topic.into(),
            partition_data: batches
                .into_iter()
                .map(|(index, records)| PartitionProduceData {
                    index,
                    records: Some(Bytes::from(records)),
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// (value, source) of each named config of a resource.
pub fn describe_configs(
    client: &mut WireClient,
    resource_type: i8,
    name: &str,
    keys: &[&str],
) -> Vec<(String, i8)> {
    let request = DescribeConfigsRequest {
        resources: vec![DescribeConfigsResource {
            resource_type,
            resource_name: name.into(),
            configuration_keys: Some(keys.iter().map(|k| k.to_string()).collect()),
        }],
        ..Default::default()
    };
    let Response::DescribeConfigs(response) = client.call(4, &request) else {
        panic!("not DescribeConfigs")
    };
    let result = &response.results[0];
    assert_eq!(result.error_code, 0, "{result:?}");
    keys.iter()
        .map(|key| {
            let entry = result
                .configs
                .iter()
                .find(|c| c.name == *key)
                .unwrap_or_else(|| panic!("{key} missing from {result:?}"));
            (entry.value.clone().unwrap_or_default(), entry.config_source)
        })
        .collect()
}
