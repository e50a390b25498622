//! The per-record rules a topic's configs put on produced records, checked during the one
//! record walk of [`crate::batch::validate_produced_batches`] (compressed batches included),
//! as Apache Kafka's `LogValidator` checks them:
//!
//! - a topic whose `cleanup.policy` contains `compact` refuses a record without a key
//!   (compaction keeps the latest record per key; a keyless record has none);
//! - a `CreateTime` topic refuses a record whose timestamp is more than
//!   `message.timestamp.before.max.ms` before the broker's clock or more than
//!   `message.timestamp.after.max.ms` after it. A record without a timestamp (-1) passes, and
//!   `LogAppendTime` topics check nothing (the broker's clock replaces the timestamps);
//! - a record of a compressed batch may decompress to at most `max.decompressed.message.bytes`
//!   (its length prefix and body), else the batch is refused
//!   ([`crate::batch::BatchError::RecordTooLarge`], INVALID_RECORD in Kafka). The batch as a
//!   whole is bounded by its compressed size (`max.message.bytes`) and, decompressed, only by
//!   the memory bound of [`crate::compression::MAX_DECOMPRESSED_BATCH`].
//!
//! Every record is checked and every fault is reported with its record's index (KIP-467's
//! `record_errors`); a record missing its key is reported for that and not for its
//! timestamp, as Kafka does. A record that does not parse still fails the batch at once,
//! whatever faults came before it. The arithmetic wraps as Java's `long` does, so the
//! bounds Kafka prints for the defaults (`Long.MAX_VALUE`) are the ones reported here.

use crate::config::TimestampType as TopicTimestampType;

