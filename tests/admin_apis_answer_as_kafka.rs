//! The cluster-inspection and ACL APIs answer as Apache Kafka 4.4 does for a broker without an
//! authorizer (each shape checked side by side with Kafka): ACL requests get SECURITY_DISABLED
//! and a filter naming UNKNOWN closes the connection; DescribeLogDirs reports exactly the bytes
//! stored per partition; DescribeProducers reports the idempotent producer that wrote them;
//! Metadata and DescribeCluster report every operation as authorized when asked.

mod support;

use kaas_engine::batch::{encode_batch_for_tests, TestRecord};
use kaas_net::protocol::messages::api_versions::ApiVersionsRequest;
use kaas_net::protocol::messages::create_acls::{AclCreation, CreateAclsRequest};
use kaas_net::protocol::messages::delete_acls::{DeleteAclsFilter, DeleteAclsRequest};
use kaas_net::protocol::messages::describe_acls::DescribeAclsRequest;
use kaas_net::protocol::messages::describe_cluster::DescribeClusterRequest;
use kaas_net::protocol::messages::describe_log_dirs::{
    DescribableLogDirTopic, DescribeLogDirsRequest, DescribeLogDirsResult,
};
use kaas_net::protocol::messages::describe_producers::{
    DescribeProducersRequest, DescribeProducersTopicRequest,
};
use kaas_net::protocol::messages::metadata::{
    MetadataRequest, MetadataRequestTopic, MetadataResponse,
};
use kaas_net::protocol::{ErrorCode, Response};
use support::{Kaas, WireClient};

const SECURITY_DISABLED: i16 = ErrorCode::SecurityDisabled.code();

fn describe_filter(operation: i8) -> DescribeAclsRequest {
    DescribeAclsRequest {
        resource_type_filter: 1,
        pattern_type_filter: 1,
        operation,
        permission_type: 1,
        ..Default::default()
    }
}

#[test]
fn acl_requests_get_security_disabled_and_unknown_elements_close_the_connection() {
    let kaas = Kaas::start(None, &[]);
    let mut client = kaas.client();
    for version in 1..=3 {
        let Response::DescribeAcls(r) = client.call(version, &describe_filter(1)) else {
            panic!("not DescribeAcls")
        };
        assert_eq!(r.error_code, SECURITY_DISABLED);
        assert_eq!(
            r.error_message.as_deref(),
            Some("No Authorizer is configured on the broker")
        );
        assert!(r.resources.is_empty());

        let creation = AclCreation {
            resource_type: 2,
            resource_name: "t".into(),
            resource_pattern_type: 3,
            principal: "User:a".into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
        };
        let request = CreateAclsRequest {
            creations: vec![creation.clone(), creation],
        };
        let Response::CreateAcls(r) = client.call(version, &request) else {
            panic!("not CreateAcls")
        };
        assert_eq!(r.results.len(), 2);
        for result in &r.results {
            assert_eq!(result.error_code, SECURITY_DISABLED);
            assert_eq!(
                result.error_message.as_deref(),
                Some("No Authorizer is configured.")
            );
        }

        let filter = DeleteAclsFilter {
            resource_type_filter: 1,
            pattern_type_filter: 1,
            operation: 1,
            permission_type: 1,
            ..Default::default()
        };
        let Response::DeleteAcls(r) = client.call(
            version,
            &DeleteAclsRequest {
                filters: vec![filter.clone(), filter.clone(), filter],
            },
        ) else {
            panic!("not DeleteAcls")
        };
        assert_eq!(r.filter_results.len(), 3);
        for result in &r.filter_results {
            assert_eq!(result.error_code, SECURITY_DISABLED);
            assert_eq!(
                result.error_message.as_deref(),
                Some("No Authorizer is configured.")
            );
            assert!(result.matching_acls.is_empty());
        }
    }

    // Operation UNKNOWN (0): Kafka cannot parse the request and closes the connection.
    let mut client = kaas.client();
    assert!(client.try_call(3, &describe_filter(0)).is_none());
    assert!(client.is_closed_by_peer());
    let mut client = kaas.client();
    let Response::ApiVersions(r) = client.call(3, &ApiVersionsRequest::default()) else {
        panic!("not ApiVersions")
    };
    assert_eq!(r.error_code, 0);
}

fn describe_log_dirs(client: &mut WireClient, version: i16, topic: &str) -> DescribeLogDirsResult {
    let request = DescribeLogDirsRequest {
        topics: Some(vec![DescribableLogDirTopic {
            topic: topic.into(),
            partitions: vec![0, 1, 2, 99],
        }]),
    };
    let Response::DescribeLogDirs(mut r) = client.call(version, &request) else {
        panic!("not DescribeLogDirs")
    };
    assert_eq!(r.results.len(), 1, "one log dir");
    r.results.remove(0)
}

