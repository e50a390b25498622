//! The cluster core's [`LeaseSource`] on the `kaas-controller` Lease: one task on the
//! core's runtime that watches the Lease, reads it every renew period, acquires it when it
//! is free or expired, renews it while held, and reports [`LeaseEvent`]s.
//!
//! When the Lease counts as free: it has no holder (never held, or released); or this
//! broker's own identity holds it (an earlier run of this pod that died without releasing:
//! a StatefulSet never runs one pod name twice); or its `resourceVersion` has not changed for
//! the lease duration (the larger of `--lease-duration-ms` and the Lease's own
//! `leaseDurationSeconds`) as measured on this broker's monotonic clock from when this broker
//! first saw that version. Expiry is judged by observation, as client-go's leader election
//! does, not by the holder's `renewTime`, so a skewed wall clock on either side changes
//! nothing; the price is that a broker that starts while a dead holder's Lease is there
//! waits one full lease duration.
//!
//! Observation is a watch of the Lease (field selector on its name): each version is seen
//! when the API server delivers it, milliseconds after the holder wrote it, so the expiry
//! clock starts then rather than at the next renew-period read, and a follower wakes exactly
//! when the version it saw has gone unchanged for the lease duration ([`Observed::free_at`])
//! and takes the Lease over at once. The watch also reports a new holder's heartbeat endpoint
//! the moment it is written, so brokers dial a new controller without waiting for a read. The
//! renew-period read stays, for a watch that is down or lagging; a version seen by both
//! keeps the earlier sighting.
//!
//! Every acquisition raises `leaseTransitions` (the epoch), a re-acquisition by the same
//! broker too; a renewal keeps it. The renew deadline reported with `Acquired` and `Renewed`
//! is `sent + lease duration − renew period` on the monotonic clock, where `sent` is when the
//! successful request was sent. Why that is safe: another broker takes the Lease over only
//! with a compare-and-swap on the last version it saw, after that version went unchanged for
//! a lease duration since it saw it, which is after this broker sent the write that made it;
//! so no other broker leads before `sent + lease duration`, and the renew period is the
//! margin for the final rename and for clocks that tick at slightly different rates.
//! `Acquired` names the holder taken over from when the Lease was taken because it expired
//! (`expired_holder`): the new controller does not wait for that broker to dial in.
//!
//! A failed request is logged (naming the verb and the resource) and tried again at the next
//! renew period; a holder keeps its term until its deadline (the controller stops writing
//! then by itself) and resumes writing if a later renewal goes through. A renewal that loses
//! the compare-and-swap is `Lost`.
//!
//! `take_over_above(highest)` re-acquires the held Lease with `leaseTransitions` above
//! `highest`; `release(epoch)` releases it at once (holder cleared, transitions re-sent) and
//! then keeps this broker from campaigning for one lease duration, so another broker takes
//! over without waiting for expiry.

use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kaas_cluster::ids::ControllerEpoch;
use kaas_cluster_core::{BoxFuture, LeaseEvent, LeaseSource};
use kaas_cluster_heartbeat::ControllerEndpoint;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use tokio::sync::{mpsc, oneshot};

use crate::context::SharedContext;
use crate::endpoint_slices::broker_id_of_pod;
use crate::error::{describe, KubeAdapterError};
use crate::error_log::ErrorLog;
use crate::lease::{Candidate, ControllerLease, LeaseOutcome, LeaseRecord, LEASE_NAME};

/// How a broker campaigns for the Lease.
#[derive(Clone, Debug)]
pub struct CampaignOptions {
    /// The holder identity: the broker's pod name (`MY_POD_NAME`).
    pub identity: String,
    /// How long a Lease not renewed stays held (`--lease-duration-ms`).
    pub lease_duration: Duration,
    /// How often the Lease is read, and renewed while held (`--lease-renew-period-ms`).
    pub renew_period: Duration,
    /// The Lease's name ([`LEASE_NAME`]; tests may run several elections side by side).
    pub lease_name: String,
}

