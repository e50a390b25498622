//! The state of one transactional id and the transaction protocol version a client speaks,
//! with Kafka's byte ids and names (`TransactionState`, `TransactionVersion`).

/// Where a transactional id's current transaction stands. The byte ids are what
/// `__transaction_state` records carry in `TransactionStatus`; the names are what
/// DescribeTransactions and ListTransactions show (Kafka's `TransactionState.stateName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransactionState {
    /// No transaction in progress: just initialized, or nothing added since the last end.
    Empty,
    /// Partitions were added; the transaction runs until EndTxn or its timeout.
    Ongoing,
    /// Commit decided and logged; markers are being written.
    PrepareCommit,
    /// Abort decided and logged; markers are being written.
    PrepareAbort,
    /// Every commit marker was written.
    CompleteCommit,
    /// Every abort marker was written.
    CompleteAbort,
    /// Being expired; never written (a tombstone is), only pending.
    Dead,
    /// The producer is being fenced before its transaction is aborted; never written.
    PrepareEpochFence,
}

impl TransactionState {
    /// Every state, in id order.
    pub const ALL: [TransactionState; 8] = [
        TransactionState::Empty,
        TransactionState::Ongoing,
        TransactionState::PrepareCommit,
        TransactionState::PrepareAbort,
        TransactionState::CompleteCommit,
        TransactionState::CompleteAbort,
        TransactionState::Dead,
        TransactionState::PrepareEpochFence,
    ];

    /// The byte id written in `TransactionLogValue.TransactionStatus`.
    pub const fn id(self) -> i8 {
        match self {
            TransactionState::Empty => 0,
            TransactionState::Ongoing => 1,
            TransactionState::PrepareCommit => 2,
            TransactionState::PrepareAbort => 3,
            TransactionState::CompleteCommit => 4,
            TransactionState::CompleteAbort => 5,
            TransactionState::Dead => 6,
            TransactionState::PrepareEpochFence => 7,
        }
    }

    /// The state with byte id `id`, if there is one.
    pub fn from_id(id: i8) -> Option<TransactionState> {
        TransactionState::ALL
            .into_iter()
            .find(|state| state.id() == id)
    }

    /// Kafka's display name ("Empty", "Ongoing", "PrepareCommit", ...).
    pub const fn name(self) -> &'static str {
        match self {
            TransactionState::Empty => "Empty",
            TransactionState::Ongoing => "Ongoing",
            TransactionState::PrepareCommit => "PrepareCommit",
            TransactionState::PrepareAbort => "PrepareAbort",
            TransactionState::CompleteCommit => "CompleteCommit",
            TransactionState::CompleteAbort => "CompleteAbort",
            TransactionState::Dead => "Dead",
            TransactionState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state named `name` (exact, case-sensitive, as Kafka's `TransactionState.fromName`).
    pub fn from_name(name: &str) -> Option<TransactionState> {
        TransactionState::ALL
            .into_iter()
            .find(|state| state.name() == name)
    }

    /// The states a transition into `self` may start from (Kafka's `VALID_PREVIOUS_STATES`).
    pub const fn valid_previous_states(self) -> &'static [TransactionState] {
        use TransactionState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            // Empty and Complete*: a V2 client may abort with nothing added.
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether a transactional id in this state may be expired once idle long enough: only
    /// when nothing is in flight.
    pub const fn is_expiration_allowed(self) -> bool {
        matches!(
            self,
            TransactionState::Empty
                | TransactionState::CompleteCommit
                | TransactionState::CompleteAbort
        )
    }
}

/// The transaction protocol version (Kafka's `transaction.version` feature level).
///
/// As a client's version: 0 for Transactions V1 (AddPartitionsToTxn up to v3, EndTxn up to
/// v4, AddOffsetsToTxn), 2 for Transactions V2 (KIP-890: the epoch is bumped at every end,
/// partitions are added by the partition leaders). Level 1 only changes the server's record
/// format (flexible `TransactionLogValue` v1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransactionVersion {
    /// Level 0: Transactions V1, `TransactionLogValue` v0.
    V0,
    /// Level 1: Transactions V1, `TransactionLogValue` v1.
    V1,
    /// Level 2: Transactions V2 (epoch bump on every end).
    V2,
}

impl TransactionVersion {
    /// The feature level.
    pub const fn feature_level(self) -> i16 {
        match self {
            TransactionVersion::V0 => 0,
            TransactionVersion::V1 => 1,
            TransactionVersion::V2 => 2,
        }
    }

