package kaas.compat;

import static kaas.compat.Support.admin;
import static kaas.compat.Support.await;
import static kaas.compat.Support.awaitFailure;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;
import static kaas.compat.Support.uniqueTopic;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidReplicaAssignmentException;
import org.apache.kafka.common.errors.InvalidRequestException;
import org.apache.kafka.common.errors.TopicExistsException;

/**
 * Topic configs (every Kafka 4.4 topic config accepted, typed and validated as Kafka does),
 * GROUP configs (KIP-848) and manual replica assignments, through the Java AdminClient.
 */
final class TopicConfigs {
    private TopicConfigs() {}

    /** Every non-internal topic config of Apache Kafka 4.4. */
    static final Set<String> KAFKA_TOPIC_CONFIGS = Set.of(
            "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
            "compression.zstd.level", "delete.retention.ms", "errors.deadletterqueue.group.enable",
            "file.delete.delay.ms", "flush.messages", "flush.ms", "follower.replication.throttled.replicas",
            "index.interval.bytes", "leader.replication.throttled.replicas", "local.retention.bytes",
            "local.retention.ms", "max.compaction.lag.ms", "max.decompressed.message.bytes", "max.message.bytes",
            "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
            "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
            "remote.copy.lag.bytes", "remote.copy.lag.ms", "remote.log.copy.disable",
            "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
            "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
            "unclean.leader.election.enable");

    /** Configs frameworks set at creation (Connect, Streams, Debezium) that kaas used to refuse. */
    static final Map<String, String> FRAMEWORK_CONFIGS = Map.ofEntries(
            Map.entry("cleanup.policy", "compact,delete"),
            Map.entry("compression.type", "zstd"),
            Map.entry("compression.zstd.level", "5"),
            Map.entry("min.insync.replicas", "2"),
            Map.entry("delete.retention.ms", "1000"),
            Map.entry("min.compaction.lag.ms", "0"),
            Map.entry("min.cleanable.dirty.ratio", "0.3"),
            Map.entry("message.timestamp.after.max.ms", "86400000"),
            Map.entry("segment.jitter.ms", "10"),
            Map.entry("preallocate", "true"),
            Map.entry("unclean.leader.election.enable", "false"),
            Map.entry("follower.replication.throttled.replicas", "*"),
            Map.entry("index.interval.bytes", "8192"),
            Map.entry("flush.messages", "1000"));

    /** Invalid values and the message Kafka 4.4 refuses each with. */
    static final List<String[]> INVALID = List.of(
            new String[] {"compression.type", "foo", "Invalid value foo for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"},
            new String[] {"cleanup.policy", "foo", "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"},
            new String[] {"segment.bytes", "100", "Invalid value 100 for configuration segment.bytes: Value must be at least 1048576"},
            new String[] {"retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"},
            new String[] {"no.such.config", "1", "Unknown topic config name: no.such.config"},
            new String[] {"min.insync.replicas", "0", "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"},
            new String[] {"min.cleanable.dirty.ratio", "2", "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"},
            new String[] {"preallocate", "maybe", "Invalid value maybe for configuration preallocate: Expected value to be either true or false"},
            new String[] {"compression.gzip.level", "10", "Invalid value 10 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"},
            new String[] {"segment.bytes", "99999999999", "Invalid value 99999999999 for configuration segment.bytes: Not a number of type INT"},
            new String[] {"message.downconversion.enable", "true", "Unknown topic config name: message.downconversion.enable"},
            new String[] {"remote.storage.enable", "true", "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."});

    static Map<String, ConfigEntry> describe(Admin admin, ConfigResource res) {
        Config cfg = await(admin.describeConfigs(List.of(res), new DescribeConfigsOptions().includeSynonyms(true)).all(),
                "describeConfigs " + res).get(res);
        check(cfg != null, "describeConfigs returned nothing for %s", res);
        Map<String, ConfigEntry> m = new HashMap<>();
        for (ConfigEntry e : cfg.entries()) m.put(e.name(), e);
        return m;
    }

    static void checkEntry(Map<String, ConfigEntry> cfg, String name, String value, ConfigEntry.ConfigSource source) {
        ConfigEntry e = cfg.get(name);
        check(e != null, "describeConfigs lacks %s", name);
        checkEq(value, e.value(), "value of " + name);
        checkEq(source, e.source(), "source of " + name);
        check(!e.isReadOnly() && !e.isSensitive(), "%s is read-only or sensitive", name);
    }