impl CampaignOptions {
    /// The options of `identity` with the given timing, on [`LEASE_NAME`].
    pub fn new(identity: &str, lease_duration: Duration, renew_period: Duration) -> Self {
        CampaignOptions {
            identity: identity.to_owned(),
            lease_duration,
            renew_period,
            lease_name: LEASE_NAME.to_owned(),
        }
    }

    /// The renew deadline of a write sent at `sent`.
    fn deadline_after(&self, sent: Instant) -> Instant {
        sent + self.lease_duration.saturating_sub(self.renew_period)
    }

    /// The longest one request may take before it counts as failed.
    fn request_timeout(&self) -> Duration {
        (self.lease_duration / 2).max(Duration::from_secs(1))
    }
}

/// The Lease source of one broker.
pub struct LeaseCampaign {
    context: SharedContext,
    options: CampaignOptions,
    commands: Option<mpsc::UnboundedSender<Command>>,
}

impl LeaseCampaign {
    /// A campaign in `context`'s namespace; nothing runs before [`LeaseSource::start`].
    pub fn new(context: SharedContext, options: CampaignOptions) -> Self {
        LeaseCampaign {
            context,
            options,
            commands: None,
        }
    }
}

enum Command {
    TakeOverAbove(ControllerEpoch),
    Release(ControllerEpoch, oneshot::Sender<()>),
}

impl LeaseSource for LeaseCampaign {
    fn start(&mut self, heartbeat: ControllerEndpoint) -> mpsc::UnboundedReceiver<LeaseEvent> {
        let (events, receiver) = mpsc::unbounded_channel();
        let (commands, command_receiver) = mpsc::unbounded_channel();
        self.commands = Some(commands);
        match self.context.get() {
            Ok(context) => {
                let lease = ControllerLease::named(&context, &self.options.lease_name);
                let watch = lease_watch(
                    kube::Api::namespaced(context.client.clone(), &context.namespace),
                    &self.options.lease_name,
                );
                let resource = describe(
                    "leases.coordination.k8s.io",
                    Some(&self.options.lease_name),
                    &context.namespace,
                );
                let campaign = Campaign {
                    candidate: Candidate {
                        identity: self.options.identity.clone(),
                        lease_duration: self.options.lease_duration,
                        heartbeat_endpoint: heartbeat.to_string(),
                    },
                    lease,
                    options: self.options.clone(),
                    events,
                    state: State::Following,
                    observed: None,
                    quiet_until: None,
                    holder: None,
                    woken_for: None,
                    errors: ErrorLog::new("controller Lease"),
                    watch_errors: ErrorLog::new("controller Lease watch"),
                    watch_resource: resource,
                };
                tokio::spawn(campaign.run(command_receiver, watch));
            }
            Err(error) => {
                tracing::error!(%error, "no Kubernetes client: this broker never campaigns for the controller Lease");
            }
        }
        receiver
    }

    fn take_over_above(&mut self, highest: ControllerEpoch) {
        if let Some(commands) = &self.commands {
            let _ = commands.send(Command::TakeOverAbove(highest));
        }
    }

    fn release(&mut self, epoch: ControllerEpoch) -> BoxFuture {
        let (done, released) = oneshot::channel();
        if let Some(commands) = &self.commands {
            let _ = commands.send(Command::Release(epoch, done));
        }
        // A campaign that is gone (or never ran) holds nothing: the sender drops and this
        // resolves at once.
        Box::pin(async move {
            let _ = released.await;
        })
    }
}

enum State {
    Following,
    Leading { held: Box<LeaseRecord> },
}

/// The Lease version last seen and when this broker first saw it (monotonic).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Observed {
    resource_version: String,
    since: Instant,
    /// Its holder (`None`: free).
    holder: Option<String>,
    /// How long it must go unchanged to expire: the larger of this broker's lease duration
    /// and the Lease's own.
    duration: Duration,
}

