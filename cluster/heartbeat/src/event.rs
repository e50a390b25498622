//! What the heartbeat server tells its consumer (the controller state machine of
//! `kaas-cluster`): plain data, in the order it happened for each broker, each stamped with
//! the monotonic time the server saw it.

use std::time::Instant;

use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::ids::{AssignmentVersion, BrokerId};

/// A connected broker as its last ping described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerStatus {
    /// The broker and its advertised Kafka endpoint.
    pub broker: BrokerEndpoint,
    /// The newest assignment it has applied (`None` before the first).
    pub applied_version: Option<AssignmentVersion>,
    /// When its last ping arrived (monotonic).
    pub last_ping: Instant,
}

/// Why a broker left the connected set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Departure {
    /// Its stream ended or broke (the process exited, the connection reset, or its pings
    /// became malformed): reported at once.
    StreamClosed,
    /// Its stream stayed open but no ping came for the configured number of intervals (a
    /// paused process, a partitioned host).
    AgedOut,
}

/// One change in the set of connected brokers, or a ping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeartbeatEvent {
    /// The broker's first ping on a stream, or its first ping after it aged out. A broker that
    /// opens a new stream while its old one is still open (it restarted before the old
    /// connection was noticed dead) joins again: the new stream replaces the old one, and no
    /// departure is reported for the old one.
    Joined(BrokerStatus),
    /// A later ping. Pings that change nothing and come less than half an interval after the
    /// last reported one are not reported (they still keep the broker alive), so a client
    /// pinging too fast cannot flood the consumer.
    Pinged(BrokerStatus),
    /// The broker left the connected set.
    Departed {
        /// The broker.
        broker: BrokerId,
        /// Why.
        reason: Departure,
        /// When the server noticed (monotonic).
        at: Instant,
    },
}

impl HeartbeatEvent {
    /// The broker the event is about.
    pub fn broker(&self) -> BrokerId {
        match self {
            HeartbeatEvent::Joined(status) | HeartbeatEvent::Pinged(status) => status.broker.id,
            HeartbeatEvent::Departed { broker, .. } => *broker,
        }
    }
}
