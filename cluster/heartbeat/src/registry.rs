//! The controller's registry of connected brokers: which stream each broker is on, its last
//! ping, and whether it has aged out. Pure logic (time is an argument), so the rules are unit
//! tested without a network; `server.rs` holds it behind a mutex and turns its answers into
//! events and stream closings.
//!
//! Rules:
//! - one stream per broker; a new stream from a broker replaces its old one (the old one is
//!   then closed by the server), because a broker that restarted dials again before its old
//!   connection is noticed dead;
//! - every ping on a stream must name the broker the first one named;
//! - a stream that ends is a departure at once, unless it had been replaced or had aged out
//!   already (each departure is reported once);
//! - a broker whose last ping is older than the age-out time has departed, though its stream
//!   stays open: a ping on it later is a join;
//! - a ping less than half an interval after the last reported one is not reported (it still
//!   keeps the broker alive); if it changed the broker's status, the next tick reports that.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kaas_cluster::ids::BrokerId;

use crate::error::PingRefused;
use crate::event::{BrokerStatus, Departure, HeartbeatEvent};
use crate::ping::Ping;

/// One stream, numbered by the server in the order streams opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// What a ping did.
#[derive(Debug, PartialEq, Eq)]
pub struct PingOutcome {
    /// The event to report, if any (see [`HeartbeatEvent::Pinged`] for the ones left out).
    pub event: Option<HeartbeatEvent>,
    /// A stream of the same broker that this ping's stream replaced: the server closes it.
    pub replaced: Option<StreamId>,
}

#[derive(Debug)]
struct Entry {
    stream: StreamId,
    status: BrokerStatus,
    /// When the last reported event about this broker (join or ping) was made.
    last_reported: Instant,
    /// A ping changed the status but was not reported (it came too soon after the last
    /// report); the next tick reports it.
    unreported: bool,
    aged_out: bool,
}

/// The registry. See the module doc for its rules.
#[derive(Debug)]
pub struct BrokerRegistry {
    ping_interval: Duration,
    age_out_after: Duration,
    brokers: BTreeMap<BrokerId, Entry>,
    stream_broker: HashMap<StreamId, BrokerId>,
}

impl BrokerRegistry {
    /// A registry for pings every `ping_interval`, aging brokers out after `age_out_after`
    /// without one.
    pub fn new(ping_interval: Duration, age_out_after: Duration) -> Self {
        BrokerRegistry {
            ping_interval,
            age_out_after,
            brokers: BTreeMap::new(),
            stream_broker: HashMap::new(),
        }
    }

    /// A ping arrived on `stream` at `now`.
    pub fn ping(
        &mut self,
        stream: StreamId,
        ping: Ping,
        now: Instant,
    ) -> Result<PingOutcome, PingRefused> {
        let id = ping.broker.id;
        if let Some(first) = self.stream_broker.get(&stream) {
            if *first != id {
                return Err(PingRefused::BrokerChanged {
                    first: first.0,
                    then: id.0,
                });
            }
        }
        let status = BrokerStatus {
            broker: ping.broker,
            applied: ping.applied,
            fenced: ping.fenced,
            last_ping: now,
        };
        let mut replaced = None;
        let joined = match self.brokers.get_mut(&id) {
            Some(entry) if entry.stream == stream => {
                let changed = entry.status.broker != status.broker
                    || entry.status.applied != status.applied
                    || entry.status.fenced != status.fenced;
                let rejoin = entry.aged_out;
                entry.status = status.clone();
                entry.aged_out = false;
                if !rejoin
                    && now.saturating_duration_since(entry.last_reported) < self.ping_interval / 2
                {
                    entry.unreported |= changed;
                    return Ok(PingOutcome {
                        event: None,
                        replaced: None,
                    });
                }
                entry.last_reported = now;
                entry.unreported = false;
                rejoin
            }
            Some(entry) => {
                replaced = Some(entry.stream);
                self.stream_broker.remove(&entry.stream);
                true
            }
            None => true,
        };
        if joined {
            self.stream_broker.insert(stream, id);
            self.brokers.insert(
                id,
                Entry {
                    stream,
                    status: status.clone(),
                    last_reported: now,
                    unreported: false,
                    aged_out: false,
                },
            );
        }
        Ok(PingOutcome {
            event: Some(if joined {
                HeartbeatEvent::Joined(status)
            } else {
                HeartbeatEvent::Pinged(status)
            }),
            replaced,
        })
    }

