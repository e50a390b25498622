//! The scan crash recovery runs over a segment's bytes: framing, magic, header counts and
//! CRC of every batch (not its records), and why the scan stopped (see "What a crash leaves
//! behind" in [`crate::batch`]).

use super::{check_batch, BatchError, BatchHeader, RecordWalk, BATCH_HEADER_LEN, LOG_OVERHEAD};

/// A batch found intact by [`BatchScan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScannedBatch {
    /// File position of the batch's first byte.
    pub position: u64,
    /// The batch's header.
    pub header: BatchHeader,
    /// Total size in bytes.
    pub total_len: usize,
}

/// Why a [`BatchScan`] stopped. Recovery truncates at [`BatchScan::valid_end`] in every case
/// but [`ScanStop::EndOfData`], where there is nothing to truncate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanStop {
    /// The bytes ended exactly at a batch boundary.
    EndOfData,
    /// A zero `batchLength` (or an all-zero fragment shorter than the framing) at a batch
    /// boundary: the preallocated region that was never written.
    Unwritten,
    /// A batch starts but the bytes end before it does: a write cut short by a crash.
    TornTail {
        /// Bytes the batch needs.
        needed: usize,
        /// Bytes present from the batch's start.
        available: usize,
    },
    /// A batch is present but invalid (bad length, magic, counts, CRC or records).
    Corrupt(BatchError),
}

/// Iterator over the intact batches of a segment's bytes, for crash recovery.
///
/// Yields batches until the first one that is not intact, then records why in
/// [`BatchScan::stop`]. By default records are not walked (the CRC covers them); enable it
/// with [`BatchScan::with_record_walk`].
#[derive(Debug, Clone)]
pub struct BatchScan<'a> {
    buf: &'a [u8],
    start_position: u64,
    pos: usize,
    walk_records: bool,
    stop: Option<ScanStop>,
}

/// Scans `buf`, whose first byte is at file position `start_position`.
pub fn scan_batches(buf: &[u8], start_position: u64) -> BatchScan<'_> {
    BatchScan::new(buf, start_position)
}

impl<'a> BatchScan<'a> {
    /// Scans `buf`, whose first byte is at file position `start_position`.
    pub fn new(buf: &'a [u8], start_position: u64) -> Self {
        Self {
            buf,
            start_position,
            pos: 0,
            walk_records: false,
            stop: None,
        }
    }

    /// Also walks the records of uncompressed batches (slower; for offline checks).
    pub fn with_record_walk(mut self, walk: bool) -> Self {
        self.walk_records = walk;
        self
    }

    /// Why the scan stopped; `None` while batches remain to be yielded.
    pub fn stop(&self) -> Option<&ScanStop> {
        self.stop.as_ref()
    }

    /// File position just past the last intact batch yielded so far: where recovery
    /// truncates once the scan has stopped.
    pub fn valid_end(&self) -> u64 {
        self.start_position.saturating_add(self.pos as u64)
    }

    fn classify(rest: &[u8], error: BatchError) -> ScanStop {
        match error {
            BatchError::Truncated { .. } if rest.len() < LOG_OVERHEAD => {
                if rest.iter().all(|&b| b == 0) {
                    ScanStop::Unwritten
                } else {
                    ScanStop::TornTail {
                        needed: BATCH_HEADER_LEN,
                        available: rest.len(),
                    }
                }
            }
            BatchError::Truncated { needed, available } => ScanStop::TornTail { needed, available },
            BatchError::BadLength(0) => ScanStop::Unwritten,
            other => ScanStop::Corrupt(other),
        }
    }
}

impl Iterator for BatchScan<'_> {
    type Item = ScannedBatch;

    fn next(&mut self) -> Option<ScannedBatch> {
        if self.stop.is_some() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            self.stop = Some(ScanStop::EndOfData);
            return None;
        }
        let walk = if self.walk_records {
            RecordWalk::Uncompressed
        } else {
            RecordWalk::Nothing
        };
        match check_batch(rest, usize::MAX, walk, None) {
            Ok((header, total_len)) => {
                let batch = ScannedBatch {
                    position: self.valid_end(),
                    header,
                    total_len,
                };
                self.pos += total_len;
                Some(batch)
            }
            Err(error) => {
                self.stop = Some(Self::classify(rest, error));
                None
            }
        }
    }
}
