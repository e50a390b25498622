//! What every floor reads: the cluster view a shard follows, topic and group configs, the
//! fence epochs derived from the assignment, the `__consumer_offsets` names and the text form
//! of topic ids. No I/O and no executor here.

pub mod cluster_view;
pub mod fence_epoch;
pub mod group_configs;
pub mod local_assignment;
pub mod offsets_topic;
pub mod topic_config;
pub mod uuid_text;
