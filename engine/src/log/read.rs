//! Reads: whole batches for a fetch (tail cache, read-ahead or the segment file), and the
//! ListOffsets lookups by timestamp.

use crate::batch;
use crate::error::{EngineError, Result};
use crate::read_ahead::NextRead;
use crate::record_timestamps;
use crate::segment;
use crate::segment_reader::BatchRead;

use super::{FetchedRecords, PartitionLog};

/// How far one batch may decompress when ListOffsets looks inside it.
const MAX_DECOMPRESSED_BATCH: usize = crate::compression::MAX_DECOMPRESSED_BATCH;

impl PartitionLog {
    /// Reads whole batches starting with the one holding `offset`, up to `max_bytes` but at
    /// least one batch, never past the high watermark. Reading at the high watermark returns
    /// nothing; outside `[log_start_offset, log_end_offset]` is an error.
    pub async fn read(&self, offset: u64, max_bytes: usize) -> Result<FetchedRecords> {
        self.read_below(offset, max_bytes, u64::MAX).await
    }

    /// [`PartitionLog::read`] of the batches below `upper` only (and below the high
    /// watermark): a read-committed fetch passes the last stable offset.
    pub(super) async fn read_below(
        &self,
        offset: u64,
        max_bytes: usize,
        upper: u64,
    ) -> Result<FetchedRecords> {
        loop {
            if let Some(fetched) = self.read_unless_swapped(offset, max_bytes, upper).await? {
                return Ok(fetched);
            }
        }
    }

    /// [`PartitionLog::read_below`], or `None` when compaction swapped a segment while the
    /// start position was being looked up (the position may then belong to the other file).
    async fn read_unless_swapped(
        &self,
        offset: u64,
        max_bytes: usize,
        upper: u64,
    ) -> Result<Option<FetchedRecords>> {
        self.shared.last_read.set(Some(std::time::Instant::now()));
        let swaps = self.shared.state.borrow().segment_swaps;
        let (segment_base, file, readable_end, hint, high_watermark, log_start_offset, bound) = {
            let mut state = self.shared.state.borrow_mut();
            state.check_usable()?;
            let high_watermark = state.durable.offset;
            let log_start_offset = state.log_start_offset;
            if offset < log_start_offset || offset > state.next_offset {
                return Err(EngineError::OffsetOutOfRange {
                    offset,
                    start: log_start_offset,
                    end: state.next_offset,
                });
            }
            let mut fetched = FetchedRecords {
                chunks: Vec::new(),
                high_watermark,
                log_start_offset,
            };
            // Batches are whole and `upper` (a last stable offset) is a batch boundary.
            let bound = high_watermark.min(upper);
            if offset >= bound {
                return Ok(Some(fetched));
            }
            if let Some(chunk) = state.tail_cache.read(offset, bound, max_bytes) {
                fetched.chunks = vec![chunk];
                return Ok(Some(fetched));
            }
            let Some((_, segment)) = state.segments.range(..=offset).next_back() else {
                return Ok(Some(fetched));
            };
            let readable_end = if segment.base_offset == state.durable.segment_base {
                state.durable.position
            } else {
                segment.size
            };
            (
                segment.base_offset,
                segment.file.clone(),
                readable_end,
                segment.index_hint(offset),
                high_watermark,
                log_start_offset,
                bound,
            )
        };
        let mut stream = self
            .shared
            .read_ahead
            .borrow_mut()
            .claim(segment_base, offset);
        let window = BatchRead::window_for(max_bytes);
        let ahead = match stream.as_mut() {
            Some(stream) => stream
                .window(window)
                .await
                .map(|bytes| (stream.position(), bytes)),
            None => None,
        };
        let (start, first_window) = match ahead {
            Some((position, bytes)) => (position, Some(bytes)),
            None => {
                // Nothing usable was read ahead: the stream (if any) is not continued.
                stream = None;
                (self.start_position(segment_base, hint, offset).await?, None)
            }
        };
        if self.shared.state.borrow().segment_swaps != swaps {
            return Ok(None);
        }
        let read = BatchRead {
            file: &file,
            start,
            readable_end,
            offset,
            upper: bound,
            max_bytes,
        }
        .run(first_window)
        .await
        .map_err(|e| EngineError::io("reading a segment", e))?;
        let swapped = self.shared.state.borrow().segment_swaps != swaps;
        if let Some((position, next_offset)) =
            read.end.filter(|&(end, _)| end < readable_end && !swapped)
        {
            self.shared.read_ahead.borrow_mut().advance(
                stream,
                &file,
                NextRead {
                    segment_base,
                    next_offset,
                    position,
                    readable_end,
                    window,
                },
            );
        }
        Ok(Some(FetchedRecords {
            chunks: read.chunks,
            high_watermark,
            log_start_offset,
        }))
    }

