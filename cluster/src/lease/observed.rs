//! What a campaign knows of the Lease: a version as observed ([`ObservedLease`]), and when
//! this broker first saw the version it last saw ([`Sighting`]), on its own clock
//! ([`MonotonicTime`]).

use std::time::Duration;

use crate::ids::ControllerEpoch;

/// A reading of the adapter's monotonic clock: the time since an origin of its choosing
/// (never a wall clock, which may jump). Full precision, so an adapter converts its clock's
/// instants to and from it exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MonotonicTime(pub Duration);

impl MonotonicTime {
    /// `ms` milliseconds after the origin.
    pub fn from_millis(ms: u64) -> Self {
        MonotonicTime(Duration::from_millis(ms))
    }

    /// `self + duration`, saturating.
    pub fn plus(self, duration: Duration) -> Self {
        MonotonicTime(self.0.saturating_add(duration))
    }
}

/// One version of the Lease, as a read, a watch or the answer to a write returned it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedLease<B> {
    /// `metadata.resourceVersion`: which version this is; a write based on it carries it.
    pub resource_version: String,
    /// `spec.holderIdentity`; `None` when free (never held, or released).
    pub holder: Option<String>,
    /// `spec.leaseTransitions` as the controller epoch.
    pub epoch: ControllerEpoch,
    /// `spec.leaseDurationSeconds`.
    pub duration: Duration,
    /// The holder's published heartbeat endpoint (`host:port`), as written.
    pub heartbeat_endpoint: Option<String>,
    /// The adapter's own copy of the Lease, handed back in the requests that write over this
    /// version (the campaign never looks inside).
    pub body: B,
}

impl<B> ObservedLease<B> {
    /// The heartbeat endpoint to report for this version: its annotation while it has a
    /// holder, none when free.
    pub fn holder_endpoint(&self) -> Option<String> {
        self.holder
            .as_ref()
            .and_then(|_| self.heartbeat_endpoint.clone())
    }
}

/// The Lease version last seen and when this broker first saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sighting {
    /// Its `resourceVersion`.
    pub resource_version: String,
    /// When this broker first saw it (its own clock).
    pub since: MonotonicTime,
    /// Its holder (`None`: free).
    pub holder: Option<String>,
    /// How long it must go unchanged to expire: the larger of this broker's lease duration
    /// and the Lease's own.
    pub duration: Duration,
    /// Its holder's heartbeat endpoint, as written (`None` when free or not published).
    pub heartbeat_endpoint: Option<String>,
}

impl Sighting {
    /// When a broker named `identity` may take this version of the Lease: at once when it
    /// has no holder or `identity` holds it, else once it has gone unchanged for its
    /// duration since it was first seen.
    pub fn free_at(&self, identity: &str) -> MonotonicTime {
        match self.holder.as_deref() {
            None => self.since,
            Some(holder) if holder == identity => self.since,
            Some(_) => self.since.plus(self.duration),
        }
    }
}
