//! InitProducerId (key 22): ids for idempotent producers. Transactions are not served, so a
//! transactional id is refused.

use std::rc::Rc;

use crate::protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::ErrorCode;
use crate::shard::Shard;

/// Answers InitProducerId.
pub async fn handle(shard: &Rc<Shard>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let refuse = |code: ErrorCode| InitProducerIdResponse {
        error_code: code.code(),
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    };
    if request.transactional_id.is_some() {
        return refuse(ErrorCode::TransactionalIdAuthorizationFailed);
    }
    // KIP-360: a producer that lost track of its sequences asks for a higher epoch of its id.
    if request.producer_id >= 0
        && request.producer_epoch >= 0
        && request.producer_epoch < i16::MAX - 1
    {
        return InitProducerIdResponse {
            producer_id: request.producer_id,
            producer_epoch: request.producer_epoch + 1,
            ..Default::default()
        };
    }
    let allocated = shard
        .router
        .call(shard, 0, |_| async move {
            match crate::shard::shard_zero::on_this_shard() {
                Some(zero) => zero
                    .producer_ids
                    .allocate()
                    .await
                    .map_err(|e| e.to_string()),
                None => Err("producer ids are allocated on shard 0".to_string()),
            }
        })
        .await;
    match allocated {
        Some(Ok(producer_id)) => InitProducerIdResponse {
            producer_id,
            producer_epoch: 0,
            ..Default::default()
        },
        Some(Err(error)) => {
            tracing::error!(error, "allocating a producer id");
            refuse(ErrorCode::KafkaStorageError)
        }
        None => refuse(ErrorCode::UnknownServerError),
    }
}
