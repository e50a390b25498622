//! `__consumer_offsets` is served from the group stores: Metadata lists it as an internal
//! topic with 50 partitions; a commit shows up in the group's partition (Kafka's
//! `abs(hashCode) % 50`) as Kafka's OffsetCommitKey / OffsetCommitValue v4, and ListOffsets
//! agrees with Fetch's high watermark; after a restart no offset is reused (the groups' state
//! is written again past the old high watermark, and a fetch from an old position gets it),
//! also after `kill -9`;
//! produce, create and delete of it are refused.

mod support;

use bytes::{Buf, Bytes};
use kaas_net::protocol::messages::create_topics::{CreatableTopic, CreateTopicsRequest};
use kaas_net::protocol::messages::delete_topics::DeleteTopicsRequest;
use kaas_net::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic,
};
use kaas_net::protocol::messages::metadata::{MetadataRequest, MetadataRequestTopic};
use kaas_net::protocol::messages::offset_commit::{
    OffsetCommitRequest, OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kaas_net::protocol::{ErrorCode, Response};
use support::offsets_topic::{self, Record};
use support::{Kaas, WireClient};

const NAME: &str = "__consumer_offsets";
const TOPIC: &str = "watched";
/// Kafka 4.4: `Utils.abs("offsets-watchers".hashCode()) % 50` is 30.
const GROUP: &str = "offsets-watchers";
const GROUP_PARTITION: i32 = 30;

fn code(error: ErrorCode) -> i16 {
    error.code()
}

fn commit(client: &mut WireClient, partition: i32, offset: i64, metadata: &str) {
    commit_to(client, TOPIC, partition, offset, metadata)
}

fn commit_to(client: &mut WireClient, topic: &str, partition: i32, offset: i64, metadata: &str) {
    let request = OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id_or_member_epoch: -1,
        topics: vec![OffsetCommitRequestTopic {
            name: topic.into(),
            partitions: vec![OffsetCommitRequestPartition {
                partition_index: partition,
                committed_offset: offset,
                committed_leader_epoch: 0,
                committed_metadata: Some(metadata.into()),
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let Response::OffsetCommit(committed) = client.call(9, &request) else {
        panic!("not OffsetCommit")
    };
    assert_eq!(
        committed.topics[0].partitions[0].error_code, 0,
        "commit to {topic}"
    );
}

/// Fetch of the group's partition from `offset`: (error, high watermark, records).
fn fetch(client: &mut WireClient, offset: i64, max_wait_ms: i32) -> (i16, i64, Vec<Record>) {
    offsets_topic::fetch(client, GROUP_PARTITION, offset, max_wait_ms)
}

/// Fetches until the partition is served (it answers NOT_LEADER_OR_FOLLOWER until the
/// coordinator has loaded its groups) and holds a record satisfying `wanted`.
fn fetch_until(
    client: &mut WireClient,
    offset: i64,
    wanted: impl Fn(&[Record]) -> bool,
) -> (i64, Vec<Record>) {
    for _ in 0..100 {
        let (error, high_watermark, records) = fetch(client, offset, 500);
        if error == 0 && wanted(&records) {
            return (high_watermark, records);
        }
        assert!(
            error == 0 || error == code(ErrorCode::NotLeaderOrFollower),
            "fetch error {error}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{NAME}-{GROUP_PARTITION} never served the expected records")
}

fn offset_commit_key(partition: i32) -> Vec<u8> {
    let mut key = vec![0, 1, 0, GROUP.len() as u8];
    key.extend_from_slice(GROUP.as_bytes());
    key.extend_from_slice(&[0, TOPIC.len() as u8]);
    key.extend_from_slice(TOPIC.as_bytes());
    key.extend_from_slice(&partition.to_be_bytes());
    key
}

/// (offset, leader epoch, metadata) of an OffsetCommitValue v4.
fn offset_commit_value(value: &Bytes) -> (i64, i32, String) {
    let mut value = value.clone();
    assert_eq!(value.get_i16(), 4, "value version");
    let offset = value.get_i64();
    let epoch = value.get_i32();
    let len = value.get_u8() as usize - 1;
    let metadata = String::from_utf8(value.split_to(len).to_vec()).expect("utf-8");
    (offset, epoch, metadata)
}

/// The latest committed value of `TOPIC`-`partition` among `records`.
fn latest_commit(records: &[Record], partition: i32) -> Option<(i64, i32, String)> {
    let key = offset_commit_key(partition);
    records
        .iter()
        .rev()
        .find(|(_, k, _)| k[..] == key[..])
        .and_then(|(_, _, value)| value.as_ref().map(offset_commit_value))
}

fn list_latest(client: &mut WireClient) -> i64 {
    let request = ListOffsetsRequest {
        replica_id: -1,
        topics: vec![ListOffsetsTopic {
            name: NAME.into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: GROUP_PARTITION,
                current_leader_epoch: -1,
                timestamp: -1,
            }],
        }],
        ..Default::default()
    };
    let Response::ListOffsets(listed) = client.call(7, &request) else {
        panic!("not ListOffsets")
    };
    let partition = &listed.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    partition.offset
}

#[test]
fn metadata_lists_it_internal_with_50_partitions() {
    let kaas = Kaas::start(None, &["--shards", "2"]);
    let mut client = kaas.client();
    let all_topics = MetadataRequest {
        topics: None,
        ..Default::default()
    };
    let Response::Metadata(all) = client.call(12, &all_topics) else {
        panic!("not Metadata")
    };
    let listed = all
        .topics
        .iter()
        .find(|t| t.name.as_deref() == Some(NAME))
        .expect("listed among all topics");
    assert!(listed.is_internal);
    assert_eq!(listed.partitions.len(), 50);
    assert_ne!(listed.topic_id, kaas_net::protocol::Uuid::NIL);
    let by_name = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: Some(NAME.into()),
            ..Default::default()
        }]),
        allow_auto_topic_creation: true,
        ..Default::default()
    };
    let Response::Metadata(named) = client.call(12, &by_name) else {
        panic!("not Metadata")
    };
    assert_eq!(named.topics[0].error_code, 0);
    assert!(named.topics[0].is_internal);
    assert_eq!(named.topics[0].topic_id, listed.topic_id);
    assert_eq!(named.topics[0].partitions.len(), 50);
    let by_id = MetadataRequest {
        topics: Some(vec![MetadataRequestTopic {
            name: None,
            topic_id: listed.topic_id,
        }]),
        ..Default::default()
    };
    let Response::Metadata(identified) = client.call(12, &by_id) else {
        panic!("not Metadata")
    };
    assert_eq!(identified.topics[0].name.as_deref(), Some(NAME));
    assert!(identified.topics[0].is_internal);
}

