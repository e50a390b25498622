//! Reading size-prefixed request frames from a client socket.
//!
//! Bytes are received straight into spare buffer capacity with `recv(MSG_DONTWAIT)` on the
//! raw socket, so nothing is zero-filled first, and one `recv` can bring several small frames
//! at once. Only when the socket is empty does the reader wait through the stream (glommio
//! waits for readability), reading at most [`WAIT_READ`] bytes that way.
//!
//! Memory follows what the client actually sent, never a size prefix alone:
//! - small frames are cut out of one receive buffer of [`RECV_CHUNK`] bytes, which is
//!   released while the connection is idle between frames;
//! - a frame larger than that gets a buffer of its own, sized at most to the bytes already
//!   received, [`RECV_CHUNK`], or the largest frame this connection has already delivered in
//!   full, whichever is largest, and grown by doubling while more bytes arrive. A client that
//!   keeps sending frames of one size therefore gets each one read with no copy beyond the
//!   kernel's, while a prefix with nothing behind it allocates no more than the client has
//!   already sent.

use std::io;
use std::os::fd::RawFd;

use bytes::{Buf, Bytes, BytesMut};
use futures_lite::io::{AsyncRead, AsyncReadExt};

/// Size of the receive buffer small frames are cut from, and the most a frame buffer is
/// given before any of its bytes have arrived.
pub const RECV_CHUNK: usize = 64 << 10;

/// Bytes read through the stream when the reader has to wait for the socket.
const WAIT_READ: usize = 1 << 10;

/// Bytes of the size prefix in front of every frame.
const PREFIX: usize = 4;

/// Reads frames from one connection.
pub struct FrameReader<R> {
    fd: RawFd,
    stream: R,
    /// Received bytes not yet handed out: the beginning of the next frame or frames.
    pending: BytesMut,
    /// The largest frame this connection delivered in full.
    largest_delivered: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// `stream` must read from the socket `fd`; both are used, the stream only to wait.
    pub fn new(fd: RawFd, stream: R) -> Self {
        FrameReader {
            fd,
            stream,
            pending: BytesMut::new(),
            largest_delivered: 0,
        }
    }

    /// The next frame's size prefix; `None` when the client closed the connection between
    /// frames. The prefix stays unconsumed until [`FrameReader::read_frame`].
    pub async fn read_size(&mut self) -> io::Result<Option<i32>> {
        if self.pending.is_empty() {
            // Idle between frames: hold no receive buffer while waiting.
            self.pending = BytesMut::new();
            if self.wait_and_read(PREFIX.max(WAIT_READ)).await? == 0 {
                return Ok(None);
            }
        }
        while self.pending.len() < PREFIX {
            self.pending.reserve(RECV_CHUNK);
            if self.receive_pending(RECV_CHUNK).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        let prefix = [
            self.pending[0],
            self.pending[1],
            self.pending[2],
            self.pending[3],
        ];
        Ok(Some(i32::from_be_bytes(prefix)))
    }

    /// Reads the frame of `size` bytes whose prefix [`FrameReader::read_size`] returned (the
    /// caller has checked `size` against its limits).
    pub async fn read_frame(&mut self, size: usize) -> io::Result<Bytes> {
        self.pending.advance(PREFIX);
        if self.pending.len() >= size {
            return Ok(self.pending.split_to(size).freeze());
        }
        if size <= RECV_CHUNK {
            while self.pending.len() < size {
                let missing = size - self.pending.len();
                self.pending.reserve(missing.max(RECV_CHUNK / 4));
                if self.receive_pending(RECV_CHUNK).await? == 0 {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
            return Ok(self.pending.split_to(size).freeze());
        }
        let present = self.pending.len();
        let mut frame =
            BytesMut::with_capacity(frame_capacity(size, present, self.largest_delivered));
        frame.extend_from_slice(&self.pending.split());
        while frame.len() < size {
            let missing = size - frame.len();
            if frame.capacity() == frame.len() {
                frame.reserve(missing.min(frame.len()));
            }
            if receive(self.fd, &mut self.stream, &mut frame, missing).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        self.largest_delivered = self.largest_delivered.max(size);
        Ok(frame.freeze())
    }

    async fn receive_pending(&mut self, limit: usize) -> io::Result<usize> {
        receive(self.fd, &mut self.stream, &mut self.pending, limit).await
    }

    /// Waits for the socket to become readable and appends up to `limit` bytes to `pending`.
    async fn wait_and_read(&mut self, limit: usize) -> io::Result<usize> {
        wait_and_read(&mut self.stream, &mut self.pending, limit).await
    }
}

/// Capacity for a frame of `size` bytes of which `present` have arrived, on a connection that
/// already delivered a frame of `largest_delivered` bytes.
fn frame_capacity(size: usize, present: usize, largest_delivered: usize) -> usize {
    size.min(present.max(largest_delivered).max(RECV_CHUNK))
}

/// Appends up to `limit` bytes from the socket to `buffer`'s spare capacity (which must not
/// be empty), waiting when none are there yet. `Ok(0)` means the client closed the connection.
async fn receive<R: AsyncRead + Unpin>(
    fd: RawFd,
    stream: &mut R,
    buffer: &mut BytesMut,
    limit: usize,
) -> io::Result<usize> {
    let limit = limit.min(buffer.capacity() - buffer.len());
    loop {
        match recv_now(fd, buffer, limit) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return wait_and_read(stream, buffer, limit).await
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            result => return result,
        }
    }
}

/// One non-blocking `recv` into `buffer`'s spare capacity, at most `limit` bytes.
fn recv_now(fd: RawFd, buffer: &mut BytesMut, limit: usize) -> io::Result<usize> {
    let spare = buffer.spare_capacity_mut();
    let len = spare.len().min(limit);
    debug_assert!(len > 0, "receive needs spare capacity");
    // SAFETY: the kernel writes at most `len` bytes into the spare capacity, which is valid
    // for writes of `len` bytes; `fd` is the connection's open socket.
    let received = unsafe { libc::recv(fd, spare.as_mut_ptr().cast(), len, libc::MSG_DONTWAIT) };
    if received < 0 {
        return Err(io::Error::last_os_error());
    }
    let received = received as usize;
    // SAFETY: the kernel initialised the first `received` bytes of the spare capacity.
    unsafe { buffer.set_len(buffer.len() + received) };
    Ok(received)
}

/// Waits through the stream until bytes arrive and appends up to `limit` (at most
/// [`WAIT_READ`]) of them to `buffer`.
async fn wait_and_read<R: AsyncRead + Unpin>(
    stream: &mut R,
    buffer: &mut BytesMut,
    limit: usize,
) -> io::Result<usize> {
    let mut landing = [0u8; WAIT_READ];
    let read = stream.read(&mut landing[..limit.min(WAIT_READ)]).await?;
    buffer.extend_from_slice(&landing[..read]);
    Ok(read)
}

#[cfg(test)]
mod tests;
