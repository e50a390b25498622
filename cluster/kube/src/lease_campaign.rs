//! The cluster core's [`LeaseSource`] on the `kaas-controller` Lease: one task on the
//! core's runtime that carries out [`kaas_cluster::lease::Campaign`]'s decisions. It watches
//! the Lease (field selector on its name) and feeds each version in as it is delivered, so a
//! follower's expiry clock starts milliseconds after the holder wrote it and a new holder's
//! heartbeat endpoint is reported at once; it sleeps until the campaign's next wake-up (the
//! renew period, or the moment the version last seen becomes free) and ticks it; it performs
//! the requests the campaign asks for with [`ControllerLease`], bounded by the request
//! timeout, and feeds their outcomes back; and it reports the campaign's events as
//! [`LeaseEvent`]s (the Lease's epoch whenever a version observed shows a higher one, for
//! the broker's epoch fence). When the Lease is free, how the renew deadline is chosen and why it is
//! safe are the campaign's rules, documented in [`kaas_cluster::lease`].
//!
//! Time enters as the campaign's [`MonotonicTime`]: the time since the task started on the
//! monotonic clock, converted back to an [`Instant`] exactly for the deadlines reported.
//!
//! A failed request is logged (naming the verb and the resource) and tried again at the next
//! renew period. While a request is in flight nothing else is handled: commands and watch
//! events wait for its answer. `Acquired` names the holder taken over from when the Lease
//! was taken because it expired, as a broker id (the pod name's ordinal).

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use futures_util::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kaas_cluster::ids::{BrokerId, ControllerEpoch};
use kaas_cluster::lease::{
    Action, Answer, Campaign, CampaignConfig, Event, HolderSignal, Input, MonotonicTime,
    ObservedLease, Request,
};
use kaas_cluster_core::{BoxFuture, LeaseEvent, LeaseSource};
use kaas_cluster_heartbeat::ControllerEndpoint;
use kube::runtime::watcher::{self, Event as WatchEvent};
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

    /// The campaign's side of the options.
    fn config(&self) -> CampaignConfig {
        CampaignConfig::new(&self.identity, self.lease_duration, self.renew_period)
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
    HolderStream(ControllerEndpoint, Option<Instant>),
    Ready(BTreeSet<BrokerId>),
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
                let origin = Instant::now();
                let adapter = CampaignAdapter {
                    candidate: Candidate {
                        identity: self.options.identity.clone(),
                        lease_duration: self.options.lease_duration,
                        heartbeat_endpoint: heartbeat.to_string(),
                    },
                    lease,
                    campaign: Campaign::new(self.options.config(), MonotonicTime::default()),
                    origin,
                    events,
                    holder: None,
                    epoch: None,
                    holder_stream: None,
                    ready: None,
                    errors: ErrorLog::new("controller Lease"),
                    watch_errors: ErrorLog::new("controller Lease watch"),
                    watch_resource: resource,
                };
                tokio::spawn(adapter.run(command_receiver, watch));
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

    fn holder_stream(&mut self, endpoint: ControllerEndpoint, down_since: Option<Instant>) {
        if let Some(commands) = &self.commands {
            let _ = commands.send(Command::HolderStream(endpoint, down_since));
        }
    }

    fn ready_brokers(&mut self, ready: BTreeSet<BrokerId>) {
        if let Some(commands) = &self.commands {
            let _ = commands.send(Command::Ready(ready));
        }
    }
}

/// The campaign and what carries it out.
struct CampaignAdapter {
    lease: ControllerLease,
    candidate: Candidate,
    campaign: Campaign<LeaseRecord>,
    /// The campaign's time zero.
    origin: Instant,
    events: mpsc::UnboundedSender<LeaseEvent>,
    /// The holder endpoint last reported (`None` before the first report).
    holder: Option<Option<ControllerEndpoint>>,
    /// The highest Lease epoch reported.
    epoch: Option<ControllerEpoch>,
    /// This broker's heartbeat stream to the holder: its endpoint and since when it has been
    /// down.
    holder_stream: Option<(ControllerEndpoint, Option<Instant>)>,
    /// The EndpointSlice's ready brokers (`None` before the first report).
    ready: Option<BTreeSet<BrokerId>>,
    errors: ErrorLog,
    watch_errors: ErrorLog,
    watch_resource: String,
}

