//! Transactions on a partition log: the markers a transaction coordinator has the leader
//! write, the last stable offset, and what a read-committed fetch reads (records below the
//! last stable offset, and the aborted transactions among them).
//!
//! The producer state (`crate::producer_state`) decides what a marker may do and which
//! transactions are open; the aborted ones are kept per segment (`crate::txn_index`).
//! Markers are appended like any batch: durable after [`PartitionLog::flush_to`] past their
//! offset, recovered by the same scan.

use futures_channel::oneshot;

use crate::batch::txn_marker::{self, MarkerRecord, TxnResult, MARKER_BATCH_LEN};
use crate::batch::BatchError;
use crate::error::{EngineError, Result};
use crate::producer_state::MarkerEpochCheck;
use crate::txn_index;

use super::{FetchedRecords, LogState, PartitionLog};

/// A transaction marker to append: which producer's transaction ends, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    /// The producer whose transaction ends.
    pub producer_id: i64,
    /// The producer epoch the coordinator writes the marker with.
    pub producer_epoch: i16,
    /// The epoch of the coordinator writing it.
    pub coordinator_epoch: i32,
    /// Commit or abort.
    pub result: TxnResult,
    /// Which epochs the marker may carry (the coordinator's transaction version).
    pub epoch_check: MarkerEpochCheck,
}

/// An aborted transaction a read-committed fetch reports (Kafka's `AbortedTransaction` of
/// the Fetch response): the consumer drops the producer's transactional records from
/// `first_offset` up to its next marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTransaction {
    /// The producer whose transaction was aborted.
    pub producer_id: i64,
    /// Offset of the transaction's first batch.
    pub first_offset: u64,
}

/// What a read-committed fetch reads.
#[derive(Clone, Debug, Default)]
pub struct CommittedRead {
    /// Whole batches below the last stable offset (none past it, so none of an open
    /// transaction). Aborted records are among them; `aborted` says which.
    pub records: FetchedRecords,
    /// The last stable offset when the read happened.
    pub last_stable_offset: u64,
    /// The aborted transactions overlapping the fetch, from its offset up to the last
    /// stable offset, in the order their markers were written.
    pub aborted: Vec<AbortedTransaction>,
}

impl LogState {
    /// The last stable offset: the first offset of the earliest transaction that is open
    /// (or whose marker is not durable yet), capped by the high watermark.
    pub(super) fn last_stable_offset(&self) -> u64 {
        let high_watermark = self.durable.offset;
        match self.producers.first_unstable_offset() {
            Some(first) if first >= 0 && (first as u64) < high_watermark => first as u64,
            _ => high_watermark,
        }
    }
}

impl PartitionLog {
    /// Appends a transaction marker ending `marker.producer_id`'s transaction (Kafka's
    /// WriteTxnMarkers on the partition leader) at the log end, stamped with
    /// `leader_epoch`, and returns its offset. Durable after [`PartitionLog::flush_to`] past
    /// it, like any append. A marker whose producer epoch is stale fails with
    /// [`crate::producer_state::ProducerStateError::ProducerFenced`], one from an older
    /// coordinator with `CoordinatorFenced` (see [`crate::producer_state`]); a marker for a
    /// producer with no open transaction is written and ends nothing. An ABORT marker
    /// ending a transaction records it in the segment's transaction index. The transaction
    /// stays unstable (it holds the last stable offset back) until the marker is durable. A
    /// negative producer id is [`EngineError::InvalidBatch`].
    pub async fn append_txn_marker(
        &self,
        marker: TxnMarker,
        leader_epoch: i32,
        now_ms: i64,
    ) -> Result<u64> {
        let config = self.config();
        let _permit = self.lock_appends().await?;
        self.check_marker(&marker)?;
        if self.needs_roll(MARKER_BATCH_LEN as u64, now_ms, &config)? {
            self.roll(now_ms).await?;
        }
        let mut state = self.shared.state.borrow_mut();
        // A roll awaited: check again, on the state the marker is written to.
        state.check_usable()?;
        state.producers.check_marker(
            marker.producer_id,
            marker.producer_epoch,
            marker.coordinator_epoch,
            marker.epoch_check,
        )?;
        let batch = txn_marker::encode_marker_batch(
            marker.producer_id,
            marker.producer_epoch,
            MarkerRecord {
                result: marker.result,
                coordinator_epoch: marker.coordinator_epoch,
            },
            now_ms,
        );
        let store = self.store_batch_for(leader_epoch, now_ms, &config);
        let offset = state.next_offset;
        store.assign_epoch(&mut state);
        store.store(&mut state, &batch, 1)?;
        Ok(offset)
    }

