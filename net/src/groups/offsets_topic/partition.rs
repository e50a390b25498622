//! One `__consumer_offsets` partition: the records derived from its groups, held in memory
//! as a compacted log.
//!
//! Each change to a group (a commit, a deleted offset, new group metadata, a deleted group)
//! becomes one record, appended at the partition's next offset; the high watermark is the
//! next offset, and a long-polling fetch waits for it to move. A record whose key is written
//! again is dropped (what Kafka's log cleaner does to `__consumer_offsets`, here at once), and
//! a tombstone is dropped [`TOMBSTONE_RETENTION_MS`] after it was written (Kafka's
//! `delete.retention.ms`) — except the partition's last record, which is always kept so a
//! consumer can always reach the end (Kafka never cleans the active segment either).
//!
//! So offsets are stable (an offset always names the same record, or no record once it was
//! compacted away), increase with every change, and never go back: they come from durable
//! reservations ([`super::reservation`]). After a restart the partition starts empty at its
//! reserved end and the coordinator writes every group's current state again: a consumer
//! positioned anywhere keeps going and sees the state as it is, as a reader of a compacted
//! log does. The log start offset is 0 for ever.

use std::collections::{BTreeMap, HashMap, VecDeque};

use bytes::Bytes;
use futures_channel::oneshot;

use super::record_batch::single_record_batch;
use crate::protocol::ErrorCode;

/// How long a tombstone stays readable (Kafka's `delete.retention.ms` default, 24 h).
pub const TOMBSTONE_RETENTION_MS: i64 = 24 * 60 * 60 * 1000;

/// The leader epoch records are stamped with and Metadata reports.
const LEADER_EPOCH: i32 = 0;

struct StoredRecord {
    key: Bytes,
    timestamp_ms: i64,
    batch: Bytes,
}

/// What a read returns.
#[derive(Debug, Default)]
pub struct PartitionRead {
    /// Whole batches from the fetch offset on.
    pub batches: Vec<Bytes>,
    /// The high watermark.
    pub high_watermark: i64,
    /// The log start offset.
    pub log_start_offset: i64,
}

/// One partition's records; lives on the shard that coordinates its groups.
pub struct OffsetsPartition {
    next_offset: i64,
    reserved_end: i64,
    records: BTreeMap<i64, StoredRecord>,
    latest_by_key: HashMap<Bytes, i64>,
    /// Tombstones in write order: (offset, written at).
    tombstones: VecDeque<(i64, i64)>,
    waiters: Vec<oneshot::Sender<()>>,
}

impl OffsetsPartition {
    /// An empty partition whose offsets start at `start`, with offsets up to `reserved_end`
    /// durably reserved.
    pub fn new(start: i64, reserved_end: i64) -> Self {
        OffsetsPartition {
            next_offset: start,
            reserved_end,
            records: BTreeMap::new(),
            latest_by_key: HashMap::new(),
            tombstones: VecDeque::new(),
            waiters: Vec::new(),
        }
    }

