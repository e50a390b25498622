//! The connection runtime: the broker's start and stop, the listener of each shard, one task
//! per connection that reads frames, dispatches them to handlers and writes the answers in
//! request order.

pub mod connection;
pub mod cpus;
pub mod dispatch;
pub mod frame_reader;
pub mod port_guard;
pub mod server;
pub mod socket_writer;
