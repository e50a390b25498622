//! Transaction markers: writing a marker entry to the partitions this broker leads (the
//! leader's side of WriteTxnMarkers, [`write_here`]), and a transaction coordinator writing
//! its markers wherever their partitions are led ([`write_markers`]).
//!
//! A marker entry is what one WriteTxnMarkers marker carries: a producer id and epoch, the
//! coordinator's epoch, commit or abort, the transaction version, and the partitions.
//!
//! [`write_markers`] works in rounds. Each round re-reads the cluster view and routes every
//! partition still to write ([`remote::route`]): the ones this broker leads are written
//! here; the others are grouped by leader and sent to each leader as one WriteTxnMarkers
//! request over the shard's [`crate::peers::PeerClient`]; a partition whose topic the view no
//! longer has counts as written (nobody reads it). The answers are judged by a plain function
//! ([`rounds::after_round`], Kafka 4.4's `TransactionMarkerRequestCompletionHandler`): what
//! Kafka retries is tried again after a backoff growing from 100 ms to 1 s, an answer that a
//! newer producer epoch or coordinator wrote since ends the work (this coordinator is
//! stale), everything written ends it too.
//!
//! Both run `Router::call` hops, so a task running them must not be awaited through its
//! glommio `JoinHandle` (see [`crate::shard::router`]).

mod local;
mod remote;
pub mod rounds;

#[cfg(test)]
mod tests;

use std::rc::Rc;
use std::time::Duration;

use kaas_engine::producer_state::MarkerEpochCheck;

use crate::shard::Shard;
use crate::transactions::coordinator::{TransactionResult, TxnMarkers};
use crate::transactions::metadata::TopicPartition;

pub use local::write_here;
pub use remote::{
    answer_for, from_wire, route, to_wire, Route, MARKER_REQUEST_TIMEOUT, MARKER_REQUEST_VERSION,
};
pub use rounds::{after_round, verdict, MarkerAnswer, RoundOutcome, Verdict};

/// The first wait before a round of retries.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between rounds.
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// One marker to write to a list of partitions (one WriteTxnMarkers marker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MarkerEntry {
    /// The producer whose transaction ends.
    pub producer_id: i64,
    /// The producer epoch the marker carries.
    pub producer_epoch: i16,
    /// The epoch of the coordinator writing it.
    pub coordinator_epoch: i32,
    /// Commit (true) or abort.
    pub commit: bool,
    /// The transaction version's feature level (0 and 1: transactions V1, 2: V2), as
    /// WriteTxnMarkers v2 carries it (0 for v1).
    pub transaction_version: i8,
    /// The partitions, each once, in the order first named.
    pub partitions: Vec<TopicPartition>,
}

impl MarkerEntry {
    /// The entry of a coordinator's markers.
    pub fn of(markers: &TxnMarkers) -> Self {
        MarkerEntry {
            producer_id: markers.producer_id,
            producer_epoch: markers.producer_epoch,
            coordinator_epoch: markers.coordinator_epoch,
            commit: markers.result == TransactionResult::Commit,
            transaction_version: markers.transaction_version.feature_level() as i8,
            partitions: unique(markers.partitions.clone()),
        }
    }

    /// Which producer epochs the marker may carry on a partition: transactions V2 bump the
    /// epoch at every end, so the marker's is above the producer's (Kafka's
    /// `ProducerAppendInfo.checkProducerEpoch`).
    pub fn epoch_check(&self) -> MarkerEpochCheck {
        if self.transaction_version >= 2 {
            MarkerEpochCheck::AboveCurrent
        } else {
            MarkerEpochCheck::AtLeastCurrent
        }
    }

    /// The same marker for `partitions` only.
    pub fn with_partitions(&self, partitions: Vec<TopicPartition>) -> Self {
        MarkerEntry {
            partitions,
            ..self.clone()
        }
    }
}

/// `partitions` without repeats, in the order first named (Kafka keeps one answer per
/// partition and writes each once).
pub fn unique(partitions: Vec<TopicPartition>) -> Vec<TopicPartition> {
    let mut seen = std::collections::HashSet::new();
    partitions
        .into_iter()
        .filter(|partition| seen.insert(partition.clone()))
        .collect()
}

/// Writes `markers` to every partition they name, wherever it is led, in rounds (see the
/// module doc): true once every partition is written (or its topic is gone), false as soon
/// as a leader answers that this coordinator is stale or `still_current` says it is no longer
/// current (checked before every round).
pub async fn write_markers(
    shard: &Rc<Shard>,
    markers: TxnMarkers,
    still_current: impl Fn() -> bool,
) -> bool {
    let entry = MarkerEntry::of(&markers);
    let mut pending = entry.partitions.clone();
    let mut backoff = FIRST_BACKOFF;
    loop {
        if !still_current() {
            return false;
        }
        let answers = remote::one_round(shard, &entry, pending).await;
        match after_round(answers) {
            RoundOutcome::AllWritten => return true,
            RoundOutcome::Stale(partition) => {
                tracing::info!(
                    transactional_id = %markers.transactional_id,
                    producer_id = entry.producer_id,
                    partition = ?partition,
                    "a newer producer epoch or coordinator wrote; markers abandoned"
                );
                return false;
            }
            RoundOutcome::Retry(left) => pending = left,
        }
        glommio::timer::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}
