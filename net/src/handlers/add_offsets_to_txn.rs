//! AddOffsetsToTxn (key 25): the group's `__consumer_offsets` partition joins the
//! transaction, so the transaction's TxnOffsetCommit is completed by its markers. Asked again
//! while the coordinator is busy with the same transaction
//! ([`crate::handlers::transaction_hop::while_busy`]).

use std::rc::Rc;

use crate::handlers::transaction_hop::{on_coordinator, while_busy};
use crate::protocol::messages::add_offsets_to_txn::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::transactions::coordinator::AddOffsetsRequest;

/// Answers AddOffsetsToTxn.
pub async fn handle(shard: &Rc<Shard>, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
    let add = AddOffsetsRequest {
        transactional_id: request.transactional_id.clone(),
        producer_id: request.producer_id,
        producer_epoch: request.producer_epoch,
        group_id: request.group_id,
    };
    let id = request.transactional_id.clone();
    let error = while_busy(
        || {
            let add = add.clone();
            async {
                match on_coordinator(shard, &id, move |driver| async move {
                    driver.add_offsets(add).await
                })
                .await
                {
                    Ok(answer) => answer.error(),
                    Err(error) => error,
                }
            }
        },
        |error| *error == ErrorCode::ConcurrentTransactions,
    )
    .await;
    AddOffsetsToTxnResponse {
        error_code: error.code(),
        ..Default::default()
    }
}
