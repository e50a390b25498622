//! One module per Kafka API: each turns a decoded request into a response.
//!
//! Partition-scoped APIs (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords)
//! group their partitions by owner shard and hop once per shard ([`partition_work`]); topic
//! changes hop to shard 0, where the topic admin runs; group APIs hop to the group's
//! coordinator shard ([`group_hop`]).

pub mod api_versions;
pub mod cluster_metadata;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod fetch;
pub mod find_coordinator;
pub mod group_hop;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod partition_work;
pub mod produce;
pub mod sync_group;

use std::future::Future;
use std::rc::Rc;

use kaas_engine::batch::BatchError;
use kaas_engine::producer_state::ProducerStateError;
use kaas_engine::EngineError;

use crate::broker::shard::Shard;
use crate::broker::topic_admin::{TopicAdmin, TopicError};
use crate::protocol::ErrorCode;

/// The leader epoch of every partition of a standalone broker.
pub const STANDALONE_LEADER_EPOCH: i32 = 0;

/// The Kafka error code for an engine failure.
pub fn error_code(error: &EngineError) -> ErrorCode {
    match error {
        EngineError::InvalidBatch(BatchError::TooLarge { .. }) => ErrorCode::MessageTooLarge,
        EngineError::InvalidBatch(_) => ErrorCode::CorruptMessage,
        EngineError::ProducerState(ProducerStateError::ProducerFenced { .. }) => {
            ErrorCode::InvalidProducerEpoch
        }
        EngineError::ProducerState(_) => ErrorCode::OutOfOrderSequenceNumber,
        EngineError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
        EngineError::Closed | EngineError::NotLeader => ErrorCode::NotLeaderOrFollower,
        EngineError::NotServed => ErrorCode::UnknownTopicOrPartition,
        EngineError::Poisoned(_) | EngineError::Corrupt { .. } | EngineError::Io { .. } => {
            ErrorCode::KafkaStorageError
        }
    }
}

/// Checks a client's `current_leader_epoch` against the partition's `leader_epoch` (-1 means
/// "not given"): an older one is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH, as
/// Kafka answers, so the client refreshes its metadata.
pub fn check_leader_epoch(current_leader_epoch: i32, leader_epoch: i32) -> ErrorCode {
    match current_leader_epoch {
        -1 => ErrorCode::None,
        epoch if epoch > leader_epoch => ErrorCode::UnknownLeaderEpoch,
        epoch if epoch < leader_epoch => ErrorCode::FencedLeaderEpoch,
        _ => ErrorCode::None,
    }
}

/// Runs a topic change on shard 0, where the topic admin lives.
pub async fn with_topic_admin<R, F, Fut>(shard: &Rc<Shard>, change: F) -> Result<R, TopicError>
where
    F: FnOnce(Rc<Shard>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, TopicError>> + 'static,
    R: Send + 'static,
{
    if shard.config.cluster.is_some() {
        // The assignment is the one source of topics in cluster mode; a topic change made
        // here would be one broker's alone.
        return Err(TopicError {
            code: ErrorCode::InvalidRequest,
            message:
                "topics are managed by the cluster assignment (assignment.json) in cluster mode"
                    .into(),
        });
    }
    let result = shard
        .router
        .call(shard, 0, move |admin_shard| async move {
            if admin_shard.topic_admin.is_none() {
                return Err(TopicError {
                    code: ErrorCode::NotController,
                    message: "topic changes run on shard 0".into(),
                });
            }
            change(admin_shard).await
        })
        .await;
    result.unwrap_or_else(|| {
        Err(TopicError {
            code: ErrorCode::UnknownServerError,
            message: "broker is shutting down".into(),
        })
    })
}

/// The topic admin of a shard that is known to have one (shard 0).
pub fn admin(shard: &Shard) -> &TopicAdmin {
    match &shard.topic_admin {
        Some(admin) => admin,
        None => unreachable!("with_topic_admin checks for the admin before calling"),
    }
}

/// Wall-clock milliseconds (Kafka timestamps).
pub fn now_ms() -> i64 {
    kaas_engine::log_manager::now_ms()
}
