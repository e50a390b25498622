//! The server's table of open streams: which stream each broker is on and its last ping.
//! Pure logic (time is an argument), so the rules are unit tested without a network;
//! `server.rs` holds it behind a mutex and turns its answers into events and stream closings.
//!
//! It does not judge whether a broker is alive: a stream that stays open but silent stays in
//! the table, and the controller (`kaas-cluster`'s `controller::registry`) ages its broker out
//! by its own clock from the pings reported to it.
//!
//! Rules:
//! - one stream per broker; a new stream from a broker replaces its old one (the old one is
//!   then closed by the server), because a broker that restarted dials again before its old
//!   connection is noticed dead;
//! - every ping on a stream must name the broker the first one named;
//! - a stream that ends is reported at once, unless it had been replaced (each end is
//!   reported once);
//! - a ping less than half an interval after the last reported one is not reported at once;
//!   the next tick at least half an interval after that report reports the latest such ping,
//!   with its content and time.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use kaas_cluster::ids::BrokerId;

use crate::error::PingRefused;
use crate::event::{BrokerStatus, HeartbeatEvent};
use crate::ping::Ping;

/// One stream, numbered by the server in the order streams opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// What a ping did.
#[derive(Debug, PartialEq, Eq)]
pub struct PingOutcome {
    /// The event to report, if any (see [`HeartbeatEvent::Pinged`] for the ones held back).
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
    /// A ping came too soon after the last report to be reported; the next tick reports it.
    unreported: bool,
}

/// The table. See the module doc for its rules.
#[derive(Debug)]
pub struct StreamRegistry {
    ping_interval: Duration,
    brokers: BTreeMap<BrokerId, Entry>,
    stream_broker: HashMap<StreamId, BrokerId>,
}

impl StreamRegistry {
    /// A table for pings every `ping_interval`.
    pub fn new(ping_interval: Duration) -> Self {
        StreamRegistry {
            ping_interval,
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
                entry.status = status.clone();
                if now.saturating_duration_since(entry.last_reported) < self.ping_interval / 2 {
                    entry.unreported = true;
                    return Ok(PingOutcome {
                        event: None,
                        replaced: None,
                    });
                }
                entry.last_reported = now;
                entry.unreported = false;
                false
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
        self.brokers.remove(&id)?;
        Some(HeartbeatEvent::StreamClosed {
            broker: id,
            at: now,
        })
    }

    /// Called a few times per ping interval: reports the pings that came too close to the
    /// last report to be reported then, once half an interval has passed since it.
    pub fn tick(&mut self, now: Instant) -> Vec<HeartbeatEvent> {
        let mut events = Vec::new();
        for entry in self.brokers.values_mut() {
            if entry.unreported
                && now.saturating_duration_since(entry.last_reported) >= self.ping_interval / 2
            {
                entry.unreported = false;
                entry.last_reported = now;
                events.push(HeartbeatEvent::Pinged(entry.status.clone()));
            }
        }
        events
    }

    /// The brokers with an open stream, by id, as their last ping described them.
    pub fn brokers(&self) -> Vec<BrokerStatus> {
        self.brokers
            .values()
            .map(|entry| entry.status.clone())
            .collect()
    }

    /// The streams of `brokers` (those of them with an open stream), to push to.
    pub fn streams_of(&self, brokers: &BTreeSet<BrokerId>) -> Vec<StreamId> {
        brokers
            .iter()
            .filter_map(|id| self.brokers.get(id))
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
            Some(HeartbeatEvent::StreamClosed { .. }) => "closed",
            None => "quiet",
        }
    }

    fn all(brokers: &[i32]) -> BTreeSet<BrokerId> {
        brokers.iter().map(|id| BrokerId(*id)).collect()
    }

    #[test]
    fn first_ping_joins_later_ones_ping_and_a_close_is_reported_once() {
        let t0 = Instant::now();
        let mut registry = StreamRegistry::new(SECOND);
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
        assert_eq!(registry.brokers().len(), 1);
        assert_eq!(
            registry.stream_closed(s, t0 + 2 * SECOND),
            Some(HeartbeatEvent::StreamClosed {
                broker: BrokerId(0),
                at: t0 + 2 * SECOND,
            })
        );
        assert_eq!(registry.stream_closed(s, t0 + 3 * SECOND), None);
        assert!(registry.brokers().is_empty());
    }

    #[test]
    fn a_stream_cannot_change_broker() {
        let t0 = Instant::now();
        let mut registry = StreamRegistry::new(SECOND);
        registry.ping(StreamId(1), ping(0, 0), t0).expect("valid");
        assert_eq!(
            registry.ping(StreamId(1), ping(1, 0), t0),
            Err(PingRefused::BrokerChanged { first: 0, then: 1 })
        );
    }

    #[test]
    fn a_new_stream_replaces_the_old_one_without_a_close() {
        let t0 = Instant::now();
        let mut registry = StreamRegistry::new(SECOND);
        registry.ping(StreamId(1), ping(2, 5), t0).expect("valid");
        let again = registry.ping(StreamId(2), ping(2, 0), t0).expect("valid");
        assert_eq!(kind(&again), "joined");
        assert_eq!(again.replaced, Some(StreamId(1)));
        assert_eq!(registry.stream_closed(StreamId(1), t0), None);
        assert_eq!(registry.streams_of(&all(&[2])), vec![StreamId(2)]);
        assert!(registry.stream_closed(StreamId(2), t0).is_some());
    }

    #[test]
    fn silence_is_not_judged_here_and_a_later_ping_is_a_ping() {
        let t0 = Instant::now();
        let mut registry = StreamRegistry::new(SECOND);
        registry.ping(StreamId(1), ping(0, 0), t0).expect("valid");
        registry.ping(StreamId(2), ping(1, 0), t0).expect("valid");
        // Whether a silent broker is gone is the controller's call: the table reports
        // nothing and keeps its stream.
        assert!(registry.tick(t0 + 60 * SECOND).is_empty());
        assert_eq!(registry.brokers().len(), 2);
        assert_eq!(
            registry.streams_of(&all(&[0, 1, 7])),
            vec![StreamId(1), StreamId(2)]
        );
        assert_eq!(registry.streams_of(&all(&[1])), vec![StreamId(2)]);
        let back = registry
            .ping(StreamId(1), ping(0, 0), t0 + 61 * SECOND)
            .expect("valid");
        assert_eq!(kind(&back), "pinged");
    }

    #[test]
    fn pings_closer_than_half_an_interval_are_reported_by_the_next_tick() {
        let t0 = Instant::now();
        let mut registry = StreamRegistry::new(SECOND);
        let s = StreamId(1);
        registry.ping(s, ping(0, 1), t0).expect("valid");
        let fast = Duration::from_millis(100);
        assert_eq!(
            kind(&registry.ping(s, ping(0, 1), t0 + fast).expect("valid")),
            "quiet"
        );
        // A quiet ping still reaches the controller, with its time, so it keeps the broker
        // alive there.
        assert!(registry.tick(t0 + 3 * fast).is_empty());
        match registry.tick(t0 + SECOND / 2).as_slice() {
            [HeartbeatEvent::Pinged(status)] => assert_eq!(status.last_ping, t0 + fast),
            other => panic!("{other:?}"),
        }
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
