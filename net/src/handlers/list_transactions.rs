//! ListTransactions (key 66): the transactions of every coordinator this broker runs, each
//! shard's listed by its own coordinators; COORDINATOR_LOAD_IN_PROGRESS while any of them
//! loads, as Kafka answers.

use std::rc::Rc;

use crate::handlers::now_ms;
use crate::protocol::messages::list_transactions::{
    ListTransactionsRequest, ListTransactionsResponse, ListedTransactionState,
};
use crate::protocol::ErrorCode;
use crate::shard::Shard;
use crate::transactions::coordinator::{ListFilter, TransactionList};
use crate::transactions::state::TransactionState;

/// What one shard found.
struct ShardList {
    loading: bool,
    lists: Vec<TransactionList>,
}

/// Answers ListTransactions.
pub async fn handle(
    shard: &Rc<Shard>,
    request: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let filter = ListFilter {
        states: request.state_filters,
        producer_ids: request.producer_id_filters,
        duration_ms: request.duration_filter,
        transactional_id_pattern: request.transactional_id_pattern,
    };
    let unknown_state_filters: Vec<String> = filter
        .states
        .iter()
        .filter(|name| TransactionState::from_name(name).is_none())
        .cloned()
        .collect();
    let shard_filter = filter.clone();
    let found = shard
        .router
        .broadcast(shard, move |target| {
            let filter = shard_filter.clone();
            async move {
                let coordinators = &target.transactions;
                let now = now_ms();
                ShardList {
                    loading: coordinators.any_loading(),
                    lists: coordinators
                        .loaded()
                        .iter()
                        .map(|driver| driver.machine().list(&filter, now))
                        .collect(),
                }
            }
        })
        .await;
    let mut error = ErrorCode::None;
    let mut transaction_states = Vec::new();
    for shard_list in found {
        let Some(shard_list) = shard_list else {
            error = ErrorCode::CoordinatorNotAvailable;
            continue;
        };
        if shard_list.loading {
            error = ErrorCode::CoordinatorLoadInProgress;
        }
        for list in shard_list.lists {
            if list.error != ErrorCode::None {
                error = list.error;
            }
            transaction_states.extend(list.transactions.into_iter().map(|listed| {
                ListedTransactionState {
                    transactional_id: listed.transactional_id,
                    producer_id: listed.producer_id,
                    transaction_state: listed.state.to_string(),
                }
            }));
        }
    }
    if error != ErrorCode::None {
        transaction_states.clear();
    }
    ListTransactionsResponse {
        error_code: error.code(),
        unknown_state_filters,
        transaction_states,
        ..Default::default()
    }
}
