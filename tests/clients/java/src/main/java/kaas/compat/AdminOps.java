package kaas.compat;

import static kaas.compat.Support.OP_TIMEOUT;
import static kaas.compat.Support.admin;
import static kaas.compat.Support.await;
import static kaas.compat.Support.awaitFailure;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;
import static kaas.compat.Support.consumer;
import static kaas.compat.Support.createTopic;
import static kaas.compat.Support.pollExactly;
import static kaas.compat.Support.uniqueTopic;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.AlterConfigsOptions;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

import kaas.compat.Records.Sent;

/** AdminClient scenarios: topics, configs, partitions, cluster, offsets, DeleteRecords. */
final class AdminOps {
    private AdminOps() {}

    static final Map<String, String> TOPIC_CONFIGS = Map.of(
            "retention.ms", "3600000",
            "retention.bytes", "104857600",
            "segment.bytes", "16777216",
            "max.message.bytes", "2097152",
            "cleanup.policy", "delete");

    static Map<String, ConfigEntry> describeTopicConfig(Admin admin, String topic) {
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config cfg = await(admin.describeConfigs(List.of(res)).all(), "describeConfigs " + topic).get(res);
        check(cfg != null, "describeConfigs returned nothing for %s", topic);
        Map<String, ConfigEntry> m = new HashMap<>();
        for (ConfigEntry e : cfg.entries()) m.put(e.name(), e);
        return m;
    }

    static void checkDynamic(Map<String, ConfigEntry> cfg, String name, String value) {
        ConfigEntry e = cfg.get(name);
        check(e != null, "describeConfigs lacks %s", name);
        checkEq(value, e.value(), "value of " + name);
        checkEq(ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, e.source(), "source of " + name);
        check(!e.isDefault(), "%s is reported as a default", name);
        check(!e.isReadOnly(), "%s is reported read-only", name);
        check(!e.isSensitive(), "%s is reported sensitive", name);
    }

    static void checkNotDynamic(Map<String, ConfigEntry> cfg, String name) {
        ConfigEntry e = cfg.get(name);
        check(e != null, "describeConfigs lacks %s", name);
        check(e.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                "%s still has a topic override (%s) after it was deleted", name, e.value());
        check(e.value() != null, "%s has no value", name);
    }

