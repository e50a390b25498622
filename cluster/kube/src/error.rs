//! The crate's one error type. Every failed request names the verb and the resource it
//! tried (`cannot update leases.coordination.k8s.io "kaas-controller" in namespace "kaas"`),
//! so a missing API server or a missing RBAC rule reads as what to fix.

use std::path::PathBuf;

/// What went wrong talking to Kubernetes.
#[derive(Debug, thiserror::Error)]
pub enum KubeAdapterError {
    /// A request failed: the API server is unreachable, refused it (RBAC: 403), or found it
    /// invalid. `resource` is the resource with its name and namespace.
    #[error("cannot {verb} {resource}: {source}")]
    Request {
        verb: &'static str,
        resource: String,
        #[source]
        source: kube::Error,
    },
    /// No client configuration: neither in-cluster service-account files nor a kubeconfig.
    #[error("no Kubernetes client configuration (in-cluster or KUBECONFIG): {0}")]
    Config(#[source] kube::config::InferConfigError),
    /// The client could not be built from the configuration (TLS, proxy).
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// The runtime for start-up could not be made.
    #[error("cannot start a runtime for the Kubernetes client: {0}")]
    Runtime(#[source] std::io::Error),
    /// Neither `POD_NAMESPACE` nor the service-account namespace file names a namespace.
    #[error("no namespace: POD_NAMESPACE is unset and {path} cannot be read: {source}")]
    Namespace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A watch stream failed (it is restarted by the caller).
    #[error("watch of {resource} failed: {source}")]
    Watch {
        resource: String,
        #[source]
        source: kube::runtime::watcher::Error,
    },
}

impl KubeAdapterError {
    /// The HTTP status the API server answered with, when it answered.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Self::Request {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }
}

/// Wraps a failed request with its verb and resource.
pub(crate) fn request_error(
    verb: &'static str,
    resource: impl Into<String>,
) -> impl FnOnce(kube::Error) -> KubeAdapterError {
    let resource = resource.into();
    move |source| KubeAdapterError::Request {
        verb,
        resource,
        source,
    }
}

/// `kind "name" in namespace "ns"`, the way kubectl names things.
pub(crate) fn describe(kind: &str, name: Option<&str>, namespace: &str) -> String {
    match name {
        Some(name) => format!("{kind} {name:?} in namespace {namespace:?}"),
        None => format!("{kind} in namespace {namespace:?}"),
    }
}

/// The API server's answer was 409 Conflict (a compare-and-swap lost) or AlreadyExists.
pub(crate) fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// The API server's answer was 404.
pub(crate) fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}
