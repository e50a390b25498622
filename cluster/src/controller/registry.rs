//! The heartbeat registry: every broker that has pinged, where it said clients reach it, when
//! it last pinged (by the controller's clock, so broker clocks never matter), whether its
//! stream is still open, and what it reports.
//!
//! This is the one place that decides whether a broker is alive; the heartbeat server only
//! reports the pings it receives and the streams that end. A broker is *connected* while its
//! stream is open and its last ping is at most the age-out period old (at exactly the
//! age-out period it is still connected; one millisecond later it is not). A closed stream
//! disconnects at once; a ping after that (a new stream, or the same one after a silence)
//! reconnects. Pings with an endpoint no client could use (empty host, port 0) or a negative
//! id are ignored, so one confused broker cannot make every assignment invalid.

use std::collections::{BTreeMap, BTreeSet};

use crate::assignment::BrokerEndpoint;
use crate::ids::{AssignmentVersion, BrokerId, ControllerEpoch, LeaderEpoch, TopicPartition};

use super::input::{Heartbeat, MonotonicMillis};

#[derive(Clone, Debug)]
struct Entry {
    endpoint: BrokerEndpoint,
    last_ping: MonotonicMillis,
    stream_open: bool,
    fenced: Vec<(TopicPartition, LeaderEpoch)>,
}

/// Every broker heard from.
#[derive(Clone, Debug, Default)]
pub struct BrokerRegistry {
    entries: BTreeMap<BrokerId, Entry>,
    highest_applied_epoch: Option<ControllerEpoch>,
    highest_applied_version: Option<AssignmentVersion>,
}

impl BrokerRegistry {
    /// Records a ping received at `now`; returns whether it was usable.
    pub fn ping(&mut self, now: MonotonicMillis, heartbeat: Heartbeat) -> bool {
        let endpoint = heartbeat.broker;
        if endpoint.id.0 < 0 || endpoint.host.trim().is_empty() || endpoint.port == 0 {
            return false;
        }
        self.highest_applied_epoch = self.highest_applied_epoch.max(heartbeat.applied_epoch);
        self.highest_applied_version = self.highest_applied_version.max(heartbeat.applied_version);
        let entry = Entry {
            endpoint: endpoint.clone(),
            last_ping: now,
            stream_open: true,
            fenced: heartbeat.fenced,
        };
        self.entries.insert(endpoint.id, entry);
        true
    }

    /// Forgets brokers silent for more than `ms` (their entries would otherwise pile up, one
    /// per id ever heard from).
    pub fn forget_silent(&mut self, now: MonotonicMillis, ms: u64) {
        self.entries.retain(|_, e| e.last_ping.plus(ms) >= now);
    }

    /// The broker's stream closed: it is disconnected until it pings again.
    pub fn stream_closed(&mut self, broker: BrokerId) {
        if let Some(entry) = self.entries.get_mut(&broker) {
            entry.stream_open = false;
        }
    }

    /// The connected brokers at `now` and their endpoints.
    pub fn connected(
        &self,
        now: MonotonicMillis,
        age_out_ms: u64,
    ) -> BTreeMap<BrokerId, BrokerEndpoint> {
        self.entries
            .iter()
            .filter(|(_, e)| e.stream_open && e.last_ping.plus(age_out_ms) >= now)
            .map(|(id, e)| (*id, e.endpoint.clone()))
            .collect()
    }

    /// When the next connected broker ages out unless it pings first: the first millisecond
    /// at which [`BrokerRegistry::connected`] no longer counts it.
    pub fn next_age_out(&self, now: MonotonicMillis, age_out_ms: u64) -> Option<MonotonicMillis> {
        self.entries
            .values()
            .filter(|e| e.stream_open && e.last_ping.plus(age_out_ms) >= now)
            .map(|e| e.last_ping.plus(age_out_ms).plus(1))
            .min()
    }

    /// The ids of the connected brokers at `now`.
    pub fn connected_ids(&self, now: MonotonicMillis, age_out_ms: u64) -> BTreeSet<BrokerId> {
        self.connected(now, age_out_ms).into_keys().collect()
    }

