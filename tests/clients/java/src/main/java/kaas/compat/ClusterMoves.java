package kaas.compat;

import static kaas.compat.Support.await;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * cluster-moves: an idempotent producer (acks=all) and a classic-protocol group consumer that
 * commits, running at once, for the cluster tests that move partitions and groups between
 * brokers while clients work (tests/partitions_move_between_brokers.rs).
 *
 * <p>Cluster mode, when the system property {@code kaas.cluster.topic} is set (the test's
 * assignment holds the topic; {@code kaas.cluster.group} names the group, {@code
 * kaas.cluster.pace-ms} the pause between two sends, default 4): {@code --records} records
 * {@code java<i>} go round-robin over the topic's partitions. It prints {@code PRODUCING} once the
 * first is acknowledged, then at the end {@code ACKED <partition> <offset> <value>} for every
 * acknowledged record and {@code COMMITTED <partition> <offset>} for the group's last successful
 * commit of each partition: the lines of tests/clients/python/cluster_moves.py's files, which its
 * {@code verify} and {@code consume --check} phases then check against the cluster's logs and
 * committed offsets. It fails unless every record is acknowledged and the consumer read every
 * acknowledged record (other clients may write the same topic; their records are read and
 * committed past, not checked here).
 *
 * <p>Standalone (the scenario suite, no property): the same on a new 6-partition topic and
 * group, with at most 600 records, then checks what only this run can know: every partition's
 * acknowledged offsets are dense from 0, the consumer read each record, and the group's
 * committed offsets are the partitions' end offsets.
 */
final class ClusterMoves {
    private ClusterMoves() {}

    /** Bound on the whole run after the last send. */
    private static final Duration FINISH_WITHIN = Duration.ofSeconds(90);

    record Acked(int partition, long offset, String value) {}

    /** What one run saw: acknowledged records and the group's last commit per partition. */
    record Outcome(List<Acked> acked, Map<Integer, Long> committed) {}

    static void clusterMoves(Scenarios.Ctx ctx) throws Exception {
        String topic = System.getProperty("kaas.cluster.topic");
        if (topic != null) {
            String group = System.getProperty("kaas.cluster.group");
            check(group != null, "kaas.cluster.topic needs kaas.cluster.group");
            long paceMs = Long.parseLong(System.getProperty("kaas.cluster.pace-ms", "4"));
            Outcome outcome = run(ctx.bootstrap(), topic, group, ctx.records(), paceMs, true);
            StringBuilder out = new StringBuilder();
            for (Acked a : outcome.acked()) {
                out.append("ACKED ").append(a.partition()).append(' ').append(a.offset()).append(' ')
                        .append(a.value()).append('\n');
            }
            outcome.committed().forEach((p, o) -> out.append("COMMITTED ").append(p).append(' ').append(o).append('\n'));
            System.out.print(out);
            System.out.flush();
            return;
        }
        standalone(ctx);
    }