    /// Where a read of `offset` in a segment starts: the active index's `hint`, or a lookup
    /// in the sealed segment's index.
    async fn start_position(
        &self,
        segment_base: u64,
        hint: Option<u64>,
        offset: u64,
    ) -> Result<u64> {
        match hint {
            Some(position) => Ok(position),
            None => self.lookup_sealed_position(segment_base, offset).await,
        }
    }

    /// Loads a sealed segment's offset index on first use and looks `offset` up in it.
    async fn lookup_sealed_position(&self, segment_base: u64, offset: u64) -> Result<u64> {
        let loaded = segment::SealedOffsets::load(
            &self.shared.storage,
            &self.shared.dir,
            segment_base,
            self.shared.epoch,
        )
        .await?;
        let mut state = self.shared.state.borrow_mut();
        let Some(segment) = state.segments.get_mut(&segment_base) else {
            return Ok(0);
        };
        let installed = segment.install_sealed_offsets(loaded);
        let position = segment.index_hint(offset).unwrap_or(0);
        if installed {
            state.sealed_offsets_loaded.push_back(segment_base);
            while state.sealed_offsets_loaded.len() > super::SEALED_OFFSETS_KEPT {
                let Some(oldest) = state.sealed_offsets_loaded.pop_front() else {
                    break;
                };
                if let Some(segment) = state.segments.get_mut(&oldest) {
                    segment.forget_sealed_offsets();
                }
            }
        }
        Ok(position)
    }

    /// ListOffsets by timestamp: the first batch whose max timestamp is ≥ `timestamp`, as
    /// (offset of its first record at or after the timestamp, that record's batch max
    /// timestamp). `None` when no such batch exists below the high watermark.
    pub async fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(u64, i64)>> {
        let candidates: Vec<(u64, u64)> = {
            let state = self.shared.state.borrow();
            state.check_usable()?;
            state
                .segments
                .values()
                .filter(|s| s.max_timestamp >= timestamp)
                .map(|s| (s.base_offset, s.next_offset))
                .collect()
        };
        for (base, _) in candidates {
            let mut offset = base.max(self.offsets().log_start_offset);
            loop {
                let fetched = self.read(offset, 1 << 20).await?;
                if fetched.is_empty() {
                    break;
                }
                for chunk in &fetched.chunks {
                    for scanned in batch::scan_batches(chunk, 0) {
                        let header = scanned.header;
                        let next = header.next_offset() as u64;
                        if header.max_timestamp >= timestamp && next > offset {
                            let batch_bytes =
                                &chunk[scanned.position as usize..][..scanned.total_len];
                            let found = record_timestamps::first_record_at_or_after(
                                batch_bytes,
                                timestamp,
                                MAX_DECOMPRESSED_BATCH,
                            );
                            return Ok(Some(match found {
                                Ok(Some(record)) if record.offset >= offset as i64 => {
                                    (record.offset as u64, record.timestamp)
                                }
                                // Unreadable records: answer at batch granularity.
                                _ => (offset.max(header.base_offset as u64), header.max_timestamp),
                            }));
                        }
                        offset = offset.max(next);
                    }
                }
                if self.segment_of(offset) != Some(base) {
                    break;
                }
            }
        }
        Ok(None)
    }

    fn segment_of(&self, offset: u64) -> Option<u64> {
        let state = self.shared.state.borrow();
        state.segments.range(..=offset).next_back().map(|(b, _)| *b)
    }

    /// ListOffsets MAX_TIMESTAMP: the offset and timestamp of the first record carrying the
    /// largest timestamp among readable records, read from inside its batch (decompressing
    /// it if needed; this is a cold path). `None` for an empty log.
    pub async fn max_timestamp_record(&self) -> Result<Option<(u64, i64)>> {
        let Some((timestamp, batch_offset)) = self.max_timestamp() else {
            return Ok(None);
        };
        let offsets = self.offsets();
        if batch_offset < offsets.log_start_offset || batch_offset >= offsets.high_watermark {
            return Ok(None);
        }
        let fetched = self.read(batch_offset, 1).await?;
        let Some(chunk) = fetched.chunks.first() else {
            return Ok(None);
        };
        let exact = batch::scan_batches(chunk, 0).next().and_then(|scanned| {
            let bytes = &chunk[scanned.position as usize..][..scanned.total_len];
            record_timestamps::max_timestamp_record(bytes, MAX_DECOMPRESSED_BATCH).ok()?
        });
        Ok(Some(match exact {
            Some(record) if record.timestamp == timestamp => {
                (record.offset as u64, record.timestamp)
            }
            _ => (batch_offset, timestamp),
        }))
    }
}
