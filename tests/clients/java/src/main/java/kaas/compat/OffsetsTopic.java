package kaas.compat;

import static kaas.compat.Support.await;
import static kaas.compat.Support.awaitFailure;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.utils.Utils;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;
import org.apache.kafka.coordinator.group.generated.GroupMetadataKey;
import org.apache.kafka.coordinator.group.generated.GroupMetadataValue;
import org.apache.kafka.coordinator.group.generated.OffsetCommitKey;
import org.apache.kafka.coordinator.group.generated.OffsetCommitValue;

/**
 * {@code __consumer_offsets}: after a group commits, a plain consumer (assign, no group) reads
 * the group's partition of the internal topic and decodes its records with Kafka's own
 * {@link GroupCoordinatorRecordSerde}; the commits (group, topic, partition, offset, leader
 * epoch, metadata) and the classic group's metadata must be there, and a later commit must
 * reach a consumer tailing the partition. Metadata lists the topic as internal, listTopics
 * hides it unless asked, a pattern subscription skips it, and writes to it are refused.
 *
 * <p>The partition count is read from Metadata (Apache Kafka in tests/kafka runs with
 * {@code offsets.topic.num.partitions=1}; kaas has Kafka's default 50).
 */
final class OffsetsTopic {
    private OffsetsTopic() {}

    static final String NAME = "__consumer_offsets";
    static final Duration READ_TIMEOUT = Duration.ofSeconds(30);

    /** The latest decoded state of one group seen in the topic. */
    static final class Seen {
        final Map<TopicPartition, OffsetCommitValue> offsets = new HashMap<>();
        GroupMetadataValue group;
    }