    private static void standalone(Scenarios.Ctx ctx) throws Exception {
        String topic = Support.uniqueTopic("cluster-moves");
        String group = Groups.uniqueGroup("cluster-moves");
        int partitions = 6;
        int records = Math.min(ctx.records(), 600);
        try (Admin admin = Support.admin(ctx.bootstrap())) {
            Support.createTopic(admin, topic, partitions, null);
            Outcome outcome = run(ctx.bootstrap(), topic, group, records, 1, false);
            Map<Integer, List<Long>> offsets = new TreeMap<>();
            for (Acked a : outcome.acked()) offsets.computeIfAbsent(a.partition(), p -> new ArrayList<>()).add(a.offset());
            Map<TopicPartition, OffsetAndMetadata> committed = await(
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets");
            for (int p = 0; p < partitions; p++) {
                List<Long> got = offsets.getOrDefault(p, List.of());
                Collections.sort(got);
                List<Long> dense = new ArrayList<>();
                for (long o = 0; o < got.size(); o++) dense.add(o);
                checkEq(dense, got, "acknowledged offsets of partition " + p);
                check(!got.isEmpty(), "partition %d got no records", p);
                OffsetAndMetadata c = committed.get(new TopicPartition(topic, p));
                checkEq((long) got.size(), c == null ? null : c.offset(), "committed offset of partition " + p);
                checkEq((long) got.size(), outcome.committed().get(p), "last commit the consumer saw for partition " + p);
            }
        }
    }

    /**
     * Produces and consumes at once; returns when both are done (or fails). With {@code announce},
     * prints PRODUCING at the first acknowledgement (the cluster test waits for it).
     */
    static Outcome run(String bootstrap, String topic, String group, int records, long paceMs, boolean announce)
            throws Exception {
        List<Acked> acked = Collections.synchronizedList(new ArrayList<>());
        List<String> errors = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean produced = new AtomicBoolean();
        AtomicReference<Throwable> consumerFailed = new AtomicReference<>();
        Map<Integer, Long> committed = Collections.synchronizedMap(new TreeMap<>());
        Set<String> seen = Collections.synchronizedSet(new HashSet<>());
        Thread consumer = new Thread(() -> {
            try {
                consume(bootstrap, topic, group, acked, produced, seen, committed);
            } catch (Throwable t) {
                consumerFailed.set(t);
            }
        }, "cluster-moves-consumer");
        consumer.start();

        Map<String, Object> conf = new HashMap<>();
        conf.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        conf.put(ProducerConfig.ACKS_CONFIG, "all");
        conf.put(ProducerConfig.LINGER_MS_CONFIG, 2);
        conf.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, 1000);
        conf.put(ProducerConfig.CLIENT_ID_CONFIG, "kaas-java-cluster-moves");
        try (KafkaProducer<byte[], byte[]> producer = Support.producer(bootstrap, conf)) {
            int partitions = producer.partitionsFor(topic).size();
            AtomicBoolean announced = new AtomicBoolean();
            for (int i = 0; i < records; i++) {
                String value = "java" + i;
                producer.send(new ProducerRecord<>(topic, i % partitions, null, value.getBytes()), (metadata, error) -> {
                    if (error != null) {
                        errors.add(error.toString());
                        return;
                    }
                    acked.add(new Acked(metadata.partition(), metadata.offset(), value));
                    if (announce && !announced.getAndSet(true)) {
                        System.out.println("PRODUCING");
                        System.out.flush();
                    }
                });
                if (paceMs > 0) Thread.sleep(paceMs);
            }
            producer.flush();
        } finally {
            produced.set(true);
        }
        consumer.join(FINISH_WITHIN.toMillis());
        check(!consumer.isAlive(), "the consumer did not finish within %s", FINISH_WITHIN);
        if (consumerFailed.get() != null) {
            throw new Support.Failure("consumer: " + consumerFailed.get(), consumerFailed.get());
        }
        check(errors.isEmpty(), "%d records failed, first: %s", errors.size(), errors.isEmpty() ? "" : errors.get(0));
        checkEq(records, acked.size(), "acknowledged records");
        return new Outcome(new ArrayList<>(acked), new TreeMap<>(committed));
    }

    /**
     * Consumes in the group, committing what each poll returned, until the producer is done and
     * every record it acknowledged has been read.
     */
    private static void consume(String bootstrap, String topic, String group, List<Acked> acked, AtomicBoolean produced,
                                Set<String> seen, Map<Integer, Long> committed) {
        Map<String, Object> conf = Groups.classic(group);
        conf.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10000);
        conf.put(ConsumerConfig.METADATA_MAX_AGE_CONFIG, 1000);
        conf.put(ConsumerConfig.CLIENT_ID_CONFIG, "kaas-java-cluster-moves");
        try (KafkaConsumer<byte[], byte[]> c = Support.consumer(bootstrap, conf)) {
            c.subscribe(List.of(topic));
            long deadline = Long.MAX_VALUE;
            // Read but not yet committed (a commit that failed is retried with the next one).
            Map<TopicPartition, OffsetAndMetadata> uncommitted = new HashMap<>();
            while (true) {
                if (produced.get() && uncommitted.isEmpty()) {
                    if (deadline == Long.MAX_VALUE) deadline = System.nanoTime() + FINISH_WITHIN.toNanos();
                    List<Acked> done;
                    synchronized (acked) {
                        done = new ArrayList<>(acked);
                    }
                    if (done.stream().allMatch(a -> seen.contains(a.value()))) return;
                    check(System.nanoTime() < deadline, "the consumer read %d of the %d acknowledged records",
                            done.stream().filter(a -> seen.contains(a.value())).count(), done.size());
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    seen.add(new String(r.value()));
                    uncommitted.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                if (uncommitted.isEmpty()) continue;
                try {
                    c.commitSync(uncommitted);
                    uncommitted.forEach((tp, o) -> committed.put(tp.partition(), o.offset()));
                    uncommitted.clear();
                } catch (KafkaException e) {
                    // A rebalance or a coordinator moving under the commit: the records stay
                    // read and the next commit carries them, for the partitions still ours.
                    System.err.println("commit retried: " + e);
                    uncommitted.keySet().retainAll(c.assignment());
                }
            }
        }
    }
}
