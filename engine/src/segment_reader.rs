//! Reading whole batches out of a segment file for a fetch.

use bytes::Bytes;

use crate::batch::{self, BatchHeader};
use crate::storage::LogFile;

/// Smallest window read from a file at a time.
const MIN_READ: usize = 64 << 10;

/// What a read of a segment served.
#[derive(Debug, Default)]
pub struct SegmentRead {
    /// Whole batches, at most one chunk (a slice of one window).
    pub chunks: Vec<Bytes>,
    /// File position right after the served batches and the offset of the batch there; `None`
    /// when nothing was served.
    pub end: Option<(u64, u64)>,
}

/// A read of batches in one segment.
pub struct BatchRead<'a> {
    pub file: &'a LogFile,
    /// An index position at or before the batch holding `offset`.
    pub start: u64,
    /// Nothing at or past this position is read (the durable end, or the segment's size).
    pub readable_end: u64,
    pub offset: u64,
    /// Batches at or past this offset (the high watermark) are not served.
    pub upper: u64,
    /// At most this many bytes, but at least one batch.
    pub max_bytes: usize,
}

impl BatchRead<'_> {
    /// Bytes read from the file at a time for reads of at most `max_bytes` (what a
    /// read-ahead of the next window reads).
    pub fn window_for(max_bytes: usize) -> usize {
        max_bytes.max(MIN_READ)
    }

    /// Reads whole batches from `start`, skipping batches below `offset`, stopping before
    /// `upper` or `readable_end`, at `max_bytes` (but returning at least one batch).
    /// `first_window` is the file's bytes from `start` when they were already read (ahead).
    pub async fn run(&self, first_window: Option<Bytes>) -> std::io::Result<SegmentRead> {
        let window_len = Self::window_for(self.max_bytes);
        let mut first_window = first_window;
        let mut position = self.start;
        while position < self.readable_end {
            let bytes = match first_window.take() {
                Some(bytes) => bytes,
                None => {
                    let len = (window_len as u64).min(self.readable_end - position) as usize;
                    self.file.read_at(position, len).await?
                }
            };
            match self.scan_window(&bytes) {
                WindowScan::Served {
                    from,
                    to,
                    next_offset,
                } => {
                    return Ok(SegmentRead {
                        chunks: vec![bytes.slice(from..to)],
                        end: Some((position + to as u64, next_offset)),
                    })
                }
                WindowScan::OversizedBatch {
                    at,
                    len,
                    next_offset,
                } => {
                    // The first wanted batch is larger than the window: read exactly it.
                    let batch_position = position + at as u64;
                    let whole = self.file.read_at(batch_position, len).await?;
                    if whole.len() != len {
                        return Ok(SegmentRead::default());
                    }
                    return Ok(SegmentRead {
                        chunks: vec![whole],
                        end: Some((batch_position + len as u64, next_offset)),
                    });
                }
                WindowScan::Nothing => return Ok(SegmentRead::default()),
                WindowScan::AllBelow { consumed } => position += consumed as u64,
            }
        }
        Ok(SegmentRead::default())
    }

    /// Finds the wanted batches in one window read at some position.
    fn scan_window(&self, bytes: &[u8]) -> WindowScan {
        let mut cursor = 0usize;
        let mut wanted: Option<usize> = None;
        let mut next_offset = self.offset;
        let served = |from: Option<usize>, to: usize, next_offset: u64| match from {
            Some(from) if to > from => WindowScan::Served {
                from,
                to,
                next_offset,
            },
            _ => WindowScan::Nothing,
        };
        while cursor + batch::BATCH_HEADER_LEN <= bytes.len() {
            let Ok(header) = BatchHeader::parse(&bytes[cursor..]) else {
                // Only whole, validated batches lie below the high watermark; anything else
                // ends the read rather than being served.
                return served(wanted, cursor, next_offset);
            };
            let total = header.total_len();
            if header.base_offset as u64 >= self.upper {
                return served(wanted, cursor, next_offset);
            }
            if (header.next_offset() as u64) <= self.offset {
                cursor += total;
                continue;
            }
            let first = *wanted.get_or_insert(cursor);
            if cursor + total > bytes.len() || cursor + total - first > self.max_bytes {
                if first == cursor {
                    return WindowScan::OversizedBatch {
                        at: cursor,
                        len: total,
                        next_offset: header.next_offset() as u64,
                    };
                }
                return served(wanted, cursor, next_offset);
            }
            cursor += total;
            next_offset = header.next_offset() as u64;
        }
        if wanted.is_some() || cursor == 0 {
            return served(wanted, cursor, next_offset);
        }
        WindowScan::AllBelow { consumed: cursor }
    }
}

enum WindowScan {
    /// Bytes `from..to` of the window are the wanted batches; `next_offset` follows them.
    Served {
        from: usize,
        to: usize,
        next_offset: u64,
    },
    /// The first wanted batch starts at `at` and is longer than the window.
    OversizedBatch {
        at: usize,
        len: usize,
        next_offset: u64,
    },
    /// Every whole batch in the window lies below the wanted offset.
    AllBelow { consumed: usize },
    /// Nothing to serve.
    Nothing,
}
