//! Topics, their ids and config overrides survive a restart (standalone: the topics file in
//! the data directory); the admin endpoint reports health and Prometheus counters.

mod support;

use kaas_net::protocol::messages::create_topics::{
    CreatableTopic, CreatableTopicConfig, CreateTopicsRequest,
};
use kaas_net::protocol::messages::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kaas_net::protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
use kaas_net::protocol::{Response, Uuid};
use support::{http_get, Kaas, WireClient};

fn describe(client: &mut WireClient, topic: &str) -> (Uuid, usize, Option<String>) {
    let metadata = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: Some(topic.into()),
            ..Default::default()
        }]),
        allow_auto_topic_creation: false,
        ..Default::default()
    };
    let Response::Metadata(metadata) = client.call(12, &metadata) else {
        panic!("not Metadata")
    };
    let found = &metadata.topics[0];
    assert_eq!(found.error_code, 0, "{found:?}");
    let configs = DescribeConfigsRequest {
        resources: vec![DescribeConfigsResource {
            resource_type: 2,
            resource_name: topic.into(),
            configuration_keys: Some(vec!["retention.ms".into()]),
        }],
        ..Default::default()
    };
    let Response::DescribeConfigs(configs) = client.call(4, &configs) else {
        panic!("not DescribeConfigs")
    };
    let retention = configs.results[0]
        .configs
        .first()
        .and_then(|c| c.value.clone());
    (found.topic_id, found.partitions.len(), retention)
}

#[test]
fn topics_survive_a_restart_and_metrics_count_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start(Some(dir.path()), &[]);
    let mut client = kaas.client();
    let create = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: "kept".into(),
            num_partitions: 4,
            replication_factor: -1,
            configs: vec![CreatableTopicConfig {
                name: "retention.ms".into(),
                value: Some("123456".into()),
            }],
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let Response::CreateTopics(created) = client.call(7, &create) else {
        panic!("not CreateTopics")
    };
    assert_eq!(created.topics[0].error_code, 0);
    let before = describe(&mut client, "kept");
    assert_eq!(before.1, 4);
    assert_eq!(before.2.as_deref(), Some("123456"));

    let (code, health) = http_get(kaas.admin, "/healthz").expect("healthz");
    assert_eq!(code, 200);
    assert!(health.contains("\"partitions_led\":4"), "{health}");
    let (code, metrics) = http_get(kaas.admin, "/metrics").expect("metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains("kaas_requests_total{api_key=\"19\"} 1"),
        "{metrics}"
    );
    assert_eq!(http_get(kaas.admin, "/nope").map(|(c, _)| c), Some(404));

    assert!(kaas.terminate(), "clean exit on SIGTERM");
    kaas.restart();
    let mut client = kaas.client();
    assert_eq!(
        describe(&mut client, "kept"),
        before,
        "same id, partitions and config"
    );
}
