//! `__consumer_offsets`, Kafka's internal topic of committed offsets and group metadata,
//! served read-only from the group stores.
//!
//! Kafka keeps its groups in this topic; kaas keeps them in one store per group
//! (`kaas_engine::GroupStore`) and derives the topic from those stores, so that clients and
//! tools that read it (lag monitors such as Burrow, `kafka-console-consumer --formatter
//! OffsetsMessageFormatter`) see what they see on Kafka:
//!
//! - Metadata lists it as internal (`is_internal`), with [`PARTITIONS`] partitions, a topic
//!   id derived from the cluster id ([`topic_id`]) and the configs Kafka gives it
//!   ([`CONFIGS`]). It exists from start-up (Kafka creates it at the first FindCoordinator;
//!   no client depends on its absence before that).
//! - A group lives in partition [`partition_for`]`(group)` (Kafka's
//!   `Utils.abs(groupId.hashCode()) % 50`), and the shard that coordinates the group is the
//!   shard that serves that partition (`placement`), so one shard sees every group of a
//!   partition.
//! - Its records are Kafka's own ([`record_format`]): `OffsetCommitKey`/`OffsetCommitValue`
//!   v4 for committed offsets, `GroupMetadataKey`/`GroupMetadataValue` v3 for classic
//!   groups, `ConsumerGroupMetadataKey`/`Value` v0 for KIP-848 groups, null values
//!   (tombstones) for what was deleted. One record per RecordBatch v2 ([`record_batch`]).
//! - Offsets and compaction are described in [`partition`]; offsets are never reused,
//!   across restarts too ([`reservation`]).
//! - Writes are refused as Kafka refuses client writes to internal topics: Produce gets
//!   INVALID_TOPIC_EXCEPTION, CreateTopics TOPIC_ALREADY_EXISTS, and DeleteTopics (which
//!   Kafka 4.4 performs, dropping every group's offsets) INVALID_TOPIC_EXCEPTION: here the
//!   topic is a view of the groups, not a log that can be removed.
//! - **Who serves a partition** ([`leadership`]). A standalone broker serves every partition.
//!   In a cluster, as in Kafka, a group's coordinator is the leader of the group's partition:
//!   the controller places the topic's partitions like every other partition
//!   (`kaas_cluster::internal_topics`), Metadata names those leaders (and the assignment's
//!   topic id), and the leader serves the partition from the groups of that partition, which
//!   its coordinator loads from their stores when it gains the partition. A partition that
//!   moves starts on its new leader above the offsets reserved on the shared volume, with every
//!   group's current records (the old leader's records are not carried over: like a
//!   compaction, only the latest value of each key is served). Before the first assignment
//!   places it, a cluster broker does not list the topic (UNKNOWN_TOPIC_OR_PARTITION).
//!
pub mod partition;
pub mod record_batch;
pub mod record_format;
pub mod reservation;
pub mod shard_topic;

pub use crate::model::offsets_topic::{
    is_offsets_topic, is_served, leader, leadership, partition_for, shard_of_partition,
    topic_by_id, topic_by_name, topic_id, topic_info, CONFIGS, LEADER_EPOCH, NAME, PARTITIONS,
};
pub use shard_topic::OffsetsTopic;
