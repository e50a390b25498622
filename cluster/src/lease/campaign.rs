//! [`Campaign`]: one broker's campaign for the Lease. Its rules are the [module
//! doc](super).

use std::collections::VecDeque;
use std::time::Duration;

use super::observed::{MonotonicTime, ObservedLease, Sighting};
use crate::ids::ControllerEpoch;

/// How a broker campaigns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CampaignConfig {
    /// The holder identity: the broker's pod name.
    pub identity: String,
    /// How long a Lease not renewed stays held (`--lease-duration-ms`).
    pub lease_duration: Duration,
    /// How often the Lease is read, and renewed while held (`--lease-renew-period-ms`).
    pub renew_period: Duration,
    /// How long this broker's heartbeat stream to the holder must stay down, while the
    /// EndpointSlice still calls the holder ready, before the holder counts as dead and the
    /// Lease is taken over before it expires ([`Input::Holder`]).
    pub holder_silence: Duration,
}

impl CampaignConfig {
    /// The configuration of `identity` with the given timing, and a holder silence of a
    /// quarter renew period (500 ms with the default 2 s), at most 1 s.
    pub fn new(identity: &str, lease_duration: Duration, renew_period: Duration) -> Self {
        CampaignConfig {
            identity: identity.to_owned(),
            lease_duration,
            renew_period,
            holder_silence: (renew_period / 4).min(Duration::from_secs(1)),
        }
    }

    /// The renew deadline of a write sent at `sent`.
    pub fn deadline_after(&self, sent: MonotonicTime) -> MonotonicTime {
        sent.plus(self.lease_duration.saturating_sub(self.renew_period))
    }

    /// The longest one request may take before the adapter answers [`Answer::Failed`].
    pub fn request_timeout(&self) -> Duration {
        (self.lease_duration / 2).max(Duration::from_secs(1))
    }
}

/// What the adapter tells the campaign.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input<B> {
    /// The watch delivered a version of the Lease (added, changed, or listed when the watch
    /// started again).
    Watched(ObservedLease<B>),
    /// The watch says the Lease was deleted (the next round creates it again).
    WatchedDeleted,
    /// The answer to the request in flight.
    Answer(Answer<B>),
    /// The controller refused the epoch acquired: take the held Lease over again with
    /// `leaseTransitions` above this epoch.
    TakeOverAbove(ControllerEpoch),
    /// Release the Lease held at this epoch now (shut-down or stepping down).
    Release(ControllerEpoch),
    /// What this broker sees of the holder outside the Lease (fed when it changes).
    Holder(HolderSignal),
}

/// What a broker sees of the Lease's holder outside the Lease: its heartbeat stream to the
/// holder and the EndpointSlice. A holder whose stream is down and that is not ready (or
/// whose stream stayed down for [`CampaignConfig::holder_silence`]) counts as dead, and a
/// follower takes the Lease over at once, before it expires (see the [module doc](super)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderSignal {
    /// The heartbeat endpoint this is about (`host:port`, as the Lease names the holder's).
    pub endpoint: String,
    /// Since when this broker's heartbeat stream to it has been down (broken, refused, or
    /// not open yet), on the campaign's clock; `None` while it is open.
    pub down_since: Option<MonotonicTime>,
    /// Whether the EndpointSlice shows the holder not ready (or not at all).
    pub not_ready: bool,
}

/// How a request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer<B> {
    /// [`Request::Read`] went through: the Lease as it is (`None`: it does not exist).
    Read(Option<ObservedLease<B>>),
    /// A write went through: the Lease as written, with its new `resourceVersion`.
    Written(ObservedLease<B>),
    /// A write lost its compare-and-swap (409 Conflict, or the Lease is gone): the Lease as
    /// it is now (`None` if it was deleted), so the campaign learns the holder.
    Conflict(Option<ObservedLease<B>>),
    /// The request failed, or no answer came within [`CampaignConfig::request_timeout`]; a
    /// write may or may not have been applied.
    Failed,
}