#[test]
fn commits_are_served_and_offsets_never_reused_across_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut kaas = Kaas::start(Some(dir.path()), &["--shards", "2"]);
    let mut client = kaas.client();
    client.create_topic(TOPIC, 2, &[]);
    commit(&mut client, 0, 17, "first");
    commit(&mut client, 1, 3, "");
    commit(&mut client, 0, 20, "second");
    // A group that reads the internal topic may commit its position in it, as on Kafka.
    commit_to(&mut client, NAME, GROUP_PARTITION, 1, "reader");
    let (high_watermark, served) = fetch_until(&mut client, 0, |records| {
        latest_commit(records, 0).is_some_and(|(offset, _, _)| offset == 20)
            && latest_commit(records, 1).is_some()
            && records.len() == 3
    });
    assert_eq!(
        latest_commit(&served, 0),
        Some((20, 0, "second".to_string()))
    );
    assert_eq!(latest_commit(&served, 1), Some((3, 0, String::new())));
    // The first commit of partition 0 was superseded and compacted away; the commit in
    // the internal topic itself is the third record.
    assert_eq!(served.len(), 3, "{served:?}");
    assert!(served.iter().all(|(offset, _, _)| *offset < high_watermark));
    assert_eq!(list_latest(&mut client), high_watermark);
    // A fetch at the end waits (long poll) and ends with no records.
    let (error, end, nothing) = fetch(&mut client, high_watermark, 200);
    assert_eq!((error, end, nothing.len()), (0, high_watermark, 0));

    // Writes to it are refused as Kafka refuses them.
    let produced = client.produce(NAME, vec![(GROUP_PARTITION, vec![0u8; 61])]);
    assert_eq!(produced[0].1, code(ErrorCode::InvalidTopicException));
    let create = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: NAME.into(),
            num_partitions: 1,
            replication_factor: 1,
            ..Default::default()
        }],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let Response::CreateTopics(created) = client.call(7, &create) else {
        panic!("not CreateTopics")
    };
    assert_eq!(
        created.topics[0].error_code,
        code(ErrorCode::TopicAlreadyExists)
    );
    let delete = DeleteTopicsRequest {
        topic_names: vec![NAME.into()],
        timeout_ms: 10_000,
        ..Default::default()
    };
    let Response::DeleteTopics(deleted) = client.call(5, &delete) else {
        panic!("not DeleteTopics")
    };
    assert_eq!(
        deleted.responses[0].error_code,
        code(ErrorCode::InvalidTopicException)
    );

    // A crash: nothing is flushed or checkpointed on the way down.
    kaas.kill9();
    kaas.restart();
    let mut client = kaas.client();
    // A reader positioned at the old end gets the groups' state again, at new offsets.
    let (after_restart, replayed) = fetch_until(&mut client, high_watermark, |records| {
        latest_commit(records, 0).is_some() && latest_commit(records, 1).is_some()
    });
    assert!(after_restart > high_watermark);
    assert!(
        replayed
            .iter()
            .all(|(offset, _, _)| *offset >= high_watermark),
        "offsets reused after the restart: {replayed:?} (end was {high_watermark})"
    );
    assert_eq!(
        latest_commit(&replayed, 0),
        Some((20, 0, "second".to_string()))
    );
    commit(&mut client, 1, 9, "third");
    let (_, tail) = fetch_until(&mut client, after_restart, |records| {
        latest_commit(records, 1).is_some()
    });
    assert_eq!(latest_commit(&tail, 1), Some((9, 0, "third".to_string())));
}
