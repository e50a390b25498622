//! KIP-848 consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe), as pure logic.
//!
//! A [`ConsumerGroup`] is a deterministic state machine: the coordinator feeds it heartbeats,
//! timer ticks ([`ConsumerGroup::expire`]) and topic changes with the current time as
//! `now_ms`, persists [`ConsumerGroup::encode`] whenever a call reports a change, and rebuilds
//! the group with [`ConsumerGroup::decode`] plus [`ConsumerGroup::restore`]. Nothing here does
//! I/O, reads a clock or is async.
//!
//! The protocol, as Apache Kafka's group coordinator implements it:
//! - Membership or subscription changes, and changes to the subscribed topics' metadata, bump
//!   the group epoch; the target assignment is then recomputed by the server-side assignor
//!   ([`assignor`]) and stamped with the group epoch (the assignment epoch).
//! - Each member converges to its target on its own ([`reconcile`]): it first revokes what it
//!   must give up, keeping its epoch, then moves to the target epoch; partitions still owned
//!   by others are withheld until released.
//!
//! Deliberate differences from Kafka are listed on [`ConsumerGroup::heartbeat`].

mod assignor;
mod commit_check;
mod group;
mod heartbeat;
mod member;
mod reconcile;
mod regex;
mod state_codec;
mod topics;

#[cfg(test)]
mod tests;

pub use assignor::{RANGE, SUPPORTED as SUPPORTED_ASSIGNORS, UNIFORM};
pub use commit_check::CommitCheck;
pub use group::{ConsumerGroup, ConsumerGroupState};
pub use heartbeat::{Heartbeat, HeartbeatResult};
pub use member::{
    Assignment, Member, MemberState, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
};
pub use state_codec::StateDecodeError;
pub use topics::TopicSnapshot;

/// Group settings the coordinator passes on every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupConfig {
    /// A member that does not heartbeat within this is removed (Kafka default 45000).
    pub session_timeout_ms: i32,
    /// How often members heartbeat (Kafka default 5000).
    pub heartbeat_interval_ms: i32,
    /// Most members the group accepts.
    pub max_size: usize,
    /// Assignor used when no member names one (Kafka default "uniform").
    pub default_assignor: &'static str,
}

impl Default for ConsumerGroupConfig {
    fn default() -> Self {
        ConsumerGroupConfig {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: usize::MAX,
            default_assignor: UNIFORM,
        }
    }
}
