package kaas.compat;

import static kaas.compat.Support.admin;
import static kaas.compat.Support.await;
import static kaas.compat.Support.awaitFailure;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;
import static kaas.compat.Support.consumer;
import static kaas.compat.Support.createTopic;
import static kaas.compat.Support.pollExactly;
import static kaas.compat.Support.producer;
import static kaas.compat.Support.uniqueTopic;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.InvalidReplicationFactorException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

import kaas.compat.Records.Sent;

/** Error codes as the Java client surfaces them. */
final class Errors {
    private Errors() {}

    static void errors(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            topicErrors(admin);
            unknownTopic(ctx, admin);
            messageTooLarge(ctx, admin);
            offsetOutOfRange(ctx, admin);
        }
    }

    /** TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_TOPIC_EXCEPTION, INVALID_CONFIG. */
    static void topicErrors(Admin admin) {
        String topic = uniqueTopic("errors");
        createTopic(admin, topic, 3, Map.of());
        awaitFailure(admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all(),
                TopicExistsException.class, "createTopics of an existing topic");
        awaitFailure(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(2))).all(),
                InvalidPartitionsException.class, "createPartitions shrinking 3 -> 2");
        awaitFailure(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all(),
                InvalidPartitionsException.class, "createPartitions to the current count");
        // Kafka refuses a factor above the broker count; kaas keeps no replicas and accepts any
        // positive factor, so only a non-positive one is checked here.
        awaitFailure(admin.createTopics(List.of(new NewTopic(uniqueTopic("errors-rf"), 1, (short) 0))).all(),
                InvalidReplicationFactorException.class, "createTopics with replication factor 0");
        awaitFailure(admin.createTopics(List.of(new NewTopic(uniqueTopic("errors-zero"), 0, (short) 1))).all(),
                InvalidPartitionsException.class, "createTopics with 0 partitions");
        awaitFailure(admin.createTopics(List.of(new NewTopic("bad/name-" + System.nanoTime(), 1, (short) 1))).all(),
                InvalidTopicException.class, "createTopics with '/' in the name");
        awaitFailure(admin.createTopics(List.of(new NewTopic("x".repeat(250), 1, (short) 1))).all(),
                InvalidTopicException.class, "createTopics with a 250-character name");
        awaitFailure(admin.createTopics(List.of(new NewTopic(uniqueTopic("errors-cfg"), 1, (short) 1)
                        .configs(Map.of("retention.ms", "forever")))).all(),
                InvalidConfigurationException.class, "createTopics with retention.ms=forever");
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        awaitFailure(admin.incrementalAlterConfigs(Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all(),
                InvalidConfigurationException.class, "incrementalAlterConfigs of an unknown config name");
        // Nothing was created by the failed requests, and the topic still has 3 partitions.
        var d = await(admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics").get(topic);
        checkEq(3, d.partitions().size(), "partition count after failed createPartitions");
        await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics");
    }

    /** UNKNOWN_TOPIC_OR_PARTITION from every admin API that names a topic that does not exist. */
    static void unknownTopic(Scenarios.Ctx ctx, Admin admin) {
        String missing = uniqueTopic("missing");
        TopicPartition tp = new TopicPartition(missing, 0);
        awaitFailure(admin.describeTopics(List.of(missing)).allTopicNames(), UnknownTopicOrPartitionException.class,
                "describeTopics of a missing topic");
        awaitFailure(admin.deleteTopics(List.of(missing)).all(), UnknownTopicOrPartitionException.class,
                "deleteTopics of a missing topic");
        awaitFailure(admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, missing))).all(),
                UnknownTopicOrPartitionException.class, "describeConfigs of a missing topic");
        awaitFailure(admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, missing), List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "1000"), AlterConfigOp.OpType.SET)))).all(),
                UnknownTopicOrPartitionException.class, "incrementalAlterConfigs of a missing topic");
        awaitFailure(admin.createPartitions(Map.of(missing, NewPartitions.increaseTo(4))).all(),
                UnknownTopicOrPartitionException.class, "createPartitions of a missing topic");
        awaitFailure(admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all(),
                UnknownTopicOrPartitionException.class, "listOffsets of a missing topic");
        // Nothing above may have auto-created it.
        awaitFailure(admin.describeTopics(List.of(missing)).allTopicNames(), UnknownTopicOrPartitionException.class,
                "describeTopics after the failed calls");
    }

    /**
     * MESSAGE_TOO_LARGE: a single-record batch larger than the topic's max.message.bytes (but
     * smaller than the producer's max.request.size) fails with RecordTooLargeException; the
     * idempotent producer keeps working afterwards and nothing was appended.
     */
    static void messageTooLarge(Scenarios.Ctx ctx, Admin admin) {
        SplittableRandom rnd = ctx.rnd("too-large");
        String topic = uniqueTopic("too-large");
        createTopic(admin, topic, 1, Map.of("max.message.bytes", "10000"));
        try (KafkaProducer<byte[], byte[]> p = producer(ctx.bootstrap(), Map.of(ProducerConfig.LINGER_MS_CONFIG, 0))) {
            var big = p.send(new ProducerRecord<>(topic, 0, null, "big".getBytes(), Records.bytes(rnd, 20_000)));
            awaitFailure(big, RecordTooLargeException.class, "sending a 20000-byte record to a topic with max.message.bytes=10000");
            List<Sent> ok = ProduceConsume.produce(p, List.of(
                    new ProducerRecord<>(topic, 0, null, "small".getBytes(), Records.bytes(rnd, 5000))));
            checkEq(0L, ok.get(0).offset, "offset of the first record that fit");
            var consumed = ProduceConsume.consumeAll(ctx.bootstrap(), topic, 1, 1, Map.of());
            Records.verify("after MESSAGE_TOO_LARGE", ok, consumed, 0);
        }
        // Raising the limit lets the same record in.
        await(admin.incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.TOPIC, topic), List.of(
                new AlterConfigOp(new ConfigEntry("max.message.bytes", "100000"), AlterConfigOp.OpType.SET)))).all(),
                "raise max.message.bytes");
        Support.waitUntil("max.message.bytes=100000 to apply", Duration.ofSeconds(15), () -> {
            try (KafkaProducer<byte[], byte[]> p = producer(ctx.bootstrap(), Map.of(ProducerConfig.LINGER_MS_CONFIG, 0))) {
                RecordMetadata md = p.send(new ProducerRecord<>(topic, 0, null, "big".getBytes(), new byte[20_000]))
                        .get(30, java.util.concurrent.TimeUnit.SECONDS);
                return md.offset() >= 1;
            } catch (Exception e) {
                return false;
            }
        });
    }

    /**
     * OFFSET_OUT_OF_RANGE: after DeleteRecords moved the log start to 50, a consumer with
     * auto.offset.reset=none that seeks to 0 (or past the end) gets OffsetOutOfRangeException naming
     * the partition and offset; with auto.offset.reset=earliest it resets to 50 and reads on.
     * DeleteRecords beyond the high watermark is OFFSET_OUT_OF_RANGE too.
     */
    static void offsetOutOfRange(Scenarios.Ctx ctx, Admin admin) {
        SplittableRandom rnd = ctx.rnd("out-of-range");
        String topic = uniqueTopic("out-of-range");
        createTopic(admin, topic, 1, Map.of());
        TopicPartition tp = new TopicPartition(topic, 0);
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < 100; i++) recs.add(new ProducerRecord<>(topic, 0, null, Records.bytes(rnd, 4), Records.bytes(rnd, 64)));
        List<Sent> sent = ProduceConsume.produce(ctx.bootstrap(), Map.of(ProducerConfig.BATCH_SIZE_CONFIG, 512,
                ProducerConfig.LINGER_MS_CONFIG, 0), recs);
        await(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(50))).all(), "deleteRecords before 50");
        awaitFailure(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(500))).all(),
                org.apache.kafka.common.errors.OffsetOutOfRangeException.class, "deleteRecords beyond the high watermark");

        try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(), Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none"))) {
            c.assign(List.of(tp));
            for (long bad : new long[] {0L, 49L, 150L}) {
                c.seek(tp, bad);
                OffsetOutOfRangeException e = pollUntilOutOfRange(c, Duration.ofSeconds(20));
                checkEq(Map.of(tp, bad), e.offsetOutOfRangePartitions(), "offsetOutOfRangePartitions after seek(" + bad + ")");
            }
            c.seek(tp, 50);
            Records.verify("fetch at the new log start", sent.subList(50, 100), pollExactly(c, 50, Duration.ofSeconds(30), 200), 50);
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(), Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest"))) {
            c.assign(List.of(tp));
            c.seek(tp, 10);
            Records.verify("reset to earliest after OFFSET_OUT_OF_RANGE", sent.subList(50, 100),
                    pollExactly(c, 50, Duration.ofSeconds(30), 200), 50);
        }
        try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(), Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "latest"))) {
            c.assign(List.of(tp));
            c.seek(tp, 10);
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            int n = 0;
            while (System.nanoTime() < deadline && c.position(tp, Duration.ofSeconds(10)) != 100) {
                n += c.poll(Duration.ofMillis(100)).count();
            }
            checkEq(0, n, "records returned after a reset to latest");
            checkEq(100L, c.position(tp, Duration.ofSeconds(10)), "position after reset to latest");
        }
    }

    static OffsetOutOfRangeException pollUntilOutOfRange(KafkaConsumer<byte[], byte[]> c, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (System.nanoTime() < deadline) {
            try {
                int n = c.poll(Duration.ofMillis(200)).count();
                check(n == 0, "poll returned %d records from an out-of-range position", n);
            } catch (OffsetOutOfRangeException e) {
                return e;
            }
        }
        throw new Support.Failure("no OffsetOutOfRangeException within " + timeout);
    }
}
