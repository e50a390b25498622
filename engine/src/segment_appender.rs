//! Write-behind appends to the active segment with direct I/O.
//!
//! Appended bytes are copied into 4 KiB-aligned chunks. A full chunk is written right away
//! (without waiting for a flush) unless a flush is running; a flush writes everything
//! pending, including the partial last page, then fdatasyncs. The partial page is kept in
//! memory and written again, with more bytes, by the next flush: O_DIRECT cannot write less
//! than a page, so the page on disk holds zero padding after the last appended byte until
//! then. Recovery treats a zero batch header as the end of written data.
//!
//! Two writes never cover the same page at the same time: full chunks end on a page
//! boundary, and while a flush (whose last write ends on a partial page) is running, full
//! chunks are queued instead of written. Segment space is reserved ahead of writes with
//! `fallocate(KEEP_SIZE)` in steps that grow with the segment (1 MiB up to
//! `preallocate_step`), so most fdatasyncs have no block allocation to commit. On ext4 the
//! reserved blocks stay "unwritten" until written, and the first write into them still costs
//! an extent conversion at the next fdatasync (and io_uring hands such a write to a kernel
//! worker thread). Writing zeros ahead of the appends avoids both but writes every byte
//! twice, and measured as a net loss (see "fdatasync metadata" in the crate README).
//!
//! An idle appender holds at most one page of memory (the partial page), not a chunk.

use std::cell::Cell;
use std::rc::Rc;

use glommio::task::JoinHandle;

use crate::aligned_buffer::{align_down, AlignedBuf, ALIGNMENT};
use crate::storage::LogFile;

type WriteTask = JoinHandle<std::io::Result<()>>;

/// Largest chunk allocated to hold one large batch whole.
const MAX_CHUNK_BYTES: usize = 8 << 20;
/// Smallest preallocation step.
const MIN_PREALLOCATE_STEP: u64 = 1 << 20;

/// Appends to one segment file.
pub(crate) struct SegmentAppender {
    file: LogFile,
    /// Logical end: bytes appended so far.
    end: u64,
    /// The chunk being filled and the (aligned) file position where it starts.
    chunk: Option<(AlignedBuf, u64)>,
    /// When no chunk is allocated: the bytes of the partial last page, which starts at
    /// `align_down(end)`.
    partial_page: Vec<u8>,
    /// Full chunks waiting because a flush was running when they filled up.
    queued: Vec<(AlignedBuf, u64)>,
    /// Writes issued since the last flush began.
    in_flight: Vec<WriteTask>,
    flush_running: bool,
    chunk_bytes: usize,
    preallocation: Rc<Preallocation>,
}

/// Tracks how far the file's blocks have been reserved.
struct Preallocation {
    reserved: Cell<u64>,
    step: u64,
}

impl Preallocation {
    async fn ensure(&self, file: &LogFile, end: u64) -> std::io::Result<()> {
        if end <= self.reserved.get() || self.step == 0 {
            return Ok(());
        }
        // Steps grow with the segment, so a partition that wrote little reserves little:
        // 1 MiB, then the segment's size rounded up to a power of two, up to `step`.
        let step = self
            .step
            .min(end.next_power_of_two().max(MIN_PREALLOCATE_STEP));
        let target = end.div_ceil(step) * step;
        file.preallocate(target).await?;
        self.reserved.set(self.reserved.get().max(target));
        Ok(())
    }
}

/// What a flush must do: the writes to wait for, then an fdatasync.
pub(crate) struct FlushPlan {
    file: LogFile,
    pending: Vec<WriteTask>,
    writes: Vec<(AlignedBuf, u64)>,
    preallocation: Rc<Preallocation>,
    /// Logical end of the segment this flush makes durable.
    pub end: u64,
}

