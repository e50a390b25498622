package kaas.compat;

import static kaas.compat.Support.OP_TIMEOUT;
import static kaas.compat.Support.admin;
import static kaas.compat.Support.await;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;
import static kaas.compat.Support.consumer;
import static kaas.compat.Support.createTopic;
import static kaas.compat.Support.partitions;
import static kaas.compat.Support.pollExactly;
import static kaas.compat.Support.producer;
import static kaas.compat.Support.uniqueTopic;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

import kaas.compat.Records.Sent;

/** Produce/consume scenarios: codecs, acks, fetch limits, long polling, idempotence. */
final class ProduceConsume {
    private ProduceConsume() {}

    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    /** Sends every record, flushes, and returns what the producer reported for each. */
    static List<Sent> produce(KafkaProducer<byte[], byte[]> producer, List<ProducerRecord<byte[], byte[]>> records) {
        List<Sent> sent = new ArrayList<>(records.size());
        List<Future<RecordMetadata>> futures = new ArrayList<>(records.size());
        for (ProducerRecord<byte[], byte[]> r : records) {
            sent.add(new Sent(r));
            futures.add(producer.send(r));
        }
        producer.flush();
        for (int i = 0; i < sent.size(); i++) sent.get(i).acked(await(futures.get(i), "send #" + i));
        return sent;
    }