    /// What connected brokers last reported fenced: (broker, partition, claim epoch).
    pub fn fenced(
        &self,
        now: MonotonicMillis,
        age_out_ms: u64,
    ) -> impl Iterator<Item = (BrokerId, &TopicPartition, LeaderEpoch)> {
        self.entries
            .iter()
            .filter(move |(_, e)| e.stream_open && e.last_ping.plus(age_out_ms) >= now)
            .flat_map(|(id, e)| e.fenced.iter().map(move |(p, claim)| (*id, p, *claim)))
    }

    /// The highest controller epoch any broker reported applying.
    pub fn highest_applied_epoch(&self) -> Option<ControllerEpoch> {
        self.highest_applied_epoch
    }

    /// The highest assignment version any broker reported applying.
    pub fn highest_applied_version(&self) -> Option<AssignmentVersion> {
        self.highest_applied_version
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ping(broker: i32, host: &str) -> Heartbeat {
        Heartbeat {
            broker: BrokerEndpoint {
                id: BrokerId(broker),
                host: host.to_string(),
                port: 9092,
            },
            applied_version: Some(AssignmentVersion(broker as u64)),
            applied_epoch: Some(ControllerEpoch(2)),
            fenced: Vec::new(),
        }
    }

    #[test]
    fn brokers_age_out_and_a_closed_stream_leaves_at_once() {
        let mut registry = BrokerRegistry::default();
        assert!(registry.ping(MonotonicMillis(1_000), ping(0, "a")));
        assert!(registry.ping(MonotonicMillis(2_000), ping(1, "b")));
        assert!(!registry.ping(MonotonicMillis(2_000), ping(2, " ")));
        let ids = |r: &BrokerRegistry, now| r.connected_ids(MonotonicMillis(now), 3_000);
        assert_eq!(ids(&registry, 4_000), [BrokerId(0), BrokerId(1)].into());
        assert_eq!(ids(&registry, 4_001), [BrokerId(1)].into());
        registry.stream_closed(BrokerId(1));
        assert_eq!(ids(&registry, 2_500), [BrokerId(0)].into());
        assert!(registry.ping(MonotonicMillis(5_000), ping(1, "b")));
        assert_eq!(ids(&registry, 5_000), [BrokerId(1)].into());
        assert_eq!(
            registry.highest_applied_version(),
            Some(AssignmentVersion(1))
        );
    }

    #[test]
    fn silence_ages_out_once_and_a_later_ping_rejoins() {
        let mut registry = BrokerRegistry::default();
        let age_out = 3_000;
        let ids = |r: &BrokerRegistry, now| r.connected_ids(MonotonicMillis(now), age_out);
        let wake = |r: &BrokerRegistry, now| r.next_age_out(MonotonicMillis(now), age_out);
        registry.ping(MonotonicMillis(1_000), ping(0, "a"));
        registry.ping(MonotonicMillis(1_000), ping(1, "b"));
        registry.ping(MonotonicMillis(3_000), ping(1, "b"));
        assert_eq!(ids(&registry, 3_000), [BrokerId(0), BrokerId(1)].into());
        // Broker 0 ages out one millisecond past the age-out period, and the registry says
        // when: the wake-up an adapter sets.
        assert_eq!(wake(&registry, 3_000), Some(MonotonicMillis(4_001)));
        assert_eq!(ids(&registry, 4_000), [BrokerId(0), BrokerId(1)].into());
        assert_eq!(ids(&registry, 4_001), [BrokerId(1)].into());
        assert_eq!(ids(&registry, 5_000), [BrokerId(1)].into());
        assert_eq!(wake(&registry, 4_001), Some(MonotonicMillis(6_001)));
        assert_eq!(ids(&registry, 6_001), BTreeSet::new());
        assert_eq!(wake(&registry, 6_001), None);
        assert_eq!(ids(&registry, 10_000), BTreeSet::new());
        // A ping on the same stream after the silence: connected again.
        registry.ping(MonotonicMillis(11_000), ping(0, "a"));
        assert_eq!(ids(&registry, 11_000), [BrokerId(0)].into());
        // An aged-out broker whose stream then closes had left already.
        registry.stream_closed(BrokerId(1));
        assert_eq!(ids(&registry, 11_000), [BrokerId(0)].into());
        assert_eq!(wake(&registry, 11_000), Some(MonotonicMillis(14_001)));
    }
}
