//! Command line and environment settings.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Parser;
use kaas_net::model::topic_config::TopicDefaults;
use kaas_net::shard::config::{BrokerConfig, ClusterSettings};
use kaas_net::shard::producer_expiration::ProducerExpiration;

/// A Kafka-compatible streaming broker. With no flags: a persistent single broker, data in
/// `./data`, Kafka on port 9092, admin HTTP (`/healthz`, `/metrics`) on port 9644.
#[derive(Parser, Debug)]
#[command(name = "kaas", version)]
pub struct Cli {
    /// Address the Kafka listener binds.
    #[arg(long, env = "KAAS_LISTEN", default_value = "0.0.0.0:9092")]
    pub listen: SocketAddr,
    /// Host name clients are told to connect to (default: the listen address, or `localhost`
    /// when listening on all interfaces).
    #[arg(long, env = "KAAS_ADVERTISED_HOST")]
    pub advertised_host: Option<String>,
    /// Port clients are told to connect to (default: the listen port).
    #[arg(long, env = "KAAS_ADVERTISED_PORT")]
    pub advertised_port: Option<u16>,
    /// Where a broker of a cluster (`MY_POD_NAME` set) learns the assignment: `kube` runs the
    /// cluster core (the `kaas-controller` Lease, EndpointSlices, KafkaTopics and the
    /// heartbeat; the Lease holder writes `assignment.json`); `file` only follows
    /// `<data-dir>/__cluster/assignment.json`, written by a test or an operator.
    #[arg(long, env = "KAAS_ASSIGNMENT_SOURCE", value_enum, default_value_t = AssignmentSource::Kube)]
    pub assignment_source: AssignmentSource,
    /// How long the controller Lease stays held without a renewal (`leaseDurationSeconds`,
    /// written in whole seconds, at least 1); another broker takes over after it.
    #[arg(long, env = "KAAS_LEASE_DURATION_MS", default_value_t = 15_000)]
    pub lease_duration_ms: u64,
    /// How often the controller Lease is read, and renewed while held; the holder stops
    /// writing assignments one renew period before the lease duration runs out.
    #[arg(long, env = "KAAS_LEASE_RENEW_PERIOD_MS", default_value_t = 2_000)]
    pub lease_renew_period_ms: u64,
    /// The Service whose EndpointSlices say which brokers are ready.
    #[arg(long, env = "KAAS_SERVICE_NAME", default_value = "kaas")]
    pub service_name: String,
    /// Address of the admin HTTP endpoint (`/healthz`, `/metrics`).
    #[arg(long, env = "KAAS_ADMIN_LISTEN", default_value = "0.0.0.0:9644")]
    pub admin_listen: SocketAddr,
    /// Address the controller's heartbeat gRPC server binds in cluster mode (brokers keep a
    /// stream to it); unused by a standalone broker.
    #[arg(long, env = "KAAS_HEARTBEAT_LISTEN", default_value = "0.0.0.0:9094")]
    pub heartbeat_listen: SocketAddr,
    /// Host the controller publishes on the `kaas-controller` Lease for brokers to dial its
    /// heartbeat server at (default: `MY_POD_IP`, the pod's IP from the downward API, so
    /// reaching a new controller needs no DNS record; else the advertised host).
    #[arg(long, env = "KAAS_HEARTBEAT_ADVERTISED_HOST")]
    pub heartbeat_advertised_host: Option<String>,
    /// Data directory.
    #[arg(long, env = "KAAS_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Keep everything in memory; nothing is written to disk and nothing survives a restart.
    #[arg(long, env = "KAAS_IN_MEMORY")]
    pub in_memory: bool,
    /// Number of shards (default: one per CPU this process may use — its cpuset and
    /// affinity — or fewer under a CPU quota).
    #[arg(long, env = "KAAS_SHARDS")]
    pub shards: Option<usize>,
    /// Node id reported to clients.
    #[arg(long, env = "KAAS_NODE_ID", default_value_t = 0)]
    pub node_id: i32,
    /// Create topics that clients ask about in Metadata (`auto.create.topics.enable`).
    #[arg(long, env = "KAAS_AUTO_CREATE_TOPICS", default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_create_topics: bool,
    /// Partitions of auto-created topics (`num.partitions`).
    #[arg(long, env = "KAAS_NUM_PARTITIONS", default_value_t = 1)]
    pub num_partitions: i32,
    /// Largest request accepted (`socket.request.max.bytes`).
    #[arg(long, env = "KAAS_MAX_REQUEST_BYTES", default_value_t = 104_857_600)]
    pub max_request_bytes: usize,
    /// Default `retention.ms` of topics (`log.retention.ms`; -1 keeps forever).
    #[arg(long, env = "KAAS_LOG_RETENTION_MS", default_value_t = 604_800_000)]
    pub log_retention_ms: i64,
    /// Default `segment.bytes` of topics (`log.segment.bytes`).
    #[arg(long, env = "KAAS_LOG_SEGMENT_BYTES", default_value_t = 1_073_741_824)]
    pub log_segment_bytes: i64,
    /// Default `max.message.bytes` of topics (`message.max.bytes`).
    #[arg(long, env = "KAAS_MESSAGE_MAX_BYTES", default_value_t = 1_048_588)]
    pub message_max_bytes: i64,
    /// How long an idempotent producer may stay idle before its partitions forget it
    /// (`producer.id.expiration.ms`, Kafka's default: one day).
    #[arg(long, env = "KAAS_PRODUCER_ID_EXPIRATION_MS", default_value_t = 86_400_000,
          value_parser = clap::value_parser!(i32).range(1..))]
    pub producer_id_expiration_ms: i32,
    /// How often each shard looks for idle producers
    /// (`producer.id.expiration.check.interval.ms`, Kafka's default: ten minutes).
    #[arg(long, env = "KAAS_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS", default_value_t = 600_000,
          value_parser = clap::value_parser!(i32).range(1..))]
    pub producer_id_expiration_check_interval_ms: i32,
    /// Consumer group settings.
    #[command(flatten)]
    pub groups: crate::group_flags::GroupFlags,
    #[command(flatten)]
    pub cleaner: crate::cleaner_flags::CleanerFlags,
    /// Transaction coordinator settings.
    #[command(flatten)]
    pub transactions: crate::transaction_flags::TransactionFlags,
}