    /**
     * DescribeCluster, CreateTopics (with configs, with broker defaults), Metadata (by name and by
     * topic id, ListTopics), DescribeConfigs, IncrementalAlterConfigs (SET, DELETE, validateOnly,
     * an invalid value), CreatePartitions, DeleteTopics.
     */
    static void topicsAndConfigs(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            // DescribeCluster: one node, which is also reported as controller, at the bootstrap port.
            DescribeClusterResult cluster = admin.describeCluster();
            Collection<Node> nodes = await(cluster.nodes(), "describeCluster nodes");
            checkEq(1, nodes.size(), "number of nodes");
            Node node = nodes.iterator().next();
            int port = Integer.parseInt(ctx.bootstrap().substring(ctx.bootstrap().lastIndexOf(':') + 1));
            checkEq(port, node.port(), "port of the advertised node");
            String clusterId = await(cluster.clusterId(), "describeCluster clusterId");
            check(clusterId != null && !clusterId.isEmpty(), "empty cluster id");
            Node controller = await(cluster.controller(), "describeCluster controller");
            check(controller != null && controller.id() == node.id(), "controller %s is not the node %s", controller, node);

            // CreateTopics with topic configs; the response carries id, partitions, RF, configs.
            String topic = uniqueTopic("admin");
            NewTopic nt = new NewTopic(topic, 3, (short) 1).configs(TOPIC_CONFIGS);
            CreateTopicsResult cr = admin.createTopics(List.of(nt));
            await(cr.all(), "createTopics " + topic);
            checkEq(3, await(cr.numPartitions(topic), "numPartitions"), "numPartitions in CreateTopics response");
            checkEq(1, await(cr.replicationFactor(topic), "replicationFactor"), "replicationFactor in CreateTopics response");
            Uuid id = await(cr.topicId(topic), "topicId");
            check(id != null && !id.equals(Uuid.ZERO_UUID), "CreateTopics returned topic id %s", id);
            Config created = await(cr.config(topic), "config in CreateTopics response");
            checkEq("3600000", created.get("retention.ms").value(), "retention.ms in CreateTopics response");
            Support.waitForTopic(admin, topic, 3);

            // Metadata by name and by id.
            TopicDescription d = await(admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics").get(topic);
            checkEq(id, d.topicId(), "topic id in Metadata");
            check(!d.isInternal(), "topic is internal");
            for (TopicPartitionInfo p : d.partitions()) {
                checkEq(node.id(), p.leader().id(), "leader of partition " + p.partition());
                checkEq(List.of(node), p.replicas(), "replicas of partition " + p.partition());
                checkEq(List.of(node), p.isr(), "isr of partition " + p.partition());
            }
            TopicDescription byId = await(admin.describeTopics(TopicCollection.ofTopicIds(List.of(id))).allTopicIds(),
                    "describeTopics by id").get(id);
            checkEq(topic, byId.name(), "topic name in Metadata by id");
            check(await(admin.listTopics().names(), "listTopics").contains(topic), "listTopics lacks %s", topic);

            // CreateTopics with the broker's default partition count and replication factor.
            String defTopic = uniqueTopic("admin-defaults");
            CreateTopicsResult dr = admin.createTopics(List.of(new NewTopic(defTopic, Optional.empty(), Optional.empty())));
            await(dr.all(), "createTopics with defaults");
            check(await(dr.numPartitions(defTopic), "numPartitions") >= 1, "default partition count < 1");
            checkEq(1, await(dr.replicationFactor(defTopic), "replicationFactor"), "default replication factor");
            Support.waitForTopic(admin, defTopic, await(dr.numPartitions(defTopic), "numPartitions"));

            // DescribeConfigs: overrides come back as DYNAMIC_TOPIC_CONFIG, others have values too.
            Map<String, ConfigEntry> cfg = describeTopicConfig(admin, topic);
            for (var e : TOPIC_CONFIGS.entrySet()) checkDynamic(cfg, e.getKey(), e.getValue());
            for (String name : List.of("compression.type", "min.insync.replicas", "message.timestamp.type")) {
                checkNotDynamic(cfg, name);
            }
            Map<String, ConfigEntry> defCfg = describeTopicConfig(admin, defTopic);
            checkNotDynamic(defCfg, "retention.ms");
            checkEq("delete", defCfg.get("cleanup.policy").value(), "default cleanup.policy");

            // IncrementalAlterConfigs: SET and DELETE.
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            List<AlterConfigOp> ops = List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("segment.bytes", "8388608"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("max.message.bytes", "500000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("retention.bytes", ""), AlterConfigOp.OpType.DELETE));
            await(admin.incrementalAlterConfigs(Map.of(res, ops)).all(), "incrementalAlterConfigs");
            Support.waitUntil("altered configs to be visible", Duration.ofSeconds(15),
                    () -> "7200000".equals(describeTopicConfig(admin, topic).get("retention.ms").value()));
            cfg = describeTopicConfig(admin, topic);
            checkDynamic(cfg, "retention.ms", "7200000");
            checkDynamic(cfg, "segment.bytes", "8388608");
            checkDynamic(cfg, "max.message.bytes", "500000");
            checkDynamic(cfg, "cleanup.policy", "delete");
            checkNotDynamic(cfg, "retention.bytes");

            // validateOnly changes nothing.
            await(admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET))),
                    new AlterConfigsOptions().validateOnly(true)).all(), "incrementalAlterConfigs validateOnly");
            checkDynamic(describeTopicConfig(admin, topic), "retention.ms", "7200000");

