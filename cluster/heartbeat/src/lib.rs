//! kaas's heartbeat over gRPC (`kaas-proto`'s `heartbeat.proto`), on tokio and tonic:
//!
//! - [`HeartbeatServer`] (the controller's side): accepts one stream per broker, keeps the
//!   table of open streams (last ping, endpoint, applied assignment version), reports
//!   [`HeartbeatEvent`]s (joined, pinged, and a stream's end at once when it ends or breaks)
//!   and pushes `ASSIGNMENT_CHANGED` to the streams of the brokers it is given;
//! - [`HeartbeatClient`] (the broker's side): keeps one stream to the controller endpoint it
//!   is given, pings every second, redials with backoff, and calls back on
//!   `ASSIGNMENT_CHANGED`.
//!
//! No decisions are made here, not even whether a broker is alive (a silent stream makes no
//! event; the controller state machine of `kaas-cluster` ages brokers out by its own clock):
//! the events are plain data for it. Everything runs on the tokio runtime of the cluster core; nothing touches
//! glommio or a file.

mod backoff;
mod client;
mod controller_endpoint;
mod error;
mod event;
mod ping;
mod server;
mod stream_registry;

pub use backoff::Backoff;
pub use client::{AssignmentChangedNotice, ClientOptions, ClientState, HeartbeatClient};
pub use controller_endpoint::{BadControllerEndpoint, ControllerEndpoint};
pub use error::{HeartbeatError, PingRefused};
pub use event::{BrokerStatus, HeartbeatEvent};
pub use ping::{Ping, MAX_HOST_LEN};
pub use server::{HeartbeatServer, ServerOptions};
