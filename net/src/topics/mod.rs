//! The topic service: creating, deleting and altering topics and group configs. A standalone
//! broker keeps `__cluster/topics.json` and publishes its view itself ([`topic_admin`],
//! [`topic_store`]); a cluster broker sends the change to the cluster core's KafkaTopic
//! service and waits for the followed assignment to show it ([`cluster_topic_changes`],
//! [`topic_change_link`], [`view_wait`]). [`topic_changes`] is the one interface handlers use.

pub mod cluster_topic_changes;
pub mod replica_assignment;
pub mod topic_admin;
pub mod topic_change_link;
pub mod topic_changes;
pub mod topic_store;
pub mod view_wait;
