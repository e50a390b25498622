//! A cluster broker's topic changes, end to end on the broker's side: a real `Broker` in
//! cluster mode (in this process, following `assignment.json`), its topic-change channel
//! served by a stand-in for the cluster core's KafkaTopic service that records each change,
//! answers at once and writes the resulting `assignment.json` only later (as the controller
//! does after the KafkaTopic watch fires). Kafka requests over TCP show that:
//! - CreateTopics, CreatePartitions and DeleteTopics are answered only once Metadata shows
//!   the change, and a change that never shows is REQUEST_TIMED_OUT within the request's
//!   timeout;
//! - what is sent is validated first with the standalone rules (bad configs, fewer
//!   partitions, an existing topic are refused without a request), validate-only requests are
//!   never sent, and the topic id sent is the one answered and then served;
//! - IncrementalAlterConfigs sends only the keys it changed; legacy AlterConfigs sends the
//!   request's set as the new full set; group configs are refused;
//! - Metadata with auto-creation creates through the same path (never `__consumer_offsets`).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kaas_cluster::assignment::Assignment;
use kaas_cluster::topic_change::{codes, TopicChange, TopicChangeRefusal};
use kaas_net::protocol::messages::alter_configs::{
    AlterConfigsRequest, AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
};
use kaas_net::protocol::messages::create_partitions::{
    CreatePartitionsRequest, CreatePartitionsTopic,
};
use kaas_net::protocol::messages::create_topics::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest, CreateTopicsResponse,
};
use kaas_net::protocol::messages::delete_topics::{DeleteTopicState, DeleteTopicsRequest};
use kaas_net::protocol::messages::incremental_alter_configs::{
    AlterConfigsResource, AlterableConfig, IncrementalAlterConfigsRequest,
};
use kaas_net::protocol::messages::metadata::{
    MetadataRequest, MetadataRequestTopic, MetadataResponseTopic,
};
use kaas_net::protocol::{decode_response, encode_request, ApiMessage, RequestHeader, Response};
use kaas_net::runtime::server::Broker;
use kaas_net::shard::config::{BrokerConfig, ClusterSettings};

/// How long the stand-in waits after answering before the assignment shows a change.
const LAG: Duration = Duration::from_millis(400);

/// The stand-in's topics: name → (id text, partitions, configs).
type Topics = BTreeMap<String, (String, i32, BTreeMap<String, String>)>;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

fn write_assignment(cluster_dir: &Path, version: u64, port: u16, topics: &Topics) {
    let topic_entries: Vec<String> = topics
        .iter()
        .map(|(name, (id, partitions, configs))| {
            format!(
                r#""{name}": {{"id": "{id}", "partitions": {partitions}, "configs": {}}}"#,
                serde_json::to_string(configs).unwrap()
            )
        })
        .collect();
    let partitions: Vec<String> = topics
        .iter()
        .map(|(name, (_, count, _))| {
            let leaders = vec![r#"{"leader": 0, "leader_epoch": 1}"#; *count as usize];
            format!(r#""{name}": [{}]"#, leaders.join(", "))
        })
        .collect();
    let text = format!(
        r#"{{"format": 1, "controller_epoch": 1, "assignment_version": {version},
            "brokers": [{{"id": 0, "host": "127.0.0.1", "port": {port}}}],
            "topics": {{{}}}, "partitions": {{{}}}}}"#,
        topic_entries.join(", "),
        partitions.join(", ")
    );
    let assignment = Assignment::from_json(text.as_bytes()).unwrap();
    kaas_cluster_file::write_assignment(cluster_dir, &assignment).unwrap();
}

