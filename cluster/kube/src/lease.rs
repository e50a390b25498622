//! The controller Lease (`coordination.k8s.io/v1` Lease `kaas-controller`): read, acquire
//! or take over, renew, release. Every write is a `replace` carrying the
//! `metadata.resourceVersion` last read, so the API server applies it only if nobody wrote
//! the Lease in between (a compare-and-swap: the loser gets 409 Conflict and, here, the
//! Lease as it is now, so it learns the holder).
//!
//! The controller epoch is `spec.leaseTransitions`: an acquisition writes the observed value
//! plus one in the same request, a renewal and a release re-send it unchanged, so the epoch
//! never rewinds. A Lease this crate creates starts at 1, so every leadership, the first
//! included, has an epoch above the 0 of a volume no controller used yet.
//!
//! The holder's heartbeat endpoint (`host:port` of its gRPC heartbeat server) rides on the
//! Lease as the annotation [`HEARTBEAT_ENDPOINT_ANNOTATION`], so brokers find the
//! controller without DNS.
//!
//! This module decides nothing: when to acquire (the Lease is free or expired), when to
//! renew and when to give up belong to the controller state machine in `kaas-cluster`.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kaas_cluster::ids::ControllerEpoch;
use kube::api::{Api, PostParams};

use crate::context::KubeContext;
use crate::error::{describe, is_conflict, request_error, KubeAdapterError};

/// The Lease every kaas broker of a namespace competes for.
pub const LEASE_NAME: &str = "kaas-controller";

/// The annotation holding the controller's heartbeat endpoint (`host:port`).
pub const HEARTBEAT_ENDPOINT_ANNOTATION: &str = "kaas.io/heartbeat-endpoint";

/// The Lease as last read or written.
#[derive(Clone, Debug)]
pub struct LeaseRecord {
    /// `spec.holderIdentity`; `None` when free (never held, or released).
    pub holder: Option<String>,
    /// `spec.leaseTransitions`: the controller epoch.
    pub transitions: i32,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// `spec.acquireTime`.
    pub acquire_time: Option<Timestamp>,
    /// `spec.renewTime`.
    pub renew_time: Option<Timestamp>,
    /// The holder's heartbeat endpoint, from [`HEARTBEAT_ENDPOINT_ANNOTATION`].
    pub heartbeat_endpoint: Option<String>,
    /// `metadata.resourceVersion`, which the next write must carry.
    pub resource_version: String,
    object: Lease,
}

impl LeaseRecord {
    pub(crate) fn from_lease(object: Lease) -> Self {
        let spec = object.spec.clone().unwrap_or_default();
        Self {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            transitions: spec.lease_transitions.unwrap_or(0),
            duration: Duration::from_secs(
                u64::try_from(spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
            ),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            heartbeat_endpoint: object
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(HEARTBEAT_ENDPOINT_ANNOTATION).cloned()),
            resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
            object,
        }
    }

    /// The controller epoch this Lease gives its holder. A negative `leaseTransitions`
    /// (which kaas never writes) reads as 0, an epoch no controller may lead at.
    pub fn epoch(&self) -> ControllerEpoch {
        ControllerEpoch(u64::try_from(self.transitions).unwrap_or(0))
    }

    /// Whether `identity` holds the Lease (expired or not).
    pub fn is_held_by(&self, identity: &str) -> bool {
        self.holder.as_deref() == Some(identity)
    }

    /// Whether the Lease is free at `now` by its own fields: no holder, or the last renewal
    /// (else the acquisition) plus the duration is before `now`. Clocks of different
    /// machines disagree; the caller adds its own margin.
    pub fn is_free_at(&self, now: Timestamp) -> bool {
        if self.holder.is_none() {
            return true;
        }
        let Some(last) = self.renew_time.or(self.acquire_time) else {
            return true;
        };
        let duration = SignedDuration::try_from(self.duration).unwrap_or(SignedDuration::MAX);
        match last.checked_add(duration) {
            Ok(expiry) => expiry < now,
            Err(_) => false,
        }
    }
}