    static void offsetsTopic(Scenarios.Ctx ctx) {
        String topic = Support.uniqueTopic("ot");
        String group = Groups.uniqueGroup("ot");
        try (Admin admin = Support.admin(ctx.bootstrap())) {
            Support.createTopic(admin, topic, 3, Map.of());

            // A classic member joins, commits two partitions, and leaves.
            Map<String, Object> member = new HashMap<>();
            member.put(ConsumerConfig.GROUP_ID_CONFIG, group);
            member.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
            member.put(ConsumerConfig.CLIENT_ID_CONFIG, "java-ot-member");
            try (KafkaConsumer<byte[], byte[]> c = Support.consumer(ctx.bootstrap(), member)) {
                c.subscribe(List.of(topic));
                Support.waitUntil("an assignment for " + group, Groups.SETTLE, () -> {
                    c.poll(Duration.ofMillis(100));
                    return c.assignment().size() == 3;
                });
                c.commitSync(Map.of(
                        new TopicPartition(topic, 0), new OffsetAndMetadata(5, Optional.of(0), "first"),
                        new TopicPartition(topic, 2), new OffsetAndMetadata(11, Optional.empty(), "")),
                        Support.OP_TIMEOUT);
            }

            // The topic as Metadata and the admin client describe it.
            TopicDescription described = await(admin.describeTopics(List.of(NAME)).allTopicNames(),
                    "describeTopics " + NAME).get(NAME);
            check(described.isInternal(), "%s is not marked internal", NAME);
            int partitions = described.partitions().size();
            check(partitions >= 1, "%s has no partitions", NAME);
            Set<String> listed = await(admin.listTopics().names(), "listTopics");
            check(!listed.contains(NAME), "listTopics() lists %s (internal topics are hidden by default)", NAME);
            Set<String> all = await(admin.listTopics(new ListTopicsOptions().listInternal(true)).names(),
                    "listTopics(listInternal)");
            check(all.contains(NAME), "listTopics(listInternal) does not list %s: %s", NAME, all);
            var configs = await(admin.describeConfigs(List.of(new ConfigResource(ConfigResource.Type.TOPIC, NAME))).all(),
                    "describeConfigs " + NAME);
            var cleanup = configs.values().iterator().next().get("cleanup.policy");
            check(cleanup != null && "compact".equals(cleanup.value()), "%s cleanup.policy is %s", NAME, cleanup);

            // Read the group's partition with a plain consumer and decode it as Kafka does.
            TopicPartition tp = new TopicPartition(NAME, Utils.abs(group.hashCode()) % partitions);
            Seen seen = new Seen();
            try (KafkaConsumer<byte[], byte[]> reader = Support.consumer(ctx.bootstrap(), Map.of())) {
                reader.assign(List.of(tp));
                reader.seekToBeginning(List.of(tp));
                readUntil(reader, group, seen, "the commits of " + group,
                        s -> s.offsets.size() == 2 && s.group != null
                                && s.offsets.get(new TopicPartition(topic, 0)) != null
                                && s.offsets.get(new TopicPartition(topic, 0)).offset() == 5);
                OffsetCommitValue p0 = seen.offsets.get(new TopicPartition(topic, 0));
                checkEq(5L, p0.offset(), "committed offset of " + topic + "-0");
                checkEq(0, p0.leaderEpoch(), "leader epoch of " + topic + "-0");
                checkEq("first", p0.metadata(), "metadata of " + topic + "-0");
                check(p0.commitTimestamp() > 0, "commit timestamp %d", p0.commitTimestamp());
                OffsetCommitValue p2 = seen.offsets.get(new TopicPartition(topic, 2));
                check(p2 != null, "no commit of %s-2 in %s", topic, tp);
                checkEq(11L, p2.offset(), "committed offset of " + topic + "-2");
                checkEq(-1, p2.leaderEpoch(), "leader epoch of " + topic + "-2");
                checkEq("", p2.metadata(), "metadata of " + topic + "-2");
                checkEq("consumer", seen.group.protocolType(), "protocol type of " + group);
                check(seen.group.generation() >= 1, "generation %d of %s", seen.group.generation(), group);

                // A consumer at the end of the partition receives the next commit (long poll).
                long before = Support.endOffsets(reader, List.of(tp)).get(tp);
                check(reader.position(tp) >= before, "reader at %d before the end %d", reader.position(tp), before);
                try (KafkaConsumer<byte[], byte[]> committer = Support.consumer(ctx.bootstrap(),
                        Map.of(ConsumerConfig.GROUP_ID_CONFIG, group))) {
                    committer.commitSync(Map.of(new TopicPartition(topic, 1), new OffsetAndMetadata(42, "later")),
                            Support.OP_TIMEOUT);
                }
                readUntil(reader, group, seen, "the later commit of " + group,
                        s -> s.offsets.containsKey(new TopicPartition(topic, 1)));
                OffsetCommitValue p1 = seen.offsets.get(new TopicPartition(topic, 1));
                checkEq(42L, p1.offset(), "committed offset of " + topic + "-1");
                checkEq("later", p1.metadata(), "metadata of " + topic + "-1");
                long after = Support.endOffsets(reader, List.of(tp)).get(tp);
                check(after > before, "high watermark of %s did not advance: %d then %d", tp, before, after);
            }

            // A pattern subscription that matches the internal topic does not get it: the Java
            // client resolves a Pattern itself and skips internal topics, for both protocols (a
            // regex sent to the broker, SubscriptionPattern, would get it, as on Kafka 4.4).
            for (String protocol : List.of("classic", "consumer")) {
                Map<String, Object> patterned = new HashMap<>();
                patterned.put(ConsumerConfig.GROUP_ID_CONFIG, group + "-pattern-" + protocol);
                patterned.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
                try (KafkaConsumer<byte[], byte[]> c = Support.consumer(ctx.bootstrap(), patterned)) {
                    c.subscribe(Pattern.compile(Pattern.quote(NAME) + "|" + Pattern.quote(topic)));
                    Support.waitUntil("an assignment for the " + protocol + " pattern subscription", Groups.SETTLE, () -> {
                        c.poll(Duration.ofMillis(100));
                        return c.assignment().size() == 3;
                    });
                    Set<String> topics = new HashSet<>();
                    c.assignment().forEach(p -> topics.add(p.topic()));
                    checkEq(Set.of(topic), topics, protocol + ": topics assigned to ^(" + NAME + "|" + topic + ")$");
                }
            }

            // Writes are refused as Kafka refuses them.
            awaitFailure(admin.createTopics(List.of(new NewTopic(NAME, 1, (short) 1))).all(),
                    TopicExistsException.class, "createTopics " + NAME);
            try (KafkaProducer<byte[], byte[]> producer = Support.producer(ctx.bootstrap(), Map.of(
                    ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false, ProducerConfig.ACKS_CONFIG, "1",
                    ProducerConfig.RETRIES_CONFIG, 0, ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 20000,
                    ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000, ProducerConfig.LINGER_MS_CONFIG, 0))) {
                awaitFailure(producer.send(new ProducerRecord<>(NAME, tp.partition(), "k".getBytes(), "v".getBytes())),
                        InvalidTopicException.class, "produce to " + tp);
            }
        }
    }

    interface Done {
        boolean test(Seen seen);
    }

    /** Polls {@code reader}, decoding every record of {@code group}, until {@code done} holds. */
    static void readUntil(KafkaConsumer<byte[], byte[]> reader, String group, Seen seen, String what, Done done) {
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
        while (!done.test(seen)) {
            check(System.nanoTime() < deadline, "timed out after %s reading %s from %s (saw %d offsets, group %s)",
                    READ_TIMEOUT, what, NAME, seen.offsets.size(), seen.group);
            for (ConsumerRecord<byte[], byte[]> r : reader.poll(Duration.ofMillis(500))) {
                check(r.key() != null, "record at %d of %s has no key", r.offset(), NAME);
                CoordinatorRecord record = serde.deserialize(ByteBuffer.wrap(r.key()),
                        r.value() == null ? null : ByteBuffer.wrap(r.value()));
                if (record.key() instanceof OffsetCommitKey key && key.group().equals(group)) {
                    TopicPartition committed = new TopicPartition(key.topic(), key.partition());
                    if (record.value() == null) {
                        seen.offsets.remove(committed);
                    } else {
                        seen.offsets.put(committed, (OffsetCommitValue) record.value().message());
                    }
                } else if (record.key() instanceof GroupMetadataKey key && key.group().equals(group)) {
                    seen.group = record.value() == null ? null : (GroupMetadataValue) record.value().message();
                }
            }
        }
    }
}
