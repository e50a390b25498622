//! EndTxn (key 26): commit or abort, answered by the transactional id's coordinator once
//! its PrepareCommit / PrepareAbort record is on the volume (the markers follow). v5+
//! (Transactions V2) answers the producer id and epoch to use next.

use std::rc::Rc;

use crate::handlers::transaction_hop::on_coordinator;
use crate::protocol::messages::end_txn::{EndTxnRequest, EndTxnResponse};
use crate::shard::Shard;
use crate::transactions::coordinator::{self, Answer, TransactionResult};
use crate::transactions::state::TransactionVersion;

/// Answers EndTxn at `version`.
pub async fn handle(shard: &Rc<Shard>, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let end = coordinator::EndTxnRequest {
        transactional_id: request.transactional_id.clone(),
        producer_id: request.producer_id,
        producer_epoch: request.producer_epoch,
        result: if request.committed {
            TransactionResult::Commit
        } else {
            TransactionResult::Abort
        },
        client_version: TransactionVersion::for_end_txn(version),
    };
    let answer = on_coordinator(shard, &request.transactional_id, move |driver| async move {
        driver.end_txn(end).await
    })
    .await;
    let (error, producer_id, producer_epoch) = match answer {
        Ok(Answer::EndTxn {
            error,
            producer_id,
            producer_epoch,
        }) => (error, producer_id, producer_epoch),
        Ok(other) => (other.error(), -1, -1),
        Err(error) => (error, -1, -1),
    };
    EndTxnResponse {
        error_code: error.code(),
        producer_id,
        producer_epoch,
        ..Default::default()
    }
}
