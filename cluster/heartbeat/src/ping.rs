//! A broker's ping, checked: the wire form (`kaas_proto::heartbeat::BrokerPing`) comes from the
//! network, so every field is validated before the registry or the controller sees it.

use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::ids::{
    AssignmentVersion, BrokerId, ControllerEpoch, LeaderEpoch, TopicName, TopicPartition,
};
use kaas_proto::heartbeat::{BrokerPing, Endpoint, FencedPartition};

use crate::error::PingRefused;

/// The longest host accepted: a DNS name's limit.
pub const MAX_HOST_LEN: usize = 255;

/// The most fenced partitions one ping may report (the message size cap, 1 MiB, bounds it
/// too).
pub const MAX_FENCED_PER_PING: usize = 10_000;

/// A validated ping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ping {
    /// The broker and the Kafka endpoint it advertises.
    pub broker: BrokerEndpoint,
    /// The controller epoch and version of the newest assignment it has applied (`None`
    /// before the first).
    pub applied: Option<(ControllerEpoch, AssignmentVersion)>,
    /// Partitions it found claimed on the volume at a higher leader epoch than it was told to
    /// lead them at, with that claim's epoch.
    pub fenced: Vec<(TopicPartition, LeaderEpoch)>,
}

impl Ping {
    /// A ping of `broker` that has applied nothing and is fenced nowhere.
    pub fn new(broker: BrokerEndpoint) -> Self {
        Ping {
            broker,
            applied: None,
            fenced: Vec::new(),
        }
    }

    /// Checks a ping as it came off the wire.
    pub fn from_wire(ping: &BrokerPing) -> Result<Ping, PingRefused> {
        let id = ping.broker_id;
        if id < 0 {
            return Err(PingRefused::NegativeBrokerId(id));
        }
        let endpoint = ping
            .endpoint
            .as_ref()
            .ok_or(PingRefused::MissingEndpoint(id))?;
        let host = &endpoint.host;
        if host.is_empty()
            || host.len() > MAX_HOST_LEN
            || host.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(PingRefused::BadHost(id));
        }
        let port = match u16::try_from(endpoint.port) {
            Ok(port) if port != 0 => port,
            _ => {
                return Err(PingRefused::BadPort {
                    broker: id,
                    port: endpoint.port,
                })
            }
        };
        if ping.fenced.len() > MAX_FENCED_PER_PING {
            return Err(PingRefused::TooManyFenced(id));
        }
        let fenced = ping
            .fenced
            .iter()
            .map(|fenced| {
                let bad = || PingRefused::BadFencedPartition(id);
                let topic = TopicName::new(&fenced.topic).map_err(|_| bad())?;
                if fenced.partition < 0 || fenced.claim_epoch < 0 {
                    return Err(bad());
                }
                Ok((
                    TopicPartition::new(topic, fenced.partition),
                    LeaderEpoch(fenced.claim_epoch),
                ))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Ping {
            broker: BrokerEndpoint {
                id: BrokerId(id),
                host: host.clone(),
                port,
            },
            applied: match ping.applied_assignment_version {
                0 => None,
                version => Some((
                    ControllerEpoch(ping.applied_controller_epoch),
                    AssignmentVersion(version),
                )),
            },
            fenced,
        })
    }

    /// The wire form of this ping.
    pub fn to_wire(&self) -> BrokerPing {
        let (epoch, version) = self
            .applied
            .map_or((0, 0), |(epoch, version)| (epoch.0, version.0));
        BrokerPing {
            broker_id: self.broker.id.0,
            endpoint: Some(Endpoint {
                host: self.broker.host.clone(),
                port: u32::from(self.broker.port),
            }),
            applied_assignment_version: version,
            applied_controller_epoch: epoch,
            fenced: self
                .fenced
                .iter()
                .map(|(partition, claim)| FencedPartition {
                    topic: partition.topic.as_str().to_string(),
                    partition: partition.partition,
                    claim_epoch: claim.0,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire(id: i32, host: &str, port: u32, version: u64) -> BrokerPing {
        BrokerPing {
            broker_id: id,
            endpoint: Some(Endpoint {
                host: host.into(),
                port,
            }),
            applied_assignment_version: version,
            applied_controller_epoch: 3,
            fenced: Vec::new(),
        }
    }

    fn fenced(topic: &str, partition: i32, claim_epoch: i32) -> FencedPartition {
        FencedPartition {
            topic: topic.into(),
            partition,
            claim_epoch,
        }
    }

    #[test]
    fn a_good_ping_round_trips() {
        let mut on_wire = wire(2, "127.0.0.2", 9092, 17);
        on_wire.fenced = vec![fenced("orders", 1, 9)];
        let ping = Ping::from_wire(&on_wire).expect("valid");
        assert_eq!(ping.broker.id, BrokerId(2));
        assert_eq!(ping.broker.host, "127.0.0.2");
        assert_eq!(ping.broker.port, 9092);
        assert_eq!(
            ping.applied,
            Some((ControllerEpoch(3), AssignmentVersion(17)))
        );
        let orders = TopicName::new("orders").expect("valid");
        assert_eq!(
            ping.fenced,
            vec![(TopicPartition::new(orders, 1), LeaderEpoch(9))]
        );
        assert_eq!(ping.to_wire(), on_wire);
        let fresh = Ping::from_wire(&wire(0, "kaas-0.kaas", 1, 0)).expect("valid");
        assert_eq!(fresh.applied, None);
    }

    #[test]
    fn bad_fields_are_refused() {
        assert_eq!(
            Ping::from_wire(&wire(-1, "h", 1, 0)),
            Err(PingRefused::NegativeBrokerId(-1))
        );
        let no_endpoint = BrokerPing {
            endpoint: None,
            ..wire(3, "h", 1, 0)
        };
        assert_eq!(
            Ping::from_wire(&no_endpoint),
            Err(PingRefused::MissingEndpoint(3))
        );
        let long = "a".repeat(MAX_HOST_LEN + 1);
        for host in ["", "a b", "a\nb", "\u{0}", long.as_str()] {
            assert_eq!(
                Ping::from_wire(&wire(1, host, 1, 0)),
                Err(PingRefused::BadHost(1)),
                "{host:?}"
            );
        }
        assert!(Ping::from_wire(&wire(1, &"a".repeat(MAX_HOST_LEN), 1, 0)).is_ok());
        for port in [0, 65_536, u32::MAX] {
            assert_eq!(
                Ping::from_wire(&wire(1, "h", port, 0)),
                Err(PingRefused::BadPort { broker: 1, port })
            );
        }
        for bad in [
            fenced("", 0, 0),
            fenced("a/b", 0, 0),
            fenced("t", -1, 0),
            fenced("t", 0, -1),
        ] {
            let mut on_wire = wire(1, "h", 1, 0);
            on_wire.fenced = vec![fenced("fine", 0, 0), bad.clone()];
            assert_eq!(
                Ping::from_wire(&on_wire),
                Err(PingRefused::BadFencedPartition(1)),
                "{bad:?}"
            );
        }
        let mut flood = wire(1, "h", 1, 0);
        flood.fenced = vec![fenced("t", 0, 0); MAX_FENCED_PER_PING + 1];
        assert_eq!(Ping::from_wire(&flood), Err(PingRefused::TooManyFenced(1)));
    }
}