    static List<Sent> produce(String bootstrap, Map<String, Object> overrides, List<ProducerRecord<byte[], byte[]>> records) {
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, overrides)) {
            return produce(p, records);
        }
    }

    /** Reads every partition of the topic from the beginning; expects exactly {@code want} records. */
    static List<ConsumerRecord<byte[], byte[]>> consumeAll(String bootstrap, String topic, int partitions, int want,
                                                           Map<String, Object> overrides) {
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, overrides)) {
            List<TopicPartition> tps = partitions(topic, partitions);
            c.assign(tps);
            c.seekToBeginning(tps);
            return pollExactly(c, want, Duration.ofSeconds(90), 300);
        }
    }

    static void checkEndOffsets(String bootstrap, String topic, List<Sent> sent, int partitions) {
        Map<Integer, List<Sent>> byP = Records.byPartition(sent);
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, Map.of())) {
            Map<TopicPartition, Long> end = c.endOffsets(partitions(topic, partitions), OP_TIMEOUT);
            Map<TopicPartition, Long> begin = c.beginningOffsets(partitions(topic, partitions), OP_TIMEOUT);
            for (int p = 0; p < partitions; p++) {
                TopicPartition tp = new TopicPartition(topic, p);
                long n = byP.getOrDefault(p, List.of()).size();
                checkEq(n, end.get(tp), "end offset of " + tp);
                checkEq(0L, begin.get(tp), "beginning offset of " + tp);
            }
        }
    }

    /**
     * Thousands of random records (null/empty keys and values, headers, explicit CreateTime),
     * once per codec (none gzip snappy lz4 zstd) and per acks setting (the producer defaults,
     * i.e. idempotent acks=all; acks=1; acks=0), read back with assign + seekToBeginning and
     * compared byte for byte, offsets dense, end offsets equal to the counts.
     */
    static void produceConsume(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            for (String codec : CODECS) {
                for (String acks : new String[] {"default", "1", "0"}) {
                    String what = "compression=" + codec + " acks=" + acks;
                    String topic = uniqueTopic("pc-" + codec + "-" + acks);
                    createTopic(admin, topic, 3, Map.of());
                    Map<String, Object> o = new HashMap<>();
                    o.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
                    if (!acks.equals("default")) {
                        o.put(ProducerConfig.ACKS_CONFIG, acks);
                        o.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false);
                    }
                    var records = Records.generate(ctx.rnd(what), topic, 3, ctx.records());
                    // The producer stays open until the records were read back: with acks=0
                    // nothing confirms delivery, so closing early could hide a lost request.
                    try (KafkaProducer<byte[], byte[]> producer = producer(ctx.bootstrap(), o)) {
                        List<Sent> sent = produce(producer, records);
                        if (!acks.equals("0")) {
                            for (Sent s : sent) check(s.offset >= 0, "%s: the producer got no offset back", what);
                        }
                        var consumed = consumeAll(ctx.bootstrap(), topic, 3, sent.size(), Map.of());
                        Records.verify(what, sent, consumed, 0);
                        checkEndOffsets(ctx.bootstrap(), topic, sent, 3);
                    }
                    System.out.printf("  %s: %d records verified%n", what, records.size());
                }
            }
        }
    }

    /**
     * Fetch byte limits: with max.partition.fetch.bytes and fetch.max.bytes far below the size of
     * single records, the broker must still return the first batch of each fetch so the consumer
     * makes progress; also a moderate fetch.max.bytes over several partitions.
     */
    static void fetchLimits(Scenarios.Ctx ctx) {
        SplittableRandom rnd = ctx.rnd("fetch-limits");
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("fetch-limits");
            createTopic(admin, topic, 3, Map.of());
            List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
            for (int i = 0; i < 300; i++) {
                int size = i % 10 == 0 ? 200_000 + rnd.nextInt(100_000) : 1 + rnd.nextInt(3000);
                records.add(new ProducerRecord<>(topic, i % 3, null, Records.bytes(rnd, 8), Records.bytes(rnd, size)));
            }
            List<Sent> sent = produce(ctx.bootstrap(), Map.of(ProducerConfig.LINGER_MS_CONFIG, 20), records);

            var tiny = Map.<String, Object>of(
                    ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 1,
                    ConsumerConfig.FETCH_MAX_BYTES_CONFIG, 1,
                    ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 7);
            Records.verify("tiny fetch limits", sent, consumeAll(ctx.bootstrap(), topic, 3, sent.size(), tiny), 0);

            var moderate = Map.<String, Object>of(
                    ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 40_000,
                    ConsumerConfig.FETCH_MAX_BYTES_CONFIG, 100_000);
            Records.verify("moderate fetch limits", sent, consumeAll(ctx.bootstrap(), topic, 3, sent.size(), moderate), 0);
        }
    }

    /**
     * Long polling: fetch.min.bytes far above what is available and fetch.max.wait.ms=500. The
     * broker must answer after max wait with whatever it has (nothing, then a few records), and
     * records produced while the consumer waits must arrive. Only content is asserted, not timing.
     */
    static void longPoll(Scenarios.Ctx ctx) throws Exception {
        SplittableRandom rnd = ctx.rnd("long-poll");
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("long-poll");
            createTopic(admin, topic, 1, Map.of());
            var cfg = Map.<String, Object>of(
                    ConsumerConfig.FETCH_MIN_BYTES_CONFIG, 1_000_000,
                    ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 500);
            TopicPartition tp = new TopicPartition(topic, 0);
            try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(), cfg);
                 KafkaProducer<byte[], byte[]> p = producer(ctx.bootstrap(), Map.of())) {
                c.assign(List.of(tp));
                c.seekToBeginning(List.of(tp));
                long t0 = System.nanoTime();
                int empty = 0;
                while (System.nanoTime() - t0 < TimeUnit.MILLISECONDS.toNanos(1500)) {
                    empty += c.poll(Duration.ofMillis(300)).count();
                }
                checkEq(0, empty, "records polled from an empty topic");
                checkEq(0L, c.position(tp, OP_TIMEOUT), "position on an empty topic");

                List<ProducerRecord<byte[], byte[]>> first = new ArrayList<>();
                for (int i = 0; i < 20; i++) first.add(new ProducerRecord<>(topic, 0, null, Records.bytes(rnd, 4), Records.bytes(rnd, 50)));
                List<Sent> sent = new ArrayList<>(produce(p, first));
                Records.verify("small batch under fetch.min.bytes", sent, pollExactly(c, 20, Duration.ofSeconds(20), 0), 0);

                // Records produced in bursts while the consumer is parked in a long poll.
                List<ProducerRecord<byte[], byte[]>> later = new ArrayList<>();
                for (int i = 0; i < 100; i++) later.add(new ProducerRecord<>(topic, 0, null, Records.bytes(rnd, 4), Records.bytes(rnd, 100)));
                AtomicReference<List<Sent>> laterSent = new AtomicReference<>();
                AtomicReference<Throwable> err = new AtomicReference<>();
                Thread t = new Thread(() -> {
                    try {
                        List<Sent> acc = new ArrayList<>();
                        for (int b = 0; b < 5; b++) {
                            Support.sleep(250);
                            acc.addAll(produce(p, later.subList(b * 20, b * 20 + 20)));
                        }
                        laterSent.set(acc);
                    } catch (Throwable e) {
                        err.set(e);
                    }
                });
                t.start();
                var got = pollExactly(c, 100, Duration.ofSeconds(30), 0);
                t.join(30_000);
                if (err.get() != null) throw new Support.Failure("producing during long poll failed: " + err.get(), err.get());
                check(laterSent.get() != null, "producer thread did not finish");
                Records.verify("records produced during long poll", laterSent.get(), got, 20);
            }
        }
    }

    /**
     * Idempotent producer (InitProducerId + sequence numbers): many small batches in flight
     * (max.in.flight=5, tiny batch.size) over three partitions, then a second producer instance
     * (a new producer id) appending to the same partitions. Offsets must be dense, with no
     * duplicates and no reordering. A third producer runs with a request timeout shorter than
     * the broker's append latency may be, so the client may resend batches; the broker must
     * de-duplicate them (DUPLICATE_SEQUENCE is reported to the client as success).
     */
    static void idempotence(Scenarios.Ctx ctx) {
        SplittableRandom rnd = ctx.rnd("idempotence");
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("idempotence");
            createTopic(admin, topic, 3, Map.of());
            Map<String, Object> o = Map.of(
                    ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
                    "max.in.flight.requests.per.connection", 5,
                    ProducerConfig.BATCH_SIZE_CONFIG, 512,
                    ProducerConfig.LINGER_MS_CONFIG, 0);
            List<Sent> all = new ArrayList<>();
            int n = Math.max(ctx.records(), 1000);
            for (int round = 0; round < 2; round++) {
                List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    byte[] v = String.format("round-%d-seq-%06d", round, i).getBytes();
                    recs.add(new ProducerRecord<>(topic, i % 3, null, Records.bytes(rnd, 6), v));
                }
                all.addAll(produce(ctx.bootstrap(), o, recs));
            }
            Map<String, Object> impatient = new HashMap<>(o);
            impatient.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 100);
            impatient.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 120_000);
            impatient.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, 10);
            List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                recs.add(new ProducerRecord<>(topic, i % 3, null, Records.bytes(rnd, 6), Records.bytes(rnd, 2000)));
            }
            all.addAll(produce(ctx.bootstrap(), impatient, recs));

            Map<Integer, Long> next = new HashMap<>();
            for (Sent s : all) {
                long want = next.getOrDefault(s.partition, 0L);
                check(s.offset == want, "partition %d: producer got offset %d, expected %d", s.partition, s.offset, want);
                next.put(s.partition, want + 1);
            }
            var consumed = consumeAll(ctx.bootstrap(), topic, 3, all.size(), Map.of());
            Records.verify("idempotent producers", all, consumed, 0);
            checkEndOffsets(ctx.bootstrap(), topic, all, 3);
        }
    }

    /**
     * Metadata auto-creation: a producer sending to a topic that does not exist gets it created
     * by the broker (auto.create.topics.enable defaults to true); a consumer with
     * allow.auto.create.topics=false must not create a topic by asking for its partitions.
     */
    static void autoCreate(Scenarios.Ctx ctx) {
        SplittableRandom rnd = ctx.rnd("auto-create");
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("auto-create");
            List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
            for (int i = 0; i < 50; i++) recs.add(new ProducerRecord<>(topic, 0, null, Records.bytes(rnd, 5), Records.bytes(rnd, 30)));
            List<Sent> sent = produce(ctx.bootstrap(), Map.of(), recs);
            var desc = await(admin.describeTopics(List.of(topic)).allTopicNames(), "describeTopics " + topic).get(topic);
            int parts = desc.partitions().size();
            check(parts >= 1, "auto-created topic has %d partitions", parts);
            Records.verify("auto-created topic", sent, consumeAll(ctx.bootstrap(), topic, parts, sent.size(), Map.of()), 0);

            String missing = uniqueTopic("not-auto-created");
            try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(),
                    Map.of(ConsumerConfig.ALLOW_AUTO_CREATE_TOPICS_CONFIG, false))) {
                var infos = c.partitionsFor(missing, Duration.ofSeconds(5));
                check(infos == null || infos.isEmpty(), "partitionsFor(%s) returned %s", missing, infos);
            }
            Support.awaitFailure(admin.describeTopics(List.of(missing)).allTopicNames(),
                    org.apache.kafka.common.errors.UnknownTopicOrPartitionException.class,
                    "describeTopics of a topic a consumer asked about with allow.auto.create.topics=false");
        }
    }

    /**
     * Seeking with a leader epoch (seek(tp, OffsetAndMetadata(offset, epoch))) makes the Java
     * consumer validate its position with OffsetForLeaderEpoch before fetching; consumption must
     * continue from that offset. Also after the partition count changes (a metadata update).
     */
    static void seekWithLeaderEpoch(Scenarios.Ctx ctx) {
        SplittableRandom rnd = ctx.rnd("seek-epoch");
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("seek-epoch");
            createTopic(admin, topic, 1, Map.of());
            List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
            for (int i = 0; i < 200; i++) recs.add(new ProducerRecord<>(topic, 0, null, Records.bytes(rnd, 5), Records.bytes(rnd, 64)));
            List<Sent> sent = produce(ctx.bootstrap(), Map.of(), recs);
            var consumed = consumeAll(ctx.bootstrap(), topic, 1, 200, Map.of());
            Records.verify("seek-epoch initial read", sent, consumed, 0);
            Optional<Integer> epoch = consumed.get(120).leaderEpoch();
            check(epoch.isPresent(), "record at offset 120 has no leader epoch");

            TopicPartition tp = new TopicPartition(topic, 0);
            try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(), Map.of(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none"))) {
                c.assign(List.of(tp));
                c.seek(tp, new OffsetAndMetadata(120, epoch, ""));
                var got = pollExactly(c, 80, Duration.ofSeconds(30), 200);
                Records.verify("after seek with epoch", sent.subList(120, 200), got, 120);

                await(admin.createPartitions(Map.of(topic, org.apache.kafka.clients.admin.NewPartitions.increaseTo(2))).all(),
                        "createPartitions " + topic);
                Support.waitForTopic(admin, topic, 2);
                List<Sent> more = produce(ctx.bootstrap(), Map.of(), List.of(
                        new ProducerRecord<>(topic, 0, null, "k".getBytes(), "after-partition-change".getBytes())));
                c.seek(tp, new OffsetAndMetadata(150, epoch, ""));
                var again = pollExactly(c, 51, Duration.ofSeconds(30), 200);
                List<Sent> want = new ArrayList<>(sent.subList(150, 200));
                want.addAll(more);
                Records.verify("after partition change and seek with epoch", want, again, 150);
            }
        }
    }
}
