//! Why the heartbeat server could not start, and why a ping was refused.

use std::net::SocketAddr;

/// Why [`crate::HeartbeatServer::bind`] failed.
#[derive(Debug, thiserror::Error)]
pub enum HeartbeatError {
    /// The listen address could not be bound (in use, not local, no permission).
    #[error("binding the heartbeat listener {address}: {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// What the kernel said.
        source: std::io::Error,
    },
}

/// Why a ping from a broker was refused; the server ends that stream with `INVALID_ARGUMENT`
/// and this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PingRefused {
    /// `broker_id` was negative.
    #[error("broker id {0} is negative")]
    NegativeBrokerId(i32),
    /// The ping carried no endpoint.
    #[error("broker {0} sent no endpoint")]
    MissingEndpoint(i32),
    /// The endpoint's host was empty, longer than 255 bytes, or held whitespace or control
    /// characters.
    #[error("broker {0} sent an unusable host")]
    BadHost(i32),
    /// The endpoint's port was 0 or above 65535.
    #[error("broker {broker} sent port {port}, not 1..=65535")]
    BadPort {
        /// The broker.
        broker: i32,
        /// The port it sent.
        port: u32,
    },
    /// The ping reported more fenced partitions than `MAX_FENCED_PER_PING`.
    #[error("broker {0} reported too many fenced partitions")]
    TooManyFenced(i32),
    /// A fenced partition had a topic name Kafka would refuse, or a negative partition or
    /// claim epoch.
    #[error("broker {0} reported an impossible fenced partition")]
    BadFencedPartition(i32),
    /// A stream's pings must all name the broker its first ping named.
    #[error("a stream opened by broker {first} sent a ping from broker {then}")]
    BrokerChanged {
        /// The broker the stream's first ping named.
        first: i32,
        /// The broker a later ping named.
        then: i32,
    },
}
