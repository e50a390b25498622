use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_lite::future::block_on;
use proptest::prelude::*;

use super::*;

/// The stream half for tests: a blocking read on the same socket, so "waiting for the
/// socket" blocks the test thread until the writer sends more.
struct BlockingRead(UnixStream);

impl AsyncRead for BlockingRead {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(self.0.read(buf))
    }
}

fn framed(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut wire = Vec::new();
    for frame in frames {
        wire.extend_from_slice(&(frame.len() as i32).to_be_bytes());
        wire.extend_from_slice(frame);
    }
    wire
}

/// Sends `wire` in pieces of the given sizes (cycled), pausing now and then so the reader
/// finds the socket empty, then closes the socket.
fn send_in_pieces(mut socket: UnixStream, wire: Vec<u8>, pieces: Vec<usize>) {
    let mut sent = 0;
    for (i, piece) in pieces.iter().cycle().enumerate() {
        if sent == wire.len() {
            break;
        }
        let end = (sent + piece.max(&1)).min(wire.len());
        socket.write_all(&wire[sent..end]).expect("write");
        sent = end;
        if i % 7 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Reads frames until the peer closes; `Err` if it closed mid-frame.
fn read_all(socket: UnixStream) -> io::Result<Vec<Bytes>> {
    let fd = socket.as_raw_fd();
    let mut reader = FrameReader::new(fd, BlockingRead(socket));
    block_on(async {
        let mut frames = Vec::new();
        while let Some(size) = reader.read_size().await? {
            frames.push(reader.read_frame(size as usize).await?);
        }
        Ok(frames)
    })
}

fn round_trip(frames: Vec<Vec<u8>>, pieces: Vec<usize>) -> io::Result<Vec<Bytes>> {
    let (client, server) = UnixStream::pair().expect("socket pair");
    let wire = framed(&frames);
    let writer = std::thread::spawn(move || send_in_pieces(client, wire, pieces));
    let result = read_all(server);
    writer.join().expect("writer");
    result
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Frames of any size, split at any points on the wire, come out whole and in order.
    #[test]
    fn frames_come_out_whole_however_the_bytes_arrive(
        sizes in prop::collection::vec(
            prop_oneof![0usize..64, 64usize..4096, 60_000usize..70_000, 100_000usize..400_000],
            1..12,
        ),
        pieces in prop::collection::vec(
            prop_oneof![1usize..8, 8usize..3000, 3000usize..200_000],
            1..6,
        ),
    ) {
        let frames: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| (0..size).map(|j| (i * 31 + j * 7) as u8).collect())
            .collect();
        let read = round_trip(frames.clone(), pieces).expect("all frames read");
        prop_assert_eq!(read.len(), frames.len());
        for (got, want) in read.iter().zip(&frames) {
            prop_assert_eq!(&got[..], &want[..]);
        }
    }
}

#[test]
fn a_close_mid_frame_is_an_error_and_a_close_between_frames_is_not() {
    let whole = framed(&[vec![9u8; 100_000]]);
    for cut in [2, 4, 10, 70_000, whole.len() - 1] {
        let (mut client, server) = UnixStream::pair().expect("socket pair");
        client.write_all(&whole[..cut]).expect("write");
        drop(client);
        let error = read_all(server).expect_err("closed mid-frame");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "cut at {cut}");
    }
    let (client, server) = UnixStream::pair().expect("socket pair");
    drop(client);
    assert!(read_all(server).expect("clean close").is_empty());
}

#[test]
fn a_size_prefix_alone_allocates_no_more_than_the_bytes_sent() {
    // Nothing of a 100 MiB frame has arrived: at most the receive buffer's size.
    assert_eq!(frame_capacity(100 << 20, 0, 0), RECV_CHUNK);
    // Never more than the frame itself.
    assert_eq!(frame_capacity(70_000, 0, 1 << 20), 70_000);
    // What arrived, or the largest frame this connection already delivered in full.
    assert_eq!(frame_capacity(100 << 20, 200_000, 0), 200_000);
    assert_eq!(frame_capacity(100 << 20, 10, 1 << 20), 1 << 20);
}

#[test]
fn an_incomplete_frame_does_not_raise_what_later_frames_may_be_given() {
    let (mut client, server) = UnixStream::pair().expect("socket pair");
    let size: i32 = 4 << 20;
    let sent = 300_000;
    let writer = std::thread::spawn(move || {
        client.write_all(&size.to_be_bytes()).expect("write");
        client.write_all(&vec![1u8; sent]).expect("write");
        // Hold the socket open until the reader has taken every byte, then close it.
        std::thread::sleep(Duration::from_millis(200));
    });
    let fd = server.as_raw_fd();
    let mut reader = FrameReader::new(fd, BlockingRead(server));
    let result = block_on(async {
        let size = reader.read_size().await?.expect("a prefix");
        reader.read_frame(size as usize).await
    });
    writer.join().expect("writer");
    assert_eq!(
        result.expect_err("closed mid-frame").kind(),
        io::ErrorKind::UnexpectedEof
    );
    assert_eq!(
        reader.largest_delivered, 0,
        "an incomplete frame is not delivered"
    );
}