/// A request to the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request<B> {
    /// Read the Lease.
    Read,
    /// Acquire the Lease for this broker: create it when `base` is `None` (at epoch
    /// `floor + 1`, at least 1), else replace `base` (carrying its `resourceVersion`) with
    /// this broker as holder, its heartbeat endpoint, new acquire and renew times and
    /// `leaseTransitions` the larger of `base`'s plus one and `floor + 1`.
    Acquire {
        /// The version to replace.
        base: Option<ObservedLease<B>>,
        /// The epoch the new one must be above.
        floor: ControllerEpoch,
    },
    /// Renew `held`: a new renew time, the same transitions, carrying its `resourceVersion`.
    Renew {
        /// The version this broker wrote last.
        held: ObservedLease<B>,
    },
    /// Release `held`: holder and heartbeat endpoint cleared, the shortest duration, the
    /// transitions re-sent, carrying its `resourceVersion`.
    Release {
        /// The version this broker wrote last.
        held: ObservedLease<B>,
    },
}

/// What the adapter publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// This broker acquired the Lease at `epoch`; it may write until `renew_deadline` unless
    /// renewed.
    Acquired {
        /// The Lease's `leaseTransitions` after the acquisition.
        epoch: ControllerEpoch,
        /// When this broker must stop writing unless renewed.
        renew_deadline: MonotonicTime,
        /// The identity whose expired Lease was taken over; `None` when the Lease was free,
        /// released, new, or this broker's own.
        expired_holder: Option<String>,
    },
    /// A renewal went through; writes are allowed until the new deadline.
    Renewed {
        /// The new deadline.
        renew_deadline: MonotonicTime,
    },
    /// This broker no longer holds the Lease (a write lost its compare-and-swap).
    Lost,
    /// The Lease as just observed names this heartbeat endpoint for its holder (`None`:
    /// nobody holds it, or it names none). Sent on every observation; the adapter reports
    /// changes.
    Holder(Option<String>),
    /// The Lease as just observed (watched, read, written or found by a conflict) is at
    /// this epoch, its `leaseTransitions`: the epoch of the controller that holds it or held
    /// it last. Sent on every observation, before the events the observation leads to; the
    /// broker raises its assignment follower's epoch fence with it, so a deposed
    /// controller's files are refused as soon as a newer holder is seen.
    Epoch(ControllerEpoch),
    /// The release of the Lease held at `epoch` went through.
    Released {
        /// The epoch released.
        epoch: ControllerEpoch,
    },
}

/// What the campaign asks the adapter to do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action<B> {
    /// Send this request now and feed its [`Answer`] back.
    Send(Request<B>),
    /// Publish this event.
    Publish(Event),
}

#[derive(Clone, Debug)]
enum Role<B> {
    Following,
    Leading { held: Box<ObservedLease<B>> },
}

/// What the request in flight is for, and when it was sent.
#[derive(Clone, Debug)]
struct InFlight {
    purpose: Purpose,
    sent: MonotonicTime,
}

#[derive(Clone, Debug)]
enum Purpose {
    Read,
    Acquire { expired_holder: Option<String> },
    Renew,
    Release { epoch: ControllerEpoch },
}

#[derive(Clone, Copy, Debug)]
enum Command {
    TakeOverAbove(ControllerEpoch),
    Release(ControllerEpoch),
}

/// One broker's campaign for the Lease.
#[derive(Clone, Debug)]
pub struct Campaign<B> {
    config: CampaignConfig,
    role: Role<B>,
    sighting: Option<Sighting>,
    /// After a release: no campaigning before this.
    quiet_until: Option<MonotonicTime>,
    /// The version whose free-at wake-up already ran a round (one per version, so a failed
    /// take-over is retried at the renew period, not in a loop).
    woken_for: Option<String>,
    /// When the next renew-period round is due.
    next_round: MonotonicTime,
    in_flight: Option<InFlight>,
    /// Commands that arrived while a request was in flight.
    waiting: VecDeque<Command>,
    /// What this broker last saw of the holder outside the Lease.
    holder_signal: Option<HolderSignal>,
    /// The version whose holder-dead wake-up already ran a round (one per version).
    suspected_for: Option<String>,
}

impl<B: Clone> Campaign<B> {
    /// A follower whose first round is due at `now`.
    pub fn new(config: CampaignConfig, now: MonotonicTime) -> Self {
        Campaign {
            config,
            role: Role::Following,
            sighting: None,
            quiet_until: None,
            woken_for: None,
            next_round: now,
            in_flight: None,
            waiting: VecDeque::new(),
            holder_signal: None,
            suspected_for: None,
        }
    }

    /// How it campaigns.
    pub fn config(&self) -> &CampaignConfig {
        &self.config
    }