impl Observed {
    /// When a broker named `identity` may take this version of the Lease: at once when it
    /// has no holder or `identity` holds it, else once it has gone unchanged for its
    /// duration since it was first seen.
    fn free_at(&self, identity: &str) -> Instant {
        match self.holder.as_deref() {
            None => self.since,
            Some(holder) if holder == identity => self.since,
            Some(_) => self.since + self.duration,
        }
    }
}

struct Campaign {
    lease: ControllerLease,
    candidate: Candidate,
    options: CampaignOptions,
    events: mpsc::UnboundedSender<LeaseEvent>,
    state: State,
    observed: Option<Observed>,
    /// After a release: no campaigning before this.
    quiet_until: Option<Instant>,
    /// The holder endpoint last reported (`None` before the first report).
    holder: Option<Option<ControllerEndpoint>>,
    /// The version whose [`Observed::free_at`] wake-up already ran a round (one per version,
    /// so a failed take-over is retried at the renew period, not in a loop).
    woken_for: Option<String>,
    errors: ErrorLog,
    watch_errors: ErrorLog,
    watch_resource: String,
}

/// The Lease's watch: every version as the API server delivers it (errors are yielded and
/// the watch restarted with kube's back-off).
fn lease_watch(
    api: kube::Api<Lease>,
    name: &str,
) -> impl Stream<Item = Result<Event<Lease>, watcher::Error>> + Send + 'static {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher::watcher(api, config).default_backoff()
}

