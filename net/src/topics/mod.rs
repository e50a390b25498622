//! The topic service: creating, deleting and altering topics and group configs, one way in
//! both modes. Handlers use [`topic_changes`]: it checks a change ([`checks`]) against the
//! view, sends it over the [`topic_change_link`] to whoever keeps the topic list, and waits
//! for the followed assignment to show it ([`view_wait`]). A standalone broker keeps its
//! topics in `__cluster/topics.json` ([`topic_store`]) and is its own controller
//! ([`local_controller`]): it serves the link on shard 0 and follows the one-broker
//! assignment of its topics (`model::local_assignment`); a cluster broker's link goes to the
//! cluster core's KafkaTopic service.

pub mod checks;
pub mod local_controller;
pub mod replica_assignment;
pub mod topic_change_link;
pub mod topic_changes;
pub mod topic_store;
pub mod transaction_state;
pub mod view_wait;
