//! Writing a response made of several buffers with one `sendmsg` (scatter-gather), so record
//! bytes read from disk go to the socket without being copied into a response buffer.
//!
//! glommio's stream has no vectored write, so this calls `sendmsg(MSG_DONTWAIT)` on the raw
//! socket and, when the socket buffer is full, falls back to the stream's own write of the
//! next buffer, which waits for the socket to become writable.

use std::io::IoSlice;
use std::os::fd::RawFd;

use bytes::Bytes;
use futures_lite::io::{AsyncWrite, AsyncWriteExt};

/// Buffers passed to one `sendmsg` at most (below the kernel's `IOV_MAX` of 1024).
const MAX_IOVECS: usize = 256;

/// Writes all of `chunks` to the socket `fd`, using `stream` (the same socket) to wait.
pub async fn write_all_vectored<W: AsyncWrite + Unpin>(
    fd: RawFd,
    stream: &mut W,
    chunks: &[Bytes],
) -> std::io::Result<usize> {
    let total: usize = chunks.iter().map(Bytes::len).sum();
    let mut index = 0usize;
    let mut offset = 0usize;
    while index < chunks.len() {
        if chunks[index].len() == offset {
            index += 1;
            offset = 0;
            continue;
        }
        match send_vectored(fd, &chunks[index..], offset) {
            Ok(mut sent) => {
                while sent > 0 {
                    let left = chunks[index].len() - offset;
                    if sent >= left {
                        sent -= left;
                        index += 1;
                        offset = 0;
                    } else {
                        offset += sent;
                        sent = 0;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let written = stream.write(&chunks[index][offset..]).await?;
                if written == 0 {
                    return Err(std::io::ErrorKind::WriteZero.into());
                }
                offset += written;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

fn send_vectored(fd: RawFd, chunks: &[Bytes], first_offset: usize) -> std::io::Result<usize> {
    let slices: Vec<IoSlice<'_>> = chunks
        .iter()
        .take(MAX_IOVECS)
        .enumerate()
        .map(|(i, chunk)| {
            IoSlice::new(if i == 0 {
                &chunk[first_offset..]
            } else {
                chunk
            })
        })
        .collect();
    // SAFETY: `msghdr` is plain data; zeroed is a valid empty header.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = slices.as_ptr() as *mut libc::iovec;
    header.msg_iovlen = slices.len() as _;
    // SAFETY: `IoSlice` is ABI-compatible with `iovec`; the slices outlive the call; `fd` is
    // an open socket owned by the caller's stream.
    let sent = unsafe { libc::sendmsg(fd, &header, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(sent as usize)
}
