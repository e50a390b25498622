//! Which data batches of a log belong to aborted transactions, for the cleaner (the data
//! side of Kafka's `CleanedTransactionMetadata`).
//!
//! A transactional batch of producer P lies in an aborted transaction when one of P's
//! aborted transactions ([`crate::txn_index`]) began at or before it and its ABORT marker
//! comes after it: a producer has one transaction open at a time, so its batches between
//! the first offset and the marker are that transaction's. The cleaner neither maps the keys
//! of such a batch (an aborted record must not make a committed one older than it look
//! superseded) nor keeps its records. It only looks below the last stable offset
//! ([`crate::log`]'s cleaner view stops there), where every transaction has ended.

use std::collections::HashMap;

use crate::batch::BatchHeader;
use crate::txn_index::AbortedTxn;

/// The aborted transactions of a log, by producer.
#[derive(Clone, Debug, Default)]
pub struct AbortedBatches {
    /// Producer id → (first offset, marker offset) of each aborted transaction, by first
    /// offset.
    by_producer: HashMap<i64, Vec<(i64, i64)>>,
}

impl AbortedBatches {
    /// From the transaction index entries of a log's segments.
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = &'a AbortedTxn>) -> Self {
        let mut by_producer: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
        for entry in entries {
            by_producer
                .entry(entry.producer_id)
                .or_default()
                .push((entry.first_offset, entry.last_offset));
        }
        for ranges in by_producer.values_mut() {
            ranges.sort_unstable();
        }
        AbortedBatches { by_producer }
    }

    /// Whether the data batch `header` describes belongs to an aborted transaction.
    pub fn contains(&self, header: &BatchHeader) -> bool {
        if !header.is_transactional() || header.is_control() {
            return false;
        }
        let Some(ranges) = self.by_producer.get(&header.producer_id) else {
            return false;
        };
        let after = ranges.partition_point(|&(first, _)| first <= header.base_offset);
        after
            .checked_sub(1)
            .is_some_and(|i| header.base_offset < ranges[i].1)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::batch::{encode_batch_for_tests, CONTROL_MASK, TRANSACTIONAL_MASK};

    fn header(producer_id: i64, base_offset: i64, attributes: i16) -> BatchHeader {
        let bytes = encode_batch_for_tests(&[(None, Some(b"v"))], 0, producer_id, 0, 0);
        BatchHeader {
            base_offset,
            attributes,
            ..BatchHeader::parse(&bytes).unwrap()
        }
    }

    #[test]
    fn batches_between_an_aborted_start_and_its_marker() {
        let aborted = AbortedBatches::from_entries(&[
            AbortedTxn {
                producer_id: 7,
                first_offset: 10,
                last_offset: 20,
                last_stable_offset: 21,
            },
            AbortedTxn {
                producer_id: 7,
                first_offset: 30,
                last_offset: 40,
                last_stable_offset: 41,
            },
        ]);
        let txn = TRANSACTIONAL_MASK;
        for (offset, inside) in [
            (9, false),
            (10, true),
            (19, true),
            (20, false),
            (25, false),
            (30, true),
        ] {
            assert_eq!(
                aborted.contains(&header(7, offset, txn)),
                inside,
                "{offset}"
            );
        }
        // Another producer, a batch outside transactions, a marker: never.
        assert!(!aborted.contains(&header(8, 15, txn)));
        assert!(!aborted.contains(&header(7, 15, 0)));
        assert!(!aborted.contains(&header(7, 15, txn | CONTROL_MASK)));
    }
}
