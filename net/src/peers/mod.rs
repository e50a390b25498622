//! The inter-broker client: one shard's connections to the other brokers of the cluster, for
//! the requests a broker sends another (a transaction coordinator's WriteTxnMarkers to the
//! leaders of its transaction's partitions).
//!
//! [`PeerClient`] is per shard and `!Send` (it lives on its shard's glommio executor), like
//! the connections it keeps. Each [`PeerClient::call`] is typed by the request and response
//! bodies of the codec ([`crate::protocol::messages`]), so what goes out and comes back is
//! exactly what a Kafka client would send and read.
//!
//! Wire contract (Kafka's):
//!
//! - A request is one frame: a 4-byte big-endian size, the request header — v1 (api key,
//!   version, correlation id, client id `kaas-broker-<id>`), v2 (the same plus an empty tagged
//!   field section) exactly when the request version is flexible — then the body.
//! - The answer is one frame: size, response header (correlation id; v1 adds tagged fields
//!   when the version is flexible, except ApiVersions, always v0), body. An answer larger than
//!   [`MAX_RESPONSE_BYTES`] is refused before it is read.
//!
//! Connections: one cached connection per endpoint (host, port). Requests to one endpoint take
//! turns on it, one in flight at a time, so each answer is the answer to the request just sent
//! and answers come back in request order; the correlation id is checked all the same. Each
//! call has a timeout covering connecting, sending and reading. After any failure (connect,
//! I/O, timeout, an answer that does not decode or does not match) the connection is dropped
//! and the next call to that endpoint makes a new one; the failed call is not repeated here
//! (whether the peer acted on it is unknown, so retrying is the caller's decision). A cached
//! connection the peer closed while idle therefore fails the first call that uses it.
//!
//! Connections are established in one place, [`connection::PeerConnection::open`]: that is
//! where authentication (a SASL handshake) goes when inter-broker listeners need it.
//!
//! Host names are resolved with the system resolver when a connection is made, on the shard's
//! thread.

mod connection;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::{select, Either};
use futures_util::lock::Mutex;

use crate::protocol::{decode_response_as, encode_request, ApiMessage, DecodeError, RequestHeader};

use connection::PeerConnection;

/// The largest answer frame read from a peer (Kafka's `socket.request.max.bytes` default).
pub const MAX_RESPONSE_BYTES: usize = 104_857_600;