    fn check_marker(&self, marker: &TxnMarker) -> Result<()> {
        if marker.producer_id < 0 {
            return Err(EngineError::InvalidBatch(BatchError::InvalidRecords(
                "a transaction marker without a producer id",
            )));
        }
        let state = self.shared.state.borrow();
        state.check_usable()?;
        state.producers.check_marker(
            marker.producer_id,
            marker.producer_epoch,
            marker.coordinator_epoch,
            marker.epoch_check,
        )?;
        Ok(())
    }

    /// The last stable offset: no record at or past it is read committed yet. Never past an
    /// open transaction's first offset, nor the high watermark.
    pub fn last_stable_offset(&self) -> u64 {
        self.shared.state.borrow().last_stable_offset()
    }

    /// The aborted transactions a read-committed fetch from `fetch_offset` reporting records
    /// below `upper_bound` lists: those whose marker is at or past `fetch_offset` and whose
    /// first offset is below `upper_bound`, found in the transaction indexes from the
    /// segment holding `fetch_offset` on (Kafka's `collectAbortedTransactions`). Kafka passes
    /// the end of the records it returns; any bound up to the last stable offset is correct.
    pub fn aborted_transactions(
        &self,
        fetch_offset: u64,
        upper_bound: u64,
    ) -> Result<Vec<AbortedTransaction>> {
        let state = self.shared.state.borrow();
        state.check_usable()?;
        let start = state
            .segments
            .range(..=fetch_offset)
            .next_back()
            .map_or(0, |(base, _)| *base);
        let mut found = Vec::new();
        for segment in state.segments.range(start..).map(|(_, s)| s) {
            if txn_index::collect(
                segment.txn_index.entries(),
                fetch_offset,
                upper_bound,
                &mut found,
            ) {
                break;
            }
        }
        Ok(found
            .into_iter()
            .map(|aborted| AbortedTransaction {
                producer_id: aborted.producer_id,
                first_offset: aborted.first_offset as u64,
            })
            .collect())
    }

    /// A read-committed fetch: whole batches from the one holding `offset`, up to
    /// `max_bytes` (at least one batch), none at or past the last stable offset, with the
    /// aborted transactions among them. Reading at the last stable offset returns no
    /// records; outside `[log_start_offset, log_end_offset]` is an error.
    pub async fn read_committed(&self, offset: u64, max_bytes: usize) -> Result<CommittedRead> {
        let last_stable_offset = self.last_stable_offset();
        let records = self
            .read_below(offset, max_bytes, last_stable_offset)
            .await?;
        let aborted = if offset < last_stable_offset {
            self.aborted_transactions(offset, last_stable_offset)?
        } else {
            Vec::new()
        };
        Ok(CommittedRead {
            records,
            last_stable_offset,
            aborted,
        })
    }

    /// Resolves once the last stable offset moves past `offset` (or the log closes or
    /// fails): a read-committed fetch's long poll. The last stable offset only moves when a
    /// flush does.
    pub async fn wait_for_stable_data_beyond(&self, offset: u64) {
        loop {
            {
                let state = self.shared.state.borrow();
                if state.last_stable_offset() > offset
                    || state.closed
                    || state.poisoned.is_some()
                    || state.fenced.is_some()
                {
                    return;
                }
            }
            let (sender, receiver) = oneshot::channel();
            self.shared.data_waiters.borrow_mut().push(sender);
            if receiver.await.is_err() {
                return;
            }
        }
    }
}