/// Serves the broker's topic changes like the KafkaTopic service plus the controller: each
/// change is recorded and answered at once; the assignment follows [`LAG`] later. A topic
/// whose name starts with `never-` is answered as created but never assigned.
fn stand_in(
    receiver: async_channel::Receiver<kaas_cluster::topic_change::TopicChangeRequest>,
    cluster_dir: PathBuf,
    port: u16,
    log: Arc<Mutex<Vec<TopicChange>>>,
) {
    std::thread::spawn(move || {
        let mut topics = Topics::new();
        let mut version = 1;
        while let Ok(request) = receiver.recv_blocking() {
            log.lock().unwrap().push(request.change.clone());
            let refusal = match &request.change {
                TopicChange::Create {
                    topic,
                    partitions,
                    topic_id,
                    configs,
                } => {
                    if topics.contains_key(topic.as_str()) {
                        Some(codes::TOPIC_ALREADY_EXISTS)
                    } else {
                        if !topic.as_str().starts_with("never-") {
                            topics.insert(
                                topic.to_string(),
                                (topic_id.to_string(), *partitions, configs.clone()),
                            );
                        }
                        None
                    }
                }
                TopicChange::Delete { topic } => topics
                    .remove(topic.as_str())
                    .is_none()
                    .then_some(codes::UNKNOWN_TOPIC_OR_PARTITION),
                TopicChange::AddPartitions { topic, count } => match topics.get_mut(topic.as_str())
                {
                    Some(entry) => {
                        entry.1 = *count;
                        None
                    }
                    None => Some(codes::UNKNOWN_TOPIC_OR_PARTITION),
                },
                TopicChange::AlterConfigs { topic, configs } => {
                    match topics.get_mut(topic.as_str()) {
                        Some(entry) => {
                            for (key, value) in configs {
                                match value {
                                    Some(value) => entry.2.insert(key.clone(), value.clone()),
                                    None => entry.2.remove(key),
                                };
                            }
                            None
                        }
                        None => Some(codes::UNKNOWN_TOPIC_OR_PARTITION),
                    }
                }
                TopicChange::ReplaceConfigs { topic, configs } => {
                    match topics.get_mut(topic.as_str()) {
                        Some(entry) => {
                            entry.2 = configs.clone();
                            None
                        }
                        None => Some(codes::UNKNOWN_TOPIC_OR_PARTITION),
                    }
                }
                // The KafkaTopic resources keep no group configs.
                TopicChange::ReplaceGroupConfigs { .. } => Some(codes::INVALID_REQUEST),
            };
            match refusal {
                Some(code) => request.answer(Err(TopicChangeRefusal::new(code, "refused"))),
                None => {
                    request.answer(Ok(()));
                    std::thread::sleep(LAG);
                    version += 1;
                    write_assignment(&cluster_dir, version, port, &topics);
                }
            }
        }
    });
}

