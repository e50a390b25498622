//! The check a broker makes before it serves with `--assignment-source kube`: one request of
//! each kind the cluster core depends on (`get` the Lease, `list` the Service's
//! EndpointSlices, `list` the KafkaTopics), so an API server that is not there, a missing
//! RBAC rule or CRDs not installed stop the broker at start-up with an error that names the
//! verb and the resource, instead of a broker that runs without a controller. After start-up
//! the adapters log such failures and retry, and the broker keeps serving what it leads.

use std::time::Duration;

use crate::context::KubeEnvironment;
use crate::endpoint_slices::ServiceEndpoints;
use crate::error::KubeAdapterError;
use crate::lease::{ControllerLease, LEASE_NAME};
use crate::topic_store::TopicStore;

/// The longest the whole check may take (an API server that accepts connections but does
/// not answer).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the check failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// A request failed (its error names the verb and the resource).
    #[error(transparent)]
    Request(#[from] KubeAdapterError),
    /// No answer in time.
    #[error(
        "no answer from the Kubernetes API server within {PROBE_TIMEOUT:?} (get leases.coordination.k8s.io {LEASE_NAME:?}, list endpointslices.discovery.k8s.io, list kafkatopics.kaas.io in namespace {namespace:?})"
    )]
    Timeout {
        /// The namespace asked about.
        namespace: String,
    },
}

/// Sends the three requests on a runtime of its own, one after the other, and returns the
/// first failure.
pub fn probe_blocking(environment: &KubeEnvironment, service: &str) -> Result<(), ProbeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(KubeAdapterError::Runtime)?;
    runtime.block_on(async {
        let checks = async {
            let context = environment.connect()?;
            ControllerLease::new(&context).read().await?;
            ServiceEndpoints::new(&context, service)
                .ready_brokers()
                .await?;
            TopicStore::new(&context).list().await?;
            Ok::<(), KubeAdapterError>(())
        };
        match tokio::time::timeout(PROBE_TIMEOUT, checks).await {
            Ok(answer) => answer.map_err(ProbeError::Request),
            Err(_) => Err(ProbeError::Timeout {
                namespace: environment.namespace.clone(),
            }),
        }
    })
}
