//! The isolation level of a Fetch (v4+) or ListOffsets (v2+) request: which records a
//! consumer may see, and so which offset bounds its reads.
//!
//! READ_UNCOMMITTED sees everything up to the high watermark; READ_COMMITTED only what lies
//! below the last stable offset (no record of a transaction still open), and is told which
//! transactions among what it read were aborted. Kafka refuses any other value
//! (`IsolationLevel.forId` throws): the request as a whole answers UNKNOWN_SERVER_ERROR.

/// A request's isolation level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// 0: every record below the high watermark.
    ReadUncommitted,
    /// 1: records below the last stable offset, with the aborted transactions among them.
    ReadCommitted,
}

impl Isolation {
    /// The level a request's `isolation_level` names, or `None` for a value Kafka refuses.
    pub(crate) fn from_wire(level: i8) -> Option<Self> {
        match level {
            0 => Some(Isolation::ReadUncommitted),
            1 => Some(Isolation::ReadCommitted),
            _ => None,
        }
    }

    /// Whether only committed records may be read.
    pub(crate) fn is_committed(self) -> bool {
        self == Isolation::ReadCommitted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kafkas_two_levels_are_known() {
        assert_eq!(Isolation::from_wire(0), Some(Isolation::ReadUncommitted));
        assert_eq!(Isolation::from_wire(1), Some(Isolation::ReadCommitted));
        for unknown in [2, -1, i8::MAX, i8::MIN] {
            assert_eq!(Isolation::from_wire(unknown), None);
        }
    }
}
