//! Writing the cleaned copy of one sealed segment under its temporary names (see
//! [`crate::compaction::swap`]): every batch filtered in order, indexes built as it goes.

use std::collections::HashMap;
use std::path::Path;

use crate::batch::BatchHeader;
use crate::compaction::batch_filter::{self, FilterContext, Filtered};
use crate::compaction::segment_batches::SegmentBatches;
use crate::compaction::swap;
use crate::compaction::throttle::Throttle;
use crate::error::{EngineError, Result};
use crate::log::SealedSegment;
use crate::segment::ActiveIndex;
use crate::segment_appender::SegmentAppender;
use crate::storage::Storage;

/// Bytes written between two flushes of the output (bounds the write-behind memory).
const FLUSH_EVERY: u64 = 8 << 20;
const WRITE_CHUNK: usize = 256 << 10;
const PREALLOCATE_STEP: u64 = 1 << 20;

/// A cleaned segment written under its temporary names, ready to be swapped in.
#[derive(Clone, Copy, Debug)]
pub struct CleanedSegment {
    /// Bytes of the cleaned log.
    pub size: u64,
    /// Its largest batch max timestamp (-1 when it holds only empty batches).
    pub max_timestamp: i64,
}

/// What cleaning one segment did.
pub struct SegmentOutcome {
    /// The result, `None` when nothing changed and no horizon was withheld (or an
    /// inherited segment's copy would be longer): the temporary files are gone then.
    pub cleaned: Option<CleanedSegment>,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// The earliest delete horizon among the batches kept.
    pub earliest_delete_horizon: Option<i64>,
    /// Records were to go but the copy was not kept (an inherited segment's copy came out
    /// longer): they are still there.
    pub gave_up: bool,
    /// A kept tombstone got no delete horizon because the segment is inherited
    /// ([`FilterContext::may_set_horizon`]). The copy is then kept even when nothing else
    /// changed, so that it can become the epoch's own file and be cleaned again with
    /// horizons.
    pub horizon_withheld: bool,
}

/// Where and how to write.
pub struct Target<'a> {
    pub storage: &'a Storage,
    pub dir: &'a Path,
    pub epoch: u32,
    pub index_interval_bytes: u64,
}

/// Cleans `segment` into its temporary files. `producer_last`: producer id → last offset of
/// its last batch (those batches stay, emptied if need be).
pub async fn clean_segment(
    target: &Target<'_>,
    segment: &SealedSegment,
    context: &FilterContext<'_>,
    producer_last: &HashMap<i64, i64>,
    throttle: &Throttle,
) -> Result<SegmentOutcome> {
    let Target {
        storage,
        dir,
        epoch,
        index_interval_bytes,
    } = *target;
    let base = segment.base_offset;
    swap::discard(storage, dir, base, epoch).await?;
    let path = swap::cleaned_path(dir, base, epoch, "log");
    let file = storage.open_log_file(&path, true).await?;
    let mut appender =
        SegmentAppender::new(file.clone(), 0, Vec::new(), WRITE_CHUNK, PREALLOCATE_STEP);
    let mut index = ActiveIndex::empty();
    let mut max_timestamp = -1i64;
    let mut changed = false;
    let mut size = 0u64;
    let mut since_flush = 0u64;
    let mut earliest_delete_horizon = None;
    let mut horizon_withheld = false;
    let mut reader = SegmentBatches::new(&segment.file, segment.size);
    let result: Result<()> = async {
        while let Some(stored) = reader.next(throttle).await? {
            let header = stored.header;
            let last_of_producer = header.has_producer_id()
                && producer_last.get(&header.producer_id) == Some(&header.last_offset());
            let last_of_segment = header.next_offset() as u64 == segment.next_offset;
            let filtered = match batch_filter::filter_batch(
                &stored.bytes,
                &header,
                context,
                last_of_producer || last_of_segment,
            ) {
                Ok(outcome) => {
                    horizon_withheld |= outcome.horizon_withheld;
                    outcome.filtered
                }
                Err(error) => {
                    // A batch the filter cannot read is kept as it is (it was stored valid).
                    tracing::warn!(dir = %dir.display(), base, offset = header.base_offset, %error, "keeping a batch the cleaner cannot read");
                    Filtered::Unchanged
                }
            };
            let rewritten;
            let bytes: &[u8] = match filtered {
                Filtered::Unchanged => &stored.bytes,
                Filtered::Rewritten(bytes) => {
                    changed = true;
                    rewritten = bytes;
                    &rewritten
                }
                Filtered::Removed => {
                    changed = true;
                    continue;
                }
            };
            let written = BatchHeader::parse(bytes)?;
            if let Some(horizon) = batch_filter::delete_horizon(&written) {
                earliest_delete_horizon =
                    Some(earliest_delete_horizon.map_or(horizon, |h: i64| h.min(horizon)));
            }
            max_timestamp = max_timestamp.max(written.max_timestamp);
            let position = appender.append(bytes);
            index.record(base, &written, position, max_timestamp, index_interval_bytes);
            size = position + bytes.len() as u64;
            since_flush += bytes.len() as u64;
            throttle.spend(bytes.len() as u64).await;
            if since_flush >= FLUSH_EVERY {
                since_flush = 0;
                flush(&mut appender).await?;
            }
            glommio::yield_if_needed().await;
        }
        Ok(())
    }
    .await;
    let bytes_read = segment.size;
    // Setting a delete horizon can make a batch longer (timestamp deltas from the horizon),
    // and so can compressing again. An inherited segment's replacement must not be: until
    // it is adopted, later openings count only its recorded length (`crate::fence`). A copy
    // of an inherited segment that only withheld horizons is as long as the segment.
    let wanted = changed || horizon_withheld;
    let keep = result.is_ok() && wanted && (size <= segment.size || !segment.inherited);
    if !keep {
        let _ = flush(&mut appender).await;
        let _ = file.close().await;
        swap::discard(storage, dir, base, epoch).await?;
        result?;
        return Ok(SegmentOutcome {
            cleaned: None,
            bytes_read,
            bytes_written: 0,
            earliest_delete_horizon,
            gave_up: changed,
            horizon_withheld,
        });
    }
    flush(&mut appender).await?;
    let context = "writing a cleaned segment";
    file.truncate(size)
        .await
        .map_err(|e| EngineError::io(context, e))?;
    file.fdatasync()
        .await
        .map_err(|e| EngineError::io(context, e))?;
    let _ = file.close().await;
    index.index_max_timestamp();
    let offsets = index.offsets.encode_from(0);
    let times = index.times.encode_from(0);
    let index_bytes = (offsets.len() + times.len()) as u64;
    storage
        .write_small_durable(&swap::cleaned_path(dir, base, epoch, "index"), offsets)
        .await?;
    storage
        .write_small_durable(&swap::cleaned_path(dir, base, epoch, "timeindex"), times)
        .await?;
    Ok(SegmentOutcome {
        cleaned: Some(CleanedSegment {
            size,
            max_timestamp,
        }),
        bytes_read,
        bytes_written: size + index_bytes,
        earliest_delete_horizon,
        gave_up: false,
        horizon_withheld,
    })
}

async fn flush(appender: &mut SegmentAppender) -> Result<()> {
    let plan = appender.begin_flush();
    let result = plan.execute().await;
    appender.end_flush();
    result.map_err(|e| EngineError::io("writing a cleaned segment", e))
}