/// Where a broker of a cluster learns the assignment.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignmentSource {
    /// Follow `<data-dir>/__cluster/assignment.json` alone (inotify plus a 1 s poll).
    File,
    /// The cluster core: the broker that holds the `kaas-controller` Lease writes the file,
    /// every broker keeps a heartbeat stream to it and still follows the file.
    Kube,
}

/// The broker id of a cluster broker named `pod_name`: the number after its last `-`, as in a
/// StatefulSet's pod names (`kaas-2` is broker 2).
pub fn broker_id_of_pod(pod_name: &str) -> Result<i32, String> {
    let ordinal = pod_name.rsplit('-').next().unwrap_or_default();
    match ordinal.parse::<i32>() {
        Ok(id) if id >= 0 && ordinal.bytes().all(|b| b.is_ascii_digit()) => Ok(id),
        _ => Err(format!(
            "MY_POD_NAME={pod_name:?} does not end in -<broker number> (e.g. kaas-0)"
        )),
    }
}

impl Cli {
    /// The broker settings these flags mean; `pod_name` (`MY_POD_NAME`) selects cluster mode.
    pub fn broker_config(&self, pod_name: Option<&str>) -> Result<BrokerConfig, String> {
        let mut config = BrokerConfig::new(self.listen);
        config.advertised_host =
            self.advertised_host
                .clone()
                .unwrap_or_else(|| match self.listen.ip() {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED) => "localhost".to_string(),
                    ip if ip.is_unspecified() => "localhost".to_string(),
                    ip => ip.to_string(),
                });
        if let Some(port) = self.advertised_port {
            config.advertised_port = i32::from(port);
        }
        config.node_id = self.node_id;
        if let Some(pod_name) = pod_name {
            let broker_id = broker_id_of_pod(pod_name)?;
            if self.in_memory {
                return Err(
                    "cluster mode (MY_POD_NAME) needs the shared --data-dir, not --in-memory"
                        .into(),
                );
            }
            self.check_heartbeat_listen()?;
            if self.assignment_source == AssignmentSource::Kube {
                self.check_heartbeat_host(&config.advertised_host)?;
                self.check_lease_timing()?;
            }
            config.node_id = broker_id;
            config.cluster = Some(ClusterSettings { broker_id });
        }
        config.data_dir = (!self.in_memory).then(|| self.data_dir.clone());
        // `available_parallelism` counts the CPUs `sched_getaffinity` allows (the cpuset
        // cgroup and any `taskset`), capped by a CFS quota: the CPUs the shards are placed on.
        config.shards = self
            .shards
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .max(1);
        config.auto_create_topics = self.auto_create_topics;
        config.default_partitions = self.num_partitions.max(1);
        config.max_request_bytes = self.max_request_bytes;
        config.topic_defaults = TopicDefaults {
            retention_ms: self.log_retention_ms,
            segment_bytes: self.log_segment_bytes,
            max_message_bytes: self.message_max_bytes,
            ..TopicDefaults::default()
        };
        config.groups = self.groups.group_config();
        config.cleaner = self.cleaner.cleaner_config();
        config.transactions = self.transactions.coordinator_config();
        config.producer_expiration = ProducerExpiration {
            expiration_ms: self.producer_id_expiration_ms,
            check_interval_ms: self.producer_id_expiration_check_interval_ms,
        };
        Ok(config)
    }

    /// The host this broker's heartbeat server is published at: `--heartbeat-advertised-host`,
    /// else `MY_POD_IP`, else `advertised_host` (the Kafka advertised host).
    pub fn heartbeat_host(&self, advertised_host: &str) -> String {
        self.heartbeat_host_with(std::env::var("MY_POD_IP").ok(), advertised_host)
    }

    /// [`Cli::heartbeat_host`] with `MY_POD_IP`'s value given (unset or empty: none).
    fn heartbeat_host_with(&self, pod_ip: Option<String>, advertised_host: &str) -> String {
        self.heartbeat_advertised_host
            .clone()
            .or(pod_ip)
            .filter(|host| !host.is_empty())
            .unwrap_or_else(|| advertised_host.to_owned())
    }

    /// The heartbeat host must be one brokers can read back from the Lease (a host name or
    /// IP address, IPv6 without brackets).
    fn check_heartbeat_host(&self, advertised_host: &str) -> Result<(), String> {
        let host = self.heartbeat_host(advertised_host);
        let published = kaas_cluster_heartbeat::ControllerEndpoint::new(host.clone(), 9094);
        match published
            .to_string()
            .parse::<kaas_cluster_heartbeat::ControllerEndpoint>()
        {
            Ok(read_back) if read_back == published => Ok(()),
            _ => Err(format!(
                "heartbeat host {host:?} (--heartbeat-advertised-host, else MY_POD_IP, else the advertised host) is not a host name or IP address"
            )),
        }
    }

    /// The Lease's timing: a whole second at least (the API server's smallest duration), and
    /// a renew period short enough to renew at least twice before the holder must stop.
    fn check_lease_timing(&self) -> Result<(), String> {
        let (duration, period) = (self.lease_duration_ms, self.lease_renew_period_ms);
        if duration < 1_000 {
            return Err(format!(
                "--lease-duration-ms {duration} is below 1000: the Lease counts whole seconds, at least one"
            ));
        }
        if period == 0 || period.saturating_mul(3) > duration {
            return Err(format!(
                "--lease-renew-period-ms {period} must be above 0 and at most a third of --lease-duration-ms {duration}"
            ));
        }
        Ok(())
    }

    /// `--heartbeat-listen` must name a fixed port (brokers dial it from the Lease
    /// annotation) that neither the Kafka listener nor the admin endpoint binds too.
    fn check_heartbeat_listen(&self) -> Result<(), String> {
        let heartbeat = self.heartbeat_listen;
        if heartbeat.port() == 0 {
            return Err(format!(
                "--heartbeat-listen {heartbeat} needs a port: brokers dial the address the controller publishes"
            ));
        }
        for (flag, other) in [
            ("--listen", self.listen),
            ("--admin-listen", self.admin_listen),
        ] {
            let overlap = heartbeat.ip() == other.ip()
                || heartbeat.ip().is_unspecified()
                || other.ip().is_unspecified();
            if heartbeat.port() == other.port() && overlap {
                return Err(format!(
                    "--heartbeat-listen {heartbeat} and {flag} {other} would bind the same port"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_id_is_the_pod_ordinal() {
        assert_eq!(broker_id_of_pod("kaas-0"), Ok(0));
        assert_eq!(broker_id_of_pod("my-kaas-12"), Ok(12));
        assert_eq!(broker_id_of_pod("7"), Ok(7));
        for bad in ["kaas", "kaas-", "kaas-+1", "kaas-x1", "kaas-99999999999"] {
            assert!(broker_id_of_pod(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cluster_flags_reach_the_config() {
        let cli = Cli::parse_from([
            "kaas",
            "--listen",
            "127.0.0.1:19092",
            "--advertised-host",
            "127.0.0.2",
            "--advertised-port",
            "29092",
            "--assignment-source",
            "file",
        ]);
        let config = cli.broker_config(Some("kaas-2")).expect("valid");
        assert_eq!(config.node_id, 2);
        assert_eq!(config.cluster, Some(ClusterSettings { broker_id: 2 }));
        assert_eq!(config.advertised_host, "127.0.0.2");
        assert_eq!(config.advertised_port, 29092);
        let kube = Cli::parse_from(["kaas", "--assignment-source", "kube"]);
        assert_eq!(kube.assignment_source, AssignmentSource::Kube);
        assert_eq!(
            Cli::parse_from(["kaas"]).assignment_source,
            AssignmentSource::Kube,
            "kube is the default"
        );
        let standalone = cli.broker_config(None).expect("valid");
        assert_eq!(standalone.cluster, None);
        let in_memory = Cli::parse_from(["kaas", "--in-memory"]);
        assert!(in_memory.broker_config(Some("kaas-0")).is_err());
    }

    #[test]
    fn the_lease_timing_has_defaults_and_is_checked_for_the_kube_source() {
        let default = Cli::parse_from(["kaas"]);
        assert_eq!(
            (
                default.lease_duration_ms,
                default.lease_renew_period_ms,
                default.service_name.as_str()
            ),
            (15_000, 2_000, "kaas")
        );
        let short = Cli::parse_from([
            "kaas",
            "--lease-duration-ms",
            "3000",
            "--lease-renew-period-ms",
            "500",
            "--service-name",
            "brokers",
        ]);
        assert!(short.broker_config(Some("kaas-0")).is_ok());
        assert_eq!(short.service_name, "brokers");
        for (duration, period) in [("900", "100"), ("3000", "1001"), ("3000", "0")] {
            let cli = Cli::parse_from([
                "kaas",
                "--lease-duration-ms",
                duration,
                "--lease-renew-period-ms",
                period,
            ]);
            let refused = cli.broker_config(Some("kaas-0")).expect_err(duration);
            assert!(refused.contains("--lease-"), "{refused}");
            assert!(cli.broker_config(None).is_ok(), "standalone ignores it");
            let file = Cli::parse_from([
                "kaas",
                "--lease-duration-ms",
                duration,
                "--lease-renew-period-ms",
                period,
                "--assignment-source",
                "file",
            ]);
            assert!(
                file.broker_config(Some("kaas-0")).is_ok(),
                "no Lease with file"
            );
        }
    }

    #[test]
    fn the_heartbeat_host_is_the_flag_else_the_pod_ip_else_the_advertised_host() {
        let default = Cli::parse_from(["kaas"]);
        let pod_ip = || Some("10.4.2.17".to_owned());
        assert_eq!(
            default.heartbeat_host_with(pod_ip(), "kaas-0.kaas-headless.ns.svc"),
            "10.4.2.17"
        );
        assert_eq!(
            default.heartbeat_host_with(None, "kaas-0.kaas-headless.ns.svc"),
            "kaas-0.kaas-headless.ns.svc"
        );
        assert_eq!(
            default.heartbeat_host_with(Some(String::new()), "127.31.4.2"),
            "127.31.4.2",
            "an empty MY_POD_IP is none"
        );
        let chosen = Cli::parse_from(["kaas", "--heartbeat-advertised-host", "fd00::7"]);
        assert_eq!(chosen.heartbeat_host_with(pod_ip(), "h"), "fd00::7");
        assert!(
            chosen.check_heartbeat_host("h").is_ok(),
            "IPv6 is bracketed"
        );
        for bad in ["a b", "[fd00::7]", "h:9094"] {
            let cli = Cli::parse_from(["kaas", "--heartbeat-advertised-host", bad]);
            let refused = cli.broker_config(Some("kaas-0")).expect_err(bad);
            assert!(refused.contains("heartbeat host"), "{refused}");
            assert!(cli.broker_config(None).is_ok(), "standalone ignores it");
        }
    }

    #[test]
    fn the_heartbeat_listener_is_checked_in_cluster_mode_only() {
        let default = Cli::parse_from(["kaas"]);
        assert_eq!(
            default.heartbeat_listen,
            "0.0.0.0:9094".parse::<SocketAddr>().expect("address")
        );
        assert!(default.broker_config(Some("kaas-0")).is_ok());
        let chosen = Cli::parse_from(["kaas", "--heartbeat-listen", "127.0.0.2:29094"]);
        assert_eq!(chosen.heartbeat_listen.to_string(), "127.0.0.2:29094");
        for bad in [
            ["--heartbeat-listen", "0.0.0.0:0"],
            ["--heartbeat-listen", "0.0.0.0:9092"],
            ["--heartbeat-listen", "127.0.0.1:9644"],
        ] {
            let cli = Cli::parse_from(["kaas", bad[0], bad[1]]);
            let refused = cli.broker_config(Some("kaas-0")).expect_err(bad[1]);
            assert!(refused.contains("--heartbeat-listen"), "{refused}");
            assert!(cli.broker_config(None).is_ok(), "standalone ignores it");
        }
        // Different addresses may share a port.
        let apart = Cli::parse_from([
            "kaas",
            "--listen",
            "127.0.0.1:9094",
            "--heartbeat-listen",
            "127.0.0.2:9094",
        ]);
        assert!(apart.broker_config(Some("kaas-0")).is_ok());
        for not_an_address in ["9094", "localhost:9094", "0.0.0.0:70000", ""] {
            assert!(
                Cli::try_parse_from(["kaas", "--heartbeat-listen", not_an_address]).is_err(),
                "{not_an_address:?}"
            );
        }
    }
}