    static void checkRefused(Admin admin, String topic, String name, String value, String message) {
        InvalidConfigurationException e = awaitFailure(admin.createTopics(List.of(
                new NewTopic(topic, 1, (short) 1).configs(Map.of(name, value)))).all(),
                InvalidConfigurationException.class, "createTopics with " + name + "=" + value);
        checkEq(message, e.getMessage(), "message refusing " + name + "=" + value);
    }

    static void alter(Admin admin, ConfigResource res, AlterConfigOp... ops) {
        await(admin.incrementalAlterConfigs(Map.of(res, List.of(ops))).all(), "incrementalAlterConfigs " + res);
    }

    static AlterConfigOp op(String name, String value, AlterConfigOp.OpType type) {
        return new AlterConfigOp(new ConfigEntry(name, value), type);
    }

    /**
     * CreateTopics with framework configs; DescribeConfigs lists every Kafka topic config with
     * Kafka's types and sources; invalid values are refused with Kafka's messages; an existing
     * topic is TOPIC_ALREADY_EXISTS whatever else is wrong; APPEND/SUBTRACT on cleanup.policy.
     */
    static void topicConfigs(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("topic-configs");
            CreateTopicsResult cr = admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(FRAMEWORK_CONFIGS)));
            await(cr.all(), "createTopics with framework configs");
            Config created = await(cr.config(topic), "configs in the CreateTopics response");
            checkEq("zstd", created.get("compression.type").value(), "compression.type in the CreateTopics response");
            Support.waitForTopic(admin, topic, 1);

            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Map<String, ConfigEntry> cfg = describe(admin, res);
            Set<String> missing = new TreeSet<>(KAFKA_TOPIC_CONFIGS);
            missing.removeAll(cfg.keySet());
            check(missing.isEmpty(), "describeConfigs lacks %s", missing);
            for (var e : FRAMEWORK_CONFIGS.entrySet()) {
                checkEntry(cfg, e.getKey(), e.getValue(), ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            }
            checkEntry(cfg, "compression.gzip.level", "-1", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
            checkEntry(cfg, "message.timestamp.type", "CreateTime", ConfigEntry.ConfigSource.DEFAULT_CONFIG);
            checkEq(ConfigEntry.ConfigType.LIST, cfg.get("cleanup.policy").type(), "type of cleanup.policy");
            checkEq(ConfigEntry.ConfigType.LONG, cfg.get("retention.ms").type(), "type of retention.ms");
            checkEq(ConfigEntry.ConfigType.INT, cfg.get("segment.bytes").type(), "type of segment.bytes");
            checkEq(ConfigEntry.ConfigType.DOUBLE, cfg.get("min.cleanable.dirty.ratio").type(), "type of min.cleanable.dirty.ratio");
            checkEq(ConfigEntry.ConfigType.BOOLEAN, cfg.get("preallocate").type(), "type of preallocate");
            checkEq(ConfigEntry.ConfigType.STRING, cfg.get("compression.type").type(), "type of compression.type");
            // Synonyms: the override first, then the broker's log.* setting Kafka falls back to.
            List<ConfigEntry.ConfigSynonym> synonyms = cfg.get("delete.retention.ms").synonyms();
            check(synonyms.size() >= 2, "delete.retention.ms synonyms: %s", synonyms);
            checkEq("delete.retention.ms", synonyms.get(0).name(), "first synonym of delete.retention.ms");
            checkEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, synonyms.get(0).source(), "source of the first synonym");
            ConfigEntry.ConfigSynonym last = synonyms.get(synonyms.size() - 1);
            checkEq("log.cleaner.delete.retention.ms", last.name(), "broker synonym of delete.retention.ms");
            checkEq("86400000", last.value(), "default of log.cleaner.delete.retention.ms");
            checkEq(ConfigEntry.ConfigSource.DEFAULT_CONFIG, last.source(), "source of log.cleaner.delete.retention.ms");

            // Invalid values: INVALID_CONFIG with Kafka's messages; none of those topics exists.
            int i = 0;
            for (String[] bad : INVALID) checkRefused(admin, topic + "-bad" + (i++), bad[0], bad[1], bad[2]);
            InvalidConfigurationException conflict = awaitFailure(admin.createTopics(List.of(new NewTopic(topic + "-lag", 1, (short) 1)
                    .configs(Map.of("min.compaction.lag.ms", "100", "max.compaction.lag.ms", "10")))).all(),
                    InvalidConfigurationException.class, "createTopics with min.compaction.lag.ms > max.compaction.lag.ms");
            checkEq("conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (10)",
                    conflict.getMessage(), "message refusing compaction lags");

            // An existing topic is TOPIC_ALREADY_EXISTS before its configs or replication factor are looked at.
            awaitFailure(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(Map.of("compression.type", "foo")))).all(),
                    TopicExistsException.class, "createTopics of an existing topic with a bad config");
            awaitFailure(admin.createTopics(List.of(new NewTopic(topic, 1, (short) 0))).all(),
                    TopicExistsException.class, "createTopics of an existing topic with replication factor 0");

            // APPEND / SUBTRACT on a LIST config; APPEND on a LONG config is refused.
            alter(admin, res, op("cleanup.policy", "delete", AlterConfigOp.OpType.SUBTRACT));
            checkEntry(describe(admin, res), "cleanup.policy", "compact", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            alter(admin, res, op("cleanup.policy", "delete", AlterConfigOp.OpType.APPEND));
            checkEntry(describe(admin, res), "cleanup.policy", "compact,delete", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
            InvalidConfigurationException append = awaitFailure(admin.incrementalAlterConfigs(Map.of(res, List.of(
                    op("retention.ms", "5", AlterConfigOp.OpType.APPEND)))).all(),
                    InvalidConfigurationException.class, "APPEND to retention.ms");
            checkEq("Can't APPEND to key retention.ms because its type is not LIST.", append.getMessage(), "message refusing APPEND");
            alter(admin, res, op("compression.type", null, AlterConfigOp.OpType.DELETE));
            checkEntry(describe(admin, res), "compression.type", "producer", ConfigEntry.ConfigSource.DEFAULT_CONFIG);

            // Read-only broker settings are refused as Kafka refuses them.
            ConfigResource broker = new ConfigResource(ConfigResource.Type.BROKER,
                    Integer.toString(await(admin.describeCluster().nodes(), "nodes").iterator().next().id()));
            InvalidRequestException ro = awaitFailure(admin.incrementalAlterConfigs(Map.of(broker, List.of(
                    op("num.partitions", "3", AlterConfigOp.OpType.SET)))).all(),
                    InvalidRequestException.class, "altering num.partitions");
            checkEq("Cannot update these configs dynamically: [num.partitions]", ro.getMessage(), "message refusing num.partitions");

            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics");
        }
    }

    /**
     * GROUP configs: described for any group, set and deleted with IncrementalAlterConfigs, bounded
     * by the broker's limits, session timeout above heartbeat interval.
     */
    static void groupConfigs(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, uniqueTopic("group-configs"));
            Map<String, ConfigEntry> cfg = describe(admin, group);
            for (String name : List.of("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms",
                    "share.session.timeout.ms", "share.delivery.count.limit", "share.auto.offset.reset",
                    "streams.session.timeout.ms", "streams.num.standby.replicas")) {
                check(cfg.containsKey(name), "describeConfigs of a group lacks %s", name);
                check(cfg.get(name).source() != ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG, "%s overridden on a new group", name);
            }
            checkEq(ConfigEntry.ConfigType.INT, cfg.get("consumer.session.timeout.ms").type(), "type of consumer.session.timeout.ms");
            checkEq("group.consumer.session.timeout.ms", cfg.get("consumer.session.timeout.ms").synonyms().get(0).name(),
                    "synonym of consumer.session.timeout.ms");

            alter(admin, group, op("consumer.session.timeout.ms", "50000", AlterConfigOp.OpType.SET),
                    op("consumer.heartbeat.interval.ms", "6000", AlterConfigOp.OpType.SET),
                    op("share.delivery.count.limit", "7", AlterConfigOp.OpType.SET));
            cfg = describe(admin, group);
            checkEntry(cfg, "consumer.session.timeout.ms", "50000", ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG);
            checkEntry(cfg, "consumer.heartbeat.interval.ms", "6000", ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG);
            checkEntry(cfg, "share.delivery.count.limit", "7", ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG);

            List<String[]> refused = new ArrayList<>();
            refused.add(new String[] {"consumer.session.timeout.ms", "1000", "consumer.session.timeout.ms must be in the range "});
            refused.add(new String[] {"consumer.session.timeout.ms", "abc", "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"});
            refused.add(new String[] {"consumer.heartbeat.interval.ms", "50000", "consumer.heartbeat.interval.ms must be in the range "});
            refused.add(new String[] {"consumer.heartbeat.interval.ms", "15000", "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"});
            refused.add(new String[] {"share.delivery.count.limit", "1", "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"});
            refused.add(new String[] {"no.such", "1", "Unknown group config name: no.such"});
            for (String[] bad : refused) {
                // 15000 passes alone against a 50000 session timeout; lower the timeout with it.
                List<AlterConfigOp> ops = bad[1].equals("15000")
                        ? List.of(op(bad[0], bad[1], AlterConfigOp.OpType.SET), op("consumer.session.timeout.ms", "15000", AlterConfigOp.OpType.SET))
                        : List.of(op(bad[0], bad[1], AlterConfigOp.OpType.SET));
                InvalidConfigurationException e = awaitFailure(admin.incrementalAlterConfigs(Map.of(group, ops)).all(),
                        InvalidConfigurationException.class, "group config " + bad[0] + "=" + bad[1]);
                check(e.getMessage() != null && e.getMessage().startsWith(bad[2]), "message refusing %s=%s: %s", bad[0], bad[1], e.getMessage());
            }
            checkEntry(describe(admin, group), "consumer.session.timeout.ms", "50000", ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG);

            alter(admin, group, op("consumer.heartbeat.interval.ms", null, AlterConfigOp.OpType.DELETE));
            cfg = describe(admin, group);
            check(cfg.get("consumer.heartbeat.interval.ms").source() != ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG,
                    "consumer.heartbeat.interval.ms still overridden after DELETE");
            checkEntry(cfg, "consumer.session.timeout.ms", "50000", ConfigEntry.ConfigSource.DYNAMIC_GROUP_CONFIG);

            InvalidRequestException unnamed = awaitFailure(admin.incrementalAlterConfigs(Map.of(
                    new ConfigResource(ConfigResource.Type.GROUP, ""), List.of(op("consumer.session.timeout.ms", "50000", AlterConfigOp.OpType.SET)))).all(),
                    InvalidRequestException.class, "group config of the unnamed group");
            checkEq("Default group resources are not allowed.", unnamed.getMessage(), "message refusing the unnamed group");
        }
    }

    /**
     * Manual replica assignments naming registered brokers are accepted at CreateTopics and
     * CreatePartitions; unknown brokers are INVALID_REPLICA_ASSIGNMENT; Metadata reports the
     * leader as the only replica.
     */
    static void replicaAssignment(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            Node node = await(admin.describeCluster().nodes(), "nodes").iterator().next();
            int id = node.id();
            String topic = uniqueTopic("assigned");
            await(admin.createTopics(List.of(new NewTopic(topic, Map.of(0, List.of(id), 1, List.of(id))))).all(),
                    "createTopics with a manual assignment");
            Support.waitForTopic(admin, topic, 2);
            InvalidReplicaAssignmentException unknown = awaitFailure(admin.createTopics(List.of(
                    new NewTopic(topic + "-unknown", Map.of(0, List.of(id + 100))))).all(),
                    InvalidReplicaAssignmentException.class, "createTopics naming an unknown broker");
            checkEq("The manual partition assignment includes broker " + (id + 100) + ", but no such broker is registered.",
                    unknown.getMessage(), "message refusing an unknown broker");
            InvalidReplicaAssignmentException gap = awaitFailure(admin.createTopics(List.of(
                    new NewTopic(topic + "-gap", Map.of(0, List.of(id), 2, List.of(id))))).all(),
                    InvalidReplicaAssignmentException.class, "createTopics with a gap in partition indexes");
            checkEq("partitions should be a consecutive 0-based integer sequence", gap.getMessage(), "message refusing a gap");

            await(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3, List.of(List.of(id))))).all(),
                    "createPartitions with a manual assignment");
            Support.waitForTopic(admin, topic, 3);
            awaitFailure(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4, List.of(List.of(id + 100))))).all(),
                    InvalidReplicaAssignmentException.class, "createPartitions naming an unknown broker");
            InvalidReplicaAssignmentException count = awaitFailure(admin.createPartitions(Map.of(topic,
                    NewPartitions.increaseTo(4, List.of(List.of(id), List.of(id))))).all(),
                    InvalidReplicaAssignmentException.class, "createPartitions with too many assignments");
            checkEq("Attempted to add 1 additional partition(s), but only 2 assignment(s) were specified.",
                    count.getMessage(), "message refusing the assignment count");

            TopicDescription d = await(admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics").get(topic);
            checkEq(3, d.partitions().size(), "partitions after createPartitions");
            for (TopicPartitionInfo p : d.partitions()) {
                checkEq(id, p.leader().id(), "leader of partition " + p.partition());
                checkEq(List.of(node), p.replicas(), "replicas of partition " + p.partition());
                checkEq(List.of(node), p.isr(), "isr of partition " + p.partition());
            }
            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics");
        }
    }
}
