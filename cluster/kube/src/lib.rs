//! kaas cluster mode's Kubernetes adapters, thin and without decisions: the controller
//! Lease ([`lease`]), the ready brokers of the Service's EndpointSlices
//! ([`endpoint_slices`]), the KafkaTopic resources ([`kafka_topic`], [`topic_store`]) and the
//! KafkaClusterAssignments mirror ([`assignment_mirror`]). The decisions (what to assign,
//! when to lead) are `kaas-cluster`'s; this crate carries them out.
//!
//! On top of those, the cluster core's sources ([`core_sources::kube_sources`]): the Lease
//! campaign ([`lease_campaign`]), the EndpointSlice and KafkaTopic watches
//! ([`endpoint_watch`], [`topic_watch`]) and the mirror ([`mirror_sink`]), which implement
//! `kaas-cluster-core`'s traits; and the service that carries the brokers' topic changes out
//! on the KafkaTopics ([`topic_requests`]).
//!
//! Every type here runs on a tokio runtime (kube's client is tokio-based): the cluster core's
//! thread, never a glommio shard.
//!
//! This library enables no Kubernetes version of `k8s-openapi` (that crate's rule for
//! libraries): the final binary enables one (`v1_37`), and so do this crate's tests.

pub mod assignment_mirror;
pub mod context;
pub mod core_sources;
pub mod endpoint_slices;
pub mod endpoint_watch;
pub mod error;
mod error_log;
pub mod kafka_topic;
pub mod lease;
pub mod lease_campaign;
pub mod mirror_sink;
pub mod startup_probe;
pub mod topic_requests;
pub mod topic_store;
pub mod topic_watch;

pub use context::{KubeContext, KubeEnvironment, SharedContext};
pub use core_sources::kube_sources;
pub use error::KubeAdapterError;
