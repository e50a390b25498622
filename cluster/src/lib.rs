//! kaas's cluster decisions, with no I/O and no runtime: the ids, `assignment.json`'s model
//! and checks, [`follower::AssignmentFollower::apply_if_new`], the [`view::ClusterView`] every
//! shard reads, placement of partitions and groups, shard commands as plain data and the
//! takeover diff that turns an assignment change into those commands.
//!
//! Everything here is deterministic and `Send`: adapters (file watching, Kubernetes, gRPC)
//! feed it inputs and carry its outputs out, which is what lets the tests drive it by
//! seeded simulation.

pub mod assignment;
pub mod command;
pub mod follower;
pub mod ids;
pub mod open_state;
pub mod placement;
pub mod takeover;
mod topic_id;
mod topic_name;
pub mod view;
