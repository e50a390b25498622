//! kaas-net: the Kafka protocol side of the broker.
//!
//! - [`protocol`] is the wire codec: message layouts, request framing, response encoding for
//!   vectored writes, version gating and Kafka error codes.
//! - [`broker`] is the runtime: shards, connections, routing to owner shards, topics and the
//!   cluster view.
//! - [`handlers`] has one module per Kafka API.

pub mod broker;
pub mod groups;
pub mod handlers;
pub mod protocol;
