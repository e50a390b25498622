//! Reading ahead for sequential consumers.
//!
//! A consumer that reads a partition from disk asks, fetch after fetch, for the offset right
//! after the last batch it was given. After serving such a read from a segment file, the log
//! keeps a *stream* for the partition: the file bytes from where the next read will start,
//! read (or being read) in pieces of one read's window each, up to [`WINDOWS_AHEAD`] windows
//! past the consumer. The next read of exactly the expected offset takes the stream and is
//! served from its pieces (waiting only for a piece still being read); then the stream drops
//! what was served and starts reading further pieces. Several disk reads stay in flight while
//! responses travel to the client, so a consumer that keeps up never waits for the disk.
//!
//! Pieces keep the buffers the disk read into. A read copies exactly its window out of them,
//! across piece boundaries when a batch straddles two, into the one buffer that leaves the
//! shard: one copy per byte served, as without read-ahead.
//!
//! Only bytes below the log's readable end at the time of the read are read ahead: they are
//! whole, validated batches that never change while the segment exists, so a piece taken later
//! is still exact. A stream that is not taken is dropped by the next read that misses, or when
//! the partition goes idle. All pieces of one shard together hold at most [`SHARD_BUDGET`]
//! bytes; beyond that nothing more is read ahead.

use std::cell::Cell;
use std::collections::VecDeque;
use std::io;

use bytes::{Bytes, BytesMut};
use glommio::task::JoinHandle;

use crate::storage::{FileBytes, LogFile};

/// Most bytes one shard holds in read-ahead pieces, read or being read.
pub const SHARD_BUDGET: usize = 64 << 20;

/// Windows read ahead of a consumer's position.
pub const WINDOWS_AHEAD: usize = 3;

/// Most bytes read ahead of one partition's consumer.
pub const MAX_AHEAD: usize = 4 << 20;

thread_local! {
    /// Bytes of read-ahead pieces on this thread (shard).
    static IN_USE: Cell<usize> = const { Cell::new(0) };
}

/// A share of [`SHARD_BUDGET`], given back on drop.
struct Charge(usize);

impl Charge {
    fn take(bytes: usize) -> Option<Charge> {
        IN_USE.with(|in_use| {
            let used = in_use.get();
            (used + bytes <= SHARD_BUDGET).then(|| {
                in_use.set(used + bytes);
                Charge(bytes)
            })
        })
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        IN_USE.with(|in_use| in_use.set(in_use.get().saturating_sub(self.0)));
    }
}

enum PieceState {
    Reading(JoinHandle<io::Result<FileBytes>>),
    Read(FileBytes),
    Failed,
}

/// File bytes `position..position + len`, read or being read.
struct Piece {
    position: u64,
    len: usize,
    state: PieceState,
    _charge: Charge,
}

impl Piece {
    fn end(&self) -> u64 {
        self.position + self.len as u64
    }

    /// The piece's bytes once read (fewer than `len` at the end of the file); `None` if the
    /// read failed.
    async fn bytes(&mut self) -> Option<&FileBytes> {
        if let PieceState::Reading(read) = &mut self.state {
            self.state = match read.await {
                Some(Ok(bytes)) => PieceState::Read(bytes),
                _ => PieceState::Failed,
            };
        }
        match &self.state {
            PieceState::Read(bytes) => Some(bytes),
            _ => None,
        }
    }
}

/// The bytes of one segment from where a sequential consumer reads next, in pieces.
pub struct Stream {
    segment_base: u64,
    /// The offset the consumer asks for next.
    next_offset: u64,
    /// The file position of the batch holding `next_offset`.
    position: u64,
    /// Contiguous pieces; the first starts at or before `position`.
    pieces: VecDeque<Piece>,
}

