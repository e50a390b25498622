package kaas.compat;

import static kaas.compat.Support.await;
import static kaas.compat.Support.awaitFailure;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidTimestampException;

/**
 * The per-record rules a topic's configs set, as Kafka enforces them on produce (KIP-467
 * record errors): a compacted topic refuses records without a key (INVALID_RECORD), and a
 * CreateTime topic refuses timestamps outside message.timestamp.before.max.ms /
 * message.timestamp.after.max.ms (INVALID_TIMESTAMP; after's default is one hour), while a
 * LogAppendTime topic ignores them. In a batch with a refused record the other records fail
 * too and nothing is stored.
 */
final class RecordRules {
    private RecordRules() {}

    private static final long HOUR = 3_600_000L;

    static KafkaProducer<byte[], byte[]> producer(Scenarios.Ctx ctx, String compression, int lingerMs) {
        return Support.producer(ctx.bootstrap(), Map.of(
                ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false,
                ProducerConfig.ACKS_CONFIG, "all",
                ProducerConfig.RETRIES_CONFIG, 0,
                ProducerConfig.COMPRESSION_TYPE_CONFIG, compression,
                ProducerConfig.LINGER_MS_CONFIG, lingerMs));
    }

    static byte[] bytes(String s) {
        return s.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    }

    static void recordRules(Scenarios.Ctx ctx) throws Exception {
        String compacted = Support.uniqueTopic("record-rules-compacted");
        String bounded = Support.uniqueTopic("record-rules-bounded");
        String appendTime = Support.uniqueTopic("record-rules-append-time");
        try (Admin admin = Support.admin(ctx.bootstrap())) {
            Support.createTopic(admin, compacted, 1, Map.of("cleanup.policy", "compact"));
            Support.createTopic(admin, bounded, 1, Map.of("message.timestamp.before.max.ms", String.valueOf(HOUR)));
            Support.createTopic(admin, appendTime, 1, Map.of(
                    "message.timestamp.type", "LogAppendTime",
                    "message.timestamp.before.max.ms", "0",
                    "message.timestamp.after.max.ms", "0"));
        }

        try (KafkaProducer<byte[], byte[]> p = producer(ctx, "none", 0)) {
            // A keyless record alone in its batch: the partition's code, the record's message.
            InvalidRecordException keyless = awaitFailure(p.send(new ProducerRecord<>(compacted, 0, null, bytes("v"))),
                    InvalidRecordException.class, "a keyless record to a compacted topic");
            checkEq("Compacted topic cannot accept message without key in topic partition " + compacted + "-0",
                    keyless.getMessage(), "message refusing a keyless record");
            RecordMetadata keyed = await(p.send(new ProducerRecord<>(compacted, 0, bytes("k"), bytes("v"))), "a keyed record");
            checkEq(0L, keyed.offset(), "offset of the first keyed record (the keyless one was not stored)");

            long now = System.currentTimeMillis();
            InvalidTimestampException old = awaitFailure(
                    p.send(new ProducerRecord<>(bounded, 0, now - 2 * HOUR, null, bytes("old"))),
                    InvalidTimestampException.class, "a record two hours old, before.max.ms one hour");
            String oldMessage = old.getMessage();
            check(oldMessage.startsWith("Timestamp " + (now - 2 * HOUR) + " of message with offset 0 is out of range. The timestamp should be within ["),
                    "message refusing an old timestamp: %s", oldMessage);
            InvalidTimestampException ahead = awaitFailure(
                    p.send(new ProducerRecord<>(bounded, 0, now + 2 * HOUR, null, bytes("ahead"))),
                    InvalidTimestampException.class, "a record two hours ahead, after.max.ms one hour by default");
            check(ahead.getMessage().startsWith("Timestamp " + (now + 2 * HOUR) + " of message with offset 0 is out of range."),
                    "message refusing a future timestamp: %s", ahead.getMessage());
            RecordMetadata recent = await(p.send(new ProducerRecord<>(bounded, 0, now - HOUR / 2, null, bytes("recent"))),
                    "a record half an hour old");
            checkEq(0L, recent.offset(), "offset of the first record within the bounds");

            // LogAppendTime: the broker's clock replaces the timestamp, so no bound applies.
            RecordMetadata stamped = await(p.send(new ProducerRecord<>(appendTime, 0, now - 2 * HOUR, null, bytes("x"))),
                    "an old record to a LogAppendTime topic");
            check(stamped.timestamp() >= now, "LogAppendTime stamped %d, before %d", stamped.timestamp(), now);
        }

        // One compressed batch of three records, the middle one keyless: it alone carries the
        // reason; the others fail with it, and nothing of the batch is stored.
        try (KafkaProducer<byte[], byte[]> p = producer(ctx, "lz4", 10_000)) {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            sent.add(p.send(new ProducerRecord<>(compacted, 0, bytes("a"), bytes("1"))));
            sent.add(p.send(new ProducerRecord<>(compacted, 0, null, bytes("2"))));
            sent.add(p.send(new ProducerRecord<>(compacted, 0, bytes("b"), bytes("3"))));
            p.flush();
            InvalidRecordException middle = awaitFailure(sent.get(1), InvalidRecordException.class, "the keyless record of the batch");
            checkEq("Compacted topic cannot accept message without key in topic partition " + compacted + "-0",
                    middle.getMessage(), "message of the keyless record in a batch");
            for (int i : new int[] {0, 2}) {
                KafkaException other = awaitFailure(sent.get(i), KafkaException.class, "keyed record " + i + " of the refused batch");
                check(!(other instanceof InvalidRecordException), "keyed record %d named as invalid: %s", i, other);
            }
        }

        try (KafkaConsumer<byte[], byte[]> c = Support.consumer(ctx.bootstrap(), Map.of())) {
            TopicPartition tp = new TopicPartition(compacted, 0);
            checkEq(1L, Support.endOffsets(c, List.of(tp)).get(tp), "records stored in the compacted topic");
            TopicPartition bp = new TopicPartition(bounded, 0);
            checkEq(1L, Support.endOffsets(c, List.of(bp)).get(bp), "records stored in the bounded topic");
        }
    }
}
