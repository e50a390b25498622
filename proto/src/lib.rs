//! kaas's gRPC contracts, generated at build time from the `.proto` files of this crate by
//! tonic-prost-build (see `build.rs`); nothing here is written by hand.
//!
//! - [`heartbeat`]: `heartbeat.proto`, the stream every broker keeps to the controller (1 s
//!   pings up, `ASSIGNMENT_CHANGED` down).
//!
//! Broker-to-broker calls (transaction markers to other partition leaders) will be a second
//! service on the same gRPC port; it is not defined yet.

/// `heartbeat.proto` (package `kaas.heartbeat.v1`): the messages, the
/// `heartbeat_client::HeartbeatClient` and the `heartbeat_server::{Heartbeat, HeartbeatServer}`
/// pair. Generated code.
pub mod heartbeat {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("kaas.heartbeat.v1");
}
