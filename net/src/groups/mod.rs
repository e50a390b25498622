//! Consumer groups: the group coordinator's state, kept apart from connections so that a
//! group can move between shards (and, in cluster mode, brokers) and be rebuilt from the
//! data volume alone.
//!
//! - [`classic`] is the classic rebalance protocol (JoinGroup, SyncGroup, Heartbeat,
//!   LeaveGroup) as a state machine.
//! - [`consumer_protocol`] reads the subscriptions classic consumers send.
//! - [`coordinator`] holds the groups one shard coordinates ([`placement`]), each a
//!   [`group::Group`]: protocol state plus its durable store; [`offsets`] is OffsetCommit,
//!   OffsetFetch and OffsetDelete on them; [`txn_offsets`] is TxnOffsetCommit and the
//!   transaction markers that complete it; [`offset_retention`] decides which offsets have
//!   expired (`offsets.retention.minutes`); [`stored`] tells whether a group not loaded has a
//!   store on the volume (cluster mode loads it on its first request).
//! - [`offsets_topic`] serves `__consumer_offsets`, read-only, derived from the groups.
//! - [`consumer_group`] is the KIP-848 consumer group protocol (ConsumerGroupHeartbeat):
//!   server-side assignment, member epochs and reconciliation, as pure logic.

pub mod classic;
pub mod clock;
pub mod config;
pub mod config_overrides;
pub mod consumer_group;
pub mod consumer_protocol;
pub mod coordinator;
mod describe;
pub mod group;
pub mod offset_retention;
pub mod offsets;
pub mod offsets_topic;
pub mod placement;
mod stored;
pub mod txn_offsets;