impl FlushPlan {
    /// Performs the writes and the fdatasync.
    pub async fn execute(self) -> std::io::Result<()> {
        let mut first_error = None;
        for task in self.pending {
            match task.await {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                None => {
                    first_error.get_or_insert(std::io::Error::other("write task was cancelled"));
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        if let Some(end) = self
            .writes
            .iter()
            .map(|(b, p)| p + b.write_len() as u64)
            .max()
        {
            self.preallocation.ensure(&self.file, end).await?;
        }
        // Issue every write before awaiting any, so the device sees them together.
        let writes: Vec<WriteTask> = self
            .writes
            .into_iter()
            .map(|(buffer, position)| {
                let file = self.file.clone();
                glommio::spawn_local(async move { file.write_at(buffer, position).await }).detach()
            })
            .collect();
        for task in writes {
            task.await
                .unwrap_or_else(|| Err(std::io::Error::other("write task was cancelled")))?;
        }
        self.file.fdatasync().await
    }
}

impl SegmentAppender {
    /// An appender for a file whose logical size is `end`. `partial_page` must hold the
    /// bytes of the file from `align_down(end)` to `end`.
    pub fn new(
        file: LogFile,
        end: u64,
        partial_page: Vec<u8>,
        chunk_bytes: usize,
        preallocate_step: u64,
    ) -> Self {
        debug_assert_eq!(partial_page.len() as u64, end - align_down(end));
        SegmentAppender {
            file,
            end,
            chunk: None,
            partial_page,
            queued: Vec::new(),
            in_flight: Vec::new(),
            flush_running: false,
            chunk_bytes: chunk_bytes.max(ALIGNMENT),
            preallocation: Rc::new(Preallocation {
                reserved: Cell::new(end),
                step: preallocate_step,
            }),
        }
    }

    /// Copies `bytes` to the end of the segment; returns the position they start at.
    pub fn append(&mut self, bytes: &[u8]) -> u64 {
        let position = self.end;
        let mut rest = bytes;
        while !rest.is_empty() {
            let (chunk, _) = self.current_chunk(rest.len());
            let taken = chunk.fill_from(rest);
            let full = chunk.remaining() == 0;
            rest = &rest[taken..];
            self.end += taken as u64;
            if full {
                if let Some(full) = self.chunk.take() {
                    self.write_full_chunk(full);
                }
            }
        }
        position
    }

    /// The chunk being filled, allocated when needed: big enough for the partial page plus
    /// `incoming` bytes (up to [`MAX_CHUNK_BYTES`]), so a large batch goes out as one write.
    fn current_chunk(&mut self, incoming: usize) -> &mut (AlignedBuf, u64) {
        if self.chunk.is_none() {
            let wanted = (self.partial_page.len() + incoming).min(MAX_CHUNK_BYTES);
            let mut buffer = self.file.alloc_buffer(self.chunk_bytes.max(wanted));
            let taken = buffer.fill_from(&self.partial_page);
            debug_assert_eq!(taken, self.partial_page.len());
            self.partial_page = Vec::new();
            self.chunk = Some((buffer, align_down(self.end)));
        }
        match &mut self.chunk {
            Some(chunk) => chunk,
            None => unreachable!("chunk allocated above"),
        }
    }

    fn write_full_chunk(&mut self, chunk: (AlignedBuf, u64)) {
        if self.flush_running {
            self.queued.push(chunk);
            return;
        }
        let file = self.file.clone();
        let preallocation = self.preallocation.clone();
        let (buffer, position) = chunk;
        let task = glommio::spawn_local(async move {
            preallocation
                .ensure(&file, position + buffer.write_len() as u64)
                .await?;
            file.write_at(buffer, position).await
        })
        .detach();
        self.in_flight.push(task);
    }

    /// Takes everything appended so far into a [`FlushPlan`]. Until
    /// [`SegmentAppender::end_flush`] is called, full chunks are queued rather than written.
    pub fn begin_flush(&mut self) -> FlushPlan {
        self.flush_running = true;
        let mut writes = std::mem::take(&mut self.queued);
        if let Some((buffer, position)) = self.chunk.take() {
            let page_start = align_down(self.end);
            let keep = (self.end - page_start) as usize;
            if keep > 0 {
                self.partial_page = buffer.filled()[buffer.len() - keep..].to_vec();
            }
            writes.push((buffer, position));
        }
        FlushPlan {
            file: self.file.clone(),
            pending: std::mem::take(&mut self.in_flight),
            writes,
            preallocation: self.preallocation.clone(),
            end: self.end,
        }
    }

    /// Marks the running flush as finished; queued full chunks are written now.
    pub fn end_flush(&mut self) {
        self.flush_running = false;
        for chunk in std::mem::take(&mut self.queued) {
            self.write_full_chunk(chunk);
        }
    }
}