    /// The offset the next record gets (the high watermark).
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }

    /// Whether the next record's offset is reserved durably.
    pub fn has_reserved_offset(&self) -> bool {
        self.next_offset < self.reserved_end
    }

    /// Records that `offsets` are reserved durably. Offsets skipped below their start (a
    /// block claimed above the last one) are never used: a gap, as compaction leaves.
    pub fn extend_reservation(&mut self, offsets: std::ops::Range<i64>) {
        if offsets.start >= self.reserved_end {
            self.next_offset = self.next_offset.max(offsets.start);
        }
        self.reserved_end = self.reserved_end.max(offsets.end);
    }

    /// Number of records held.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Appends a record (`value` `None` is a tombstone) and wakes waiting fetches; its
    /// offset, or `None` when no reserved offset is left (reserve first).
    pub fn append(&mut self, key: Bytes, value: Option<&[u8]>, now_ms: i64) -> Option<i64> {
        if !self.has_reserved_offset() {
            return None;
        }
        let offset = self.next_offset;
        self.next_offset += 1;
        let batch = single_record_batch(offset, LEADER_EPOCH, now_ms, &key, value);
        if let Some(previous) = self.latest_by_key.insert(key.clone(), offset) {
            self.records.remove(&previous);
        }
        if value.is_none() {
            self.tombstones.push_back((offset, now_ms));
        }
        self.records.insert(
            offset,
            StoredRecord {
                key,
                timestamp_ms: now_ms,
                batch,
            },
        );
        self.expire_tombstones(now_ms);
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(());
        }
        Some(offset)
    }

    /// Drops tombstones older than [`TOMBSTONE_RETENTION_MS`] (never the last record).
    pub fn expire_tombstones(&mut self, now_ms: i64) {
        while let Some(&(offset, written_ms)) = self.tombstones.front() {
            if now_ms - written_ms < TOMBSTONE_RETENTION_MS || offset + 1 == self.next_offset {
                break;
            }
            self.tombstones.pop_front();
            // The key may have been written again since: only its latest record counts.
            if let Some(record) = self.records.remove(&offset) {
                if self.latest_by_key.get(&record.key) == Some(&offset) {
                    self.latest_by_key.remove(&record.key);
                }
            }
        }
    }

    /// Whole batches from `offset` on, at least one (when any), then as many as fit in
    /// `max_bytes`. OFFSET_OUT_OF_RANGE below 0 or past the high watermark.
    pub fn read(&self, offset: i64, max_bytes: usize) -> Result<PartitionRead, ErrorCode> {
        if offset < 0 || offset > self.next_offset {
            return Err(ErrorCode::OffsetOutOfRange);
        }
        let mut batches = Vec::new();
        let mut bytes = 0usize;
        for record in self.records.range(offset..).map(|(_, record)| record) {
            if !batches.is_empty() && bytes + record.batch.len() > max_bytes {
                break;
            }
            bytes += record.batch.len();
            batches.push(record.batch.clone());
        }
        Ok(PartitionRead {
            batches,
            high_watermark: self.next_offset,
            log_start_offset: 0,
        })
    }

    /// The first record at or after `timestamp_ms`: (offset, timestamp).
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> Option<(i64, i64)> {
        self.records
            .iter()
            .find(|(_, record)| record.timestamp_ms >= timestamp_ms)
            .map(|(offset, record)| (*offset, record.timestamp_ms))
    }

    /// The record with the largest timestamp (the earliest such): (offset, timestamp).
    pub fn max_timestamp_record(&self) -> Option<(i64, i64)> {
        self.records.iter().fold(
            None,
            |best: Option<(i64, i64)>, (offset, record)| match best {
                Some((_, ts)) if ts >= record.timestamp_ms => best,
                _ => Some((*offset, record.timestamp_ms)),
            },
        )
    }

    /// A receiver completed by the next append (or dropped with the partition).
    pub fn wait_for_append(&mut self) -> oneshot::Receiver<()> {
        let (sender, receiver) = oneshot::channel();
        self.waiters.retain(|waiter| !waiter.is_canceled());
        self.waiters.push(sender);
        receiver
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    fn offsets(read: &PartitionRead) -> Vec<i64> {
        read.batches
            .iter()
            .map(|batch| i64::from_be_bytes(batch[..8].try_into().expect("8 bytes")))
            .collect()
    }

    #[test]
    fn a_rewritten_key_keeps_only_its_latest_record() {
        let mut partition = OffsetsPartition::new(10, 100);
        assert_eq!(partition.append(key("a"), Some(b"1"), 0), Some(10));
        assert_eq!(partition.append(key("b"), Some(b"1"), 0), Some(11));
        assert_eq!(partition.append(key("a"), Some(b"2"), 0), Some(12));
        let read = partition.read(0, 1 << 20).expect("read");
        assert_eq!(offsets(&read), vec![11, 12]);
        assert_eq!(read.high_watermark, 13);
        assert_eq!(read.log_start_offset, 0);
        assert_eq!(
            offsets(&partition.read(12, 1 << 20).expect("read")),
            vec![12]
        );
        assert!(partition
            .read(13, 1 << 20)
            .expect("at the end")
            .batches
            .is_empty());
        assert_eq!(
            partition.read(14, 1 << 20).err(),
            Some(ErrorCode::OffsetOutOfRange)
        );
        assert_eq!(
            partition.read(-1, 1 << 20).err(),
            Some(ErrorCode::OffsetOutOfRange)
        );
    }

    #[test]
    fn reads_return_at_least_one_batch_then_what_fits() {
        let mut partition = OffsetsPartition::new(0, 100);
        for i in 0..5 {
            partition.append(key(&format!("k{i}")), Some(b"v"), 0);
        }
        assert_eq!(offsets(&partition.read(0, 1).expect("read")), vec![0]);
        let one = partition.read(0, 1).expect("read").batches[0].len();
        assert_eq!(
            offsets(&partition.read(1, 2 * one).expect("read")),
            vec![1, 2]
        );
    }

    #[test]
    fn no_offset_is_used_beyond_the_reservation() {
        let mut partition = OffsetsPartition::new(0, 2);
        assert!(partition.append(key("a"), Some(b"1"), 0).is_some());
        assert!(partition.append(key("b"), Some(b"1"), 0).is_some());
        assert_eq!(partition.append(key("c"), Some(b"1"), 0), None);
        partition.extend_reservation(2..4);
        assert_eq!(partition.append(key("c"), Some(b"1"), 0), Some(2));
        // A block claimed above: the offsets between are skipped.
        assert!(partition.append(key("d"), Some(b"1"), 0).is_some());
        partition.extend_reservation(10..20);
        assert_eq!(partition.append(key("e"), Some(b"1"), 0), Some(10));
        assert_eq!(partition.next_offset(), 11);
    }

    #[test]
    fn tombstones_expire_but_the_last_record_stays() {
        let mut partition = OffsetsPartition::new(0, 100);
        partition.append(key("a"), Some(b"1"), 0);
        partition.append(key("a"), None, 1);
        partition.append(key("b"), None, 2);
        assert_eq!(
            offsets(&partition.read(0, 1 << 20).expect("read")),
            vec![1, 2]
        );
        partition.expire_tombstones(TOMBSTONE_RETENTION_MS + 10);
        // "a"'s tombstone is gone; "b"'s is the last record and stays.
        assert_eq!(offsets(&partition.read(0, 1 << 20).expect("read")), vec![2]);
        partition.append(key("c"), Some(b"1"), TOMBSTONE_RETENTION_MS + 20);
        assert_eq!(offsets(&partition.read(0, 1 << 20).expect("read")), vec![3]);
        assert_eq!(partition.len(), 1);
    }

    #[test]
    fn timestamps_are_looked_up() {
        let mut partition = OffsetsPartition::new(0, 100);
        partition.append(key("a"), Some(b"1"), 100);
        partition.append(key("b"), Some(b"1"), 300);
        partition.append(key("c"), Some(b"1"), 200);
        assert_eq!(partition.offset_for_timestamp(150), Some((1, 300)));
        assert_eq!(partition.offset_for_timestamp(400), None);
        assert_eq!(partition.max_timestamp_record(), Some((1, 300)));
    }

    #[test]
    fn an_append_wakes_waiters() {
        let mut partition = OffsetsPartition::new(0, 100);
        let mut waiting = partition.wait_for_append();
        assert_eq!(waiting.try_recv(), Ok(None));
        partition.append(key("a"), Some(b"1"), 0);
        assert_eq!(waiting.try_recv(), Ok(Some(())));
    }
}