    /// `stream` ended at `now` (however it ended).
    pub fn stream_closed(&mut self, stream: StreamId, now: Instant) -> Option<HeartbeatEvent> {
        let id = self.stream_broker.remove(&stream)?;
        let entry = self.brokers.remove(&id)?;
        (!entry.aged_out).then_some(HeartbeatEvent::Departed {
            broker: id,
            reason: Departure::StreamClosed,
            at: now,
        })
    }

    /// Called a few times per ping interval: ages out every broker whose last ping is older
    /// than the age-out time at `now`, and reports the changes that pings too close together
    /// left unreported.
    pub fn tick(&mut self, now: Instant) -> Vec<HeartbeatEvent> {
        let mut events = Vec::new();
        for (id, entry) in &mut self.brokers {
            if entry.aged_out {
                continue;
            }
            if now.saturating_duration_since(entry.status.last_ping) >= self.age_out_after {
                entry.aged_out = true;
                events.push(HeartbeatEvent::Departed {
                    broker: *id,
                    reason: Departure::AgedOut,
                    at: now,
                });
            } else if entry.unreported
                && now.saturating_duration_since(entry.last_reported) >= self.ping_interval / 2
            {
                entry.unreported = false;
                entry.last_reported = now;
                events.push(HeartbeatEvent::Pinged(entry.status.clone()));
            }
        }
        events
    }

    /// The connected brokers (not aged out), by id.
    pub fn connected(&self) -> Vec<BrokerStatus> {
        self.brokers
            .values()
            .filter(|entry| !entry.aged_out)
            .map(|entry| entry.status.clone())
            .collect()
    }

    /// The streams of connected brokers (not aged out), to push to.
    pub fn connected_streams(&self) -> Vec<StreamId> {
        self.brokers
            .values()
            .filter(|entry| !entry.aged_out)
            .map(|entry| entry.stream)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kaas_cluster::assignment::BrokerEndpoint;
    use kaas_cluster::ids::{AssignmentVersion, ControllerEpoch};

    const SECOND: Duration = Duration::from_secs(1);

    fn ping(id: i32, version: u64) -> Ping {
        Ping {
            broker: BrokerEndpoint {
                id: BrokerId(id),
                host: format!("127.0.0.{}", id + 1),
                port: 9092,
            },
            applied: (version > 0).then_some((ControllerEpoch(1), AssignmentVersion(version))),
            fenced: Vec::new(),
        }
    }

    fn kind(outcome: &PingOutcome) -> &'static str {
        match outcome.event {
            Some(HeartbeatEvent::Joined(_)) => "joined",
            Some(HeartbeatEvent::Pinged(_)) => "pinged",
            Some(HeartbeatEvent::Departed { .. }) => "departed",
            None => "quiet",
        }
    }

