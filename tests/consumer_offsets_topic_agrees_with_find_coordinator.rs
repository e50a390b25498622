//! `__consumer_offsets` in cluster mode agrees with FindCoordinator when the assignment does
//! not place the topic (a file written by hand, or by a controller from before groups were
//! placed by that topic: every controller now places it, see
//! `groups_follow_their_offsets_partition.rs`). Such a file places groups one by one
//! (`consumerGroups`, else the fallback coordinator), so two groups of one partition can have
//! different coordinators and no partition leader could agree with both. So the topic does not
//! exist then: with three real brokers and groups spread over them, two of them in the same
//! partition on different brokers, every broker's FindCoordinator names each group's broker,
//! which takes its commits, while Metadata (all topics, by name, by id), ListOffsets, Fetch and
//! DescribeConfigs of `__consumer_offsets` answer as Kafka does for a topic that does not
//! exist, on every broker, instead of listing 50 partitions without a leader.

mod support;

use kaas_cluster::placement::offsets_partition;
use kaas_net::protocol::messages::describe_configs::{
    DescribeConfigsRequest, DescribeConfigsResource,
};
use kaas_net::protocol::messages::fetch::{FetchPartition, FetchRequest, FetchTopic};
use kaas_net::protocol::messages::find_coordinator::FindCoordinatorRequest;
use kaas_net::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kaas_net::protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
use kaas_net::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kaas_net::protocol::{ErrorCode, Response};
use support::cluster::{endpoints, file_brokers, start_all, write_assignment};
use support::WireClient;

const NAME: &str = "__consumer_offsets";
const TOPIC: &str = "orders";

/// Three groups: the first two in one `__consumer_offsets` partition, the third in another.
fn groups() -> [String; 3] {
    let first = "group-0".to_string();
    let partition = offsets_partition(&first);
    let same = (1..)
        .map(|i| format!("group-{i}"))
        .find(|g| offsets_partition(g) == partition)
        .expect("a second group in the partition");
    let other = (1..)
        .map(|i| format!("group-{i}"))
        .find(|g| offsets_partition(g) != partition)
        .expect("a group in another partition");
    [first, same, other]
}

fn metadata(client: &mut WireClient, topics: Option<Vec<MetadataRequestTopic>>) -> Response {
    let request = MetadataRequest {
        topics,
        ..Default::default()
    };
    client.call(12, &request)
}

fn commit_error(client: &mut WireClient, group: &str) -> i16 {
    let request = OffsetCommitRequest {
        group_id: group.into(),
        generation_id_or_member_epoch: -1,
        topics: vec![OffsetCommitRequestTopic {
            name: TOPIC.into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: 0,
                committed_offset: 0,
                committed_leader_epoch: -1,
                committed_metadata: Some(String::new()),
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::OffsetCommit(committed) = client.call(9, &request) else {
        panic!("not OffsetCommit")
    };
    committed.topics[0].partitions[0].error_code
}

#[test]
fn cluster_brokers_never_name_a_consumer_offsets_leader_that_is_not_the_coordinator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut brokers = file_brokers(3, &data);
    let all = endpoints(&brokers);
    let groups = groups();
    let placed: Vec<(&str, i32)> = groups.iter().map(String::as_str).zip(0..).collect();
    write_assignment(
        &kaas_volume::cluster_dir(&data),
        1,
        &all,
        TOPIC,
        &[(0, 1), (1, 1), (2, 1)],
        &placed,
    );
    start_all(&mut brokers, 1);

    for broker in &brokers {
        let mut client = WireClient::connect(broker.kafka);
        // FindCoordinator names each group's broker, which takes its commits; the others
        // answer NOT_COORDINATOR.
        for (group, coordinator) in &placed {
            let find = FindCoordinatorRequest {
                key_type: 0,
                coordinator_keys: vec![group.to_string()],
                ..Default::default()
            };
            let Response::FindCoordinator(found) = client.call(4, &find) else {
                panic!("not FindCoordinator")
            };
            let found = &found.coordinators[0];
            assert_eq!(
                (found.error_code, found.node_id),
                (0, *coordinator),
                "{group}"
            );
            let expected = if *coordinator == broker.id {
                0
            } else {
                ErrorCode::NotCoordinator.code()
            };
            assert_eq!(
                commit_error(&mut client, group),
                expected,
                "commit of {group} at broker {}",
                broker.id
            );
        }

        // No __consumer_offsets among all topics, by name or by the id a standalone broker
        // would give it.
        let Response::Metadata(all_topics) = metadata(&mut client, None) else {
            panic!("not Metadata")
        };
        let names: Vec<_> = all_topics.topics.iter().map(|t| t.name.clone()).collect();
        assert_eq!(names, vec![Some(TOPIC.to_string())], "broker {}", broker.id);
        let by_name = Some(vec![MetadataRequestTopic {
            name: Some(NAME.into()),
            ..Default::default()
        }]);
        let Response::Metadata(named) = metadata(&mut client, by_name) else {
            panic!("not Metadata")
        };
        assert_eq!(
            (named.topics[0].error_code, named.topics[0].partitions.len()),
            (ErrorCode::UnknownTopicOrPartition.code(), 0),
            "Metadata of {NAME} by name at broker {}",
            broker.id
        );
        let cluster_id = all_topics.cluster_id.clone().expect("cluster id");
        let by_id = Some(vec![MetadataRequestTopic {
            name: None,
            topic_id: kaas_net::groups::offsets_topic::topic_id(&cluster_id),
        }]);
        let Response::Metadata(identified) = metadata(&mut client, by_id) else {
            panic!("not Metadata")
        };
        assert_eq!(
            identified.topics[0].error_code,
            ErrorCode::UnknownTopicId.code()
        );

        // The groups' partition is unknown to ListOffsets, Fetch and DescribeConfigs.
        let partition = offsets_partition(&groups[0]);
        let list = ListOffsetsRequest {
            replica_id: -1,
            topics: vec![ListOffsetsTopic {
                name: NAME.into(),
                partitions: vec![ListOffsetsPartition {
                    partition_index: partition,
                    current_leader_epoch: -1,
                    timestamp: -1,
                }],
            }],
            ..Default::default()
        };
        let Response::ListOffsets(listed) = client.call(7, &list) else {
            panic!("not ListOffsets")
        };
        assert_eq!(
            listed.topics[0].partitions[0].error_code,
            ErrorCode::UnknownTopicOrPartition.code()
        );
        let fetch = FetchRequest {
            max_wait_ms: 0,
            min_bytes: 1,
            topics: vec![FetchTopic {
                topic: NAME.into(),
                partitions: vec![FetchPartition {
                    partition,
                    fetch_offset: 0,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let Response::Fetch(fetched) = client.call(12, &fetch) else {
            panic!("not Fetch")
        };
        assert_eq!(
            fetched.responses[0].partitions[0].error_code,
            ErrorCode::UnknownTopicOrPartition.code()
        );
        let describe = DescribeConfigsRequest {
            resources: vec![DescribeConfigsResource {
                resource_type: 2,
                resource_name: NAME.into(),
                configuration_keys: None,
            }],
            ..Default::default()
        };
        let Response::DescribeConfigs(described) = client.call(4, &describe) else {
            panic!("not DescribeConfigs")
        };
        assert_eq!(
            described.results[0].error_code,
            ErrorCode::UnknownTopicOrPartition.code()
        );
    }
    for broker in &mut brokers {
        broker.terminate();
    }
}
