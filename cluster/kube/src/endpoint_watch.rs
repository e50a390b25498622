//! The cluster core's [`EndpointSource`]: a watch of the Service's EndpointSlices (label
//! `kubernetes.io/service-name=<service>`, `--service-name`, `kaas` by default) that reports
//! the whole set of ready broker ids once the initial list is in and again whenever it
//! changes (readiness as [`ready_brokers_of`] reads it). A failed watch is logged, naming
//! the resource, and restarted with kube's back-off; the last set reported stands meanwhile.

use std::collections::{BTreeMap, BTreeSet};

use futures_util::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kaas_cluster::ids::BrokerId;
use kaas_cluster_core::EndpointSource;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use tokio::sync::mpsc;

use crate::context::SharedContext;
use crate::endpoint_slices::{ready_brokers_of, SERVICE_NAME_LABEL};
use crate::error::{describe, KubeAdapterError};
use crate::error_log::ErrorLog;

/// The EndpointSlice source of one Service.
pub struct EndpointWatch {
    context: SharedContext,
    service: String,
}

impl EndpointWatch {
    /// Watches the EndpointSlices of `service` in `context`'s namespace once started.
    pub fn new(context: SharedContext, service: &str) -> Self {
        EndpointWatch {
            context,
            service: service.to_owned(),
        }
    }
}

impl EndpointSource for EndpointWatch {
    fn start(&mut self) -> mpsc::UnboundedReceiver<BTreeSet<BrokerId>> {
        let (ready, receiver) = mpsc::unbounded_channel();
        let context = match self.context.get() {
            Ok(context) => context,
            Err(error) => {
                tracing::error!(%error, "no Kubernetes client: no EndpointSlice readiness");
                return receiver;
            }
        };
        let selector = format!("{SERVICE_NAME_LABEL}={}", self.service);
        let resource = describe("endpointslices.discovery.k8s.io", None, &context.namespace)
            + &format!(" with label {selector}");
        let api: Api<EndpointSlice> = Api::namespaced(context.client, &context.namespace);
        let stream =
            watcher::watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
        tokio::spawn(async move {
            let mut errors = ErrorLog::new("EndpointSlices");
            let mut slices = SliceSet::default();
            let mut reported: Option<BTreeSet<BrokerId>> = None;
            futures_util::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let event = match event {
                    Ok(event) => {
                        errors.succeeded();
                        event
                    }
                    Err(source) => {
                        errors.failed(&KubeAdapterError::Watch {
                            resource: resource.clone(),
                            source,
                        });
                        continue;
                    }
                };
                let Some(now) = slices.apply(event) else {
                    continue;
                };
                if reported.as_ref() != Some(&now) {
                    tracing::info!(ready = ?now.iter().map(|id| id.0).collect::<Vec<_>>(), "EndpointSlice-ready brokers");
                    if ready.send(now.clone()).is_err() {
                        return;
                    }
                    reported = Some(now);
                }
            }
        });
        receiver
    }
}

/// The slices as the watch has them, by name; an initial list is collected whole before it
/// replaces the last one.
#[derive(Default)]
struct SliceSet {
    current: BTreeMap<String, EndpointSlice>,
    pending: Option<BTreeMap<String, EndpointSlice>>,
}

impl SliceSet {
    /// Applies one watch event; the ready brokers when the event completes a state.
    fn apply(&mut self, event: Event<EndpointSlice>) -> Option<BTreeSet<BrokerId>> {
        match event {
            Event::Init => {
                self.pending = Some(BTreeMap::new());
                return None;
            }
            Event::InitApply(slice) => {
                if let (Some(pending), Some(name)) =
                    (self.pending.as_mut(), slice.metadata.name.clone())
                {
                    pending.insert(name, slice);
                }
                return None;
            }
            Event::InitDone => self.current = self.pending.take().unwrap_or_default(),
            Event::Apply(slice) => {
                if let Some(name) = slice.metadata.name.clone() {
                    self.current.insert(name, slice);
                }
            }
            Event::Delete(slice) => {
                if let Some(name) = &slice.metadata.name {
                    self.current.remove(name);
                }
            }
        }
        let slices: Vec<EndpointSlice> = self.current.values().cloned().collect();
        Some(ready_brokers_of(&slices).into_keys().collect())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn slice(name: &str, pods: &[(&str, bool)]) -> EndpointSlice {
        let endpoints: Vec<serde_json::Value> = pods
            .iter()
            .map(|(pod, ready)| {
                serde_json::json!({"addresses": ["10.0.0.1"], "conditions": {"ready": ready},
                    "targetRef": {"kind": "Pod", "name": pod}})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "addressType": "IPv4", "endpoints": endpoints,
        }))
        .unwrap()
    }

    fn ids(set: Option<BTreeSet<BrokerId>>) -> Vec<i32> {
        set.unwrap().into_iter().map(|id| id.0).collect()
    }

    #[test]
    fn the_ready_set_follows_the_initial_list_and_every_change() {
        let mut slices = SliceSet::default();
        assert_eq!(slices.apply(Event::Init), None);
        assert_eq!(
            slices.apply(Event::InitApply(slice("a", &[("kaas-0", true)]))),
            None
        );
        assert_eq!(ids(slices.apply(Event::InitDone)), [0]);
        let two = slice("b", &[("kaas-1", true), ("kaas-2", false)]);
        assert_eq!(ids(slices.apply(Event::Apply(two.clone()))), [0, 1]);
        assert_eq!(ids(slices.apply(Event::Delete(slice("a", &[])))), [1]);
        // A re-list replaces everything at once.
        slices.apply(Event::Init);
        slices.apply(Event::InitApply(slice("c", &[("kaas-2", true)])));
        assert_eq!(ids(slices.apply(Event::InitDone)), [2]);
    }
}