/// Who is asking for the Lease and what it publishes there.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// The holder identity: the broker's pod name.
    pub identity: String,
    /// `leaseDurationSeconds` to write (at least 1; the API server refuses 0).
    pub lease_duration: Duration,
    /// The heartbeat endpoint (`host:port`) to publish while holding the Lease.
    pub heartbeat_endpoint: String,
}

/// The result of a write to the Lease.
#[derive(Clone, Debug)]
pub enum LeaseOutcome {
    /// The write went through; the record is the Lease as written (with its new
    /// resourceVersion).
    Won(LeaseRecord),
    /// Someone wrote the Lease first (409): the record is the Lease as it is now
    /// (`None` if it was deleted meanwhile), so the caller learns the holder.
    Lost(Option<LeaseRecord>),
}

/// The Lease adapter of one namespace.
#[derive(Clone)]
pub struct ControllerLease {
    api: Api<Lease>,
    name: String,
    namespace: String,
}

impl ControllerLease {
    /// The Lease [`LEASE_NAME`] in the context's namespace.
    pub fn new(context: &KubeContext) -> Self {
        Self::named(context, LEASE_NAME)
    }

    /// A Lease of another name (tests run several elections side by side).
    pub fn named(context: &KubeContext, name: &str) -> Self {
        Self {
            api: Api::namespaced(context.client.clone(), &context.namespace),
            name: name.to_owned(),
            namespace: context.namespace.clone(),
        }
    }

    /// The Lease as error messages name it (resource, name and namespace).
    pub(crate) fn resource(&self) -> String {
        describe(
            "leases.coordination.k8s.io",
            Some(&self.name),
            &self.namespace,
        )
    }

    /// The Lease as it is now; `None` if it does not exist yet.
    pub async fn read(&self) -> Result<Option<LeaseRecord>, KubeAdapterError> {
        let lease = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(request_error("get", self.resource()))?;
        Ok(lease.map(LeaseRecord::from_lease))
    }

    /// Acquires the Lease for `candidate` at the epoch after `observed`'s: creates it at
    /// epoch 1 when `observed` is `None`, else replaces it carrying `observed`'s
    /// resourceVersion with `leaseTransitions + 1`. Whether the Lease may be taken (free,
    /// expired) is the caller's decision.
    pub async fn acquire(
        &self,
        observed: Option<&LeaseRecord>,
        candidate: &Candidate,
    ) -> Result<LeaseOutcome, KubeAdapterError> {
        self.acquire_above(observed, candidate, ControllerEpoch(0))
            .await
    }

