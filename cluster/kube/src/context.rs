//! Client start-up: kube's configuration inference (the in-cluster service account, else
//! `KUBECONFIG` / `~/.kube/config`) and the namespace kaas works in: `POD_NAMESPACE` (the
//! downward API), else the service account's namespace file.

use std::path::{Path, PathBuf};

use crate::error::KubeAdapterError;

/// Where Kubernetes mounts the pod's service-account namespace.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// A client and the namespace every adapter of this crate works in.
#[derive(Clone)]
pub struct KubeContext {
    /// The API client (cheap to clone; tied to the tokio runtime it was built on).
    pub client: kube::Client,
    /// The namespace of the Lease, the EndpointSlices and the custom resources.
    pub namespace: String,
}

impl KubeContext {
    /// A context from an existing client (tests, or a caller with its own configuration).
    pub fn new(client: kube::Client, namespace: impl Into<String>) -> Self {
        Self {
            client,
            namespace: namespace.into(),
        }
    }

    /// Infers the configuration and the namespace from the environment, as a pod sees it.
    /// No request is sent yet: an unreachable API server shows up as the first request's
    /// error, which names its verb and resource.
    pub async fn from_environment() -> Result<Self, KubeAdapterError> {
        let config = kube::Config::infer()
            .await
            .map_err(KubeAdapterError::Config)?;
        let client = kube::Client::try_from(config).map_err(KubeAdapterError::Client)?;
        let namespace = namespace_from_environment(
            std::env::var("POD_NAMESPACE").ok(),
            Path::new(SERVICE_ACCOUNT_NAMESPACE_FILE),
        )?;
        Ok(Self { client, namespace })
    }
}

/// `POD_NAMESPACE` when set and not empty, else the trimmed content of `file`.
pub fn namespace_from_environment(
    pod_namespace: Option<String>,
    file: &Path,
) -> Result<String, KubeAdapterError> {
    if let Some(namespace) = pod_namespace.filter(|n| !n.trim().is_empty()) {
        return Ok(namespace.trim().to_owned());
    }
    let namespace_error = |source| KubeAdapterError::Namespace {
        path: PathBuf::from(file),
        source,
    };
    let text = std::fs::read_to_string(file).map_err(namespace_error)?;
    let namespace = text.trim();
    if namespace.is_empty() {
        return Err(namespace_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the file is empty",
        )));
    }
    Ok(namespace.to_owned())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pod_namespace_wins_over_the_file() {
        let namespace =
            namespace_from_environment(Some("prod".into()), Path::new("/nonexistent")).unwrap();
        assert_eq!(namespace, "prod");
    }

    #[test]
    fn the_service_account_file_is_read_and_trimmed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("namespace");
        std::fs::write(&file, "staging\n").unwrap();
        assert_eq!(namespace_from_environment(None, &file).unwrap(), "staging");
        assert_eq!(
            namespace_from_environment(Some("  ".into()), &file).unwrap(),
            "staging"
        );
    }

    #[test]
    fn no_namespace_anywhere_names_the_file() {
        let error = namespace_from_environment(None, Path::new("/nonexistent/namespace"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("POD_NAMESPACE"), "{error}");
        assert!(error.contains("/nonexistent/namespace"), "{error}");
    }
}
