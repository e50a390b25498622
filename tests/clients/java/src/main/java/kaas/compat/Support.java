package kaas.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** Assertions, bounded waits and client factories shared by every scenario. */
final class Support {
    /** Upper bound for any single admin/produce future. */
    static final Duration OP_TIMEOUT = Duration.ofSeconds(30);

    private Support() {}

    /** Thrown on any mismatch; the runner prints it and exits 1. */
    static final class Failure extends RuntimeException {
        Failure(String msg) { super(msg); }
        Failure(String msg, Throwable cause) { super(msg, cause); }
    }

    static void check(boolean cond, String fmt, Object... args) {
        if (!cond) throw new Failure(String.format(fmt, args));
    }

    static void checkEq(Object expected, Object actual, String what) {
        if (expected == null ? actual != null : !expected.equals(actual)) {
            throw new Failure(what + ": expected <" + expected + "> but got <" + actual + ">");
        }
    }

    static String uniqueTopic(String scenario) {
        return "java-" + scenario + "-" + Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffffffL);
    }

    // ---- futures -----------------------------------------------------------------------

    static <T> T await(KafkaFuture<T> f, String what) {
        return await((Future<T>) f, what);
    }

    static <T> T await(Future<T> f, String what) {
        try {
            return f.get(OP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            throw new Failure(what + " failed: " + e.getCause(), e.getCause());
        } catch (TimeoutException e) {
            throw new Failure(what + " did not complete within " + OP_TIMEOUT);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure(what + " interrupted");
        }
    }

    /** Waits for a future that must fail with the given exception type; returns that exception. */
    static <E extends Throwable> E awaitFailure(Future<?> f, Class<E> expected, String what) {
        try {
            Object v = f.get(OP_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            throw new Failure(what + ": expected " + expected.getSimpleName() + " but it succeeded with " + v);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (!expected.isInstance(cause)) {
                throw new Failure(what + ": expected " + expected.getSimpleName() + " but got " + cause, cause);
            }
            return expected.cast(cause);
        } catch (TimeoutException e) {
            throw new Failure(what + ": no answer within " + OP_TIMEOUT + " (expected " + expected.getSimpleName() + ")");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure(what + " interrupted");
        }
    }

    /** Polls cond every 100 ms until it holds or the timeout passes. */
    static void waitUntil(String what, Duration timeout, BooleanSupplier cond) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            if (cond.getAsBoolean()) return;
            if (System.nanoTime() > deadline) throw new Failure("timed out after " + timeout + " waiting for " + what);
            sleep(100);
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure("interrupted");
        }
    }

    // ---- clients -----------------------------------------------------------------------

    static Admin admin(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, "kaas-java-admin");
        return Admin.create(p);
    }

    /** A producer with the client's defaults (idempotent, acks=all) plus the given overrides. */
    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, Object> overrides) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "kaas-java-producer");
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60000);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30000);
        p.putAll(overrides);
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    /** A consumer without group.id: only assign/seek, no group coordination, no commits. */
    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Map<String, Object> overrides) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "kaas-java-consumer");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 20000);
        p.putAll(overrides);
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    static void createTopic(Admin admin, String topic, int partitions, Map<String, String> configs) {
        NewTopic nt = new NewTopic(topic, partitions, (short) 1);
        if (configs != null && !configs.isEmpty()) nt.configs(configs);
        await(admin.createTopics(List.of(nt)).all(), "createTopics " + topic);
        waitForTopic(admin, topic, partitions);
    }

    /**
     * Waits until Metadata shows the topic with the given number of partitions, all with a leader,
     * and every partition answers ListOffsets. (Real Kafka may report a leader in Metadata a moment
     * before the partition accepts requests; an acks=0 produce in that window is dropped.)
     */
    static void waitForTopic(Admin admin, String topic, int partitions) {
        waitUntil("topic " + topic + " with " + partitions + " partitions and leaders", Duration.ofSeconds(30), () -> {
            try {
                var d = admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
                return d.partitions().size() == partitions && d.partitions().stream().allMatch(p -> p.leader() != null);
            } catch (Exception e) {
                return false;
            }
        });
        Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
        for (TopicPartition tp : partitions(topic, partitions)) specs.put(tp, OffsetSpec.latest());
        await(admin.listOffsets(specs).all(), "listOffsets on the new partitions of " + topic);
    }

    /**
     * Polls until {@code want} records arrived (or the deadline passes), then keeps polling for
     * {@code settleMs} more to catch unexpected extra records.
     */
    static List<ConsumerRecord<byte[], byte[]>> pollExactly(KafkaConsumer<byte[], byte[]> c, int want,
                                                            Duration timeout, long settleMs) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (out.size() < want && System.nanoTime() < deadline) {
            ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
            rs.forEach(out::add);
        }
        check(out.size() >= want, "consumed only %d of %d records within %s", out.size(), want, timeout);
        long settleEnd = System.nanoTime() + Duration.ofMillis(settleMs).toNanos();
        while (System.nanoTime() < settleEnd) {
            c.poll(Duration.ofMillis(100)).forEach(out::add);
        }
        check(out.size() == want, "consumed %d records but expected exactly %d", out.size(), want);
        return out;
    }

    static Map<TopicPartition, Long> endOffsets(KafkaConsumer<?, ?> c, Collection<TopicPartition> tps) {
        return c.endOffsets(tps, OP_TIMEOUT);
    }

    static List<TopicPartition> partitions(String topic, int n) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < n; i++) tps.add(new TopicPartition(topic, i));
        return tps;
    }

    static String hex(byte[] b) {
        if (b == null) return "null";
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < Math.min(b.length, 16); i++) sb.append(String.format("%02x", b[i]));
        if (b.length > 16) sb.append("...(").append(b.length).append(" bytes)");
        return sb.toString();
    }
}