    /// Like [`ControllerLease::acquire`], at an epoch above `floor` too: `leaseTransitions`
    /// becomes the larger of the observed value plus one and `floor + 1` (for a controller
    /// that refused its epoch because the volume has seen a higher one).
    pub async fn acquire_above(
        &self,
        observed: Option<&LeaseRecord>,
        candidate: &Candidate,
        floor: ControllerEpoch,
    ) -> Result<LeaseOutcome, KubeAdapterError> {
        let now = MicroTime(Timestamp::now());
        let above_floor = i32::try_from(floor.0.saturating_add(1)).unwrap_or(i32::MAX);
        match observed {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        annotations: Some(
                            [(
                                HEARTBEAT_ENDPOINT_ANNOTATION.to_owned(),
                                candidate.heartbeat_endpoint.clone(),
                            )]
                            .into(),
                        ),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(candidate.identity.clone()),
                        lease_duration_seconds: Some(duration_seconds(candidate.lease_duration)),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(above_floor.max(1)),
                        ..LeaseSpec::default()
                    }),
                };
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(written) => Ok(LeaseOutcome::Won(LeaseRecord::from_lease(written))),
                    Err(error) if is_conflict(&error) => Ok(LeaseOutcome::Lost(self.read().await?)),
                    Err(error) => Err(request_error("create", self.resource())(error)),
                }
            }
            Some(observed) => {
                let spec = LeaseSpec {
                    holder_identity: Some(candidate.identity.clone()),
                    lease_duration_seconds: Some(duration_seconds(candidate.lease_duration)),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(
                        observed.transitions.saturating_add(1).max(above_floor),
                    ),
                    ..observed.object.spec.clone().unwrap_or_default()
                };
                self.write(observed, spec, Some(&candidate.heartbeat_endpoint))
                    .await
            }
        }
    }

    /// Renews a Lease `held` by `candidate`: a new renewTime, the same transitions (epoch)
    /// and acquireTime. Lost means another broker took the Lease.
    pub async fn renew(
        &self,
        held: &LeaseRecord,
        candidate: &Candidate,
    ) -> Result<LeaseOutcome, KubeAdapterError> {
        let spec = LeaseSpec {
            holder_identity: Some(candidate.identity.clone()),
            lease_duration_seconds: Some(duration_seconds(candidate.lease_duration)),
            renew_time: Some(MicroTime(Timestamp::now())),
            lease_transitions: Some(held.transitions),
            ..held.object.spec.clone().unwrap_or_default()
        };
        self.write(held, spec, Some(&candidate.heartbeat_endpoint))
            .await
    }

    /// Releases a Lease `held` (on SIGTERM): clears the holder and the heartbeat endpoint
    /// and shortens the duration to 1 s (the smallest the API server accepts), re-sending
    /// the transitions so the next holder's epoch is above this one. Another broker may
    /// acquire it at once.
    pub async fn release(&self, held: &LeaseRecord) -> Result<LeaseOutcome, KubeAdapterError> {
        let now = MicroTime(Timestamp::now());
        let spec = LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: Some(held.transitions),
            ..held.object.spec.clone().unwrap_or_default()
        };
        self.write(held, spec, None).await
    }

    /// Replaces the Lease with `spec`, carrying `base`'s resourceVersion.
    async fn write(
        &self,
        base: &LeaseRecord,
        spec: LeaseSpec,
        heartbeat_endpoint: Option<&str>,
    ) -> Result<LeaseOutcome, KubeAdapterError> {
        let mut lease = base.object.clone();
        lease.metadata.resource_version = Some(base.resource_version.clone());
        lease.metadata.managed_fields = None;
        let annotations = lease
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        match heartbeat_endpoint {
            Some(endpoint) => {
                annotations.insert(
                    HEARTBEAT_ENDPOINT_ANNOTATION.to_owned(),
                    endpoint.to_owned(),
                );
            }
            None => {
                annotations.remove(HEARTBEAT_ENDPOINT_ANNOTATION);
            }
        }
        lease.spec = Some(spec);
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => Ok(LeaseOutcome::Won(LeaseRecord::from_lease(written))),
            Err(error) if is_conflict(&error) || crate::error::is_not_found(&error) => {
                Ok(LeaseOutcome::Lost(self.read().await?))
            }
            Err(error) => Err(request_error("update", self.resource())(error)),
        }
    }
}

/// Whole seconds, at least 1 and at most `i32::MAX`.
fn duration_seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn record(holder: Option<&str>, renewed: Timestamp, seconds: i32) -> LeaseRecord {
        LeaseRecord::from_lease(Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(seconds),
                renew_time: Some(MicroTime(renewed)),
                lease_transitions: Some(4),
                ..LeaseSpec::default()
            }),
        })
    }

    #[test]
    fn a_lease_is_free_only_without_holder_or_after_its_duration() {
        let renewed = Timestamp::from_second(1_000_000).unwrap();
        let held = record(Some("kaas-0"), renewed, 10);
        assert!(!held.is_free_at(renewed));
        assert!(!held.is_free_at(Timestamp::from_second(1_000_010).unwrap()));
        assert!(held.is_free_at(Timestamp::from_second(1_000_011).unwrap()));
        assert!(record(None, renewed, 10).is_free_at(renewed));
        assert_eq!(held.epoch(), ControllerEpoch(4));
        assert!(held.is_held_by("kaas-0") && !held.is_held_by("kaas-1"));
    }

    #[test]
    fn durations_are_whole_positive_seconds() {
        assert_eq!(duration_seconds(Duration::from_millis(10)), 1);
        assert_eq!(duration_seconds(Duration::from_secs(15)), 15);
        assert_eq!(duration_seconds(Duration::from_secs(u64::MAX)), i32::MAX);
    }
}
