//! Client start-up: kube's configuration inference (the in-cluster service account, else
//! `KUBECONFIG` / `~/.kube/config`) and the namespace kaas works in: `POD_NAMESPACE` (the
//! downward API), else the service account's namespace file.
//!
//! A `kube::Client` belongs to the tokio runtime it was made on, and the binary learns its
//! configuration before the cluster core's runtime exists; so [`KubeEnvironment`] keeps the
//! configuration, and [`SharedContext`] makes the one client the adapters share on first use,
//! on the runtime of that use (the cluster core's).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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

/// The client configuration and namespace found in the environment, before any client.
#[derive(Clone)]
pub struct KubeEnvironment {
    /// kube's inferred configuration (in-cluster, else `KUBECONFIG`).
    pub config: kube::Config,
    /// The namespace (see [`namespace_from_environment`]).
    pub namespace: String,
}

impl KubeEnvironment {
    /// Infers the configuration and the namespace, as [`KubeContext::from_environment`]
    /// does, and checks that a client can be built from them (TLS settings, proxy). Runs on
    /// a runtime of its own, so it may be called from plain start-up code; sends nothing.
    pub fn infer_blocking() -> Result<Self, KubeAdapterError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(KubeAdapterError::Runtime)?;
        runtime.block_on(async {
            let config = kube::Config::infer()
                .await
                .map_err(KubeAdapterError::Config)?;
            let namespace = namespace_from_environment(
                std::env::var("POD_NAMESPACE").ok(),
                Path::new(SERVICE_ACCOUNT_NAMESPACE_FILE),
            )?;
            let environment = KubeEnvironment { config, namespace };
            environment.connect()?;
            Ok(environment)
        })
    }

    /// A client on the current tokio runtime, in the environment's namespace.
    pub fn connect(&self) -> Result<KubeContext, KubeAdapterError> {
        let client =
            kube::Client::try_from(self.config.clone()).map_err(KubeAdapterError::Client)?;
        Ok(KubeContext::new(client, self.namespace.clone()))
    }
}

/// One [`KubeContext`] for several adapters, made on first use on the runtime of that use.
#[derive(Clone)]
pub struct SharedContext {
    source: ContextSource,
    made: Arc<Mutex<Option<KubeContext>>>,
}

#[derive(Clone)]
enum ContextSource {
    Environment(Box<KubeEnvironment>),
    Ready(KubeContext),
}

impl SharedContext {
    /// A context made from `environment` when first asked for.
    pub fn from_environment(environment: KubeEnvironment) -> Self {
        SharedContext {
            source: ContextSource::Environment(Box::new(environment)),
            made: Arc::new(Mutex::new(None)),
        }
    }

    /// An existing context (tests, whose client is already on the right runtime).
    pub fn ready(context: KubeContext) -> Self {
        SharedContext {
            source: ContextSource::Ready(context),
            made: Arc::new(Mutex::new(None)),
        }
    }

    /// The context; made now, on the current runtime, if this is the first call.
    pub fn get(&self) -> Result<KubeContext, KubeAdapterError> {
        let environment = match &self.source {
            ContextSource::Ready(context) => return Ok(context.clone()),
            ContextSource::Environment(environment) => environment,
        };
        let mut made = self
            .made
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(context) = made.as_ref() {
            return Ok(context.clone());
        }
        let context = environment.connect()?;
        *made = Some(context.clone());
        Ok(context)
    }

    /// The namespace the adapters work in.
    pub fn namespace(&self) -> &str {
        match &self.source {
            ContextSource::Environment(environment) => &environment.namespace,
            ContextSource::Ready(context) => &context.namespace,
        }
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