impl Stream {
    /// Where the bytes of [`Stream::window`] start.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Up to `len` bytes of the file from [`Stream::position`], copied out of the pieces
    /// (waiting for those still being read). Fewer when the pieces end sooner; `None` if a
    /// read failed or no piece holds the position.
    pub async fn window(&mut self, len: usize) -> Option<Bytes> {
        let available = self
            .pieces
            .back()
            .map_or(0, |piece| piece.end().saturating_sub(self.position));
        let mut out = BytesMut::with_capacity(len.min(available as usize));
        for piece in self.pieces.iter_mut() {
            let at = self.position + out.len() as u64;
            if out.len() >= len || piece.end() <= at {
                continue;
            }
            if piece.position > at {
                break;
            }
            let (piece_position, complete_len) = (piece.position, piece.len);
            let bytes = piece.bytes().await?;
            let from = (at - piece_position) as usize;
            if from >= bytes.len() {
                break;
            }
            let take = (bytes.len() - from).min(len - out.len());
            out.extend_from_slice(&bytes[from..from + take]);
            if bytes.len() < complete_len {
                break;
            }
        }
        (!out.is_empty()).then(|| out.freeze())
    }

    /// Drops the pieces that end at or before `position`.
    fn drop_before(&mut self, position: u64) {
        while self
            .pieces
            .front()
            .is_some_and(|piece| piece.end() <= position)
        {
            self.pieces.pop_front();
        }
        if self
            .pieces
            .front()
            .is_some_and(|piece| piece.position > position)
        {
            self.pieces.clear();
        }
    }
}

/// Where a consumer reads next, after a read served batches.
pub struct NextRead {
    pub segment_base: u64,
    /// The offset a sequential consumer asks for next: the end of what was just served.
    pub next_offset: u64,
    /// Where that offset's batch starts in the segment file.
    pub position: u64,
    /// Nothing at or past this position is read ahead.
    pub readable_end: u64,
    /// Bytes of one read's window (and of one piece).
    pub window: usize,
}

/// One partition's read-ahead: at most one stream.
#[derive(Default)]
pub struct ReadAhead {
    stream: Option<Stream>,
}

impl ReadAhead {
    /// The stream for a read of `offset` in the segment at `segment_base`, if one was read
    /// ahead for exactly that; any other stream is dropped.
    pub fn claim(&mut self, segment_base: u64, offset: u64) -> Option<Stream> {
        self.stream
            .take()
            .filter(|stream| stream.segment_base == segment_base && stream.next_offset == offset)
    }

    /// Keeps reading ahead of `next`, continuing `stream` (the one the read claimed) when it
    /// covers the same segment, and starts pieces up to [`WINDOWS_AHEAD`] windows (at most
    /// [`MAX_AHEAD`] bytes) past `next.position`, within the shard's budget.
    pub fn advance(&mut self, stream: Option<Stream>, file: &LogFile, next: NextRead) {
        let mut stream = match stream {
            Some(stream) if stream.segment_base == next.segment_base => stream,
            _ => Stream {
                segment_base: next.segment_base,
                next_offset: next.next_offset,
                position: next.position,
                pieces: VecDeque::new(),
            },
        };
        stream.drop_before(next.position);
        stream.next_offset = next.next_offset;
        stream.position = next.position;
        let piece_len = next.window.clamp(1, MAX_AHEAD) as u64;
        let ahead = (next.window.saturating_mul(WINDOWS_AHEAD)).min(MAX_AHEAD) as u64;
        let target = (next.position + ahead).min(next.readable_end);
        let mut end = stream.pieces.back().map_or(next.position, Piece::end);
        while end < target {
            let len = piece_len.min(next.readable_end - end) as usize;
            let Some(charge) = Charge::take(len) else {
                break;
            };
            let file = file.clone();
            let position = end;
            let read =
                glommio::spawn_local(async move { file.read_buffer(position, len).await }).detach();
            stream.pieces.push_back(Piece {
                position,
                len,
                state: PieceState::Reading(read),
                _charge: charge,
            });
            end += len as u64;
        }
        self.stream = (!stream.pieces.is_empty()).then_some(stream);
    }

    /// Drops the stream (an idle partition gives its memory back).
    pub fn release(&mut self) {
        self.stream = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shard_budget_bounds_the_charges_and_returns_on_drop() {
        let first = Charge::take(SHARD_BUDGET - 10).expect("within budget");
        assert!(Charge::take(11).is_none(), "over budget");
        let second = Charge::take(10).expect("exactly the rest");
        drop(first);
        assert!(Charge::take(SHARD_BUDGET - 10).is_some());
        drop(second);
        IN_USE.with(|in_use| assert_eq!(in_use.get(), 0));
    }
}