/// The Lease's watch: every version as the API server delivers it (errors are yielded and
/// the watch restarted with kube's back-off).
fn lease_watch(
    api: kube::Api<Lease>,
    name: &str,
) -> impl Stream<Item = Result<WatchEvent<Lease>, watcher::Error>> + Send + 'static {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    watcher::watcher(api, config).default_backoff()
}

/// The campaign's view of a Lease read or written; the record rides along for the writes
/// based on it.
fn observed(record: LeaseRecord) -> ObservedLease<LeaseRecord> {
    ObservedLease {
        resource_version: record.resource_version.clone(),
        holder: record.holder.clone(),
        epoch: record.epoch(),
        duration: record.duration,
        heartbeat_endpoint: record.heartbeat_endpoint.clone(),
        body: record,
    }
}

impl CampaignAdapter {
    async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        watch: impl Stream<Item = Result<WatchEvent<Lease>, watcher::Error>> + Send + 'static,
    ) {
        let mut watch = Box::pin(watch.fuse());
        loop {
            let wake = self.campaign.next_wake().map(|at| self.instant(at));
            let woken = async move {
                match wake {
                    Some(at) => tokio::time::sleep_until(at.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                command = commands.recv() => match command {
                    Some(Command::TakeOverAbove(highest)) => {
                        if !self.campaign.is_leading() {
                            tracing::debug!(
                                highest = highest.0,
                                "not holding the Lease; nothing to take over"
                            );
                        }
                        self.step(Input::TakeOverAbove(highest)).await;
                    }
                    Some(Command::Release(epoch, done)) => {
                        self.step(Input::Release(epoch)).await;
                        let _ = done.send(());
                    }
                    Some(Command::HolderStream(endpoint, down_since)) => {
                        self.holder_stream = Some((endpoint, down_since));
                        self.holder_signal().await;
                    }
                    Some(Command::Ready(ready)) => {
                        self.ready = Some(ready);
                        self.holder_signal().await;
                    }
                    // The source was dropped: the core stopped.
                    None => return,
                },
                Some(event) = watch.next() => self.watched(event).await,
                () = woken => {
                    let actions = self.campaign.tick(self.now());
                    self.carry_out(actions).await;
                }
            }
        }
    }

    /// Tells the campaign what this broker sees of the holder: its stream to the holder's
    /// endpoint, and whether the EndpointSlice lists the holder (the broker id of the
    /// identity the Lease names) ready.
    async fn holder_signal(&mut self) {
        let Some((endpoint, down_since)) = self.holder_stream.clone() else {
            return;
        };
        let holder = self
            .campaign
            .sighting()
            .and_then(|sighting| sighting.holder.as_deref())
            .and_then(broker_id_of_pod);
        let not_ready = match (&self.ready, holder) {
            (Some(ready), Some(holder)) => !ready.contains(&holder),
            _ => false,
        };
        let signal = HolderSignal {
            endpoint: endpoint.to_string(),
            down_since: down_since
                .map(|since| MonotonicTime(since.saturating_duration_since(self.origin))),
            not_ready,
        };
        self.step(Input::Holder(signal)).await;
    }

    /// The campaign's reading of the monotonic clock now.
    fn now(&self) -> MonotonicTime {
        MonotonicTime(Instant::now().saturating_duration_since(self.origin))
    }

    fn instant(&self, at: MonotonicTime) -> Instant {
        self.origin + at.0
    }

    async fn step(&mut self, input: Input<LeaseRecord>) {
        let actions = self.campaign.step(self.now(), input);
        self.carry_out(actions).await;
    }

    /// One watch event: a version of the Lease seen now.
    async fn watched(&mut self, event: Result<WatchEvent<Lease>, watcher::Error>) {
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
            WatchEvent::Apply(lease) | WatchEvent::InitApply(lease) => {
                let record = LeaseRecord::from_lease(lease);
                self.step(Input::Watched(observed(record))).await;
            }
            WatchEvent::Delete(_) => self.step(Input::WatchedDeleted).await,
            WatchEvent::Init | WatchEvent::InitDone => {}
        }
    }

    /// Carries out the campaign's actions in order: a request is sent and its outcome fed
    /// back (which may ask for more) before the next action.
    async fn carry_out(&mut self, actions: Vec<Action<LeaseRecord>>) {
        let mut queue = VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Send(request) => {
                    let answer = self.perform(request).await;
                    let now = self.now();
                    queue.extend(self.campaign.step(now, Input::Answer(answer)));
                }
                Action::Publish(event) => self.publish(event),
            }
        }
    }

    async fn perform(&mut self, request: Request<LeaseRecord>) -> Answer<LeaseRecord> {
        let timeout = self.campaign.config().request_timeout();
        let resource = self.lease.resource();
        let written = match request {
            Request::Read => {
                let read = self.lease.read();
                return match bounded(&mut self.errors, timeout, ("get", resource), read).await {
                    Some(record) => Answer::Read(record.map(observed)),
                    None => Answer::Failed,
                };
            }
            Request::Acquire { base, floor } => {
                let base = base.map(|base| base.body);
                let write = self
                    .lease
                    .acquire_above(base.as_ref(), &self.candidate, floor);
                bounded(
                    &mut self.errors,
                    timeout,
                    ("create or update", resource),
                    write,
                )
                .await
            }
            Request::Renew { held } => {
                let write = self.lease.renew(&held.body, &self.candidate);
                bounded(&mut self.errors, timeout, ("update", resource), write).await
            }
            Request::Release { held } => {
                let write = self.lease.release(&held.body);
                bounded(&mut self.errors, timeout, ("update", resource), write).await
            }
        };
        match written {
            Some(LeaseOutcome::Won(record)) => Answer::Written(observed(record)),
            Some(LeaseOutcome::Lost(current)) => Answer::Conflict(current.map(observed)),
            None => Answer::Failed,
        }
    }

    fn publish(&mut self, event: Event) {
        match event {
            Event::Acquired {
                epoch,
                renew_deadline,
                expired_holder,
            } => self.emit(LeaseEvent::Acquired {
                epoch,
                renew_deadline: self.instant(renew_deadline),
                expired_holder: expired_holder.as_deref().and_then(broker_id_of_pod),
            }),
            Event::Renewed { renew_deadline } => self.emit(LeaseEvent::Renewed {
                renew_deadline: self.instant(renew_deadline),
            }),
            Event::Lost => self.emit(LeaseEvent::Lost),
            Event::Holder(endpoint) => self.report_holder(endpoint.as_deref()),
            Event::Epoch(epoch) => {
                // Reported when it rises: the broker's follower fences older controllers.
                if self.epoch < Some(epoch) {
                    self.epoch = Some(epoch);
                    self.emit(LeaseEvent::Epoch(epoch));
                }
            }
            Event::Released { epoch } => {
                tracing::info!(epoch = epoch.0, "released the controller Lease");
            }
        }
    }

    /// Reports the holder's heartbeat endpoint when it changed.
    fn report_holder(&mut self, endpoint: Option<&str>) {
        let endpoint = endpoint.and_then(|text| match text.parse::<ControllerEndpoint>() {
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
async fn bounded<T>(
    errors: &mut ErrorLog,
    timeout: Duration,
    (verb, resource): (&str, String),
    request: impl std::future::Future<Output = Result<T, KubeAdapterError>>,
) -> Option<T> {
    match tokio::time::timeout(timeout, request).await {
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
                "cannot {verb} {resource}: no answer from the API server within {timeout:?}",
            ));
            None
        }
    }
}
