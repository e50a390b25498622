//! Every topic config of Apache Kafka 4.4 (`LogConfig`'s non-internal configs), with Kafka's
//! type, default, validator and broker synonym, in the order DescribeConfigs lists them.
//! Which of them change what kaas does is said in net/README.md ("Topic configs").

use super::value::{ConfigSpec, Rule, Synonym, ValueType};

const fn listed(name: &'static str) -> Option<Synonym> {
    Some(Synonym {
        name,
        listed_by_default: true,
    })
}

const fn unlisted(name: &'static str) -> Option<Synonym> {
    Some(Synonym {
        name,
        listed_by_default: false,
    })
}

const fn spec(
    name: &'static str,
    value_type: ValueType,
    default: &'static str,
    rule: Rule,
    synonym: Option<Synonym>,
) -> ConfigSpec {
    ConfigSpec {
        name,
        value_type,
        default,
        rule,
        synonym,
    }
}

/// `compression.type`'s values, in Kafka's order.
pub const COMPRESSION_TYPES: &[&str] =
    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

const LONG_MAX: &str = "9223372036854775807";

use ValueType::{Boolean, Double, Int, List, Long, String};

/// The topic configs, sorted by name.
pub const TOPIC_CONFIGS: &[ConfigSpec] = &[
    spec(
        "cleanup.policy",
        List,
        "delete",
        Rule::ListOf(&["compact", "delete"]),
        listed("log.cleanup.policy"),
    ),
    spec(
        "compression.gzip.level",
        Int,
        "-1",
        Rule::BetweenOr(1, 9, -1),
        listed("compression.gzip.level"),
    ),
    spec(
        "compression.lz4.level",
        Int,
        "9",
        Rule::Between(1, 17),
        listed("compression.lz4.level"),
    ),
    spec(
        "compression.type",
        String,
        "producer",
        Rule::OneOf(COMPRESSION_TYPES),
        listed("compression.type"),
    ),
    spec(
        "compression.zstd.level",
        Int,
        "3",
        Rule::Between(-131_072, 22),
        listed("compression.zstd.level"),
    ),
    spec(
        "delete.retention.ms",
        Long,
        "86400000",
        Rule::AtLeast(0),
        listed("log.cleaner.delete.retention.ms"),
    ),
    spec(
        "errors.deadletterqueue.group.enable",
        Boolean,
        "false",
        Rule::Any,
        None,
    ),
    spec(
        "file.delete.delay.ms",
        Long,
        "60000",
        Rule::AtLeast(0),
        listed("log.segment.delete.delay.ms"),
    ),
    spec(
        "flush.messages",
        Long,
        LONG_MAX,
        Rule::AtLeast(1),
        listed("log.flush.interval.messages"),
    ),
    spec(
        "flush.ms",
        Long,
        LONG_MAX,
        Rule::AtLeast(0),
        unlisted("log.flush.interval.ms"),
    ),
    spec(
        "follower.replication.throttled.replicas",
        List,
        "",
        Rule::ThrottledReplicas,
        None,
    ),
    spec(
        "index.interval.bytes",
        Int,
        "4096",
        Rule::AtLeast(0),
        listed("log.index.interval.bytes"),
    ),
    spec(
        "leader.replication.throttled.replicas",
        List,
        "",
        Rule::ThrottledReplicas,
        None,
    ),
    spec(
        "local.retention.bytes",
        Long,
        "-2",
        Rule::AtLeast(-2),
        listed("log.local.retention.bytes"),
    ),
    spec(
        "local.retention.ms",
        Long,
        "-2",
        Rule::AtLeast(-2),
        listed("log.local.retention.ms"),
    ),
    spec(
        "max.compaction.lag.ms",
        Long,
        LONG_MAX,
        Rule::AtLeast(1),
        listed("log.cleaner.max.compaction.lag.ms"),
    ),
    spec(
        "max.decompressed.message.bytes",
        Int,
        "2147483639",
        Rule::Between(1, 2_147_483_639),
        listed("max.decompressed.message.bytes"),
    ),
    spec(
        "max.message.bytes",
        Int,
        "1048588",
        Rule::AtLeast(0),
        listed("message.max.bytes"),
    ),
    spec(
        "message.timestamp.after.max.ms",
        Long,
        "3600000",
        Rule::AtLeast(0),
        listed("log.message.timestamp.after.max.ms"),
    ),
    spec(
        "message.timestamp.before.max.ms",
        Long,
        LONG_MAX,
        Rule::AtLeast(0),
        listed("log.message.timestamp.before.max.ms"),
    ),
    spec(
        "message.timestamp.type",
        String,
        "CreateTime",
        Rule::OneOf(&["CreateTime", "LogAppendTime"]),
        listed("log.message.timestamp.type"),
    ),
    spec(
        "min.cleanable.dirty.ratio",
        Double,
        "0.5",
        Rule::Fraction(0.0, 1.0),
        listed("log.cleaner.min.cleanable.ratio"),
    ),
    spec(
        "min.compaction.lag.ms",
        Long,
        "0",
        Rule::AtLeast(0),
        listed("log.cleaner.min.compaction.lag.ms"),
    ),
    spec(
        "min.insync.replicas",
        Int,
        "1",
        Rule::AtLeast(1),
        listed("min.insync.replicas"),
    ),
    spec(
        "preallocate",
        Boolean,
        "false",
        Rule::Any,
        listed("log.preallocate"),
    ),
    spec(
        "remote.copy.lag.bytes",
        Long,
        "-1",
        Rule::AtLeast(-1),
        listed("log.remote.copy.lag.bytes"),
    ),
    spec(
        "remote.copy.lag.ms",
        Long,
        "0",
        Rule::AtLeast(-1),
        listed("log.remote.copy.lag.ms"),
    ),
    spec("remote.log.copy.disable", Boolean, "false", Rule::Any, None),
    spec(
        "remote.log.delete.on.disable",
        Boolean,
        "false",
        Rule::Any,
        None,
    ),
    spec("remote.storage.enable", Boolean, "false", Rule::Any, None),
    spec(
        "retention.bytes",
        Long,
        "-1",
        Rule::Any,
        listed("log.retention.bytes"),
    ),
    spec(
        "retention.ms",
        Long,
        "604800000",
        Rule::AtLeast(-1),
        unlisted("log.retention.ms"),
    ),
    spec(
        "segment.bytes",
        Int,
        "1073741824",
        Rule::AtLeast(1_048_576),
        listed("log.segment.bytes"),
    ),
    spec(
        "segment.index.bytes",
        Int,
        "10485760",
        Rule::AtLeast(4),
        listed("log.index.size.max.bytes"),
    ),
    spec(
        "segment.jitter.ms",
        Long,
        "0",
        Rule::AtLeast(0),
        unlisted("log.roll.jitter.ms"),
    ),
    spec(
        "segment.ms",
        Long,
        "604800000",
        Rule::AtLeast(1),
        unlisted("log.roll.ms"),
    ),
    spec(
        "unclean.leader.election.enable",
        Boolean,
        "false",
        Rule::Any,
        listed("unclean.leader.election.enable"),
    ),
];

/// The spec of a topic config, by name.
pub fn topic_spec(name: &str) -> Option<&'static ConfigSpec> {
    TOPIC_CONFIGS.iter().find(|spec| spec.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_every_default_is_valid() {
        assert!(TOPIC_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
        for spec in TOPIC_CONFIGS {
            assert_eq!(
                spec.check(spec.default).as_deref(),
                Ok(spec.default),
                "{}",
                spec.name
            );
        }
        assert_eq!(TOPIC_CONFIGS.len(), 37);
    }
}