            // A value that does not parse is INVALID_CONFIG and changes nothing.
            awaitFailure(admin.incrementalAlterConfigs(Map.of(res, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "not-a-number"), AlterConfigOp.OpType.SET)))).all(),
                    InvalidConfigurationException.class, "incrementalAlterConfigs retention.ms=not-a-number");
            checkDynamic(describeTopicConfig(admin, topic), "retention.ms", "7200000");

            // CreatePartitions 3 -> 5; the new partitions accept records.
            await(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all(), "createPartitions 3->5");
            Support.waitForTopic(admin, topic, 5);
            List<Sent> sent = ProduceConsume.produce(ctx.bootstrap(), Map.of(), List.of(
                    new ProducerRecord<>(topic, 4, null, "k".getBytes(), "to-new-partition".getBytes())));
            checkEq(4, sent.get(0).partition, "partition of record sent to a new partition");
            checkEq(0L, sent.get(0).offset, "offset in a new partition");

            // DeleteTopics: gone from Metadata and DescribeConfigs.
            await(admin.deleteTopics(List.of(topic, defTopic)).all(), "deleteTopics");
            Support.waitUntil("deleted topics to disappear", Duration.ofSeconds(30), () -> {
                try {
                    var names = admin.listTopics().names().get(10, TimeUnit.SECONDS);
                    return !names.contains(topic) && !names.contains(defTopic);
                } catch (Exception e) {
                    return false;
                }
            });
            awaitFailure(admin.describeTopics(List.of(topic)).allTopicNames(), UnknownTopicOrPartitionException.class,
                    "describeTopics of a deleted topic");
        }
    }

    /**
     * ListOffsets earliest / latest / max-timestamp / by timestamp through AdminClient.listOffsets
     * and the consumer's offsetsForTimes, beginningOffsets and endOffsets; on an uncompressed and
     * a zstd-compressed partition (so the max-timestamp record sits inside a compressed batch),
     * and on an empty partition.
     */
    static void listOffsets(Scenarios.Ctx ctx) {
        SplittableRandom rnd = ctx.rnd("list-offsets");
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("list-offsets");
            createTopic(admin, topic, 3, Map.of());
            long base = System.currentTimeMillis() - 600_000L;
            // Timestamps rise by 10 ms, except offset 60 which has the largest one.
            for (int p = 0; p < 2; p++) {
                List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
                for (int i = 0; i < 100; i++) {
                    long ts = i == 60 ? base + 5000 : base + i * 10L;
                    recs.add(new ProducerRecord<>(topic, p, ts, Records.bytes(rnd, 4), Records.bytes(rnd, 40)));
                }
                String codec = p == 0 ? "none" : "zstd";
                ProduceConsume.produce(ctx.bootstrap(), Map.of(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec,
                        ProducerConfig.LINGER_MS_CONFIG, 50), recs);
            }
            TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1), p2 = new TopicPartition(topic, 2);
            for (TopicPartition tp : List.of(p0, p1)) {
                checkOffset(admin, tp, OffsetSpec.earliest(), 0, -1, "earliest");
                checkOffset(admin, tp, OffsetSpec.latest(), 100, -1, "latest");
                checkOffset(admin, tp, OffsetSpec.maxTimestamp(), 60, base + 5000, "max timestamp");
                checkOffset(admin, tp, OffsetSpec.forTimestamp(base), 0, base, "timestamp = first");
                checkOffset(admin, tp, OffsetSpec.forTimestamp(base + 205), 21, base + 210, "timestamp between records");
                checkOffset(admin, tp, OffsetSpec.forTimestamp(base + 610), 60, base + 5000, "timestamp just past offset 60's neighbours");
                checkOffset(admin, tp, OffsetSpec.forTimestamp(base + 600), 60, base + 5000, "timestamp of the skipped slot");
                checkOffset(admin, tp, OffsetSpec.forTimestamp(base + 590), 59, base + 590, "timestamp of offset 59");
                checkOffset(admin, tp, OffsetSpec.forTimestamp(base + 5000), 60, base + 5000, "timestamp = max");
                checkOffset(admin, tp, OffsetSpec.forTimestamp(base + 5001), -1, -1, "timestamp after all records");
            }
            checkOffset(admin, p2, OffsetSpec.earliest(), 0, -1, "earliest of an empty partition");
            checkOffset(admin, p2, OffsetSpec.latest(), 0, -1, "latest of an empty partition");
            checkOffset(admin, p2, OffsetSpec.maxTimestamp(), -1, -1, "max timestamp of an empty partition");
            checkOffset(admin, p2, OffsetSpec.forTimestamp(base), -1, -1, "timestamp lookup in an empty partition");

            try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(), Map.of())) {
                Map<TopicPartition, Long> query = new HashMap<>();
                query.put(p0, base + 205);
                query.put(p1, base + 5000);
                query.put(p2, base);
                Map<TopicPartition, OffsetAndTimestamp> r = c.offsetsForTimes(query, OP_TIMEOUT);
                checkOffsetAndTimestamp(r.get(p0), 21, base + 210, "offsetsForTimes p0");
                checkOffsetAndTimestamp(r.get(p1), 60, base + 5000, "offsetsForTimes p1");
                check(r.containsKey(p2) && r.get(p2) == null, "offsetsForTimes of an empty partition: %s", r.get(p2));
                Map<TopicPartition, Long> after = c.offsetsForTimes(Map.of(p0, base + 10_000), OP_TIMEOUT).entrySet().stream()
                        .collect(HashMap::new, (m, e) -> m.put(e.getKey(), e.getValue() == null ? null : e.getValue().offset()), HashMap::putAll);
                check(after.containsKey(p0) && after.get(p0) == null, "offsetsForTimes past the end: %s", after);
                checkEq(Map.of(p0, 0L, p1, 0L, p2, 0L), c.beginningOffsets(List.of(p0, p1, p2), OP_TIMEOUT), "beginningOffsets");
                checkEq(Map.of(p0, 100L, p1, 100L, p2, 0L), c.endOffsets(List.of(p0, p1, p2), OP_TIMEOUT), "endOffsets");

                // Seek to the offset found by timestamp and read from there.
                c.assign(List.of(p1));
                c.seek(p1, r.get(p1).offset());
                List<ConsumerRecord<byte[], byte[]>> got = pollExactly(c, 40, Duration.ofSeconds(30), 100);
                checkEq(60L, got.get(0).offset(), "first offset after seeking by timestamp");
                checkEq(base + 5000, got.get(0).timestamp(), "timestamp of the record found by timestamp");
            }
        }
    }

    static void checkOffsetAndTimestamp(OffsetAndTimestamp ot, long offset, long timestamp, String what) {
        check(ot != null, "%s: no result", what);
        check(ot.offset() == offset && ot.timestamp() == timestamp, "%s: got %s, expected offset %d timestamp %d",
                what, ot, offset, timestamp);
        check(ot.leaderEpoch().isPresent(), "%s: no leader epoch in the ListOffsets answer", what);
    }

    static void checkOffset(Admin admin, TopicPartition tp, OffsetSpec spec, long offset, long timestamp, String what) {
        ListOffsetsResultInfo info = await(admin.listOffsets(Map.of(tp, spec)).partitionResult(tp), "listOffsets " + what);
        check(info.offset() == offset, "listOffsets %s on %s: offset %d, expected %d", what, tp, info.offset(), offset);
        if (timestamp != -1 || offset == -1) {
            check(info.timestamp() == timestamp, "listOffsets %s on %s: timestamp %d, expected %d", what, tp, info.timestamp(), timestamp);
        }
    }

    /**
     * DeleteRecords: the low watermark moves, ListOffsets earliest and the consumer's
     * beginningOffsets follow it, reading from the beginning starts there; deleting below the
     * current start is a no-op; beforeOffset(-1) means "up to the high watermark"; appends
     * continue at the old end.
     */
    static void deleteRecords(Scenarios.Ctx ctx) {
        SplittableRandom rnd = ctx.rnd("delete-records");
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("delete-records");
            createTopic(admin, topic, 1, Map.of());
            TopicPartition tp = new TopicPartition(topic, 0);
            List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
            for (int i = 0; i < 100; i++) recs.add(new ProducerRecord<>(topic, 0, null, Records.bytes(rnd, 4), Records.bytes(rnd, 100)));
            List<Sent> sent = ProduceConsume.produce(ctx.bootstrap(), Map.of(ProducerConfig.LINGER_MS_CONFIG, 0,
                    ProducerConfig.BATCH_SIZE_CONFIG, 1024), recs);

            long low = await(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(40))).lowWatermarks().get(tp),
                    "deleteRecords before 40").lowWatermark();
            checkEq(40L, low, "low watermark after deleteRecords(40)");
            checkOffset(admin, tp, OffsetSpec.earliest(), 40, -1, "earliest after deleteRecords");
            checkOffset(admin, tp, OffsetSpec.latest(), 100, -1, "latest after deleteRecords");
            try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(), Map.of())) {
                checkEq(40L, c.beginningOffsets(List.of(tp), OP_TIMEOUT).get(tp), "beginningOffsets after deleteRecords");
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                Records.verify("after deleteRecords(40)", sent.subList(40, 100), pollExactly(c, 60, Duration.ofSeconds(30), 200), 40);
            }

            low = await(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(10))).lowWatermarks().get(tp),
                    "deleteRecords below the log start").lowWatermark();
            checkEq(40L, low, "low watermark after deleting below it");

            low = await(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(-1))).lowWatermarks().get(tp),
                    "deleteRecords up to the high watermark").lowWatermark();
            checkEq(100L, low, "low watermark after deleteRecords(-1)");
            checkOffset(admin, tp, OffsetSpec.earliest(), 100, -1, "earliest after deleting everything");

            List<Sent> more = ProduceConsume.produce(ctx.bootstrap(), Map.of(), List.of(
                    new ProducerRecord<>(topic, 0, null, "k".getBytes(), "after".getBytes())));
            checkEq(100L, more.get(0).offset, "offset of the first record after deleting everything");
            try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(), Map.of())) {
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                Records.verify("after deleting everything", more, pollExactly(c, 1, Duration.ofSeconds(30), 200), 100);
            }
        }
    }
}
