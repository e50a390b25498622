//! Filtering one stored batch against a pass's offset map, as Apache Kafka's log cleaner
//! does (`MemoryRecords.filterTo` with the cleaner's retention rules).
//!
//! - A control batch (a transaction marker) is kept as it is. (Kafka's cleaner removes a
//!   marker once no data of its transaction is left and a delete horizon after it has
//!   passed; here markers stay.)
//! - A data batch of an aborted transaction
//!   ([`crate::compaction::aborted_batches`]) keeps no record.
//! - A record at or past the end of the mapped range is kept; below it, a record is kept
//!   when it is the latest of its key ([`Latest::At`] at or below its offset, a key the map
//!   does not know, or a collided hash). A keyless record is dropped (Kafka counts it as
//!   invalid in a compacted log).
//! - A tombstone that is kept keeps its batch's delete horizon: a batch holding a tombstone
//!   and no horizon yet gets `now + delete.retention.ms` as its base timestamp with
//!   attribute bit 6 set (KIP-534, what Kafka writes); once the horizon has passed, its
//!   tombstones are dropped. A batch written again with no tombstone left loses the flag
//!   (its base timestamp stays, so the records' timestamps still add up).
//! - A batch that keeps records is written again with the same base offset,
//!   `lastOffsetDelta`, producer id, epoch and base sequence, leader epoch and codec (records
//!   decompressed, filtered and compressed again); each record keeps its bytes (and its
//!   offset delta), and only its timestamp delta changes when the base timestamp does. Its
//!   `maxTimestamp` is recomputed from the kept records (`CreateTime`).
//! - A batch that keeps nothing goes, unless the caller needs it: the last batch of an
//!   idempotent producer (its sequence numbers must survive, as in Kafka) and the last
//!   batch of a segment (the segment then still ends at the next one's base offset, which
//!   recovery relies on) stay as an empty batch header, as Kafka's `writeEmptyHeader`
//!   writes it: no records, codec none, base timestamp -1, the original `maxTimestamp`.

use crate::batch::{
    self, BatchError, BatchHeader, TimestampType, BATCH_HEADER_LEN, COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
};
use crate::compaction::aborted_batches::AbortedBatches;
use crate::compaction::offset_map::{Latest, OffsetMap};
use crate::compaction::records::{self, RecordView};
use crate::compression;

/// `attributes` bit 6: the base timestamp is the batch's delete horizon (KIP-534).
pub const DELETE_HORIZON_MASK: i16 = 0x40;

/// What the filter needs to know about the pass.
#[derive(Clone, Copy)]
pub struct FilterContext<'a> {
    /// Latest offsets of the keys in the dirty range `[.., map_end)`.
    pub map: &'a OffsetMap,
    /// Records at or past this offset are not judged in this pass.
    pub map_end: u64,
    /// Broker time now.
    pub now_ms: i64,
    /// `delete.retention.ms`.
    pub delete_retention_ms: i64,
    /// Decompression cap; a batch inflating past it is kept as it is.
    pub max_batch_bytes: usize,
    /// Whether a batch may get a delete horizon (which can lengthen it): not in a segment
    /// whose replacement must not grow (inherited from an older epoch, until a copy of it
    /// becomes the epoch's own file, see [`crate::compaction::partition_cleaner`]).
    pub may_set_horizon: bool,
    /// The log's aborted transactions: their data batches keep no record.
    pub aborted: &'a AbortedBatches,
}

/// The outcome for one batch, and whether a horizon was withheld from it.
#[derive(Debug, PartialEq, Eq)]
pub struct FilterOutcome {
    /// What happens to the batch.
    pub filtered: Filtered,
    /// The batch keeps a tombstone that would have got a delete horizon, had
    /// [`FilterContext::may_set_horizon`] allowed it.
    pub horizon_withheld: bool,
}

/// The outcome for one batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Filtered {
    /// Keep the stored bytes.
    Unchanged,
    /// Replace the batch with these bytes.
    Rewritten(Vec<u8>),
    /// Drop the batch.
    Removed,
}

/// The delete horizon of a batch, when it has one.
pub fn delete_horizon(header: &BatchHeader) -> Option<i64> {
    (header.attributes & DELETE_HORIZON_MASK != 0).then_some(header.base_timestamp)
}

/// Filters `stored` (exactly one batch, `header` parsed from it). `keep_empty`: an emptied
/// batch stays as an empty header (see the module doc).
pub fn filter_batch(
    stored: &[u8],
    header: &BatchHeader,
    context: &FilterContext<'_>,
    keep_empty: bool,
) -> Result<FilterOutcome, BatchError> {
    let mut horizon_withheld = false;
    let filtered = filter_records(stored, header, context, keep_empty, &mut horizon_withheld)?;
    Ok(FilterOutcome {
        filtered,
        horizon_withheld,
    })
}