    /// Whether it holds the Lease (as far as its last answer said).
    pub fn is_leading(&self) -> bool {
        matches!(self.role, Role::Leading { .. })
    }

    /// The version last seen, and when.
    pub fn sighting(&self) -> Option<&Sighting> {
        self.sighting.as_ref()
    }

    /// When [`Campaign::tick`] has something to do next: the next renew-period round, or
    /// earlier when the version a follower saw becomes free. `None` while a request is in
    /// flight (its answer comes first).
    pub fn next_wake(&self) -> Option<MonotonicTime> {
        if self.in_flight.is_some() {
            return None;
        }
        let round = self.next_round;
        let wake = self.free_wake().map_or(round, |(at, _)| at.min(round));
        Some(self.suspect_wake().map_or(wake, |(at, _)| at.min(wake)))
    }

    /// Time passed: starts a round when one is due (the version seen became free, or the
    /// renew period came round). A round reads the Lease while following, renews it while
    /// leading. Rounds missed while busy are not made up: the next comes one renew period
    /// after the late one.
    pub fn tick(&mut self, now: MonotonicTime) -> Vec<Action<B>> {
        let mut actions = Vec::new();
        if self.in_flight.is_some() {
            return actions;
        }
        if let Some((at, version)) = self.free_wake() {
            if at <= now {
                self.woken_for = Some(version);
                self.round(now, &mut actions);
                return actions;
            }
        }
        if let Some((at, version)) = self.suspect_wake() {
            if at <= now {
                self.suspected_for = Some(version);
                self.round(now, &mut actions);
                return actions;
            }
        }
        if self.next_round <= now {
            let on_cadence = self.next_round.plus(self.config.renew_period);
            self.next_round = if on_cadence > now {
                on_cadence
            } else {
                now.plus(self.config.renew_period)
            };
            self.round(now, &mut actions);
        }
        actions
    }

    /// Feeds one input observed at `now`; returns what to do, in order.
    pub fn step(&mut self, now: MonotonicTime, input: Input<B>) -> Vec<Action<B>> {
        let mut actions = Vec::new();
        match input {
            Input::Watched(lease) => {
                self.observe(&lease, now, &mut actions);
                // A newer term held by another broker: this one's is over, whatever its
                // deadline says (taken over early, while it was paused or cut off).
                let superseded = matches!(&self.role, Role::Leading { held }
                    if lease.epoch > held.epoch
                        && lease.holder.as_deref() != Some(self.config.identity.as_str()));
                if superseded && self.in_flight.is_none() {
                    self.role = Role::Following;
                    actions.push(Action::Publish(Event::Lost));
                }
                actions.push(Action::Publish(Event::Holder(lease.holder_endpoint())));
            }
            Input::Holder(signal) => self.holder_signal = Some(signal),
            Input::WatchedDeleted => actions.push(Action::Publish(Event::Holder(None))),
            Input::Answer(answer) => {
                if let Some(in_flight) = self.in_flight.take() {
                    self.answered(now, in_flight, answer, &mut actions);
                }
                while self.in_flight.is_none() {
                    let Some(command) = self.waiting.pop_front() else {
                        break;
                    };
                    self.command(now, command, &mut actions);
                }
            }
            Input::TakeOverAbove(highest) => {
                self.command(now, Command::TakeOverAbove(highest), &mut actions)
            }
            Input::Release(epoch) => self.command(now, Command::Release(epoch), &mut actions),
        }
        actions
    }

    fn command(&mut self, now: MonotonicTime, command: Command, actions: &mut Vec<Action<B>>) {
        if self.in_flight.is_some() {
            self.waiting.push_back(command);
            return;
        }
        match command {
            Command::TakeOverAbove(highest) => {
                if let Role::Leading { held } = &self.role {
                    let held = (**held).clone();
                    self.acquire(now, Some(held), highest, actions);
                }
            }
            Command::Release(epoch) => {
                let Role::Leading { held } = &self.role else {
                    return;
                };
                if held.epoch != epoch {
                    return;
                }
                let held = (**held).clone();
                self.role = Role::Following;
                self.quiet_until = Some(now.plus(self.config.lease_duration));
                self.send(
                    now,
                    Purpose::Release { epoch },
                    Request::Release { held },
                    actions,
                );
            }
        }
    }

