//! Taking over a `__transaction_state` partition (Kafka's
//! `loadTransactionsForTxnTopicPartition`): replay its records, then finish what was in
//! flight.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::transactions::log_format::{decode_key, decode_value, TransactionLogError};
use crate::transactions::metadata::TransactionMetadata;
use crate::transactions::state::TransactionState;

use super::{Actions, CoordinatorConfig, TransactionCoordinator, TransactionResult};

/// A record of the partition that cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("record {index} of the partition: {cause}")]
pub struct LoadError {
    /// Position of the record among those replayed (0 is the first).
    pub index: usize,
    /// What is wrong with it.
    pub cause: TransactionLogError,
}

impl TransactionCoordinator {
    /// Rebuilds the coordinator of `partition` from its records, in log order (key, value;
    /// a `None` value is a tombstone): the latest value of each key wins, a tombstone
    /// removes it, records of unknown key types or value versions are skipped as Kafka
    /// skips them. Transactions found in PrepareCommit or PrepareAbort are completed: their
    /// markers are in the returned [`Actions`] (or, with no partition, their Complete
    /// record), as a coordinator that takes over does.
    pub fn load(
        partition: i32,
        coordinator_epoch: i32,
        config: CoordinatorConfig,
        records: impl IntoIterator<Item = (Bytes, Option<Bytes>)>,
        now_ms: i64,
    ) -> Result<(TransactionCoordinator, Actions), LoadError> {
        let mut loaded: BTreeMap<String, TransactionMetadata> = BTreeMap::new();
        for (index, (key, value)) in records.into_iter().enumerate() {
            let key = match decode_key(key) {
                Ok(key) => key,
                Err(TransactionLogError::UnknownKeyType(_)) => continue,
                Err(cause) => return Err(LoadError { index, cause }),
            };
            let Some(value) = value else {
                loaded.remove(&key.transactional_id);
                continue;
            };
            let value = match decode_value(value) {
                Ok(value) => value,
                Err(TransactionLogError::UnknownValueVersion(_)) => continue,
                Err(cause) => return Err(LoadError { index, cause }),
            };
            let metadata =
                TransactionMetadata::from_log_value(key.transactional_id.clone(), &value)
                    .map_err(|cause| LoadError { index, cause })?;
            loaded.insert(key.transactional_id, metadata);
        }
        let mut coordinator =
            TransactionCoordinator::new(partition, coordinator_epoch, config, now_ms);
        coordinator.transactions = loaded;
        let mut actions = Actions::default();
        let in_flight: Vec<(String, TransactionResult)> = coordinator
            .transactions
            .iter()
            .filter_map(|(id, metadata)| match metadata.state {
                TransactionState::PrepareCommit => Some((id.clone(), TransactionResult::Commit)),
                TransactionState::PrepareAbort => Some((id.clone(), TransactionResult::Abort)),
                _ => None,
            })
            .collect();
        for (id, result) in in_flight {
            let complete = coordinator
                .transactions
                .get_mut(&id)
                .map(|metadata| metadata.prepare_complete(now_ms));
            if let Some(Ok(complete)) = complete {
                coordinator.send_markers(&id, result, complete, &mut actions);
            }
        }
        Ok((coordinator, actions))
    }
}