fn filter_records(
    stored: &[u8],
    header: &BatchHeader,
    context: &FilterContext<'_>,
    keep_empty: bool,
    horizon_withheld: &mut bool,
) -> Result<Filtered, BatchError> {
    if header.is_control() {
        return Ok(Filtered::Unchanged);
    }
    if context.aborted.contains(header) {
        if !keep_empty {
            return Ok(Filtered::Removed);
        }
        let empty = empty_header(header);
        // An earlier pass may have emptied it already.
        return Ok(if stored.get(..header.total_len()) == Some(&empty[..]) {
            Filtered::Unchanged
        } else {
            Filtered::Rewritten(empty)
        });
    }
    if header.base_offset < 0 || header.base_offset as u64 >= context.map_end {
        return Ok(Filtered::Unchanged);
    }
    let codec = header
        .codec()
        .ok_or(BatchError::InvalidCompression(header.compression_id()))?;
    let section = &stored[BATCH_HEADER_LEN..header.total_len()];
    let mut decompressed = Vec::new();
    compression::decompress(codec, section, &mut decompressed, context.max_batch_bytes)?;
    let all = records::walk(&decompressed, header.records_count)?;
    let horizon = delete_horizon(header);
    let horizon_passed = horizon.is_some_and(|h| context.now_ms >= h);
    let mut kept: Vec<&RecordView<'_>> = Vec::with_capacity(all.len());
    let mut kept_tombstone = false;
    for record in &all {
        let offset = header.base_offset as u64 + record.offset_delta.max(0) as u64;
        let keep = if offset >= context.map_end {
            true
        } else {
            match record.key {
                None => false,
                Some(key) => match context.map.latest(key) {
                    Latest::At(latest) => offset >= latest,
                    Latest::Unknown | Latest::Collided => true,
                },
            }
        };
        let keep = keep && !(record.tombstone && horizon_passed);
        if keep {
            kept_tombstone |= record.tombstone;
            kept.push(record);
        }
    }
    let new_horizon = match horizon {
        None if kept_tombstone && context.may_set_horizon => {
            Some(context.now_ms.saturating_add(context.delete_retention_ms))
        }
        None if kept_tombstone => {
            *horizon_withheld = true;
            None
        }
        _ => None,
    };
    if kept.len() == all.len() && new_horizon.is_none() {
        return Ok(Filtered::Unchanged);
    }
    if kept.is_empty() {
        return Ok(if keep_empty {
            Filtered::Rewritten(empty_header(header))
        } else {
            Filtered::Removed
        });
    }
    let base_timestamp = new_horizon.unwrap_or(header.base_timestamp);
    let mut plain = Vec::with_capacity(decompressed.len());
    let mut max_timestamp = i64::MIN;
    for record in &kept {
        let timestamp = header.base_timestamp.saturating_add(record.timestamp_delta);
        max_timestamp = max_timestamp.max(timestamp);
        let delta = (base_timestamp != header.base_timestamp).then(|| timestamp - base_timestamp);
        records::put_record(&mut plain, record, delta);
    }
    let mut out = Vec::with_capacity(BATCH_HEADER_LEN + plain.len());
    out.extend_from_slice(&[0; BATCH_HEADER_LEN]);
    compression::compress(codec, None, &plain, &mut out)?;
    let mut attributes = header.attributes;
    if new_horizon.is_some() {
        attributes |= DELETE_HORIZON_MASK;
    } else if !kept_tombstone {
        // No tombstone left to expire: the horizon no longer means anything (the base
        // timestamp stays, so the records' timestamp deltas still add up).
        attributes &= !DELETE_HORIZON_MASK;
    }
    let rewritten = BatchHeader {
        batch_length: i32::try_from(out.len() - LOG_OVERHEAD).map_err(|_| {
            BatchError::TooLarge {
                size: out.len(),
                max: i32::MAX as usize,
            }
        })?,
        attributes,
        base_timestamp,
        max_timestamp: match header.timestamp_type() {
            TimestampType::CreateTime => max_timestamp,
            TimestampType::LogAppendTime => header.max_timestamp,
        },
        records_count: kept.len() as i32,
        crc: 0,
        ..*header
    };
    Ok(Filtered::Rewritten(finish(out, &rewritten)))
}

/// Kafka's empty batch header for a batch whose records all went.
pub fn empty_header(header: &BatchHeader) -> Vec<u8> {
    let empty = BatchHeader {
        batch_length: (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32,
        attributes: header.attributes & !COMPRESSION_CODEC_MASK & !DELETE_HORIZON_MASK,
        base_timestamp: -1,
        records_count: 0,
        crc: 0,
        ..*header
    };
    finish(vec![0; BATCH_HEADER_LEN], &empty)
}

fn finish(mut out: Vec<u8>, header: &BatchHeader) -> Vec<u8> {
    out[..BATCH_HEADER_LEN].copy_from_slice(&header.encode());
    let crc = batch::compute_crc(&out);
    out[batch::CRC_POS..][..4].copy_from_slice(&crc.to_be_bytes());
    out
}
