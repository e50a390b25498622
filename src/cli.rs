//! Command line and environment settings.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use clap::Parser;
use kaas_net::broker::config::BrokerConfig;
use kaas_net::broker::topic_config::TopicDefaults;

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
    /// Address of the admin HTTP endpoint (`/healthz`, `/metrics`).
    #[arg(long, env = "KAAS_ADMIN_LISTEN", default_value = "0.0.0.0:9644")]
    pub admin_listen: SocketAddr,
    /// Data directory.
    #[arg(long, env = "KAAS_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    /// Keep everything in memory; nothing is written to disk and nothing survives a restart.
    #[arg(long, env = "KAAS_IN_MEMORY")]
    pub in_memory: bool,
    /// Number of shards (default: the cores this process may use).
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
    /// Consumer group settings.
    #[command(flatten)]
    pub groups: crate::group_flags::GroupFlags,
}

impl Cli {
    /// The broker settings these flags mean.
    pub fn broker_config(&self) -> BrokerConfig {
        let mut config = BrokerConfig::new(self.listen);
        config.advertised_host =
            self.advertised_host
                .clone()
                .unwrap_or_else(|| match self.listen.ip() {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED) => "localhost".to_string(),
                    ip if ip.is_unspecified() => "localhost".to_string(),
                    ip => ip.to_string(),
                });
        config.node_id = self.node_id;
        config.data_dir = (!self.in_memory).then(|| self.data_dir.clone());
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
        config
    }
}
