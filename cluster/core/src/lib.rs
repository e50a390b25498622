//! The cluster core of a kaas broker in cluster mode: one thread with a current-thread tokio
//! runtime, beside the glommio shards, that never touches a partition file.
//!
//! On it run, for the controller's side, the [`Controller`](kaas_cluster::controller::Controller)
//! state machine of `kaas-cluster` and the adapters that feed it and carry out its actions
//! ([`controller_loop`]): the heartbeat server, a 2 s tick (the alive-set poll), the volume
//! (`assignment.json` through `kaas-cluster-file`'s writer and its
//! controller-epoch file), and the Lease, EndpointSlice and KafkaTopic inputs behind the
//! [`sources`] traits. For the broker's side ([`broker_side`]) it runs the heartbeat client
//! to the controller the Lease names, which reports the assignment the broker applied and
//! nudges the broker's `FileFollower` on `ASSIGNMENT_CHANGED`. [`ClusterCore`] starts and
//! stops the thread.

pub mod broker_side;
mod clock;
pub mod controller_loop;
mod core_thread;
pub mod sources;
mod volume;

pub use broker_side::BrokerHooks;
pub use core_thread::{ClusterCore, CoreError, CoreOptions};
pub use sources::{
    BoxFuture, EndpointSource, LeaseEvent, LeaseSource, MirrorSink, Sources, TopicSource,
};
