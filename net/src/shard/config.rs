//! Broker settings shared by every shard (read-only after start-up).

use std::net::SocketAddr;
use std::path::PathBuf;

/// How the broker runs.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// This broker's node id in Metadata responses.
    pub node_id: i32,
    /// Address the Kafka listener binds.
    pub listen: SocketAddr,
    /// Host clients are told to connect to (Metadata `host`).
    pub advertised_host: String,
    /// Port clients are told to connect to.
    pub advertised_port: i32,
    /// Data directory; `None` keeps everything in memory.
    pub data_dir: Option<PathBuf>,
    /// Number of shards (one executor per core).
    pub shards: usize,
    /// Largest request frame accepted (`socket.request.max.bytes`); larger closes the connection.
    pub max_request_bytes: usize,
    /// Requests processed concurrently per connection.
    pub max_in_flight_per_connection: usize,
    /// Create unknown topics when a client's Metadata request asks (`auto.create.topics.enable`).
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic or a CreateTopics without a count (`num.partitions`).
    pub default_partitions: i32,
    /// Broker-level defaults for topic configs (`log.*` settings).
    pub topic_defaults: crate::model::topic_config::TopicDefaults,
    /// Group coordinator settings (`group.*`, `offset.*`).
    pub groups: crate::groups::config::GroupConfig,
    /// Cluster mode (`None`: a standalone broker).
    pub cluster: Option<ClusterSettings>,
    /// The log cleaner's settings (`log.cleaner.*`).
    pub cleaner: kaas_engine::compaction::CleanerConfig,
    /// When idle idempotent producers are forgotten (`producer.id.expiration.*`).
    pub producer_expiration: crate::shard::producer_expiration::ProducerExpiration,
    /// The transaction coordinators' settings (`transaction.*`).
    pub transactions: crate::transactions::coordinator::CoordinatorConfig,
}

/// How a broker of a cluster runs: several brokers share one data directory and follow
/// `<data>/__cluster/assignment.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSettings {
    /// This broker's id in the assignment (also its Metadata node id).
    pub broker_id: i32,
}

impl BrokerConfig {
    /// Settings for a broker on `listen` with all other values at their defaults.
    pub fn new(listen: SocketAddr) -> Self {
        BrokerConfig {
            node_id: 0,
            listen,
            advertised_host: listen.ip().to_string(),
            advertised_port: i32::from(listen.port()),
            data_dir: None,
            shards: 1,
            max_request_bytes: 104_857_600,
            max_in_flight_per_connection: 64,
            auto_create_topics: true,
            default_partitions: 1,
            topic_defaults: Default::default(),
            groups: Default::default(),
            cluster: None,
            cleaner: Default::default(),
            producer_expiration: Default::default(),
            transactions: Default::default(),
        }
    }
}
