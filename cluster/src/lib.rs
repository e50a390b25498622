//! kaas's cluster decisions, with no I/O and no runtime: the ids, `assignment.json`'s model
//! and checks, [`follower::AssignmentFollower::apply_if_new`], the [`view::ClusterView`] every
//! shard reads, placement of partitions and groups, shard commands as plain data and the
//! takeover diff that turns an assignment change into those commands; and the controller's
//! side: the [`balancer`] that computes the next assignment and the [`controller`] state
//! machine that decides when to lead, compute and write; the [`lease`] campaign that decides
//! when a broker holds the controller Lease; and the [`topic_change`] requests a broker sends
//! to whoever keeps the cluster's topic list.
//!
//! Everything here is deterministic and `Send`: adapters (file watching, Kubernetes, gRPC)
//! feed it inputs and carry its outputs out, which is what lets the tests drive it by
//! seeded simulation.

pub mod assignment;
pub mod balancer;
pub mod command;
pub mod controller;
pub mod follower;
pub mod ids;
pub mod internal_topics;
pub mod lease;
pub mod open_state;
pub mod placement;
pub mod takeover;
pub mod topic_change;
mod topic_id;
mod topic_name;
pub mod view;

#[cfg(test)]
mod tests {
    /// The cluster core's values cross threads (the cluster core to every shard), so each must
    /// stay `Send + Sync`; this fails to compile the day one does not.
    #[test]
    fn values_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<crate::assignment::Assignment>();
        send_sync::<crate::follower::AssignmentFollower>();
        send_sync::<crate::view::ClusterView>();
        send_sync::<crate::command::AddressedCommand>();
        send_sync::<crate::open_state::OpenState>();
        send_sync::<crate::takeover::TakeoverPlan>();
        send_sync::<crate::controller::Controller>();
        send_sync::<crate::controller::Action>();
        send_sync::<crate::controller::Input>();
        send_sync::<crate::lease::Campaign<()>>();
        send_sync::<crate::topic_change::TopicChange>();
        fn send<T: Send>() {}
        send::<crate::topic_change::TopicChangeRequest>();
    }
}
