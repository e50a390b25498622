//! One connection to a peer broker: a TCP stream carrying one request at a time, each a
//! whole Kafka frame out and a whole frame back (framing in the parent module's doc).

use bytes::Bytes;
use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;

use super::{Endpoint, PeerError, MAX_RESPONSE_BYTES};

/// An open connection to one endpoint.
pub(super) struct PeerConnection {
    endpoint: Endpoint,
    stream: TcpStream,
}

impl PeerConnection {
    /// Connects to `endpoint`. The one place a connection to a peer is established: a
    /// connection that needs authentication (a SASL handshake) gets it here, before it is
    /// used or cached.
    pub(super) async fn open(endpoint: &Endpoint) -> Result<Self, PeerError> {
        let connect_error = |source: std::io::Error| PeerError::Connect {
            endpoint: endpoint.clone(),
            source,
        };
        let stream = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
            .await
            .map_err(|error| connect_error(error.into()))?;
        stream
            .set_nodelay(true)
            .map_err(|error| connect_error(error.into()))?;
        Ok(PeerConnection {
            endpoint: endpoint.clone(),
            stream,
        })
    }

    /// Writes one request frame (`frame`: its chunks, size prefix included) and reads the
    /// answer frame, returned without its size prefix.
    pub(super) async fn exchange(&mut self, frame: &[Bytes]) -> Result<Bytes, PeerError> {
        let mut out = Vec::with_capacity(frame.iter().map(Bytes::len).sum());
        for chunk in frame {
            out.extend_from_slice(chunk);
        }
        let io = |source: std::io::Error| PeerError::Io {
            endpoint: self.endpoint.clone(),
            source,
        };
        self.stream.write_all(&out).await.map_err(io)?;
        self.stream.flush().await.map_err(io)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).await.map_err(io)?;
        let size = i32::from_be_bytes(size);
        // At least a correlation id; at most what a broker accepts.
        let len = usize::try_from(size)
            .ok()
            .filter(|len| (4..=MAX_RESPONSE_BYTES).contains(len))
            .ok_or_else(|| PeerError::BadFrameSize {
                endpoint: self.endpoint.clone(),
                size: i64::from(size),
            })?;
        let mut answer = vec![0u8; len];
        self.stream.read_exact(&mut answer).await.map_err(io)?;
        Ok(Bytes::from(answer))
    }
}
