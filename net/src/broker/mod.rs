//! The broker runtime: shards, connections, routing, topics, and the cluster view.

pub mod append_turns;
pub mod cluster_topic_changes;
pub mod cluster_view;
pub mod config;
pub mod connection;
pub mod dispatch;
pub mod fence_epoch;
pub mod frame_reader;
pub mod group_configs;
pub mod metrics;
pub mod port_guard;
pub mod producer_expiration;
pub mod producer_ids;
pub mod replica_assignment;
pub mod router;
pub mod server;
pub mod shard;
pub mod shard_commands;
pub mod socket_writer;
pub mod takeover_driver;
pub mod topic_admin;
pub mod topic_change_link;
pub mod topic_changes;
pub mod topic_config;
pub mod topic_store;
pub mod view_wait;
