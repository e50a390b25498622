//! DescribeTransactions (key 65): each transactional id's state, from its coordinator
//! (TRANSACTIONAL_ID_NOT_FOUND for an id it does not know, NOT_COORDINATOR /
//! COORDINATOR_LOAD_IN_PROGRESS as for every coordinator request).

use std::rc::Rc;

use crate::handlers::transaction_hop::on_coordinator;
use crate::protocol::messages::describe_transactions::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, DescribedTransactionState,
    DescribedTransactionTopic,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::transactions::coordinator::DescribedTransaction;

/// Answers DescribeTransactions.
pub async fn handle(
    shard: &Rc<Shard>,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let mut transaction_states = Vec::with_capacity(request.transactional_ids.len());
    for transactional_id in request.transactional_ids {
        let id = transactional_id.clone();
        let described = on_coordinator(shard, &transactional_id, move |driver| async move {
            driver.machine().describe(&id)
        })
        .await
        .unwrap_or_else(|error| DescribedTransaction {
            error,
            transaction: None,
        });
        transaction_states.push(state(transactional_id, described));
    }
    DescribeTransactionsResponse {
        transaction_states,
        ..Default::default()
    }
}

fn state(transactional_id: String, described: DescribedTransaction) -> DescribedTransactionState {
    let Some(transaction) = described.transaction else {
        return DescribedTransactionState {
            error_code: described.error.code(),
            transactional_id,
            producer_id: -1,
            producer_epoch: -1,
            transaction_start_time_ms: -1,
            ..Default::default()
        };
    };
    let mut topics: Vec<DescribedTransactionTopic> = Vec::new();
    for partition in transaction.partitions {
        match topics.last_mut() {
            Some(topic) if topic.topic == partition.topic => {
                topic.partitions.push(partition.partition)
            }
            _ => topics.push(DescribedTransactionTopic {
                topic: partition.topic,
                partitions: vec![partition.partition],
            }),
        }
    }
    DescribedTransactionState {
        error_code: ErrorCode::None.code(),
        transactional_id,
        transaction_state: transaction.state.to_string(),
        transaction_timeout_ms: transaction.timeout_ms,
        transaction_start_time_ms: transaction.start_time_ms,
        producer_id: transaction.producer_id,
        producer_epoch: transaction.producer_epoch,
        topics,
    }
}
