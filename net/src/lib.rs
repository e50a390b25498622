//! kaas-net: the Kafka protocol side of the broker.
//!
//! The folders are floors; a module imports only from its own floor and the floors below:
//!
//! - [`runtime`]: the connection runtime — the broker's start and stop, listeners, one task
//!   per connection reading frames and writing answers in request order, dispatch to handlers.
//! - [`handlers`]: one module per Kafka API, and the partition-request pipeline.
//! - [`topics`]: the topic service — creating, deleting and altering topics, standalone
//!   (`topics.json`) or through the cluster core, and waiting for the view to show a change.
//! - [`shard`]: the shard context — the partitions a shard owns, the router to other
//!   shards, the commands the cluster core sends, the takeover driver, producer ids, metrics
//!   and the broker's settings.
//! - [`transactions`]: the transaction coordinator's decisions and the `__transaction_state`
//!   record format, as plain data in and out (no I/O).
//! - [`groups`]: the group coordinator (classic and KIP-848 groups, committed offsets,
//!   `__consumer_offsets`).
//! - [`peers`]: the inter-broker client — one shard's cached connections to the other
//!   brokers, sending typed requests of the codec (uses only [`model`] and [`protocol`]).
//! - [`model`]: what every floor reads — the cluster view, topic and group configs, fence
//!   epochs, the `__consumer_offsets` names, topic id text.
//! - [`protocol`]: the wire codec — message layouts, framing, version gating, error codes.

pub mod groups;
pub mod handlers;
pub mod model;
pub mod peers;
pub mod protocol;
pub mod runtime;
pub mod shard;
pub mod topics;
pub mod transactions;