/// The rules of one topic (its `LogConfig`). The default checks nothing; `net` sets a topic's
/// rules from its configs, where Kafka's defaults apply (`message.timestamp.after.max.ms` is
/// one hour there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordRules {
    /// Records must have a key (`cleanup.policy` contains `compact`).
    pub keys_required: bool,
    /// `message.timestamp.before.max.ms`: how far in the past a `CreateTime` record may be.
    pub timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms`: how far in the future a `CreateTime` record may be.
    pub timestamp_after_max_ms: i64,
    /// `max.decompressed.message.bytes`: the most one record of a compressed batch may take
    /// once decompressed.
    pub max_decompressed_record_bytes: usize,
}

/// Kafka's default `max.decompressed.message.bytes`.
pub const DEFAULT_MAX_DECOMPRESSED_RECORD_BYTES: usize = 2_147_483_639;

impl Default for RecordRules {
    fn default() -> Self {
        RecordRules {
            keys_required: false,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: i64::MAX,
            max_decompressed_record_bytes: DEFAULT_MAX_DECOMPRESSED_RECORD_BYTES,
        }
    }
}

/// The rules to check one produce against: the topic's rules, its timestamp type and the
/// broker's clock at the append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordChecks {
    /// The topic's rules.
    pub rules: RecordRules,
    /// The topic's `message.timestamp.type`.
    pub timestamp_type: TopicTimestampType,
    /// The broker's clock, in milliseconds since the epoch.
    pub now_ms: i64,
}

/// What one record broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordFault {
    /// The record has no key, and the topic is compacted.
    MissingKey,
    /// The record's timestamp lies outside `[earliest, latest]`.
    TimestampOutOfRange {
        /// The record's timestamp.
        timestamp: i64,
        /// The record's offset as the producer numbered it (`baseOffset + offsetDelta`).
        offset: i64,
        /// The broker's clock minus `message.timestamp.before.max.ms` (wrapping).
        earliest: i64,
        /// The broker's clock plus `message.timestamp.after.max.ms` (wrapping).
        latest: i64,
    },
}

/// One record's fault and the record's position in its batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordFaultAt {
    /// The record's index in its batch (0-based).
    pub index: u32,
    /// What it broke.
    pub fault: RecordFault,
}

/// What the rules need of one record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecordFacts {
    /// Whether the key is present (not null).
    pub has_key: bool,
    /// The record's timestamp (the batch's `maxTimestamp` for a `LogAppendTime` batch).
    pub timestamp: i64,
    /// `baseOffset + offsetDelta`.
    pub offset: i64,
}

/// Kafka's "no timestamp".
const NO_TIMESTAMP: i64 = -1;

impl RecordChecks {
    /// The fault of one record, if it has one (the key first, as Kafka checks it first).
    pub(crate) fn check(&self, record: RecordFacts) -> Option<RecordFault> {
        if self.rules.keys_required && !record.has_key {
            return Some(RecordFault::MissingKey);
        }
        if self.timestamp_type != TopicTimestampType::CreateTime || record.timestamp == NO_TIMESTAMP
        {
            return None;
        }
        let behind = self.now_ms.wrapping_sub(record.timestamp);
        let too_old = behind > self.rules.timestamp_before_max_ms;
        let too_new = behind.wrapping_neg() > self.rules.timestamp_after_max_ms;
        (too_old || too_new).then(|| RecordFault::TimestampOutOfRange {
            timestamp: record.timestamp,
            offset: record.offset,
            earliest: self.now_ms.wrapping_sub(self.rules.timestamp_before_max_ms),
            latest: self.now_ms.wrapping_add(self.rules.timestamp_after_max_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000_000;
    const HOUR: i64 = 3_600_000;

    fn checks(rules: RecordRules, timestamp_type: TopicTimestampType) -> RecordChecks {
        RecordChecks {
            rules,
            timestamp_type,
            now_ms: NOW,
        }
    }

    fn record(has_key: bool, timestamp: i64) -> RecordFacts {
        RecordFacts {
            has_key,
            timestamp,
            offset: 7,
        }
    }

    #[test]
    fn kafkas_defaults_refuse_only_records_more_than_an_hour_ahead() {
        let rules = RecordRules {
            timestamp_after_max_ms: HOUR,
            ..RecordRules::default()
        };
        let checks = checks(rules, TopicTimestampType::CreateTime);
        assert_eq!(checks.check(record(false, 0)), None);
        assert_eq!(checks.check(record(false, NOW + HOUR)), None);
        assert_eq!(
            checks.check(record(false, NOW + HOUR + 1)),
            Some(RecordFault::TimestampOutOfRange {
                timestamp: NOW + HOUR + 1,
                offset: 7,
                earliest: NOW.wrapping_sub(i64::MAX),
                latest: NOW + HOUR,
            })
        );
        // Java's subtraction wraps: the earliest possible timestamp counts as far ahead.
        assert!(checks.check(record(false, i64::MIN)).is_some());
    }

    #[test]
    fn the_default_rules_check_nothing() {
        let checks = checks(RecordRules::default(), TopicTimestampType::CreateTime);
        for timestamp in [0, NOW + 100 * HOUR, i64::MAX] {
            assert_eq!(checks.check(record(false, timestamp)), None);
        }
    }

    #[test]
    fn bounds_are_inclusive_and_no_timestamp_passes() {
        let rules = RecordRules {
            timestamp_before_max_ms: HOUR,
            timestamp_after_max_ms: 0,
            ..RecordRules::default()
        };
        let checks = checks(rules, TopicTimestampType::CreateTime);
        assert_eq!(checks.check(record(true, NOW - HOUR)), None);
        assert!(checks.check(record(true, NOW - HOUR - 1)).is_some());
        assert_eq!(checks.check(record(true, NOW)), None);
        assert!(checks.check(record(true, NOW + 1)).is_some());
        assert_eq!(checks.check(record(true, NO_TIMESTAMP)), None);
    }

    #[test]
    fn log_append_time_topics_check_no_timestamp_but_still_keys() {
        let rules = RecordRules {
            keys_required: true,
            timestamp_before_max_ms: 0,
            timestamp_after_max_ms: 0,
            ..RecordRules::default()
        };
        let checks = checks(rules, TopicTimestampType::LogAppendTime);
        assert_eq!(checks.check(record(true, 0)), None);
        assert_eq!(
            checks.check(record(false, 0)),
            Some(RecordFault::MissingKey)
        );
    }

    #[test]
    fn a_missing_key_is_reported_instead_of_a_bad_timestamp() {
        let rules = RecordRules {
            keys_required: true,
            timestamp_before_max_ms: 0,
            ..RecordRules::default()
        };
        let checks = checks(rules, TopicTimestampType::CreateTime);
        assert_eq!(
            checks.check(record(false, 0)),
            Some(RecordFault::MissingKey)
        );
        assert!(matches!(
            checks.check(record(true, 0)),
            Some(RecordFault::TimestampOutOfRange { .. })
        ));
    }
}