/// Where a broker listens for Kafka clients.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl Endpoint {
    /// The endpoint `host`:`port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Endpoint {
            host: host.into(),
            port,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Why a call to a peer broker got no answer.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// No connection could be made.
    #[error("connecting to {endpoint}: {source}")]
    Connect {
        /// The endpoint.
        endpoint: Endpoint,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Sending the request or reading the answer failed (the peer closed the connection:
    /// `UnexpectedEof`).
    #[error("talking to {endpoint}: {source}")]
    Io {
        /// The endpoint.
        endpoint: Endpoint,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No answer within the call's timeout.
    #[error("no answer from {endpoint} within {timeout:?}")]
    TimedOut {
        /// The endpoint.
        endpoint: Endpoint,
        /// The timeout.
        timeout: Duration,
    },
    /// The answer frame's size is negative, too small for a header, or above
    /// [`MAX_RESPONSE_BYTES`].
    #[error("answer frame of {size} bytes from {endpoint}")]
    BadFrameSize {
        /// The endpoint.
        endpoint: Endpoint,
        /// The size the frame announced.
        size: i64,
    },
    /// The answer does not decode as the expected response.
    #[error("answer from {endpoint} does not decode: {source}")]
    Decode {
        /// The endpoint.
        endpoint: Endpoint,
        /// Why.
        #[source]
        source: DecodeError,
    },
    /// The answer carries another request's correlation id.
    #[error("answer from {endpoint} has correlation id {received}, expected {expected}")]
    CorrelationMismatch {
        /// The endpoint.
        endpoint: Endpoint,
        /// The request's.
        expected: i32,
        /// The answer's.
        received: i32,
    },
    /// The codec has no such version of the request or response (nothing was sent).
    #[error("api {api_key} version {version} cannot be sent")]
    UnsupportedVersion {
        /// The request's API key.
        api_key: i16,
        /// The version asked for.
        version: i16,
    },
}

/// One endpoint's cached connection; the lock makes calls to the endpoint take turns.
type Slot = Rc<Mutex<Option<PeerConnection>>>;

/// One shard's client to the other brokers. `!Send`: lives on its shard.
pub struct PeerClient {
    client_id: String,
    next_correlation_id: Cell<i32>,
    connections: RefCell<HashMap<Endpoint, Slot>>,
}

impl PeerClient {
    /// A client sending `client_id` in every request header.
    pub fn new(client_id: impl Into<String>) -> Self {
        PeerClient {
            client_id: client_id.into(),
            next_correlation_id: Cell::new(0),
            connections: RefCell::new(HashMap::new()),
        }
    }

    /// The client of broker `broker_id`: client id `kaas-broker-<id>`.
    pub fn for_broker(broker_id: i32) -> Self {
        PeerClient::new(format!("kaas-broker-{broker_id}"))
    }

    /// The client id requests carry.
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Sends `request` at `version` to `endpoint` and returns the peer's answer, within
    /// `timeout` (connecting included). The API key is the request type's. Any error drops
    /// the endpoint's connection (see the module doc); the call is not repeated.
    pub async fn call<Req: ApiMessage, Resp: ApiMessage>(
        &self,
        endpoint: &Endpoint,
        version: i16,
        request: &Req,
        timeout: Duration,
    ) -> Result<Resp, PeerError> {
        if Req::API_KEY != Resp::API_KEY || !Req::supports(version) || !Resp::supports(version) {
            return Err(PeerError::UnsupportedVersion {
                api_key: Req::API_KEY,
                version,
            });
        }
        let slot = self.slot(endpoint);
        let mut cached = slot.lock().await;
        let correlation_id = self.correlation_id();
        let header = RequestHeader {
            api_key: Req::API_KEY,
            api_version: version,
            correlation_id,
            client_id: Some(self.client_id.clone()),
        };
        let frame = encode_request(&header, request);
        // The connection is taken out for the exchange and put back only after a good answer:
        // every failure, a timeout included, drops it.
        let connection = cached.take();
        let exchange = async move {
            let mut connection = match connection {
                Some(connection) => connection,
                None => PeerConnection::open(endpoint).await?,
            };
            let answer = connection.exchange(&frame).await?;
            Ok((connection, answer))
        };
        let (connection, answer) = within(timeout, endpoint, exchange).await?;
        let (received, body) =
            decode_response_as::<Resp>(version, answer).map_err(|source| PeerError::Decode {
                endpoint: endpoint.clone(),
                source,
            })?;
        if received != correlation_id {
            return Err(PeerError::CorrelationMismatch {
                endpoint: endpoint.clone(),
                expected: correlation_id,
                received,
            });
        }
        *cached = Some(connection);
        Ok(body)
    }

    /// Whether a connection to `endpoint` is cached (and not in use).
    pub fn is_connected(&self, endpoint: &Endpoint) -> bool {
        let slot = self.connections.borrow().get(endpoint).cloned();
        slot.is_some_and(|slot| slot.try_lock().is_some_and(|cached| cached.is_some()))
    }

    fn slot(&self, endpoint: &Endpoint) -> Slot {
        self.connections
            .borrow_mut()
            .entry(endpoint.clone())
            .or_default()
            .clone()
    }

    fn correlation_id(&self) -> i32 {
        let id = self.next_correlation_id.get();
        self.next_correlation_id.set(id.wrapping_add(1) & i32::MAX);
        id
    }
}

/// `work`'s result, or [`PeerError::TimedOut`] once `timeout` passes (`work` is dropped).
async fn within<T>(
    timeout: Duration,
    endpoint: &Endpoint,
    work: impl Future<Output = Result<T, PeerError>>,
) -> Result<T, PeerError> {
    let work = pin!(work);
    let timer = pin!(glommio::timer::sleep(timeout));
    match select(work, timer).await {
        Either::Left((result, _)) => result,
        Either::Right(_) => Err(PeerError::TimedOut {
            endpoint: endpoint.clone(),
            timeout,
        }),
    }
}

#[cfg(test)]
pub(crate) mod test_server;
#[cfg(test)]
mod tests;
