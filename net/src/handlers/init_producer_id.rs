//! InitProducerId (key 22): ids for idempotent producers, and for transactional ones the
//! transaction coordinator's answer.
//!
//! Without a transactional id the id comes from shard 0's allocator (a higher epoch of the
//! producer's own id when it asks for one, KIP-360). With one the request goes to the id's
//! coordinator ([`crate::handlers::transaction_hop`]), which fences the id's earlier
//! producers (a new epoch; an open transaction aborted) and answers once that is on the
//! volume.

use std::rc::Rc;

use crate::handlers::transaction_hop;
use crate::protocol::messages::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::ErrorCode;
use crate::shard::producer_ids::allocate_on_shard_zero;
use crate::shard::Shard;
use crate::transactions::coordinator::{self, Answer, ProducerIdAndEpoch};

fn refuse(code: ErrorCode) -> InitProducerIdResponse {
    InitProducerIdResponse {
        error_code: code.code(),
        producer_id: -1,
        producer_epoch: -1,
        ..Default::default()
    }
}

/// Answers InitProducerId.
pub async fn handle(shard: &Rc<Shard>, request: InitProducerIdRequest) -> InitProducerIdResponse {
    // Kafka: an id without an epoch, or an epoch without an id, is malformed.
    if (request.producer_id < 0) != (request.producer_epoch < 0) {
        return refuse(ErrorCode::InvalidRequest);
    }
    if let Some(transactional_id) = request.transactional_id.clone() {
        return transactional(shard, transactional_id, &request).await;
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
    match allocate_on_shard_zero(shard).await {
        Ok(producer_id) => InitProducerIdResponse {
            producer_id,
            producer_epoch: 0,
            ..Default::default()
        },
        Err(error) => refuse(error),
    }
}

async fn transactional(
    shard: &Rc<Shard>,
    transactional_id: String,
    request: &InitProducerIdRequest,
) -> InitProducerIdResponse {
    let expected = (request.producer_id >= 0).then_some(ProducerIdAndEpoch {
        producer_id: request.producer_id,
        producer_epoch: request.producer_epoch,
    });
    let init = coordinator::InitProducerIdRequest {
        transactional_id: transactional_id.clone(),
        transaction_timeout_ms: request.transaction_timeout_ms,
        expected,
    };
    let answer =
        transaction_hop::on_coordinator(shard, &transactional_id, move |driver| async move {
            driver.init_producer_id(init).await
        })
        .await;
    match answer {
        Ok(Answer::InitProducerId {
            error,
            producer_id,
            producer_epoch,
        }) => InitProducerIdResponse {
            error_code: error.code(),
            producer_id,
            producer_epoch,
            ..Default::default()
        },
        Ok(other) => refuse(other.error()),
        Err(error) => refuse(error),
    }
}