#[test]
fn log_dir_sizes_and_producer_state_follow_what_was_produced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kaas = Kaas::start(Some(dir.path()), &["--shards", "2"]);
    let mut client = kaas.client();
    client.create_topic("sizes", 3, &[]);

    let empty = describe_log_dirs(&mut client, 4, "sizes");
    assert_eq!(
        empty.log_dir,
        std::path::absolute(dir.path())
            .expect("abs")
            .display()
            .to_string()
    );
    assert!(empty.total_bytes > 0 && empty.usable_bytes >= 0);
    assert!(empty.usable_bytes <= empty.total_bytes);
    assert_eq!(empty.topics.len(), 1);
    let sizes: Vec<(i32, i64)> = empty.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.partition_size))
        .collect();
    assert_eq!(
        sizes,
        vec![(0, 0), (1, 0), (2, 0)],
        "partition 99 is left out"
    );

    let value = vec![7u8; 500];
    let records: Vec<TestRecord<'_>> = (0..10).map(|_| (None, Some(&value[..]))).collect();
    let first = encode_batch_for_tests(&records, 1_700_000_000_000, 4242, 3, 0);
    let second = encode_batch_for_tests(&records, 1_700_000_000_500, 4242, 3, 10);
    let other = encode_batch_for_tests(&records[..2], 1_700_000_000_900, 77, 0, 0);
    for (partition, batch) in [(0, &first), (0, &second), (2, &other)] {
        let answer = client.produce("sizes", vec![(partition, batch.clone())]);
        assert_eq!(answer[0].1, 0, "{answer:?}");
    }

    let after = describe_log_dirs(&mut client, 5, "sizes");
    let sizes: Vec<(i32, i64)> = after.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.partition_size))
        .collect();
    let stored = |batches: &[&Vec<u8>]| batches.iter().map(|b| b.len() as i64).sum::<i64>();
    assert_eq!(
        sizes,
        vec![
            (0, stored(&[&first, &second])),
            (1, 0),
            (2, stored(&[&other]))
        ]
    );
    assert!(after.topics[0]
        .partitions
        .iter()
        .all(|p| p.offset_lag == 0 && !p.is_future_key));
    // v1-v3 carry no volume sizes.
    let v1 = describe_log_dirs(&mut client, 1, "sizes");
    assert_eq!((v1.total_bytes, v1.usable_bytes), (-1, -1));

    let request = DescribeProducersRequest {
        topics: vec![DescribeProducersTopicRequest {
            name: "sizes".into(),
            partition_indexes: vec![0, 1, 2, 3],
        }],
    };
    let Response::DescribeProducers(r) = client.call(0, &request) else {
        panic!("not DescribeProducers")
    };
    let partitions = &r.topics[0].partitions;
    assert_eq!(partitions.len(), 4);
    let p0 = &partitions[0];
    assert_eq!(p0.error_code, 0);
    assert_eq!(p0.active_producers.len(), 1);
    let state = &p0.active_producers[0];
    assert_eq!(
        (state.producer_id, state.producer_epoch, state.last_sequence),
        (4242, 3, 19)
    );
    assert_eq!(state.last_timestamp, 1_700_000_000_500);
    assert_eq!(
        (state.coordinator_epoch, state.current_txn_start_offset),
        (-1, -1)
    );
    assert!(partitions[1].active_producers.is_empty());
    assert_eq!(partitions[2].active_producers[0].producer_id, 77);
    assert_eq!(partitions[2].active_producers[0].last_sequence, 1);
    assert_eq!(
        partitions[3].error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    assert_eq!(partitions[3].error_message, None);
}

fn metadata(client: &mut WireClient, version: i16, include: bool) -> MetadataResponse {
    let request = MetadataRequest {
        topics: Some(
            ["ops", "ops-missing"]
                .iter()
                .map(|name| MetadataRequestTopic {
                    name: Some(name.to_string()),
                    ..Default::default()
                })
                .collect(),
        ),
        allow_auto_topic_creation: false,
        include_cluster_authorized_operations: include,
        include_topic_authorized_operations: include,
    };
    let Response::Metadata(r) = client.call(version, &request) else {
        panic!("not Metadata")
    };
    r
}

#[test]
fn authorized_operations_are_all_operations_when_asked_for() {
    let kaas = Kaas::start(None, &[]);
    let mut client = kaas.client();
    client.create_topic("ops", 1, &[]);
    // Kafka 4.4 without an authorizer: 3576 on every topic of the answer, unknown ones too;
    // 8096 for the cluster where the version has the field (v8-v10).
    let asked = metadata(&mut client, 10, true);
    assert_eq!(asked.topics.len(), 2);
    assert!(asked
        .topics
        .iter()
        .all(|t| t.topic_authorized_operations == 3576));
    assert_eq!(
        asked.topics[1].error_code,
        ErrorCode::UnknownTopicOrPartition.code()
    );
    assert_eq!(asked.cluster_authorized_operations, 8096);
    let newer = metadata(&mut client, 12, true);
    assert!(newer
        .topics
        .iter()
        .all(|t| t.topic_authorized_operations == 3576));
    let not_asked = metadata(&mut client, 12, false);
    assert!(not_asked
        .topics
        .iter()
        .all(|t| t.topic_authorized_operations == i32::MIN));

    for (include, expected) in [(true, 8096), (false, i32::MIN)] {
        let request = DescribeClusterRequest {
            include_cluster_authorized_operations: include,
            ..Default::default()
        };
        let Response::DescribeCluster(r) = client.call(2, &request) else {
            panic!("not DescribeCluster")
        };
        assert_eq!(r.cluster_authorized_operations, expected);
    }
}