    /// The version at feature level `level`, if known.
    pub const fn from_feature_level(level: i16) -> Option<TransactionVersion> {
        match level {
            0 => Some(TransactionVersion::V0),
            1 => Some(TransactionVersion::V1),
            2 => Some(TransactionVersion::V2),
            _ => None,
        }
    }

    /// Whether every EndTxn bumps the producer epoch (Transactions V2).
    pub const fn supports_epoch_bump(self) -> bool {
        matches!(self, TransactionVersion::V2)
    }

    /// The `TransactionLogValue` version a server at this level writes.
    pub const fn log_value_version(self) -> i16 {
        match self {
            TransactionVersion::V0 => 0,
            TransactionVersion::V1 | TransactionVersion::V2 => 1,
        }
    }

    /// The client version an EndTxn request of `api_version` speaks (v5+ is V2).
    pub const fn for_end_txn(api_version: i16) -> TransactionVersion {
        if api_version > 4 {
            TransactionVersion::V2
        } else {
            TransactionVersion::V0
        }
    }

    /// The client version an AddPartitionsToTxn request of `api_version` speaks: v4+ comes
    /// from a partition leader adding a V2 producer's partition, v3 and below from a V1
    /// client.
    pub const fn for_add_partitions(api_version: i16) -> TransactionVersion {
        if api_version > 3 {
            TransactionVersion::V2
        } else {
            TransactionVersion::V0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_kafkas() {
        let expected = [
            (0, "Empty"),
            (1, "Ongoing"),
            (2, "PrepareCommit"),
            (3, "PrepareAbort"),
            (4, "CompleteCommit"),
            (5, "CompleteAbort"),
            (6, "Dead"),
            (7, "PrepareEpochFence"),
        ];
        for (state, (id, name)) in TransactionState::ALL.into_iter().zip(expected) {
            assert_eq!(state.id(), id);
            assert_eq!(state.name(), name);
            assert_eq!(TransactionState::from_id(id), Some(state));
            assert_eq!(TransactionState::from_name(name), Some(state));
        }
        assert_eq!(TransactionState::from_id(8), None);
        assert_eq!(TransactionState::from_id(-1), None);
        assert_eq!(TransactionState::from_name("ongoing"), None);
    }

    #[test]
    fn only_settled_states_expire() {
        let expiring: Vec<_> = TransactionState::ALL
            .into_iter()
            .filter(|state| state.is_expiration_allowed())
            .collect();
        assert_eq!(
            expiring,
            [
                TransactionState::Empty,
                TransactionState::CompleteCommit,
                TransactionState::CompleteAbort
            ]
        );
    }

    #[test]
    fn request_versions_map_to_client_versions() {
        assert_eq!(TransactionVersion::for_end_txn(4), TransactionVersion::V0);
        assert_eq!(TransactionVersion::for_end_txn(5), TransactionVersion::V2);
        assert_eq!(
            TransactionVersion::for_add_partitions(3),
            TransactionVersion::V0
        );
        assert_eq!(
            TransactionVersion::for_add_partitions(4),
            TransactionVersion::V2
        );
        assert_eq!(TransactionVersion::V0.log_value_version(), 0);
        assert_eq!(TransactionVersion::V1.log_value_version(), 1);
        assert!(!TransactionVersion::V1.supports_epoch_bump());
        assert_eq!(TransactionVersion::from_feature_level(3), None);
    }
}
