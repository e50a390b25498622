//! One client connection: read frames, process requests concurrently, answer in order.
//!
//! The reader decodes each frame and spawns its handling at once (pipelined requests run
//! concurrently); the writer awaits the handlers in arrival order and writes each response
//! with one vectored send, because Kafka clients match responses by order. A bounded queue
//! between them limits the requests in flight per connection, so a client that does not read
//! its responses stops being read.
//!
//! Bad input closes the connection: a size prefix that is negative or above
//! `max_request_bytes`, a frame too short for a header, an unknown API or version (except
//! ApiVersions, which is answered in v0 with UNSUPPORTED_VERSION), a malformed body. Frames
//! are read by [`FrameReader`], whose buffers follow the bytes that arrive rather than a size
//! prefix, and the request bytes in flight on one connection never exceed
//! `max_request_bytes`: a frame is read only once earlier requests have released enough of
//! that budget.
//!
//! A handler's response reaches the writer through a oneshot channel, never through the
//! handler task's `JoinHandle`. Handlers wait on other shards, so the last waker of a
//! handler task is often dropped on another shard's thread, and glommio 0.9 frees a
//! completed task twice when its `JoinHandle` is dropped at that moment: the foreign drop
//! takes the reference count to zero and only then re-takes a reference to hand the task
//! back to its shard, and a `JoinHandle` dropped in between sees zero and frees the task
//! (so does the waker when it arrives). A task whose `JoinHandle` is dropped at spawn never
//! takes that path.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::rc::Rc;

use bytes::Bytes;
use futures_channel::oneshot;
use futures_lite::io::AsyncRead;
use glommio::net::TcpStream;
use glommio::sync::Semaphore;

use crate::protocol::{decode_request, FrameError};
use crate::runtime::dispatch;
use crate::runtime::frame_reader::FrameReader;
use crate::runtime::socket_writer::write_all_vectored;
use crate::shard::Shard;

/// The response to one request, once its handler is done: `None` for produce with acks=0
/// (nothing to send); the channel is cancelled if the handler never finished.
type Pending = oneshot::Receiver<Option<Vec<Bytes>>>;

/// Runs a request's handler in its own task (detached at once, see the module docs) and
/// returns where its response will arrive.
fn spawn_handler(
    handler: impl std::future::Future<Output = Option<Vec<Bytes>>> + 'static,
) -> Pending {
    let (response, pending) = oneshot::channel();
    glommio::spawn_local(async move {
        let _ = response.send(handler.await);
    })
    .detach();
    pending
}

/// Serves a connection until the client closes it or sends something unacceptable.
pub async fn serve(shard: Rc<Shard>, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let fd = stream.as_raw_fd();
    let peer = stream.peer_addr().ok();
    shard.metrics.connection(1);
    let (reader, mut writer) = futures_lite::io::split(stream);
    let mut reader = FrameReader::new(fd, reader);
    let (queue, responses) =
        async_channel::bounded::<Pending>(shard.config.max_in_flight_per_connection.max(1));
    let metrics = shard.metrics.clone();
    let writer_task = glommio::spawn_local(async move {
        while let Ok(pending) = responses.recv().await {
            let chunks = match pending.await {
                Ok(Some(chunks)) => chunks,
                // Produce with acks=0: no response.
                Ok(None) => continue,
                // The handler did not finish: answering later requests would break the
                // response order, so the connection ends here.
                Err(oneshot::Canceled) => break,
            };
            match write_all_vectored(fd, &mut writer, &chunks).await {
                Ok(bytes) => metrics.response(bytes),
                Err(_) => break,
            }
        }
        responses.close();
    })
    .detach();

    if let Err(reason) = read_requests(&shard, &mut reader, &queue, peer).await {
        tracing::debug!(?peer, reason, "closing connection");
        shard.metrics.request_error();
    }
    queue.close();
    let _ = writer_task.await;
    shard.metrics.connection(-1);
}

/// Reads and dispatches frames; `Err` carries why the connection must close.
async fn read_requests<R: AsyncRead + Unpin>(
    shard: &Rc<Shard>,
    reader: &mut FrameReader<R>,
    queue: &async_channel::Sender<Pending>,
    peer: Option<SocketAddr>,
) -> Result<(), &'static str> {
    let budget = Rc::new(Semaphore::new(shard.config.max_request_bytes as u64));
    loop {
        let size = match reader.read_size().await {
            Ok(Some(size)) => size,
            Ok(None) | Err(_) => return Ok(()),
        };
        if size < 0 || size as usize > shard.config.max_request_bytes {
            return Err("frame size out of bounds");
        }
        let permit = budget
            .acquire_static_permit((size as u64).max(1))
            .await
            .map_err(|_| "connection budget closed")?;
        let frame = reader
            .read_frame(size as usize)
            .await
            .map_err(|_| "connection closed mid-frame")?;
        shard.metrics.request(
            i16::from_be_bytes([
                *frame.first().unwrap_or(&0xff),
                *frame.get(1).unwrap_or(&0xff),
            ]),
            frame.len() + 4,
        );
        let pending = match decode_request(frame) {
            Ok((header, request)) => {
                if !dispatch::is_served(header.api_key, header.api_version) {
                    return Err("api not served");
                }
                if !dispatch::is_well_formed(&request) {
                    return Err("request Kafka refuses to parse");
                }
                let shard = shard.clone();
                spawn_handler(async move {
                    let response = dispatch::handle(&shard, header, request, peer).await;
                    drop(permit);
                    response
                })
            }
            Err(FrameError::UnsupportedVersion(ids))
                if ids.api_key == crate::protocol::messages::api_versions::API_VERSIONS_KEY =>
            {
                let response = dispatch::api_versions_fallback(ids.correlation_id);
                spawn_handler(async move { Some(response) })
            }
            Err(FrameError::TooShort(_)) => return Err("frame too short for a header"),
            Err(FrameError::UnknownApi(_)) => return Err("unknown api key"),
            Err(FrameError::UnsupportedVersion(_)) => return Err("unsupported api version"),
            Err(error @ (FrameError::Header { .. } | FrameError::Body { .. })) => {
                tracing::debug!(ids = ?error.ids(), %error, "malformed request");
                return Err("malformed request");
            }
        };
        if queue.send(pending).await.is_err() {
            return Ok(());
        }
    }
}
