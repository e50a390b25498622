//! DescribeTransactions and ListTransactions over this partition's transactional ids
//! (Kafka's `handleDescribeTransactions` and `listTransactionStates`). The handler merges
//! the lists of every partition this broker coordinates.

use regex::Regex;

use crate::protocol::ErrorCode;
use crate::transactions::metadata::TopicPartition;
use crate::transactions::state::TransactionState;

use super::TransactionCoordinator;

/// DescribeTransactions' answer for one transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedTransaction {
    /// NONE, or why there is nothing to describe.
    pub error: ErrorCode,
    /// The transaction, when `error` is NONE.
    pub transaction: Option<TransactionView>,
}

/// A transaction as DescribeTransactions shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionView {
    /// State name ("Ongoing", ...).
    pub state: &'static str,
    /// Producer id.
    pub producer_id: i64,
    /// Producer epoch.
    pub producer_epoch: i16,
    /// Timeout (ms).
    pub timeout_ms: i32,
    /// Start (ms), -1 if none.
    pub start_time_ms: i64,
    /// Partitions, sorted by topic and partition.
    pub partitions: Vec<TopicPartition>,
}

/// ListTransactions' filters; empty lists and a negative duration filter nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListFilter {
    /// State names; unknown names are reported back and match nothing.
    pub states: Vec<String>,
    /// Producer ids.
    pub producer_ids: Vec<i64>,
    /// Only transactions running longer than this (ms); negative for all (v1+).
    pub duration_ms: i64,
    /// Only ids matching this regular expression in full (v2+, KIP-1152); `None` or empty
    /// for all. Rust's `regex` syntax, which for the patterns tools send (`.*`, classes,
    /// alternatives) reads as Java's.
    pub transactional_id_pattern: Option<String>,
}

impl Default for ListFilter {
    fn default() -> Self {
        ListFilter {
            states: Vec::new(),
            producer_ids: Vec::new(),
            duration_ms: -1,
            transactional_id_pattern: None,
        }
    }
}

/// One listed transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTransaction {
    /// The transactional id.
    pub transactional_id: String,
    /// Producer id.
    pub producer_id: i64,
    /// State name.
    pub state: &'static str,
}

/// ListTransactions' answer for this partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionList {
    /// NONE, or INVALID_REGULAR_EXPRESSION for a pattern that does not compile.
    pub error: ErrorCode,
    /// State filters that name no state, in request order.
    pub unknown_state_filters: Vec<String>,
    /// The transactions, by transactional id.
    pub transactions: Vec<ListedTransaction>,
}

impl TransactionCoordinator {
    /// DescribeTransactions for one id: INVALID_REQUEST for an empty id, NOT_COORDINATOR for
    /// an id of another partition, TRANSACTIONAL_ID_NOT_FOUND for an unknown or expiring one.
    pub fn describe(&self, transactional_id: &str) -> DescribedTransaction {
        let refused = |error| DescribedTransaction {
            error,
            transaction: None,
        };
        if transactional_id.is_empty() {
            return refused(ErrorCode::InvalidRequest);
        }
        if !self.owns(transactional_id) {
            return refused(ErrorCode::NotCoordinator);
        }
        match self.transactions.get(transactional_id) {
            Some(metadata) if metadata.state != TransactionState::Dead => DescribedTransaction {
                error: ErrorCode::None,
                transaction: Some(TransactionView {
                    state: metadata.state.name(),
                    producer_id: metadata.producer_id,
                    producer_epoch: metadata.producer_epoch,
                    timeout_ms: metadata.timeout_ms,
                    start_time_ms: metadata.start_time_ms,
                    partitions: metadata.partitions.iter().cloned().collect(),
                }),
            },
            _ => refused(ErrorCode::TransactionalIdNotFound),
        }
    }

    /// ListTransactions over this partition's ids (never the expiring ones).
    pub fn list(&self, filter: &ListFilter, now_ms: i64) -> TransactionList {
        let mut unknown_state_filters = Vec::new();
        let mut states = Vec::new();
        for name in &filter.states {
            match TransactionState::from_name(name) {
                Some(state) => states.push(state),
                None => unknown_state_filters.push(name.clone()),
            }
        }
        let pattern = match filter.transactional_id_pattern.as_deref() {
            None | Some("") => None,
            Some(pattern) => match Regex::new(&format!("^(?:{pattern})$")) {
                Ok(pattern) => Some(pattern),
                Err(_) => {
                    return TransactionList {
                        error: ErrorCode::InvalidRegularExpression,
                        unknown_state_filters: Vec::new(),
                        transactions: Vec::new(),
                    }
                }
            },
        };
        let transactions = self
            .transactions
            .values()
            .filter(|metadata| metadata.state != TransactionState::Dead)
            .filter(|metadata| {
                filter.producer_ids.is_empty()
                    || filter.producer_ids.contains(&metadata.producer_id)
            })
            // Unknown names alone filter everything out, as in Kafka.
            .filter(|metadata| filter.states.is_empty() || states.contains(&metadata.state))
            .filter(|metadata| {
                filter.duration_ms < 0
                    || now_ms.saturating_sub(metadata.start_time_ms) > filter.duration_ms
            })
            .filter(|metadata| {
                pattern
                    .as_ref()
                    .is_none_or(|pattern| pattern.is_match(&metadata.transactional_id))
            })
            .map(|metadata| ListedTransaction {
                transactional_id: metadata.transactional_id.clone(),
                producer_id: metadata.producer_id,
                state: metadata.state.name(),
            })
            .collect();
        TransactionList {
            error: ErrorCode::None,
            unknown_state_filters,
            transactions,
        }
    }
}
