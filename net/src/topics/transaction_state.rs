//! Creating `__transaction_state` when the first transactional client needs it, as Kafka
//! creates it at the first FindCoordinator for a transactional id.
//!
//! A standalone broker's own controller creates it like a user topic, with Kafka's configs
//! and 50 partitions, under an id derived from the cluster id; it is then in `topics.json`
//! and opens at every start. A cluster broker creates the empty file
//! `__cluster/transaction-state-requested` (`O_EXCL`, made durable); the controller, which
//! watches for it, places the topic in the next assignment like every other topic. Either
//! way the coordinators load when the partitions open on their shards.

use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use kaas_cluster::internal_topics::{
    derived_topic_id_of, transaction_state_configs, transaction_state_topic_name,
};

use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::topics::checks::TopicError;
use crate::topics::topic_changes;
use crate::transactions::{TRANSACTION_STATE_PARTITIONS, TRANSACTION_STATE_TOPIC};

/// How long a standalone broker waits for its own view to show the new topic.
const CREATE_WAIT: Duration = Duration::from_secs(5);

/// Whether this broker's view has `__transaction_state`.
pub fn exists(shard: &Shard) -> bool {
    shard.view.load().topic(TRANSACTION_STATE_TOPIC).is_some()
}

/// Asks for `__transaction_state`: on a standalone broker it exists when this returns `Ok`;
/// in a cluster it exists once the controller's next assignment places it.
pub async fn request(shard: &Rc<Shard>) -> Result<(), TopicError> {
    if exists(shard) {
        return Ok(());
    }
    let view = shard.view.load();
    if view.is_cluster() {
        drop(view);
        return request_from_controller(shard).await;
    }
    let topic_id = derived_topic_id_of(&view.cluster_id, TRANSACTION_STATE_TOPIC);
    drop(view);
    shard
        .router
        .call(shard, 0, move |zero| async move {
            let Some(changes) = topic_changes::on_this_shard() else {
                return Err(TopicError::new(
                    ErrorCode::CoordinatorNotAvailable,
                    "topic changes are served on shard 0",
                ));
            };
            changes
                .create_internal(
                    &zero,
                    transaction_state_topic_name(),
                    TRANSACTION_STATE_PARTITIONS,
                    topic_id,
                    transaction_state_configs(),
                    CREATE_WAIT,
                )
                .await
        })
        .await
        .unwrap_or_else(|| {
            Err(TopicError::new(
                ErrorCode::CoordinatorNotAvailable,
                "shard 0 has stopped",
            ))
        })
}

/// Creates the controller's request file, once, durably.
async fn request_from_controller(shard: &Shard) -> Result<(), TopicError> {
    let path = kaas_volume::in_cluster_dir(kaas_volume::TRANSACTION_STATE_REQUESTED_FILE);
    let storage_error = |error: kaas_engine::EngineError| {
        TopicError::new(ErrorCode::CoordinatorNotAvailable, error.to_string())
    };
    if shard
        .storage
        .file_exists(&path)
        .await
        .map_err(storage_error)?
    {
        return Ok(());
    }
    if shard
        .storage
        .create_new(&path)
        .await
        .map_err(storage_error)?
    {
        let dir = PathBuf::from(kaas_volume::CLUSTER_DIR);
        shard
            .storage
            .sync_at_once(vec![path, dir])
            .await
            .map_err(storage_error)?;
        tracing::info!("asked the controller for {TRANSACTION_STATE_TOPIC}");
    }
    Ok(())
}