struct Client {
    stream: TcpStream,
    correlation_id: i32,
}

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            correlation_id: 0,
        }
    }

    fn call<R: ApiMessage>(&mut self, version: i16, body: &R) -> Response {
        self.correlation_id += 1;
        let header = RequestHeader {
            api_key: R::API_KEY,
            api_version: version,
            correlation_id: self.correlation_id,
            client_id: Some("kaas-tests".into()),
        };
        for chunk in encode_request(&header, body) {
            self.stream.write_all(&chunk).unwrap();
        }
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).unwrap();
        let mut frame = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut frame).unwrap();
        let (answered, response) =
            decode_response(R::API_KEY, version, Bytes::from(frame)).unwrap();
        assert_eq!(answered, self.correlation_id);
        response
    }

    fn create(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(&str, &str)],
        validate_only: bool,
        timeout_ms: i32,
    ) -> CreateTopicsResponse {
        let request = CreateTopicsRequest {
            topics: vec![CreatableTopic {
                name: name.into(),
                num_partitions: partitions,
                replication_factor: -1,
                configs: configs
                    .iter()
                    .map(|(k, v)| CreatableTopicConfig {
                        name: k.to_string(),
                        value: Some(v.to_string()),
                    })
                    .collect(),
                ..Default::default()
            }],
            timeout_ms,
            validate_only,
        };
        match self.call(7, &request) {
            Response::CreateTopics(response) => response,
            other => panic!("unexpected {other:?}"),
        }
    }

    fn metadata(&mut self, name: &str, auto_create: bool) -> MetadataResponseTopic {
        let request = MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                name: Some(name.into()),
                ..Default::default()
            }]),
            allow_auto_topic_creation: auto_create,
            ..Default::default()
        };
        match self.call(12, &request) {
            Response::Metadata(mut response) => response.topics.remove(0),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[test]
fn topic_changes_are_sent_validated_and_answered_once_the_view_shows_them() {
    let dir = tempfile::tempdir().unwrap();
    let cluster_dir = kaas_volume::cluster_dir(dir.path());
    std::fs::create_dir_all(&cluster_dir).unwrap();
    let port = free_port();
    write_assignment(&cluster_dir, 1, port, &Topics::new());
    let mut config = BrokerConfig::new(SocketAddr::from(([127, 0, 0, 1], port)));
    config.shards = 2;
    config.data_dir = Some(dir.path().to_path_buf());
    config.cluster = Some(ClusterSettings { broker_id: 0 });
    config.default_partitions = 2;
    let broker = Broker::start(config).unwrap();
    let receiver = broker
        .serve_topic_changes()
        .expect("the first taker serves");
    assert!(broker.serve_topic_changes().is_none(), "handed out once");
    let log = Arc::new(Mutex::new(Vec::new()));
    stand_in(receiver, cluster_dir.clone(), port, log.clone());
    let sent = || log.lock().unwrap().len();
    let mut client = Client::connect(SocketAddr::from(([127, 0, 0, 1], port)));

    // Created: answered only once Metadata has it, with the id that was sent.
    let started = Instant::now();
    let created = client.create("orders", 3, &[("retention.ms", "1000")], false, 10_000);
    let result = &created.topics[0];
    assert_eq!(result.error_code, 0, "{result:?}");
    assert!(
        started.elapsed() >= LAG,
        "answered before the view could show it"
    );
    assert_eq!(result.num_partitions, 3);
    let shown = client.metadata("orders", false);
    assert_eq!(shown.error_code, 0, "{shown:?}");
    assert_eq!(shown.partitions.len(), 3);
    assert_eq!(shown.topic_id, result.topic_id);
    let TopicChange::Create {
        topic_id, configs, ..
    } = log.lock().unwrap()[0].clone()
    else {
        panic!("a create was sent first");
    };
    assert_eq!(topic_id.0, result.topic_id.0);
    assert_eq!(topic_id.to_string().len(), 22);
    assert_eq!(
        configs,
        BTreeMap::from([("retention.ms".to_string(), "1000".to_string())])
    );

    // Refused by the broker's own checks, or validate-only: nothing is sent.
    let before = sent();
    let code = |r: CreateTopicsResponse| r.topics[0].error_code;
    assert_eq!(code(client.create("orders", 1, &[], false, 10_000)), 36);
    assert_eq!(
        code(client.create("bad", 1, &[("retention.ms", "-5")], false, 10_000)),
        40
    );
    assert_eq!(code(client.create("bad", 0, &[], false, 10_000)), 37);
    assert_eq!(code(client.create("a/b", 1, &[], false, 10_000)), 17);
    assert_eq!(code(client.create("checked", 4, &[], true, 10_000)), 0);
    assert_eq!(client.metadata("checked", false).error_code, 3);
    assert_eq!(sent(), before, "{:?}", log.lock().unwrap());

    // A created topic the view never shows: REQUEST_TIMED_OUT within the request's timeout.
    let started = Instant::now();
    let lagging = client.create("never-shown", 1, &[], false, 300);
    assert_eq!(lagging.topics[0].error_code, 7, "{:?}", lagging.topics[0]);
    assert!(started.elapsed() < Duration::from_secs(10));

    // Partitions: checked against the view, then sent and waited for.
    let before = sent();
    let partitions = |client: &mut Client, count: i32, validate_only: bool| {
        let request = CreatePartitionsRequest {
            topics: vec![CreatePartitionsTopic {
                name: "orders".into(),
                count,
                assignments: None,
            }],
            timeout_ms: 10_000,
            validate_only,
        };
        match client.call(3, &request) {
            Response::CreatePartitions(r) => r.results[0].error_code,
            other => panic!("unexpected {other:?}"),
        }
    };
    assert_eq!(partitions(&mut client, 2, false), 37);
    assert_eq!(partitions(&mut client, 9, true), 0);
    assert_eq!(sent(), before);
    assert_eq!(partitions(&mut client, 5, false), 0);
    assert_eq!(client.metadata("orders", false).partitions.len(), 5);

    // Configs: only the changed keys go out; group configs are checked, then refused.
    let alter_with = |client: &mut Client, resource_type: i8, name: &str, configs| {
        let request = IncrementalAlterConfigsRequest {
            resources: vec![AlterConfigsResource {
                resource_type,
                resource_name: name.into(),
                configs,
            }],
            validate_only: false,
        };
        match client.call(1, &request) {
            Response::IncrementalAlterConfigs(r) => r.responses[0].clone(),
            other => panic!("unexpected {other:?}"),
        }
    };
    let alter = |client: &mut Client, resource_type: i8, name: &str| {
        let configs = vec![
            AlterableConfig {
                name: "retention.ms".into(),
                config_operation: 1,
                value: None,
            },
            AlterableConfig {
                name: "cleanup.policy".into(),
                config_operation: 0,
                value: Some("compact".into()),
            },
        ];
        alter_with(client, resource_type, name, configs)
    };
    assert_eq!(alter(&mut client, 2, "orders").error_code, 0);
    assert_eq!(
        log.lock().unwrap().last().cloned(),
        Some(TopicChange::AlterConfigs {
            topic: kaas_cluster::ids::TopicName::new("orders").unwrap(),
            configs: BTreeMap::from([
                ("cleanup.policy".to_string(), Some("compact".to_string())),
                ("retention.ms".to_string(), None),
            ]),
        })
    );
    // A group's configs go the same way, as the group's whole set; the KafkaTopic service
    // (here its stand-in) keeps none and refuses them with INVALID_REQUEST.
    let before = sent();
    let topic_configs_on_a_group = alter(&mut client, 32, "billing");
    assert_eq!(
        topic_configs_on_a_group.error_code, 40,
        "{topic_configs_on_a_group:?}"
    );
    assert_eq!(sent(), before);
    let session = vec![AlterableConfig {
        name: "consumer.session.timeout.ms".into(),
        config_operation: 0,
        value: Some("50000".into()),
    }];
    let group = alter_with(&mut client, 32, "billing", session);
    assert_eq!(group.error_code, 42, "{group:?}");
    assert_eq!(sent(), before + 1);
    assert!(matches!(
        log.lock().unwrap().last(),
        Some(TopicChange::ReplaceGroupConfigs { group, .. }) if group == "billing"
    ));

    // Legacy AlterConfigs sends the request's set as the new full set (not a diff against
    // this broker's view), even when the view already shows exactly that set.
    let replace = |client: &mut Client| {
        let request = AlterConfigsRequest {
            resources: vec![LegacyResource {
                resource_type: 2,
                resource_name: "orders".into(),
                configs: vec![LegacyConfig {
                    name: "segment.ms".into(),
                    value: Some("60000".into()),
                }],
            }],
            validate_only: false,
        };
        match client.call(1, &request) {
            Response::AlterConfigs(r) => r.responses[0].clone(),
            other => panic!("unexpected {other:?}"),
        }
    };
    let replaced = TopicChange::ReplaceConfigs {
        topic: kaas_cluster::ids::TopicName::new("orders").unwrap(),
        configs: BTreeMap::from([("segment.ms".to_string(), "60000".to_string())]),
    };
    assert_eq!(replace(&mut client).error_code, 0);
    assert_eq!(log.lock().unwrap().last().cloned(), Some(replaced.clone()));
    let before = sent();
    assert_eq!(replace(&mut client).error_code, 0);
    assert_eq!(sent(), before + 1, "sent although the view shows that set");
    assert_eq!(log.lock().unwrap().last().cloned(), Some(replaced));

    // Auto-creation on Metadata goes the same way, with the default partition count.
    let auto = client.metadata("auto", true);
    assert_eq!(auto.error_code, 0, "{auto:?}");
    assert_eq!(auto.partitions.len(), 2);
    assert!(matches!(
        log.lock().unwrap().last(),
        Some(TopicChange::Create { partitions: 2, .. })
    ));

    // The coordinators' internal topic is never auto-created.
    let before = sent();
    let internal = client.metadata("__consumer_offsets", true);
    assert_eq!(internal.error_code, 3, "{internal:?}");
    assert_eq!(sent(), before);

    // Deleted: answered once Metadata no longer has it.
    let request = DeleteTopicsRequest {
        topics: vec![DeleteTopicState {
            name: Some("orders".into()),
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    match client.call(6, &request) {
        Response::DeleteTopics(r) => {
            assert_eq!(r.responses[0].error_code, 0, "{:?}", r.responses[0]);
            assert_eq!(r.responses[0].topic_id, shown.topic_id);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(client.metadata("orders", false).error_code, 3);

    drop(client);
    broker.stop();
}
