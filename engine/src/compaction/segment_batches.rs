//! Whole batches of a sealed segment, read in windows (bounded memory: one window, or one
//! batch when a batch is larger), throttled by the cleaner's I/O budget.

use bytes::Bytes;

use crate::batch::{self, BatchHeader, ScanStop};
use crate::compaction::throttle::Throttle;
use crate::error::{EngineError, Result};
use crate::storage::LogFile;

/// Bytes read per step.
const WINDOW: usize = 1 << 20;
/// A batch claiming more than this is not read.
const MAX_BATCH: usize = 256 << 20;

/// A batch read from a segment.
pub struct StoredBatch {
    /// Its header.
    pub header: BatchHeader,
    /// Its bytes.
    pub bytes: Bytes,
}

/// Reads the batches of `file` below `size`.
pub struct SegmentBatches<'a> {
    file: &'a LogFile,
    size: u64,
    position: u64,
    window: Bytes,
    window_at: u64,
}

impl<'a> SegmentBatches<'a> {
    /// Batches of the first `size` bytes of `file`.
    pub fn new(file: &'a LogFile, size: u64) -> Self {
        SegmentBatches {
            file,
            size,
            position: 0,
            window: Bytes::new(),
            window_at: 0,
        }
    }

    /// The next batch, `None` at the end. A segment that does not hold whole, intact batches
    /// up to its size (it was sealed that way) is reported as corrupt.
    pub async fn next(&mut self, throttle: &Throttle) -> Result<Option<StoredBatch>> {
        if self.position >= self.size {
            return Ok(None);
        }
        let mut want = WINDOW;
        loop {
            let offset_in_window = (self.position - self.window_at) as usize;
            let available = self.window.len().saturating_sub(offset_in_window);
            let rest = if self.position >= self.window_at && available > 0 {
                self.window.slice(offset_in_window..)
            } else {
                Bytes::new()
            };
            let mut scan = batch::scan_batches(&rest, self.position);
            if let Some(found) = scan.next() {
                let bytes = rest.slice(..found.total_len);
                self.position += found.total_len as u64;
                return Ok(Some(StoredBatch {
                    header: found.header,
                    bytes,
                }));
            }
            let needed = match scan.stop() {
                Some(ScanStop::TornTail { needed, .. }) => *needed,
                Some(ScanStop::EndOfData) => 0,
                other => {
                    return Err(EngineError::Corrupt {
                        what: "segment being cleaned".into(),
                        detail: format!("at position {}: {other:?}", self.position),
                    })
                }
            };
            let remaining = self.size - self.position;
            if needed > MAX_BATCH || (needed as u64) > remaining || (rest.len() as u64) >= remaining
            {
                return Err(EngineError::Corrupt {
                    what: "segment being cleaned".into(),
                    detail: format!("torn batch at position {}", self.position),
                });
            }
            want = want.max(needed);
            let len = (want as u64).min(remaining) as usize;
            throttle.spend(len as u64).await;
            self.window = self
                .file
                .read_at(self.position, len)
                .await
                .map_err(|e| EngineError::io("reading a segment to clean", e))?;
            self.window_at = self.position;
            if self.window.is_empty() {
                return Err(EngineError::Corrupt {
                    what: "segment being cleaned".into(),
                    detail: "shorter than its size".into(),
                });
            }
        }
    }
}
