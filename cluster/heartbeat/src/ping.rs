//! A broker's ping, checked: the wire form (`kaas_proto::heartbeat::BrokerPing`) comes from the
//! network, so every field is validated before the registry or the controller sees it.

use kaas_cluster::assignment::BrokerEndpoint;
use kaas_cluster::ids::{AssignmentVersion, BrokerId};
use kaas_proto::heartbeat::{BrokerPing, Endpoint};

use crate::error::PingRefused;

/// The longest host accepted: a DNS name's limit.
pub const MAX_HOST_LEN: usize = 255;

/// A validated ping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ping {
    /// The broker and the Kafka endpoint it advertises.
    pub broker: BrokerEndpoint,
    /// The newest assignment it has applied (`None` before the first).
    pub applied_version: Option<AssignmentVersion>,
}

impl Ping {
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
        Ok(Ping {
            broker: BrokerEndpoint {
                id: BrokerId(id),
                host: host.clone(),
                port,
            },
            applied_version: match ping.applied_assignment_version {
                0 => None,
                version => Some(AssignmentVersion(version)),
            },
        })
    }

    /// The wire form of this ping.
    pub fn to_wire(&self) -> BrokerPing {
        BrokerPing {
            broker_id: self.broker.id.0,
            endpoint: Some(Endpoint {
                host: self.broker.host.clone(),
                port: u32::from(self.broker.port),
            }),
            applied_assignment_version: self.applied_version.map_or(0, |v| v.0),
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
        }
    }

    #[test]
    fn a_good_ping_round_trips() {
        let ping = Ping::from_wire(&wire(2, "127.0.0.2", 9092, 17)).expect("valid");
        assert_eq!(ping.broker.id, BrokerId(2));
        assert_eq!(ping.broker.host, "127.0.0.2");
        assert_eq!(ping.broker.port, 9092);
        assert_eq!(ping.applied_version, Some(AssignmentVersion(17)));
        assert_eq!(ping.to_wire(), wire(2, "127.0.0.2", 9092, 17));
        let fresh = Ping::from_wire(&wire(0, "kaas-0.kaas", 1, 0)).expect("valid");
        assert_eq!(fresh.applied_version, None);
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
    }
}
