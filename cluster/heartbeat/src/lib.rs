//! kaas's heartbeat over gRPC (`kaas-proto`'s `heartbeat.proto`), on tokio and tonic:
//!
//! - [`HeartbeatServer`] (the controller's side): accepts one stream per broker, keeps the
//!   registry of connected brokers (last ping, endpoint, applied assignment version), reports
//!   [`HeartbeatEvent`]s (joined, pinged, departed at once when a stream breaks, aged out
//!   after missed pings) and pushes `ASSIGNMENT_CHANGED` to every stream;
//! - [`HeartbeatClient`] (the broker's side): keeps one stream to the controller endpoint it
//!   is given, pings every second, redials with backoff, and calls back on
//!   `ASSIGNMENT_CHANGED`.
//!
//! No decisions are made here: the events are plain data for the controller state machine of
//! `kaas-cluster`. Everything runs on the tokio runtime of the cluster core; nothing touches
//! glommio or a file.

mod backoff;
mod client;
mod controller_endpoint;
mod error;
mod event;
mod ping;
mod registry;
mod server;

pub use backoff::Backoff;
pub use client::{AssignmentChangedNotice, ClientOptions, ClientState, HeartbeatClient};
pub use controller_endpoint::{BadControllerEndpoint, ControllerEndpoint};
pub use error::{HeartbeatError, PingRefused};
pub use event::{BrokerStatus, Departure, HeartbeatEvent};
pub use ping::{Ping, MAX_HOST_LEN};
pub use server::{HeartbeatServer, ServerOptions};