impl Campaign {
    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        watch: impl Stream<Item = Result<Event<Lease>, watcher::Error>> + Send + 'static,
    ) {
        let mut rounds = tokio::time::interval(self.options.renew_period);
        rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut watch = Box::pin(watch.fuse());
        loop {
            let wake = self.wake_at();
            let wake_instant = wake.as_ref().map(|(at, _)| *at);
            let expired = async move {
                match wake_instant {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                command = commands.recv() => match command {
                    Some(Command::TakeOverAbove(highest)) => self.take_over_above(highest).await,
                    Some(Command::Release(epoch, done)) => {
                        self.release(epoch).await;
                        let _ = done.send(());
                    }
                    // The source was dropped: the core stopped.
                    None => return,
                },
                Some(event) = watch.next() => self.watched(event),
                () = expired => {
                    self.woken_for = wake.map(|(_, version)| version);
                    self.round().await;
                }
                _ = rounds.tick() => self.round().await,
            }
        }
    }

    /// When a follower should try for the Lease next, outside the renew-period rounds: when
    /// the version last seen becomes free (not before a release's quiet time ends), once per
    /// version; with the version it is for.
    fn wake_at(&self) -> Option<(Instant, String)> {
        if matches!(self.state, State::Leading { .. }) {
            return None;
        }
        let observed = self.observed.as_ref()?;
        if self.woken_for.as_ref() == Some(&observed.resource_version) {
            return None;
        }
        let at = observed.free_at(&self.candidate.identity);
        let at = self.quiet_until.map_or(at, |quiet| at.max(quiet));
        Some((at, observed.resource_version.clone()))
    }

    /// One watch event: a version of the Lease seen now.
    fn watched(&mut self, event: Result<Event<Lease>, watcher::Error>) {
        let event = match event {
            Ok(event) => {
                self.watch_errors.succeeded();
                event
            }
            Err(source) => {
                self.watch_errors.failed(&KubeAdapterError::Watch {
                    resource: self.watch_resource.clone(),
                    source,
                });
                return;
            }
        };
        match event {
            Event::Apply(lease) | Event::InitApply(lease) => {
                let record = LeaseRecord::from_lease(lease);
                self.see(&record, Instant::now());
                self.report_holder(Some(&record));
            }
            // Gone: the next round creates it again.
            Event::Delete(_) => self.report_holder(None),
            Event::Init | Event::InitDone => {}
        }
    }

    async fn round(&mut self) {
        if let State::Leading { held } = &self.state {
            let held: LeaseRecord = (**held).clone();
            let sent = Instant::now();
            let outcome = request(
                &mut self.errors,
                &self.options,
                ("update", self.lease.resource()),
                self.lease.renew(&held, &self.candidate),
            )
            .await;
            match outcome {
                Some(LeaseOutcome::Won(record)) => {
                    self.see(&record, sent);
                    self.state = State::Leading {
                        held: Box::new(record),
                    };
                    self.emit(LeaseEvent::Renewed {
                        renew_deadline: self.options.deadline_after(sent),
                    });
                }
                Some(LeaseOutcome::Lost(now)) => self.lost(now),
                // The deadline stands: the controller stops writing when it passes.
                None => {}
            }
            return;
        }
        let seen_at = Instant::now();
        let Some(record) = request(
            &mut self.errors,
            &self.options,
            ("get", self.lease.resource()),
            self.lease.read(),
        )
        .await
        else {
            return;
        };
        if let Some(record) = &record {
            self.see(record, seen_at);
            self.report_holder(Some(record));
        } else {
            self.report_holder(None);
        }
        if self.quiet_until.is_some_and(|until| Instant::now() < until) {
            return;
        }
        self.quiet_until = None;
        if record.as_ref().is_none_or(|record| self.is_free(record)) {
            self.acquire(record.as_ref(), ControllerEpoch(0)).await;
        }
    }

    async fn take_over_above(&mut self, highest: ControllerEpoch) {
        let State::Leading { held } = &self.state else {
            tracing::debug!(
                highest = highest.0,
                "not holding the Lease; nothing to take over"
            );
            return;
        };
        let held: LeaseRecord = (**held).clone();
        self.acquire(Some(&held), highest).await;
    }

    /// Acquires (or, if held, re-acquires) the Lease at an epoch above `observed`'s and
    /// `floor`.
    async fn acquire(&mut self, observed: Option<&LeaseRecord>, floor: ControllerEpoch) {
        // Taken because it expired: its holder has not renewed for a lease duration.
        let expired_holder = observed
            .and_then(|record| record.holder.as_deref())
            .filter(|holder| *holder != self.candidate.identity)
            .and_then(broker_id_of_pod);
        let sent = Instant::now();
        let outcome = request(
            &mut self.errors,
            &self.options,
            ("create or update", self.lease.resource()),
            self.lease.acquire_above(observed, &self.candidate, floor),
        )
        .await;
        match outcome {
            Some(LeaseOutcome::Won(record)) => {
                self.see(&record, sent);
                let epoch = record.epoch();
                self.state = State::Leading {
                    held: Box::new(record.clone()),
                };
                self.emit(LeaseEvent::Acquired {
                    epoch,
                    renew_deadline: self.options.deadline_after(sent),
                    expired_holder,
                });
                self.report_holder(Some(&record));
            }
            Some(LeaseOutcome::Lost(now)) => self.lost(now),
            None => {}
        }
    }

    async fn release(&mut self, epoch: ControllerEpoch) {
        let State::Leading { held } = &self.state else {
            return;
        };
        if held.epoch() != epoch {
            return;
        }
        let held: LeaseRecord = (**held).clone();
        let sent = Instant::now();
        self.state = State::Following;
        self.quiet_until = Some(sent + self.options.lease_duration);
        match request(
            &mut self.errors,
            &self.options,
            ("update", self.lease.resource()),
            self.lease.release(&held),
        )
        .await
        {
            Some(LeaseOutcome::Won(record)) => {
                tracing::info!(epoch = epoch.0, "released the controller Lease");
                self.see(&record, sent);
                self.report_holder(Some(&record));
            }
            Some(LeaseOutcome::Lost(now)) => {
                if let Some(now) = &now {
                    self.see(now, sent);
                }
                self.report_holder(now.as_ref());
            }
            // Not released: it expires on its own after the lease duration.
            None => {}
        }
    }

    /// A write lost its compare-and-swap: `now` is the Lease as it is.
    fn lost(&mut self, now: Option<LeaseRecord>) {
        if matches!(self.state, State::Leading { .. }) {
            self.state = State::Following;
            self.emit(LeaseEvent::Lost);
        }
        if let Some(record) = &now {
            self.see(record, Instant::now());
        }
        self.report_holder(now.as_ref());
    }

    /// Notes `record`'s version: a version not seen before starts its expiry clock at `at`.
    fn see(&mut self, record: &LeaseRecord, at: Instant) {
        let unchanged = self
            .observed
            .as_ref()
            .is_some_and(|seen| seen.resource_version == record.resource_version);
        if !unchanged {
            self.observed = Some(Observed {
                resource_version: record.resource_version.clone(),
                since: at,
                holder: record.holder.clone(),
                duration: self.options.lease_duration.max(record.duration),
            });
        }
    }

    fn is_free(&self, record: &LeaseRecord) -> bool {
        self.observed.as_ref().is_some_and(|seen| {
            seen.resource_version == record.resource_version
                && seen.free_at(&self.candidate.identity) <= Instant::now()
        })
    }

    /// Reports the holder's heartbeat endpoint when it changed.
    fn report_holder(&mut self, record: Option<&LeaseRecord>) {
        let endpoint = record
            .filter(|record| record.holder.is_some())
            .and_then(|record| record.heartbeat_endpoint.as_deref())
            .and_then(|text| match text.parse::<ControllerEndpoint>() {
                Ok(endpoint) => Some(endpoint),
                Err(error) => {
                    tracing::warn!(%error, "the Lease's heartbeat endpoint is not usable");
                    None
                }
            });
        if self.holder.as_ref() != Some(&endpoint) {
            self.holder = Some(endpoint.clone());
            self.emit(LeaseEvent::Holder(endpoint));
        }
    }

    fn emit(&self, event: LeaseEvent) {
        // The core gone means shutting down; nothing to tell.
        let _ = self.events.send(event);
    }
}

