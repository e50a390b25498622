//! One partition log's read at a fetch's isolation level: the batches, the last stable
//! offset the response reports (Kafka sends it at both levels), and for READ_COMMITTED the
//! aborted transactions among the batches returned.
//!
//! The engine's committed read lists every aborted transaction up to the last stable
//! offset; Kafka lists those overlapping the records it returns (`addAbortedTransactions`
//! bounds the search by the offset after the fetched bytes), so a consumer reading a long
//! partition a slice at a time is not sent the same aborted transactions again with every
//! slice. [`records_end`] finds that bound in the returned batches.

use bytes::Bytes;
use kaas_engine::batch::{BATCH_LENGTH_POS, LAST_OFFSET_DELTA_POS};
use kaas_engine::{AbortedTransaction, FetchedRecords, PartitionLog};

use super::isolation::Isolation;

/// A log read as the Fetch response reports it.
pub(super) struct LogRead {
    /// Whole batches, below the high watermark (READ_UNCOMMITTED) or the last stable offset
    /// (READ_COMMITTED).
    pub records: FetchedRecords,
    /// The partition's last stable offset, never past `records.high_watermark`.
    pub last_stable_offset: u64,
    /// READ_COMMITTED: the aborted transactions overlapping `records`; `None` for
    /// READ_UNCOMMITTED (Kafka's null).
    pub aborted: Option<Vec<AbortedTransaction>>,
}

impl LogRead {
    /// A read that returns nothing (a spent response budget), with the log's offsets.
    pub fn nothing(log: &PartitionLog, isolation: Isolation) -> Self {
        let offsets = log.offsets();
        LogRead {
            records: FetchedRecords {
                chunks: Vec::new(),
                high_watermark: offsets.high_watermark,
                log_start_offset: offsets.log_start_offset,
            },
            last_stable_offset: log.last_stable_offset().min(offsets.high_watermark),
            aborted: isolation.is_committed().then(Vec::new),
        }
    }

    /// Drops the batches read (they do not fit the response), and with them the aborted
    /// transactions listed for them.
    pub fn clear(&mut self) {
        self.records.chunks.clear();
        if let Some(aborted) = self.aborted.as_mut() {
            aborted.clear();
        }
    }
}

/// The offset no fetch at `isolation` reads at or past: where a read from `offset` has
/// nothing to return.
pub(super) fn read_bound(log: &PartitionLog, high_watermark: u64, isolation: Isolation) -> u64 {
    match isolation {
        Isolation::ReadUncommitted => high_watermark,
        Isolation::ReadCommitted => log.last_stable_offset().min(high_watermark),
    }
}

/// Reads whole batches from `offset`, up to `max_bytes` (at least one batch), at
/// `isolation`.
pub(super) async fn read_log(
    log: &PartitionLog,
    offset: u64,
    max_bytes: usize,
    isolation: Isolation,
) -> kaas_engine::Result<LogRead> {
    match isolation {
        Isolation::ReadUncommitted => {
            // Taken before the read: the read's high watermark is at least this one's, so
            // the response never shows a last stable offset past its high watermark.
            let last_stable_offset = log.last_stable_offset();
            let records = log.read(offset, max_bytes).await?;
            Ok(LogRead {
                last_stable_offset: last_stable_offset.min(records.high_watermark),
                records,
                aborted: None,
            })
        }
        Isolation::ReadCommitted => {
            let read = log.read_committed(offset, max_bytes).await?;
            let end = records_end(&read.records.chunks).unwrap_or(offset);
            let aborted = read
                .aborted
                .into_iter()
                .filter(|aborted| aborted.first_offset < end)
                .collect();
            Ok(LogRead {
                last_stable_offset: read.last_stable_offset.min(read.records.high_watermark),
                records: read.records,
                aborted: Some(aborted),
            })
        }
    }
}

/// The offset after the last batch of `chunks` (whole batches, possibly split across
/// buffers), or `None` when there is none or a header is cut short.
pub(super) fn records_end(chunks: &[Bytes]) -> Option<u64> {
    let total: usize = chunks.iter().map(Bytes::len).sum();
    let mut position = 0usize;
    let mut end = None;
    while position < total {
        let base_offset = i64::from_be_bytes(read_array(chunks, position)?);
        let length = i32::from_be_bytes(read_array(chunks, position + BATCH_LENGTH_POS)?);
        let last_delta = i32::from_be_bytes(read_array(chunks, position + LAST_OFFSET_DELTA_POS)?);
        let batch_end = base_offset
            .checked_add(i64::from(last_delta))?
            .checked_add(1)?;
        end = Some(u64::try_from(batch_end).ok()?);
        let length = usize::try_from(length).ok()?;
        position = position.checked_add(BATCH_LENGTH_POS + 4 + length)?;
    }
    end
}

/// `N` bytes at `position` of the concatenation of `chunks`.
fn read_array<const N: usize>(chunks: &[Bytes], position: usize) -> Option<[u8; N]> {
    let mut out = [0u8; N];
    let mut filled = 0;
    let mut chunk_start = 0usize;
    for chunk in chunks {
        let chunk_end = chunk_start + chunk.len();
        let want = position + filled;
        if want < chunk_end {
            let from = want - chunk_start;
            let take = (chunk.len() - from).min(N - filled);
            out[filled..filled + take].copy_from_slice(&chunk[from..from + take]);
            filled += take;
            if filled == N {
                return Some(out);
            }
        }
        chunk_start = chunk_end;
    }
    None
}

#[cfg(test)]
mod tests {
    use kaas_engine::batch::encode_batch_for_tests;

    use super::*;

    /// A batch of `records` records stored at `base_offset`.
    fn stored(base_offset: i64, records: usize) -> Vec<u8> {
        let values: Vec<Vec<u8>> = (0..records).map(|i| vec![i as u8; 5]).collect();
        let pairs: Vec<_> = values.iter().map(|v| (None, Some(v.as_slice()))).collect();
        let mut batch = encode_batch_for_tests(&pairs, 1_000, -1, -1, -1);
        batch[..8].copy_from_slice(&base_offset.to_be_bytes());
        batch
    }

    #[test]
    fn the_end_is_after_the_last_batch_however_the_buffers_split_it() {
        let mut bytes = stored(10, 3);
        bytes.extend(stored(13, 2));
        bytes.extend(stored(20, 4));
        let whole = Bytes::from(bytes.clone());
        assert_eq!(records_end(std::slice::from_ref(&whole)), Some(24));
        for split in [1, 7, 13, 30, bytes.len() - 1] {
            let chunks = [whole.slice(..split), whole.slice(split..)];
            assert_eq!(records_end(&chunks), Some(24), "split at {split}");
        }
        assert_eq!(records_end(&[]), None);
    }

    #[test]
    fn a_cut_header_has_no_end() {
        let bytes = Bytes::from(stored(0, 2));
        assert_eq!(records_end(&[bytes.slice(..20)]), None);
    }
}
