//! The brokers Kubernetes considers ready: the EndpointSlices of the kaas Service (label
//! `kubernetes.io/service-name=<service>`, the Service named by a flag, `kaas` by default).
//! An endpoint counts when its `conditions.ready` is true or unset (Kubernetes says to read
//! unset as ready) and its `targetRef` is a Pod; the pod's name gives the broker id, the
//! StatefulSet ordinal after the last `-` (`kaas-2` is broker 2). A pod may appear in several
//! slices (one per address family): it is one broker.

use std::collections::BTreeMap;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kaas_cluster::ids::BrokerId;
use kube::api::{Api, ListParams};

use crate::context::KubeContext;
use crate::error::{describe, request_error, KubeAdapterError};

/// The label EndpointSlices carry to name their Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The Service whose EndpointSlices are read when no flag names another.
pub const DEFAULT_SERVICE: &str = "kaas";

/// Reads the ready brokers of one Service.
#[derive(Clone)]
pub struct ServiceEndpoints {
    api: Api<EndpointSlice>,
    service: String,
    namespace: String,
}

impl ServiceEndpoints {
    /// The EndpointSlices of `service` in the context's namespace.
    pub fn new(context: &KubeContext, service: &str) -> Self {
        Self {
            api: Api::namespaced(context.client.clone(), &context.namespace),
            service: service.to_owned(),
            namespace: context.namespace.clone(),
        }
    }

    /// The ready brokers: broker id → pod name. Pods whose name has no ordinal are left out
    /// (and logged).
    pub async fn ready_brokers(&self) -> Result<BTreeMap<BrokerId, String>, KubeAdapterError> {
        let selector = format!("{SERVICE_NAME_LABEL}={}", self.service);
        let slices = self
            .api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(request_error(
                "list",
                describe("endpointslices.discovery.k8s.io", None, &self.namespace)
                    + &format!(" with label {selector}"),
            ))?;
        Ok(ready_brokers_of(&slices.items))
    }
}

/// The ready brokers named by `slices` (see the module doc).
pub fn ready_brokers_of(slices: &[EndpointSlice]) -> BTreeMap<BrokerId, String> {
    let mut ready = BTreeMap::new();
    for endpoint in slices
        .iter()
        .flat_map(|slice| slice.endpoints.iter().flatten())
    {
        let is_ready = endpoint
            .conditions
            .as_ref()
            .and_then(|conditions| conditions.ready)
            .unwrap_or(true);
        let Some(target) = &endpoint.target_ref else {
            continue;
        };
        if !is_ready || target.kind.as_deref().is_some_and(|kind| kind != "Pod") {
            continue;
        }
        let Some(pod) = target.name.as_deref() else {
            continue;
        };
        match broker_id_of_pod(pod) {
            Some(id) => {
                ready.insert(id, pod.to_owned());
            }
            None => tracing::warn!(pod, "ready endpoint's pod name has no ordinal; ignored"),
        }
    }
    ready
}

/// The StatefulSet ordinal after the last `-` of a pod name, as a broker id.
pub fn broker_id_of_pod(pod: &str) -> Option<BrokerId> {
    let (_, ordinal) = pod.rsplit_once('-')?;
    if ordinal.is_empty() || !ordinal.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    ordinal.parse::<i32>().ok().map(BrokerId)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ordinals_come_after_the_last_dash() {
        assert_eq!(broker_id_of_pod("kaas-0"), Some(BrokerId(0)));
        assert_eq!(broker_id_of_pod("my-kaas-12"), Some(BrokerId(12)));
        for bad in [
            "kaas",
            "kaas-",
            "kaas-x1",
            "kaas-99999999999",
            "kaas-+1",
            "kaas-1-",
        ] {
            assert_eq!(broker_id_of_pod(bad), None, "{bad}");
        }
    }
}
