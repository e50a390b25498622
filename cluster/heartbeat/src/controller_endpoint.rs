//! Where the controller's heartbeat server is reached. The controller publishes it as text on
//! its Lease (an annotation, `host:port`, IPv6 hosts in brackets); brokers parse it with
//! [`ControllerEndpoint::from_str`](std::str::FromStr) and hand it to the client.

use std::fmt;
use std::str::FromStr;

/// A controller's heartbeat endpoint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ControllerEndpoint {
    /// Host name, IPv4 address, or IPv6 address without brackets.
    pub host: String,
    /// TCP port, never 0.
    pub port: u16,
}

/// Why an endpoint's text was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a heartbeat endpoint (host:port, [ipv6]:port)")]
pub struct BadControllerEndpoint {
    /// The text refused.
    pub text: String,
}

impl ControllerEndpoint {
    /// The endpoint `host:port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        ControllerEndpoint {
            host: host.into(),
            port,
        }
    }

    /// The URI tonic dials.
    pub(crate) fn uri(&self) -> String {
        format!("http://{self}")
    }
}

impl fmt::Display for ControllerEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl FromStr for ControllerEndpoint {
    type Err = BadControllerEndpoint;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || BadControllerEndpoint { text: text.into() };
        let (host, port) = match text.strip_prefix('[') {
            Some(rest) => {
                let (host, port) = rest.split_once("]:").ok_or_else(bad)?;
                host.parse::<std::net::Ipv6Addr>().map_err(|_| bad())?;
                (host, port)
            }
            None => {
                let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
                // An IPv6 address needs its brackets.
                if host.contains(':') {
                    return Err(bad());
                }
                (host, port)
            }
        };
        let host_ok = !host.is_empty()
            && host.len() <= crate::ping::MAX_HOST_LEN
            && (host.contains(':')
                || host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)));
        // Digits only, no sign and no leading zero: one spelling per port.
        let port_ok =
            !port.is_empty() && !port.starts_with('0') && port.bytes().all(|b| b.is_ascii_digit());
        let port = match port.parse::<u16>() {
            Ok(port) if port_ok && host_ok => port,
            _ => return Err(bad()),
        };
        Ok(ControllerEndpoint::new(host, port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_print_back() {
        for text in [
            "127.0.0.1:9094",
            "kaas-0.kaas.ns.svc:9094",
            "[::1]:9094",
            "[fe80::1]:1",
        ] {
            let endpoint: ControllerEndpoint = text.parse().expect(text);
            assert_eq!(endpoint.to_string(), text);
        }
        assert_eq!(
            "[::1]:9094"
                .parse::<ControllerEndpoint>()
                .expect("valid")
                .host,
            "::1"
        );
        for bad in [
            "",
            "host",
            ":9094",
            "host:",
            "host:0",
            "host:65536",
            "host:+1",
            "host:09094",
            "::1:9094",
            "[::1]9094",
            "[nothost]:1",
            "a b:1",
            "h/x:1",
        ] {
            assert!(bad.parse::<ControllerEndpoint>().is_err(), "{bad:?}");
        }
    }
}