    /// When a follower should try for the Lease next, outside the renew-period rounds: when
    /// the version last seen becomes free (not before a release's quiet time ends), once per
    /// version; with the version it is for.
    fn free_wake(&self) -> Option<(MonotonicTime, String)> {
        if self.is_leading() {
            return None;
        }
        let sighting = self.sighting.as_ref()?;
        if self.woken_for.as_ref() == Some(&sighting.resource_version) {
            return None;
        }
        let at = sighting.free_at(&self.config.identity);
        let at = self.quiet_until.map_or(at, |quiet| at.max(quiet));
        Some((at, sighting.resource_version.clone()))
    }

    /// Since when the holder of the version last seen counts as dead: this broker's stream to
    /// its heartbeat endpoint is down, and it is not ready (at once) or the stream stayed down
    /// for the holder silence. `None` while it does not (or this broker leads, or holds it by
    /// name, or nobody does).
    fn holder_dead_since(&self) -> Option<MonotonicTime> {
        if self.is_leading() {
            return None;
        }
        let sighting = self.sighting.as_ref()?;
        let holder = sighting.holder.as_deref()?;
        if holder == self.config.identity {
            return None;
        }
        let signal = self.holder_signal.as_ref()?;
        if sighting.heartbeat_endpoint.as_deref() != Some(signal.endpoint.as_str()) {
            return None;
        }
        let down = signal.down_since?;
        Some(if signal.not_ready {
            down
        } else {
            down.plus(self.config.holder_silence)
        })
    }

    /// When a follower should read the Lease to take it over from a dead holder, once per
    /// version (not before a release's quiet time ends); with the version it is for.
    fn suspect_wake(&self) -> Option<(MonotonicTime, String)> {
        let at = self.holder_dead_since()?;
        let sighting = self.sighting.as_ref()?;
        if self.suspected_for.as_ref() == Some(&sighting.resource_version) {
            return None;
        }
        let at = self.quiet_until.map_or(at, |quiet| at.max(quiet));
        Some((at, sighting.resource_version.clone()))
    }

    fn round(&mut self, now: MonotonicTime, actions: &mut Vec<Action<B>>) {
        match &self.role {
            Role::Leading { held } => {
                let held = (**held).clone();
                self.send(now, Purpose::Renew, Request::Renew { held }, actions);
            }
            Role::Following => self.send(now, Purpose::Read, Request::Read, actions),
        }
    }

    /// Acquires (or, if held, re-acquires) the Lease at an epoch above `observed`'s and
    /// `floor`.
    fn acquire(
        &mut self,
        now: MonotonicTime,
        observed: Option<ObservedLease<B>>,
        floor: ControllerEpoch,
        actions: &mut Vec<Action<B>>,
    ) {
        // Taken because it expired: its holder has not renewed for a lease duration.
        let expired_holder = observed
            .as_ref()
            .and_then(|lease| lease.holder.clone())
            .filter(|holder| *holder != self.config.identity);
        self.send(
            now,
            Purpose::Acquire { expired_holder },
            Request::Acquire {
                base: observed,
                floor,
            },
            actions,
        );
    }

    fn send(
        &mut self,
        now: MonotonicTime,
        purpose: Purpose,
        request: Request<B>,
        actions: &mut Vec<Action<B>>,
    ) {
        self.in_flight = Some(InFlight { purpose, sent: now });
        actions.push(Action::Send(request));
    }

