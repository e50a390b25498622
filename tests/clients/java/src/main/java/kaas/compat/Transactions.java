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

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;

import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListTransactionsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.header.internals.RecordHeader;

import kaas.compat.Records.Sent;

/**
 * Transactions with the Java client, which speaks Transactions V2 (KIP-890: no
 * AddPartitionsToTxn, an epoch bump at every transaction end) when the broker finalizes the
 * {@code transaction.version} feature at level 2: commit and abort seen through both isolation
 * levels, consume-transform-produce with offsets in the transaction, fencing by a second producer
 * with the same transactional id, the coordinator aborting a transaction that timed out, and the
 * transaction admin APIs.
 */
final class Transactions {
    private Transactions() {}

    /** How long the coordinator may take to abort a timed-out transaction (Kafka's check runs every 10 s by default). */
    static final Duration TIMEOUT_ABORT_LIMIT = Duration.ofSeconds(60);

    static String uniqueTxnId(String name) {
        return "java-txn-" + name + "-" + Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffffffL);
    }

    static KafkaProducer<byte[], byte[]> txnProducer(String bootstrap, String txnId, Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "kaas-java-txn-producer");
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.putAll(extra);
        return producer(bootstrap, p);
    }

    static KafkaConsumer<byte[], byte[]> isolated(String bootstrap, IsolationLevel level) {
        return consumer(bootstrap, Map.of(ConsumerConfig.ISOLATION_LEVEL_CONFIG, level.toString(),
                ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG, 4 << 20));
    }

    /** Sends every record, flushes, and returns them with the partition and offset each got. */
    static List<Sent> sendAll(KafkaProducer<byte[], byte[]> p, List<ProducerRecord<byte[], byte[]>> records, String what) {
        List<Sent> sent = new ArrayList<>();
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (var r : records) {
            sent.add(new Sent(r));
            fs.add(p.send(r));
        }
        p.flush();
        for (int i = 0; i < fs.size(); i++) sent.get(i).acked(await(fs.get(i), what + " record " + i));
        return sent;
    }

    /** Reads every partition of the topic from the beginning until exactly {@code want} records arrived. */
    static List<ConsumerRecord<byte[], byte[]>> readAll(String bootstrap, String topic, int partitions,
                                                        IsolationLevel level, int want) {
        try (KafkaConsumer<byte[], byte[]> c = isolated(bootstrap, level)) {
            c.assign(partitions(topic, partitions));
            c.seekToBeginning(partitions(topic, partitions));
            return pollExactly(c, want, Duration.ofSeconds(90), 1000);
        }
    }

    /**
     * Transactional records leave gaps (one offset per transaction marker), so the consumed
     * records are compared with the sent ones per partition in order at the offsets the producer
     * was told, byte for byte.
     */
    static void verifyAt(String what, List<Sent> sent, List<ConsumerRecord<byte[], byte[]>> consumed) {
        Map<Integer, List<Sent>> expected = Records.byPartition(sent);
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = new HashMap<>();
        for (var r : consumed) got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r);
        check(expected.keySet().containsAll(got.keySet()),
                "%s: records consumed from partitions %s but expected only %s", what, got.keySet(), expected.keySet());
        for (var e : expected.entrySet()) {
            List<Sent> exp = e.getValue();
            var act = got.getOrDefault(e.getKey(), List.of());
            check(exp.size() == act.size(), "%s: partition %d: expected %d records, consumed %d (offsets %s)",
                    what, e.getKey(), exp.size(), act.size(), act.stream().map(ConsumerRecord::offset).toList());
            for (int i = 0; i < exp.size(); i++) {
                Records.compare(what + " partition " + e.getKey() + " #" + i, exp.get(i), act.get(i), exp.get(i).offset);
            }
        }
    }

    static Map<Integer, Long> latest(Admin admin, String topic, int partitions, IsolationLevel level) {
        Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
        for (TopicPartition tp : partitions(topic, partitions)) specs.put(tp, OffsetSpec.latest());
        Map<Integer, Long> out = new TreeMap<>();
        await(admin.listOffsets(specs, new ListOffsetsOptions(level)).all(), "listOffsets latest " + level)
                .forEach((tp, info) -> out.put(tp.partition(), info.offset()));
        return out;
    }

    static Map<Integer, Long> consumerEnds(String bootstrap, String topic, int partitions, IsolationLevel level) {
        try (KafkaConsumer<byte[], byte[]> c = isolated(bootstrap, level)) {
            Map<Integer, Long> out = new TreeMap<>();
            c.endOffsets(partitions(topic, partitions), OP_TIMEOUT).forEach((tp, o) -> out.put(tp.partition(), o));
            return out;
        }
    }

    /** Waits until the last stable offset caught up with the high watermark on every partition (all markers written). */
    static Map<Integer, Long> waitStable(Admin admin, String topic, int partitions) {
        Map<Integer, Long>[] last = new Map[2];
        try {
            Support.waitUntil("read_committed end offsets of " + topic + " to reach the high watermarks", OP_TIMEOUT, () -> {
                last[0] = latest(admin, topic, partitions, IsolationLevel.READ_COMMITTED);
                last[1] = latest(admin, topic, partitions, IsolationLevel.READ_UNCOMMITTED);
                return last[0].equals(last[1]);
            });
        } catch (Support.Failure f) {
            throw new Support.Failure(f.getMessage() + " (read_committed " + last[0] + ", read_uncommitted " + last[1] + ")");
        }
        return last[1];
    }

    static TransactionDescription describeTxn(Admin admin, String txnId) {
        return await(admin.describeTransactions(List.of(txnId)).description(txnId), "describeTransactions " + txnId);
    }

    static TransactionDescription waitTxnState(Admin admin, String txnId, TransactionState want, Duration limit) {
        TransactionDescription[] last = {null};
        try {
            Support.waitUntil("transaction " + txnId + " to reach " + want, limit, () -> {
                last[0] = describeTxn(admin, txnId);
                return last[0].state() == want;
            });
        } catch (Support.Failure f) {
            throw new Support.Failure(f.getMessage() + " (last: " + last[0] + ")");
        }
        return last[0];
    }

    /** The exception itself or one of its causes of the given types, or null. */
    static Throwable findCause(Throwable t, Class<?>... types) {
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            for (Class<?> k : types) if (k.isInstance(c)) return c;
        }
        return null;
    }

    static int maxTransactionVersion(Admin admin) {
        Map<String, FinalizedVersionRange> fin = await(admin.describeFeatures().featureMetadata(), "describeFeatures")
                .finalizedFeatures();
        FinalizedVersionRange tv = fin.get("transaction.version");
        return tv == null ? 0 : tv.maxVersionLevel();
    }

    // ---- txn-commit-abort ------------------------------------------------------------------

    /** Random records for one transaction, the first three forced onto partitions 0, 1 and 2. */
    static List<ProducerRecord<byte[], byte[]>> txnRecords(SplittableRandom rnd, String topic, int n, String tag) {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        int i = 0;
        for (var r : Records.generate(rnd, topic, 3, n)) {
            Integer partition = i < 3 ? Integer.valueOf(i) : r.partition();
            var rec = new ProducerRecord<>(topic, partition, r.timestamp(), r.key(), r.value(), r.headers());
            rec.headers().add(new RecordHeader("txn", tag.getBytes(StandardCharsets.UTF_8)));
            out.add(rec);
            i++;
        }
        return out;
    }

    /**
     * A committed transaction over three partitions, an aborted one and another committed one
     * (random keys, values and headers): read_committed consumers see exactly the committed
     * records at the offsets the producer was told, read_uncommitted ones all of them; while the
     * third transaction is open the read_committed end offset of each partition is that
     * transaction's first offset there; afterwards both isolation levels report the same end
     * offsets, records plus one marker per transaction and partition. Each transaction end bumps
     * the producer epoch (KIP-890), which describeTransactions shows.
     */
    static void commitAbort(Scenarios.Ctx ctx) {
        SplittableRandom rnd = ctx.rnd("txn-commit-abort");
        int n = Math.max(30, Math.min(ctx.records() / 10, 200));
        try (Admin admin = admin(ctx.bootstrap())) {
            checkEq(2, maxTransactionVersion(admin), "finalized transaction.version feature level");
            String topic = uniqueTopic("txn-commit-abort");
            createTopic(admin, topic, 3, Map.of());
            String txnId = uniqueTxnId("commit-abort");
            List<Sent> committed = new ArrayList<>();
            List<Sent> all = new ArrayList<>();
            List<Integer> epochs = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> p = txnProducer(ctx.bootstrap(), txnId, Map.of())) {
                p.initTransactions();

                p.beginTransaction();
                List<Sent> first = sendAll(p, txnRecords(rnd, topic, n, "first"), "first transaction");
                p.commitTransaction();
                committed.addAll(first);
                all.addAll(first);
                epochs.add(waitTxnState(admin, txnId, TransactionState.COMPLETE_COMMIT, OP_TIMEOUT).producerEpoch());

                p.beginTransaction();
                List<Sent> aborted = sendAll(p, txnRecords(rnd, topic, n / 2, "aborted"), "aborted transaction");
                p.abortTransaction();
                all.addAll(aborted);
                epochs.add(waitTxnState(admin, txnId, TransactionState.COMPLETE_ABORT, OP_TIMEOUT).producerEpoch());

                Map<Integer, Long> before = waitStable(admin, topic, 3);
                p.beginTransaction();
                List<Sent> third = sendAll(p, txnRecords(rnd, topic, n, "third"), "third transaction");
                // Open: read_committed stops at the open transaction's first offset on each partition.
                Map<Integer, Long> firstOffsets = new TreeMap<>();
                Map<Integer, Long> lastOffsets = new TreeMap<>();
                for (Sent s : third) {
                    firstOffsets.merge(s.partition, s.offset, Math::min);
                    lastOffsets.merge(s.partition, s.offset + 1, Math::max);
                }
                checkEq(before, firstOffsets, "first offsets of the open transaction (= end offsets before it)");
                checkEq(firstOffsets, latest(admin, topic, 3, IsolationLevel.READ_COMMITTED),
                        "listOffsets latest read_committed while a transaction is open");
                checkEq(firstOffsets, consumerEnds(ctx.bootstrap(), topic, 3, IsolationLevel.READ_COMMITTED),
                        "consumer endOffsets read_committed while a transaction is open");
                checkEq(lastOffsets, latest(admin, topic, 3, IsolationLevel.READ_UNCOMMITTED),
                        "listOffsets latest read_uncommitted while a transaction is open");
                checkEq(TransactionState.ONGOING, describeTxn(admin, txnId).state(), "state of the open transaction");
                p.commitTransaction();
                committed.addAll(third);
                all.addAll(third);
                epochs.add(waitTxnState(admin, txnId, TransactionState.COMPLETE_COMMIT, OP_TIMEOUT).producerEpoch());
            }
            check(epochs.get(0) < epochs.get(1) && epochs.get(1) < epochs.get(2),
                    "producer epoch after each transaction end should rise (Transactions V2), got %s", epochs);

            Map<Integer, Long> ends = waitStable(admin, topic, 3);
            Map<Integer, Long> want = new TreeMap<>();
            for (Sent s : all) want.merge(s.partition, 1L, Long::sum);
            for (int part = 0; part < 3; part++) want.merge(part, 3L, Long::sum); // three markers each
            checkEq(want, ends, "end offsets (records + one marker per transaction)");
            checkEq(ends, consumerEnds(ctx.bootstrap(), topic, 3, IsolationLevel.READ_COMMITTED),
                    "consumer endOffsets read_committed after all transactions ended");
            checkEq(ends, consumerEnds(ctx.bootstrap(), topic, 3, IsolationLevel.READ_UNCOMMITTED),
                    "consumer endOffsets read_uncommitted after all transactions ended");

            verifyAt("read_committed", committed,
                    readAll(ctx.bootstrap(), topic, 3, IsolationLevel.READ_COMMITTED, committed.size()));
            verifyAt("read_uncommitted", all,
                    readAll(ctx.bootstrap(), topic, 3, IsolationLevel.READ_UNCOMMITTED, all.size()));
            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics " + topic);
        }
    }

    // ---- txn-consume-transform-produce -----------------------------------------------------

    static final int CTP_PER_PARTITION = 10;

    static void produceInput(String bootstrap, String topic, int round) {
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, Map.of())) {
            List<ProducerRecord<byte[], byte[]>> rs = new ArrayList<>();
            for (int part = 0; part < 3; part++) {
                for (int i = 0; i < CTP_PER_PARTITION; i++) {
                    String v = "in-" + part + "-" + (round * CTP_PER_PARTITION + i);
                    rs.add(new ProducerRecord<>(topic, part, ("k" + i).getBytes(StandardCharsets.UTF_8),
                            v.getBytes(StandardCharsets.UTF_8)));
                }
            }
            sendAll(p, rs, "input round " + round);
        }
    }

    static List<ConsumerRecord<byte[], byte[]>> pollN(KafkaConsumer<byte[], byte[]> c, int want, String what) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (out.size() < want && System.nanoTime() < deadline) c.poll(Duration.ofMillis(200)).forEach(out::add);
        check(out.size() == want, "%s: polled %d records, expected %d", what, out.size(), want);
        return out;
    }

    /** Writes the transformed records into the open transaction; returns the offsets to commit. */
    static Map<TopicPartition, OffsetAndMetadata> transform(KafkaProducer<byte[], byte[]> p,
                                                            List<ConsumerRecord<byte[], byte[]>> in, String out) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (var r : in) {
            var rec = new ProducerRecord<>(out, r.partition(), r.key(), transformed(r.value()));
            rec.headers().add("src-offset", Long.toString(r.offset()).getBytes(StandardCharsets.UTF_8));
            fs.add(p.send(rec));
            offsets.merge(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1, "ctp"),
                    (a, b) -> a.offset() >= b.offset() ? a : b);
        }
        p.flush();
        for (var f : fs) await(f, "send a transformed record");
        return offsets;
    }

    static byte[] transformed(byte[] v) {
        return ("out:" + new String(v, StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8);
    }

    static Map<Integer, Long> asPartitionMap(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<Integer, Long> out = new TreeMap<>();
        m.forEach((tp, o) -> out.put(tp.partition(), o.offset()));
        return out;
    }

    static void waitCommitted(Admin admin, String group, String topic, Map<Integer, Long> want, String what) {
        Map<Integer, Long>[] last = new Map[1];
        try {
            Support.waitUntil(what, OP_TIMEOUT, () -> {
                last[0] = Groups.committed(admin, group, topic);
                return last[0].equals(want);
            });
        } catch (Support.Failure f) {
            throw new Support.Failure(f.getMessage() + " (committed " + last[0] + ", expected " + want + ")");
        }
    }

    /** Values by partition, in offset order. */
    static Map<Integer, List<String>> values(List<ConsumerRecord<byte[], byte[]>> rs) {
        Map<Integer, List<String>> out = new TreeMap<>();
        for (var r : rs) out.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(new String(r.value(), StandardCharsets.UTF_8));
        return out;
    }

    /**
     * A classic group member reads an input topic (read_committed) and writes transformed records
     * to an output topic in a transaction with {@code sendOffsetsToTransaction(offsets,
     * consumer.groupMetadata())}. A committed round makes the sent offsets the group's committed
     * offsets; an aborted round leaves them and hides its output from read_committed; the member
     * seeks back to the committed offsets and commits that input again. In the end the
     * read_committed output holds every input record exactly once, in order, and the group's
     * offsets are the end of the input.
     */
    static void consumeTransformProduce(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            String in = uniqueTopic("txn-ctp-in");
            String out = uniqueTopic("txn-ctp-out");
            String group = Groups.uniqueGroup("txn-ctp");
            createTopic(admin, in, 3, Map.of());
            createTopic(admin, out, 3, Map.of());
            produceInput(ctx.bootstrap(), in, 0);
            int perRound = 3 * CTP_PER_PARTITION;

            Map<String, Object> cc = new HashMap<>(Groups.classic(group));
            cc.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
            try (KafkaConsumer<byte[], byte[]> c = consumer(ctx.bootstrap(), cc);
                 KafkaProducer<byte[], byte[]> p = txnProducer(ctx.bootstrap(), uniqueTxnId("ctp"), Map.of())) {
                p.initTransactions();
                c.subscribe(List.of(in));

                // Round 1: committed.
                var r1 = pollN(c, perRound, "round 1 input");
                p.beginTransaction();
                var o1 = transform(p, r1, out);
                p.sendOffsetsToTransaction(o1, c.groupMetadata());
                p.commitTransaction();
                Map<Integer, Long> want1 = asPartitionMap(o1);
                checkEq(Map.of(0, 10L, 1, 10L, 2, 10L), want1, "offsets sent in round 1");
                waitCommitted(admin, group, in, want1, "the group's offsets after the committed round 1");

                // Round 2: aborted.
                produceInput(ctx.bootstrap(), in, 1);
                var r2 = pollN(c, perRound, "round 2 input");
                p.beginTransaction();
                var o2 = transform(p, r2, out);
                p.sendOffsetsToTransaction(o2, c.groupMetadata());
                p.abortTransaction();
                waitStable(admin, out, 3);
                Support.sleep(500);
                checkEq(want1, Groups.committed(admin, group, in), "the group's offsets after the aborted round 2");
                Map<TopicPartition, OffsetAndMetadata> seen = c.committed(Set.copyOf(partitions(in, 3)), OP_TIMEOUT);
                for (var e : seen.entrySet()) {
                    check(e.getValue() != null && e.getValue().offset() == want1.get(e.getKey().partition()),
                            "consumer.committed(%s) after the aborted round: %s", e.getKey(), e.getValue());
                }
                checkEq(perRound, readAll(ctx.bootstrap(), out, 3, IsolationLevel.READ_COMMITTED, perRound).size(),
                        "read_committed output after the aborted round");

                // Round 3: back to the committed offsets, the same input again, committed.
                for (var e : seen.entrySet()) c.seek(e.getKey(), e.getValue().offset());
                var r3 = pollN(c, perRound, "round 3 input (after seeking back)");
                checkEq(values(r2), values(r3), "input re-read after the abort");
                p.beginTransaction();
                var o3 = transform(p, r3, out);
                p.sendOffsetsToTransaction(o3, c.groupMetadata());
                p.commitTransaction();
                Map<Integer, Long> want3 = asPartitionMap(o3);
                checkEq(Map.of(0, 20L, 1, 20L, 2, 20L), want3, "offsets sent in round 3");
                waitCommitted(admin, group, in, want3, "the group's offsets after the committed round 3");
            }

            waitStable(admin, out, 3);
            var visible = values(readAll(ctx.bootstrap(), out, 3, IsolationLevel.READ_COMMITTED, 2 * perRound));
            Map<Integer, List<String>> want = new TreeMap<>();
            for (int part = 0; part < 3; part++) {
                List<String> vs = new ArrayList<>();
                for (int i = 0; i < 2 * CTP_PER_PARTITION; i++) vs.add("out:in-" + part + "-" + i);
                want.put(part, vs);
            }
            checkEq(want, visible, "read_committed output (every input record exactly once, in order)");
            checkEq(3 * perRound, readAll(ctx.bootstrap(), out, 3, IsolationLevel.READ_UNCOMMITTED, 3 * perRound).size(),
                    "read_uncommitted output (the aborted round included)");
            await(admin.deleteTopics(List.of(in, out)).all(), "deleteTopics");
        }
    }

    // ---- txn-fencing -----------------------------------------------------------------------

    static List<ProducerRecord<byte[], byte[]>> simple(String topic, String tag, int n) {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            out.add(new ProducerRecord<>(topic, 0, ("k" + i).getBytes(StandardCharsets.UTF_8),
                    (tag + "-" + i).getBytes(StandardCharsets.UTF_8)));
        }
        return out;
    }

    /**
     * A producer's transaction is open when a second producer with the same transactional id
     * calls initTransactions: that aborts the open transaction and fences the first producer,
     * whose next send and commit fail (ProducerFencedException, or InvalidProducerEpochException),
     * while the second producer's transaction commits. read_committed sees only the second
     * producer's records; nothing the fenced producer sent after the fence was appended.
     */
    static void fencing(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("txn-fencing");
            createTopic(admin, topic, 1, Map.of());
            String txnId = uniqueTxnId("fencing");
            List<Sent> firstSent;
            List<Sent> secondSent;
            try (KafkaProducer<byte[], byte[]> p1 = txnProducer(ctx.bootstrap(), txnId, Map.of())) {
                p1.initTransactions();
                p1.beginTransaction();
                firstSent = sendAll(p1, simple(topic, "first", 5), "first producer");
                checkEq(TransactionState.ONGOING, describeTxn(admin, txnId).state(), "state before the second producer");
                long pid = describeTxn(admin, txnId).producerId();

                try (KafkaProducer<byte[], byte[]> p2 = txnProducer(ctx.bootstrap(), txnId, Map.of())) {
                    p2.initTransactions();
                    TransactionDescription d = describeTxn(admin, txnId);
                    checkEq(pid, d.producerId(), "producer id after the second initTransactions");

                    Throwable sendErr = null;
                    try {
                        p1.send(new ProducerRecord<>(topic, 0, null, "fenced".getBytes(StandardCharsets.UTF_8)))
                                .get(OP_TIMEOUT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
                    } catch (Exception e) {
                        sendErr = e;
                    }
                    check(sendErr != null, "the fenced producer's send succeeded");
                    Throwable commitErr = null;
                    try {
                        p1.commitTransaction();
                    } catch (Exception e) {
                        commitErr = e;
                    }
                    check(commitErr != null, "the fenced producer's commit succeeded");
                    // Kafka 4.4 (Transactions V2) answers both with INVALID_PRODUCER_EPOCH.
                    check(findCause(sendErr, ProducerFencedException.class, InvalidProducerEpochException.class) != null,
                            "the fenced producer's send failed with neither ProducerFencedException nor InvalidProducerEpochException: %s",
                            sendErr);
                    check(findCause(commitErr, ProducerFencedException.class, InvalidProducerEpochException.class) != null,
                            "the fenced producer's commit failed with neither ProducerFencedException nor InvalidProducerEpochException: %s",
                            commitErr);
                    System.err.println("txn-fencing: fenced producer's send failed with " + sendErr
                            + "; commit with " + commitErr);

                    p2.beginTransaction();
                    secondSent = sendAll(p2, simple(topic, "second", 5), "second producer");
                    p2.commitTransaction();
                }
                p1.close(Duration.ofSeconds(5));
            }
            waitTxnState(admin, txnId, TransactionState.COMPLETE_COMMIT, OP_TIMEOUT);
            Map<Integer, Long> ends = waitStable(admin, topic, 1);
            // 5 aborted + marker + 5 committed + marker.
            checkEq(Map.of(0, 12L), ends, "end offset");
            verifyAt("read_committed", secondSent, readAll(ctx.bootstrap(), topic, 1, IsolationLevel.READ_COMMITTED, 5));
            List<Sent> both = new ArrayList<>(firstSent);
            both.addAll(secondSent);
            verifyAt("read_uncommitted", both, readAll(ctx.bootstrap(), topic, 1, IsolationLevel.READ_UNCOMMITTED, 10));
            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics " + topic);
        }
    }

    // ---- txn-timeout -----------------------------------------------------------------------

    /**
     * A producer with {@code transaction.timeout.ms=5000} writes in a transaction and then makes
     * no calls. Records another producer writes afterwards stay invisible to read_committed
     * until the coordinator aborts the transaction (within 60 s); then read_committed sees them
     * and none of the abandoned transaction's, describeTransactions says CompleteAbort, and the
     * original producer's commit fails.
     */
    static void timeout(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("txn-timeout");
            createTopic(admin, topic, 1, Map.of());
            String txnId = uniqueTxnId("timeout");
            try (KafkaProducer<byte[], byte[]> p1 = txnProducer(ctx.bootstrap(), txnId,
                    Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 5000))) {
                p1.initTransactions();
                p1.beginTransaction();
                long started = System.nanoTime();
                List<Sent> abandoned = sendAll(p1, simple(topic, "abandoned", 5), "transactional producer");
                checkEq(0L, abandoned.get(0).offset, "first offset of the transaction");
                List<Sent> later;
                try (KafkaProducer<byte[], byte[]> p2 = producer(ctx.bootstrap(), Map.of())) {
                    later = sendAll(p2, simple(topic, "later", 5), "second producer");
                }
                long elapsedMs = (System.nanoTime() - started) / 1_000_000;
                TransactionDescription open = describeTxn(admin, txnId);
                if (elapsedMs < 4000) {
                    checkEq(TransactionState.ONGOING, open.state(), "state right after the writes (" + elapsedMs + " ms)");
                    checkEq(5000L, open.transactionTimeoutMs(), "transaction timeout");
                    checkEq(Map.of(0, 0L), latest(admin, topic, 1, IsolationLevel.READ_COMMITTED),
                            "read_committed end offset while the transaction is open");
                }

                List<ConsumerRecord<byte[], byte[]>> seen;
                try (KafkaConsumer<byte[], byte[]> c = isolated(ctx.bootstrap(), IsolationLevel.READ_COMMITTED)) {
                    c.assign(partitions(topic, 1));
                    c.seekToBeginning(partitions(topic, 1));
                    seen = pollExactly(c, 5, TIMEOUT_ABORT_LIMIT, 1000);
                }
                verifyAt("read_committed after the timeout", later, seen);
                TransactionDescription d = waitTxnState(admin, txnId, TransactionState.COMPLETE_ABORT, OP_TIMEOUT);
                check(d.producerEpoch() > open.producerEpoch(), "producer epoch after the timeout abort %d, before %d",
                        d.producerEpoch(), open.producerEpoch());
                System.err.printf("txn-timeout: read_committed got past the abandoned transaction %.1f s after it began%n",
                        (System.nanoTime() - started) / 1e9);

                Throwable commitErr = null;
                try {
                    p1.commitTransaction();
                } catch (Exception e) {
                    commitErr = e;
                }
                check(commitErr != null, "the commit of a transaction the coordinator aborted succeeded");
                // Kafka 4.4 answers the EndTxn with INVALID_TXN_STATE.
                check(findCause(commitErr, InvalidTxnStateException.class, ProducerFencedException.class,
                                InvalidProducerEpochException.class) != null,
                        "the commit after the timeout failed with %s, not InvalidTxnStateException, "
                                + "ProducerFencedException or InvalidProducerEpochException", commitErr);
                System.err.println("txn-timeout: commit after the timeout failed with " + commitErr);
                p1.close(Duration.ofSeconds(5));
            }
            List<ConsumerRecord<byte[], byte[]>> all = readAll(ctx.bootstrap(), topic, 1, IsolationLevel.READ_UNCOMMITTED, 10);
            checkEq(Map.of(0, List.of("abandoned-0", "abandoned-1", "abandoned-2", "abandoned-3", "abandoned-4",
                    "later-0", "later-1", "later-2", "later-3", "later-4")), values(all), "read_uncommitted records");
            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics " + topic);
        }
    }

    // ---- txn-admin -------------------------------------------------------------------------

    static TransactionListing listed(Collection<TransactionListing> ls, String txnId) {
        return ls.stream().filter(l -> l.transactionalId().equals(txnId)).findFirst().orElse(null);
    }

    /**
     * listTransactions, describeTransactions and describeProducers around an open transaction
     * that wrote to partitions 0 and 1 of a topic whose partition 0 already held 4 plain records:
     * listed Ongoing (also with a state filter and a producer id filter; not under a CompleteCommit
     * filter), described with its producer id, timeout, start time and both partitions;
     * describeProducers shows the transaction's start offsets (4 and 0) and the producer's epoch;
     * after the commit the transaction is CompleteCommit with no partitions and the producers
     * have no open transaction.
     */
    static void adminApis(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("txn-admin");
            createTopic(admin, topic, 3, Map.of());
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            try (KafkaProducer<byte[], byte[]> plain = producer(ctx.bootstrap(), Map.of())) {
                sendAll(plain, simple(topic, "plain", 4), "plain records");
            }
            String txnId = uniqueTxnId("admin");
            try (KafkaProducer<byte[], byte[]> p = txnProducer(ctx.bootstrap(), txnId,
                    Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 45000))) {
                p.initTransactions();
                long before = System.currentTimeMillis();
                p.beginTransaction();
                List<ProducerRecord<byte[], byte[]>> rs = new ArrayList<>(simple(topic, "txn", 3));
                rs.add(new ProducerRecord<>(topic, 1, null, "txn-p1".getBytes(StandardCharsets.UTF_8)));
                List<Sent> sent = sendAll(p, rs, "transactional records");
                checkEq(4L, sent.get(0).offset, "first transactional offset on partition 0");
                checkEq(0L, sent.get(3).offset, "first transactional offset on partition 1");

                TransactionListing l = listed(await(admin.listTransactions().all(), "listTransactions"), txnId);
                check(l != null, "listTransactions does not list %s", txnId);
                checkEq(TransactionState.ONGOING, l.state(), "listed state");
                long pid = l.producerId();
                check(pid >= 0, "listed producer id %d", pid);
                check(listed(await(admin.listTransactions(new ListTransactionsOptions()
                        .filterStates(List.of(TransactionState.ONGOING))).all(), "listTransactions Ongoing"), txnId) != null,
                        "listTransactions filtered on Ongoing does not list %s", txnId);
                check(listed(await(admin.listTransactions(new ListTransactionsOptions()
                        .filterStates(List.of(TransactionState.COMPLETE_COMMIT))).all(), "listTransactions CompleteCommit"), txnId) == null,
                        "listTransactions filtered on CompleteCommit lists the open %s", txnId);
                var byPid = await(admin.listTransactions(new ListTransactionsOptions()
                        .filterProducerIds(List.of(pid))).all(), "listTransactions by producer id");
                checkEq(List.of(txnId), byPid.stream().map(TransactionListing::transactionalId).toList(),
                        "listTransactions filtered on producer id " + pid);

                TransactionDescription d = describeTxn(admin, txnId);
                checkEq(TransactionState.ONGOING, d.state(), "described state");
                checkEq(pid, d.producerId(), "described producer id");
                checkEq(45000L, d.transactionTimeoutMs(), "described timeout");
                checkEq(Set.of(p0, p1), d.topicPartitions(), "described partitions");
                check(d.transactionStartTimeMs().isPresent() && d.transactionStartTimeMs().getAsLong() >= before - 5000
                                && d.transactionStartTimeMs().getAsLong() <= System.currentTimeMillis() + 5000,
                        "described start time %s (began at %d)", d.transactionStartTimeMs(), before);
                check(d.coordinatorId() >= 0, "coordinator id %d", d.coordinatorId());

                for (var e : Map.of(p0, 4L, p1, 0L).entrySet()) {
                    ProducerState s = await(admin.describeProducers(List.of(e.getKey())).partitionResult(e.getKey()),
                            "describeProducers " + e.getKey()).activeProducers().stream()
                            .filter(x -> x.producerId() == pid).findFirst()
                            .orElseThrow(() -> new Support.Failure("describeProducers " + e.getKey() + " lacks producer " + pid));
                    checkEq(OptionalLong.of(e.getValue()), s.currentTransactionStartOffset(),
                            "transaction start offset on " + e.getKey());
                    checkEq(d.producerEpoch(), s.producerEpoch(), "producer epoch on " + e.getKey());
                }
                p.commitTransaction();

                TransactionDescription done = waitTxnState(admin, txnId, TransactionState.COMPLETE_COMMIT, OP_TIMEOUT);
                checkEq(Set.of(), done.topicPartitions(), "partitions after the commit");
                checkEq(pid, done.producerId(), "producer id after the commit");
                TransactionListing after = listed(await(admin.listTransactions(new ListTransactionsOptions()
                        .filterStates(List.of(TransactionState.COMPLETE_COMMIT))).all(), "listTransactions CompleteCommit"), txnId);
                check(after != null, "listTransactions filtered on CompleteCommit does not list %s after the commit", txnId);
                for (TopicPartition tp : List.of(p0, p1)) {
                    for (ProducerState s : await(admin.describeProducers(List.of(tp)).partitionResult(tp),
                            "describeProducers " + tp + " after the commit").activeProducers()) {
                        checkEq(OptionalLong.empty(), s.currentTransactionStartOffset(),
                                "transaction start offset on " + tp + " after the commit (producer " + s.producerId() + ")");
                    }
                }
            }
            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics " + topic);
        }
    }

    // ---- txn-admin-abort -------------------------------------------------------------------

    /**
     * What {@code kafka-transactions.sh abort} does to a transaction left open on a partition:
     * describeProducers finds the producer's open transaction, abortTransaction writes an ABORT
     * marker straight to the partition leader (WriteTxnMarkers). Afterwards the partition has
     * no open transaction, the read_committed end offset is the partition's end, and a
     * read_committed consumer sees the records written after the abort, not the aborted ones.
     */
    static void adminAbort(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("txn-admin-abort");
            createTopic(admin, topic, 1, Map.of());
            TopicPartition tp = new TopicPartition(topic, 0);
            String txnId = uniqueTxnId("admin-abort");
            try (KafkaProducer<byte[], byte[]> p = txnProducer(ctx.bootstrap(), txnId,
                    Map.of(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 60000))) {
                p.initTransactions();
                p.beginTransaction();
                sendAll(p, simple(topic, "hanging", 3), "transactional records");
                ProducerState open = await(admin.describeProducers(List.of(tp)).partitionResult(tp),
                        "describeProducers").activeProducers().stream()
                        .filter(s -> s.currentTransactionStartOffset().isPresent()).findFirst()
                        .orElseThrow(() -> new Support.Failure("describeProducers shows no open transaction"));
                checkEq(OptionalLong.of(0L), open.currentTransactionStartOffset(), "open transaction's start offset");
                checkEq(Map.of(0, 0L), latest(admin, topic, 1, IsolationLevel.READ_COMMITTED),
                        "read_committed end offset while the transaction is open");

                await(admin.abortTransaction(new AbortTransactionSpec(tp, open.producerId(),
                        (short) open.producerEpoch(), open.coordinatorEpoch().orElse(-1))).all(), "abortTransaction");
                for (ProducerState s : await(admin.describeProducers(List.of(tp)).partitionResult(tp),
                        "describeProducers after the abort").activeProducers()) {
                    checkEq(OptionalLong.empty(), s.currentTransactionStartOffset(),
                            "open transaction after the abort (producer " + s.producerId() + ")");
                }
                checkEq(latest(admin, topic, 1, IsolationLevel.READ_UNCOMMITTED),
                        latest(admin, topic, 1, IsolationLevel.READ_COMMITTED), "end offsets after the abort");
                List<Sent> later;
                try (KafkaProducer<byte[], byte[]> plain = producer(ctx.bootstrap(), Map.of())) {
                    later = sendAll(plain, simple(topic, "later", 2), "plain records");
                }
                verifyAt("read_committed after the abort", later,
                        readAll(ctx.bootstrap(), topic, 1, IsolationLevel.READ_COMMITTED, 2));
                p.close(Duration.ZERO);
            }
            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics " + topic);
        }
    }
}
