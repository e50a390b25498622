//! One module per Kafka API: each turns a decoded request into a response.
//!
//! Partition-scoped APIs (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, DeleteRecords,
//! DescribeLogDirs, DescribeProducers) go through one pipeline ([`partition_request`]):
//! resolve each partition against the view, hop once per owner shard, gather; topic
//! changes hop to shard 0, where the topic admin runs; group APIs hop to the group's
//! coordinator shard ([`group_hop`]).

pub mod acl_requests;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_configs;
pub mod api_versions;
pub mod authorized_operations;
pub mod cluster_metadata;
pub mod config_alteration;
pub mod config_changes;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_transactions;
pub mod end_txn;
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
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod partition_request;
pub mod produce;
pub mod sync_group;
pub mod transaction_hop;
pub mod transaction_verification;
pub mod txn_offset_commit;
pub mod write_txn_markers;

use std::future::Future;
use std::rc::Rc;

use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::topics::checks::TopicError;
use crate::topics::topic_changes::{self, TopicChanges};

/// The Kafka codes of the shard's and the engine's failures, chosen on the shard floor so the
/// shard's own work (transaction markers) answers with the same codes as the handlers.
pub use crate::shard::error_codes::{batch_error_code, error_code, partition_error_code};

/// Runs a topic change on shard 0, where the topic changes live (the way to whoever keeps the
/// topic list: a standalone broker's own controller, or the cluster core's KafkaTopic
/// service).
pub async fn with_topic_changes<R, F, Fut>(shard: &Rc<Shard>, change: F) -> Result<R, TopicError>
where
    F: FnOnce(Rc<Shard>, Rc<TopicChanges>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<R, TopicError>> + 'static,
    R: Send + 'static,
{
    let result = shard
        .router
        .call(shard, 0, move |admin_shard| async move {
            let Some(changes) = topic_changes::on_this_shard() else {
                return Err(TopicError {
                    code: ErrorCode::NotController,
                    message: "topic changes run on shard 0".into(),
                });
            };
            change(admin_shard, changes).await
        })
        .await;
    result.unwrap_or_else(|| {
        Err(TopicError {
            code: ErrorCode::UnknownServerError,
            message: "broker is shutting down".into(),
        })
    })
}

/// Wall-clock milliseconds (Kafka timestamps).
pub fn now_ms() -> i64 {
    kaas_engine::log_manager::now_ms()
}