    fn answered(
        &mut self,
        now: MonotonicTime,
        in_flight: InFlight,
        answer: Answer<B>,
        actions: &mut Vec<Action<B>>,
    ) {
        let sent = in_flight.sent;
        match (in_flight.purpose, answer) {
            // Nothing changes; the next round tries again. A holder's deadline stands: the
            // controller stops writing when it passes.
            (_, Answer::Failed) => {}
            (Purpose::Release { .. }, Answer::Conflict(current)) => {
                // Released already as far as this broker goes; it only learns the holder.
                // Seen when the answer came: the version may have been written after the
                // release was sent.
                if let Some(lease) = &current {
                    self.observe(lease, now, actions);
                }
                actions.push(Action::Publish(Event::Holder(
                    current.as_ref().and_then(ObservedLease::holder_endpoint),
                )));
            }
            (_, Answer::Conflict(current)) => self.lost(now, current, actions),
            (Purpose::Read, Answer::Read(current)) => self.read(now, current, actions),
            (Purpose::Renew, Answer::Written(lease)) => {
                self.observe(&lease, sent, actions);
                self.role = Role::Leading {
                    held: Box::new(lease),
                };
                actions.push(Action::Publish(Event::Renewed {
                    renew_deadline: self.config.deadline_after(sent),
                }));
            }
            (Purpose::Acquire { expired_holder }, Answer::Written(lease)) => {
                self.observe(&lease, sent, actions);
                let endpoint = lease.holder_endpoint();
                let epoch = lease.epoch;
                self.role = Role::Leading {
                    held: Box::new(lease),
                };
                actions.push(Action::Publish(Event::Acquired {
                    epoch,
                    renew_deadline: self.config.deadline_after(sent),
                    expired_holder,
                }));
                actions.push(Action::Publish(Event::Holder(endpoint)));
            }
            (Purpose::Release { epoch }, Answer::Written(lease)) => {
                actions.push(Action::Publish(Event::Released { epoch }));
                self.observe(&lease, sent, actions);
                actions.push(Action::Publish(Event::Holder(lease.holder_endpoint())));
            }
            // An answer that does not fit its request (a read answered as a write or the
            // other way round) tells nothing reliable.
            (Purpose::Read, Answer::Written(_))
            | (
                Purpose::Acquire { .. } | Purpose::Renew | Purpose::Release { .. },
                Answer::Read(_),
            ) => {}
        }
    }

    /// A round's read came back at `now`: note the version, and take the Lease if it is
    /// free. The version is seen at `now`, not when the read was sent: the holder may have
    /// written it after the send (a read that took long to reach the API server), and its
    /// renew deadline counts from its own send, which is before the answer but maybe after
    /// the read's send.
    fn read(
        &mut self,
        now: MonotonicTime,
        current: Option<ObservedLease<B>>,
        actions: &mut Vec<Action<B>>,
    ) {
        match &current {
            Some(lease) => {
                self.observe(lease, now, actions);
                actions.push(Action::Publish(Event::Holder(lease.holder_endpoint())));
            }
            None => actions.push(Action::Publish(Event::Holder(None))),
        }
        if self.quiet_until.is_some_and(|until| now < until) {
            return;
        }
        self.quiet_until = None;
        let holder_dead = self.holder_dead_since().is_some_and(|since| since <= now);
        if current
            .as_ref()
            .is_none_or(|lease| self.is_free(lease, now) || holder_dead)
        {
            self.acquire(now, current, ControllerEpoch(0), actions);
        }
    }

    /// A write lost its compare-and-swap: `current` is the Lease as it is.
    fn lost(
        &mut self,
        now: MonotonicTime,
        current: Option<ObservedLease<B>>,
        actions: &mut Vec<Action<B>>,
    ) {
        if self.is_leading() {
            self.role = Role::Following;
            actions.push(Action::Publish(Event::Lost));
        }
        if let Some(lease) = &current {
            self.observe(lease, now, actions);
        }
        actions.push(Action::Publish(Event::Holder(
            current.as_ref().and_then(ObservedLease::holder_endpoint),
        )));
    }

    /// Notes `lease`'s version (see [`Campaign::see`]) and publishes its epoch.
    fn observe(
        &mut self,
        lease: &ObservedLease<B>,
        at: MonotonicTime,
        actions: &mut Vec<Action<B>>,
    ) {
        self.see(lease, at);
        actions.push(Action::Publish(Event::Epoch(lease.epoch)));
    }

    /// Notes `lease`'s version: a version not seen before starts its expiry clock at `at`.
    fn see(&mut self, lease: &ObservedLease<B>, at: MonotonicTime) {
        let unchanged = self
            .sighting
            .as_ref()
            .is_some_and(|seen| seen.resource_version == lease.resource_version);
        if !unchanged {
            self.sighting = Some(Sighting {
                resource_version: lease.resource_version.clone(),
                since: at,
                holder: lease.holder.clone(),
                duration: self.config.lease_duration.max(lease.duration),
                heartbeat_endpoint: lease.heartbeat_endpoint.clone(),
            });
        }
    }

    fn is_free(&self, lease: &ObservedLease<B>, now: MonotonicTime) -> bool {
        self.sighting.as_ref().is_some_and(|seen| {
            seen.resource_version == lease.resource_version
                && seen.free_at(&self.config.identity) <= now
        })
    }
}
