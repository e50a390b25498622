//! kaas cluster mode's Kubernetes adapters, thin and without decisions: the controller
//! Lease ([`lease`]), the highest controller epoch kept on the volume
//! ([`controller_epoch_file`]), the ready brokers of the Service's EndpointSlices
//! ([`endpoint_slices`]), the KafkaTopic resources ([`kafka_topic`], [`topic_store`]), the
//! KafkaClusterAssignments mirror ([`assignment_mirror`]) and the service that carries the
//! brokers' topic changes out on the KafkaTopics ([`topic_requests`]). The decisions (when to
//! take the Lease, what to assign) are `kaas-cluster`'s; this crate carries them out.
//!
//! Every type here runs on a tokio runtime (kube's client is tokio-based): the cluster core's
//! thread, never a glommio shard.
//!
//! This library enables no Kubernetes version of `k8s-openapi` (that crate's rule for
//! libraries): the final binary enables one (`v1_37`), and so do this crate's tests.

pub mod assignment_mirror;
pub mod context;
pub mod controller_epoch_file;
pub mod endpoint_slices;
pub mod error;
pub mod kafka_topic;
pub mod lease;
pub mod topic_requests;
pub mod topic_store;

pub use context::KubeContext;
pub use error::KubeAdapterError;