/// Sends one request, bounded by the request timeout; failures are logged. `verb` and
/// `resource` name it when it times out (other failures name themselves).
async fn request<T>(
    errors: &mut ErrorLog,
    options: &CampaignOptions,
    (verb, resource): (&str, String),
    request: impl std::future::Future<Output = Result<T, KubeAdapterError>>,
) -> Option<T> {
    match tokio::time::timeout(options.request_timeout(), request).await {
        Ok(Ok(answer)) => {
            errors.succeeded();
            Some(answer)
        }
        Ok(Err(error)) => {
            errors.failed(&error);
            None
        }
        Err(_) => {
            errors.failed(&format_args!(
                "cannot {verb} {resource}: no answer from the API server within {:?}",
                options.request_timeout(),
            ));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_leaves_one_renew_period_before_others_may_take_over() {
        let options =
            CampaignOptions::new("kaas-0", Duration::from_secs(15), Duration::from_secs(2));
        let sent = Instant::now();
        assert_eq!(options.deadline_after(sent), sent + Duration::from_secs(13));
        assert_eq!(options.request_timeout(), Duration::from_millis(7_500));
        let short = CampaignOptions::new(
            "kaas-0",
            Duration::from_millis(1_000),
            Duration::from_millis(250),
        );
        assert_eq!(
            short.deadline_after(sent),
            sent + Duration::from_millis(750)
        );
        assert_eq!(short.request_timeout(), Duration::from_secs(1));
    }

    #[test]
    fn a_version_held_by_another_is_free_one_duration_after_it_was_first_seen() {
        let seen = Instant::now();
        let observed = |holder: Option<&str>| Observed {
            resource_version: "41".into(),
            since: seen,
            holder: holder.map(str::to_owned),
            duration: Duration::from_secs(15),
        };
        assert_eq!(
            observed(Some("kaas-0")).free_at("kaas-1"),
            seen + Duration::from_secs(15)
        );
        // Free, or this pod's own from an earlier run: at once.
        assert_eq!(observed(None).free_at("kaas-1"), seen);
        assert_eq!(observed(Some("kaas-1")).free_at("kaas-1"), seen);
    }
}