    #[test]
    fn first_ping_joins_later_ones_ping_and_a_close_departs_once() {
        let t0 = Instant::now();
        let mut registry = BrokerRegistry::new(SECOND, 3 * SECOND);
        let s = StreamId(1);
        let first = registry.ping(s, ping(0, 0), t0).expect("valid");
        assert_eq!(kind(&first), "joined");
        assert_eq!(first.replaced, None);
        let next = registry.ping(s, ping(0, 4), t0 + SECOND).expect("valid");
        match next.event {
            Some(HeartbeatEvent::Pinged(status)) => {
                assert_eq!(
                    status.applied,
                    Some((ControllerEpoch(1), AssignmentVersion(4)))
                );
                assert_eq!(status.last_ping, t0 + SECOND);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(registry.connected().len(), 1);
        assert_eq!(
            registry.stream_closed(s, t0 + 2 * SECOND),
            Some(HeartbeatEvent::Departed {
                broker: BrokerId(0),
                reason: Departure::StreamClosed,
                at: t0 + 2 * SECOND,
            })
        );
        assert_eq!(registry.stream_closed(s, t0 + 3 * SECOND), None);
        assert!(registry.connected().is_empty());
    }

    #[test]
    fn a_stream_cannot_change_broker() {
        let t0 = Instant::now();
        let mut registry = BrokerRegistry::new(SECOND, 3 * SECOND);
        registry.ping(StreamId(1), ping(0, 0), t0).expect("valid");
        assert_eq!(
            registry.ping(StreamId(1), ping(1, 0), t0),
            Err(PingRefused::BrokerChanged { first: 0, then: 1 })
        );
    }

    #[test]
    fn a_new_stream_replaces_the_old_one_without_a_departure() {
        let t0 = Instant::now();
        let mut registry = BrokerRegistry::new(SECOND, 3 * SECOND);
        registry.ping(StreamId(1), ping(2, 5), t0).expect("valid");
        let again = registry.ping(StreamId(2), ping(2, 0), t0).expect("valid");
        assert_eq!(kind(&again), "joined");
        assert_eq!(again.replaced, Some(StreamId(1)));
        assert_eq!(registry.stream_closed(StreamId(1), t0), None);
        assert_eq!(registry.connected_streams(), vec![StreamId(2)]);
        assert!(registry.stream_closed(StreamId(2), t0).is_some());
    }

    #[test]
    fn silence_ages_out_once_and_a_later_ping_rejoins() {
        let t0 = Instant::now();
        let mut registry = BrokerRegistry::new(SECOND, 3 * SECOND);
        registry.ping(StreamId(1), ping(0, 0), t0).expect("valid");
        registry.ping(StreamId(2), ping(1, 0), t0).expect("valid");
        registry
            .ping(StreamId(2), ping(1, 0), t0 + 2 * SECOND)
            .expect("valid");
        assert!(registry.tick(t0 + 2 * SECOND).is_empty());
        let aged = registry.tick(t0 + 3 * SECOND);
        assert_eq!(
            aged,
            vec![HeartbeatEvent::Departed {
                broker: BrokerId(0),
                reason: Departure::AgedOut,
                at: t0 + 3 * SECOND,
            }]
        );
        assert!(registry.tick(t0 + 4 * SECOND).is_empty());
        let aged: Vec<BrokerId> = registry
            .tick(t0 + 5 * SECOND)
            .iter()
            .map(HeartbeatEvent::broker)
            .collect();
        assert_eq!(aged, vec![BrokerId(1)]);
        assert!(registry.tick(t0 + 9 * SECOND).is_empty());
        assert!(registry.connected().is_empty());
        let back = registry
            .ping(StreamId(1), ping(0, 0), t0 + 10 * SECOND)
            .expect("valid");
        assert_eq!(kind(&back), "joined");
        assert_eq!(registry.connected_streams(), vec![StreamId(1)]);
        // An aged-out broker whose stream then closes has departed already.
        assert_eq!(registry.stream_closed(StreamId(2), t0 + 10 * SECOND), None);
    }

    #[test]
    fn pings_closer_than_half_an_interval_are_reported_by_the_next_tick() {
        let t0 = Instant::now();
        let mut registry = BrokerRegistry::new(SECOND, 3 * SECOND);
        let s = StreamId(1);
        registry.ping(s, ping(0, 1), t0).expect("valid");
        let fast = Duration::from_millis(100);
        assert_eq!(
            kind(&registry.ping(s, ping(0, 1), t0 + fast).expect("valid")),
            "quiet"
        );
        // A quiet ping still keeps the broker alive.
        assert!(registry.tick(t0 + 3 * SECOND - fast).is_empty());
        let later = t0 + 3 * SECOND - fast;
        assert_eq!(
            kind(&registry.ping(s, ping(0, 1), later).expect("valid")),
            "pinged"
        );
        assert_eq!(
            kind(&registry.ping(s, ping(0, 2), later + fast).expect("valid")),
            "quiet"
        );
        assert_eq!(
            kind(
                &registry
                    .ping(s, ping(0, 3), later + 2 * fast)
                    .expect("valid")
            ),
            "quiet"
        );
        assert!(registry.tick(later + 3 * fast).is_empty());
        match registry.tick(later + SECOND / 2).as_slice() {
            [HeartbeatEvent::Pinged(status)] => {
                assert_eq!(
                    status.applied,
                    Some((ControllerEpoch(1), AssignmentVersion(3)))
                );
                assert_eq!(status.last_ping, later + 2 * fast);
            }
            other => panic!("{other:?}"),
        }
        assert!(registry.tick(later + SECOND).is_empty());
    }
}
