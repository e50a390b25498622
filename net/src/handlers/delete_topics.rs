//! DeleteTopics (key 20): by name (v1–5) or by name or id (v6+).

use std::rc::Rc;

use crate::groups::offsets_topic;
use crate::handlers::with_topic_changes;
use crate::protocol::messages::delete_topics::{
    DeletableTopicResult, DeleteTopicsRequest, DeleteTopicsResponse,
};
use crate::protocol::{ErrorCode, Uuid};
use crate::shard::Shard;
use crate::topics::topic_changes::wait_of_timeout;

/// Answers DeleteTopics at `version`.
pub async fn handle(
    shard: &Rc<Shard>,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let targets: Vec<(Option<String>, Uuid)> = if version >= 6 {
        request
            .topics
            .into_iter()
            .map(|t| (t.name, t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .into_iter()
            .map(|n| (Some(n), Uuid::NIL))
            .collect()
    };
    let mut responses = Vec::with_capacity(targets.len());
    for (name, topic_id) in targets {
        let view = shard.view.load();
        let resolved = match (&name, topic_id) {
            (Some(name), _) if !name.is_empty() => view.topic(name).map(|t| t.name().to_string()),
            (_, id) if id != Uuid::NIL => view.topic_by_id(&id).map(|t| t.name().to_string()),
            _ => None,
        };
        let mut result = DeletableTopicResult {
            name: name.clone(),
            topic_id,
            ..Default::default()
        };
        let internal = match (&name, topic_id) {
            (Some(name), _) if !name.is_empty() => offsets_topic::is_offsets_topic(name),
            (_, id) => offsets_topic::topic_by_id(&view, &id).is_some(),
        };
        let transaction_state = resolved
            .as_deref()
            .is_some_and(|name| name == kaas_cluster::internal_topics::TRANSACTION_STATE_TOPIC);
        match resolved {
            // `__transaction_state` holds the state of every open transaction.
            Some(_) if transaction_state => {
                result.name = Some(kaas_cluster::internal_topics::TRANSACTION_STATE_TOPIC.into());
                result.error_code = ErrorCode::InvalidTopicException.code();
                result.error_message = Some(format!(
                    "Cannot delete internal topic {}: it holds the state of the transactions.",
                    kaas_cluster::internal_topics::TRANSACTION_STATE_TOPIC
                ));
            }
            // `__consumer_offsets` is the groups' own state, not a log to remove.
            None if internal => {
                result.name = Some(offsets_topic::NAME.into());
                result.error_code = ErrorCode::InvalidTopicException.code();
                result.error_message = Some(format!(
                    "Cannot delete internal topic {}; delete the consumer groups instead.",
                    offsets_topic::NAME
                ));
            }
            None => {
                let code = if topic_id != Uuid::NIL && name.is_none() {
                    ErrorCode::UnknownTopicId
                } else {
                    ErrorCode::UnknownTopicOrPartition
                };
                result.error_code = code.code();
                result.error_message = Some("This server does not host this topic.".into());
            }
            Some(resolved_name) => {
                result.name = Some(resolved_name.clone());
                let wait = wait_of_timeout(request.timeout_ms);
                let deleted = with_topic_changes(shard, move |admin_shard, changes| async move {
                    changes.delete(&admin_shard, &resolved_name, wait).await
                })
                .await;
                match deleted {
                    Ok(id) => result.topic_id = id,
                    Err(error) => {
                        result.error_code = error.code.code();
                        result.error_message = Some(error.message);
                    }
                }
            }
        }
        responses.push(result);
    }
    DeleteTopicsResponse {
        responses,
        ..Default::default()
    }
}
