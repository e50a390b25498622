package kaas.compat;

import static kaas.compat.Support.check;
import static kaas.compat.Support.hex;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;

/** Random test records and the byte-for-byte comparison of what came back. */
final class Records {
    private Records() {}

    /** One record as sent, plus what the producer reported for it. */
    static final class Sent {
        final ProducerRecord<byte[], byte[]> record;
        int partition = -1;
        long offset = -1;
        long timestamp = -1;

        Sent(ProducerRecord<byte[], byte[]> record) { this.record = record; }

        void acked(RecordMetadata md) {
            partition = md.partition();
            offset = md.hasOffset() ? md.offset() : -1;
            timestamp = md.timestamp();
        }
    }

    private static final String HEADER_CHARS = "abcdefghijklmnopqrstuvwxyz-_.0123456789éß€日本";

    /**
     * Builds {@code n} records for {@code topic}. Keys are sometimes null or empty, values are
     * sometimes null, empty, compressible text or incompressible bytes (a few are tens of KiB),
     * records carry 0-4 headers (duplicate keys and null values included), and most carry an
     * explicit CreateTime from the last hour. Most records name a partition; the rest are left to
     * the client's partitioner.
     */
    static List<ProducerRecord<byte[], byte[]>> generate(SplittableRandom rnd, String topic, int partitions, int n) {
        long base = System.currentTimeMillis() - 3_600_000L + 60_000L;
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            byte[] key = pick(rnd, 8) ? null : pick(rnd, 5) ? new byte[0] : bytes(rnd, 1 + rnd.nextInt(64));
            byte[] value;
            int v = rnd.nextInt(100);
            if (v < 4) value = null;
            else if (v < 9) value = new byte[0];
            else if (v < 50) value = text(rnd, 1 + rnd.nextInt(2048));
            else if (v < 95) value = bytes(rnd, 1 + rnd.nextInt(1024));
            else value = pick(rnd, 50) ? text(rnd, 8192 + rnd.nextInt(57344)) : bytes(rnd, 8192 + rnd.nextInt(24576));
            List<Header> headers = new ArrayList<>();
            int nh = rnd.nextInt(5);
            for (int h = 0; h < nh; h++) {
                String hk = (h > 0 && pick(rnd, 15)) ? headers.get(0).key() : headerKey(rnd);
                byte[] hv = pick(rnd, 10) ? null : bytes(rnd, rnd.nextInt(48));
                headers.add(new RecordHeader(hk, hv));
            }
            Long ts = pick(rnd, 70) ? Long.valueOf(base + i * 7L + rnd.nextInt(5)) : null;
            Integer partition = pick(rnd, 70) ? Integer.valueOf(rnd.nextInt(partitions)) : null;
            out.add(new ProducerRecord<>(topic, partition, ts, key, value, headers));
        }
        return out;
    }

    static boolean pick(SplittableRandom rnd, int percent) {
        return rnd.nextInt(100) < percent;
    }

    static byte[] bytes(SplittableRandom rnd, int len) {
        byte[] b = new byte[len];
        rnd.nextBytes(b);
        return b;
    }

    static byte[] text(SplittableRandom rnd, int len) {
        String[] words = {"kafka ", "stream ", "broker ", "record ", "offset ", "partition ", "batch ", "log "};
        StringBuilder sb = new StringBuilder(len + 16);
        while (sb.length() < len) sb.append(words[rnd.nextInt(words.length)]);
        return sb.substring(0, len).getBytes(StandardCharsets.UTF_8);
    }

    static String headerKey(SplittableRandom rnd) {
        int len = rnd.nextInt(17);
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < len; i++) sb.append(HEADER_CHARS.charAt(rnd.nextInt(HEADER_CHARS.length())));
        return sb.toString();
    }

    /** Groups sent records by the partition the producer reported, in send order. */
    static Map<Integer, List<Sent>> byPartition(List<Sent> sent) {
        Map<Integer, List<Sent>> m = new HashMap<>();
        for (Sent s : sent) m.computeIfAbsent(s.partition, k -> new ArrayList<>()).add(s);
        return m;
    }

    /**
     * Checks that the consumed records are exactly the sent ones: per partition in send order,
     * offsets dense from {@code startOffset}, keys/values/headers identical byte for byte
     * (null and empty kept apart), CreateTime equal to what the producer used, and, where the
     * producer got an offset back, the same offset.
     */
    static void verify(String what, List<Sent> sent, List<ConsumerRecord<byte[], byte[]>> consumed, long startOffset) {
        Map<Integer, List<Sent>> expected = byPartition(sent);
        Map<Integer, List<ConsumerRecord<byte[], byte[]>>> got = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : consumed) got.computeIfAbsent(r.partition(), k -> new ArrayList<>()).add(r);
        check(expected.keySet().containsAll(got.keySet()),
                "%s: records consumed from partitions %s but produced only to %s", what, got.keySet(), expected.keySet());
        for (var e : expected.entrySet()) {
            int p = e.getKey();
            List<Sent> exp = e.getValue();
            List<ConsumerRecord<byte[], byte[]>> act = got.getOrDefault(p, List.of());
            check(exp.size() == act.size(), "%s: partition %d: produced %d records, consumed %d",
                    what, p, exp.size(), act.size());
            for (int i = 0; i < exp.size(); i++) {
                compare(what + " partition " + p + " #" + i, exp.get(i), act.get(i), startOffset + i);
            }
        }
    }

    static void compare(String where, Sent s, ConsumerRecord<byte[], byte[]> r, long expectedOffset) {
        ProducerRecord<byte[], byte[]> pr = s.record;
        check(r.offset() == expectedOffset, "%s: offset %d, expected %d (offsets must be dense)", where, r.offset(), expectedOffset);
        if (s.offset >= 0) {
            check(r.offset() == s.offset, "%s: consumed at offset %d but the producer was told %d", where, r.offset(), s.offset);
        }
        check(Arrays.equals(pr.key(), r.key()), "%s: key %s, expected %s", where, hex(r.key()), hex(pr.key()));
        check(Arrays.equals(pr.value(), r.value()), "%s: value %s, expected %s", where, hex(r.value()), hex(pr.value()));
        check(r.serializedKeySize() == (pr.key() == null ? -1 : pr.key().length),
                "%s: serializedKeySize %d", where, r.serializedKeySize());
        check(r.serializedValueSize() == (pr.value() == null ? -1 : pr.value().length),
                "%s: serializedValueSize %d", where, r.serializedValueSize());
        check(r.timestampType() == TimestampType.CREATE_TIME, "%s: timestamp type %s, expected CreateTime", where, r.timestampType());
        long wantTs = pr.timestamp() != null ? pr.timestamp() : s.timestamp;
        check(r.timestamp() == wantTs, "%s: timestamp %d, expected %d", where, r.timestamp(), wantTs);
        Header[] want = pr.headers().toArray();
        Header[] have = r.headers().toArray();
        check(want.length == have.length, "%s: %d headers, expected %d", where, have.length, want.length);
        for (int h = 0; h < want.length; h++) {
            check(want[h].key().equals(have[h].key()), "%s: header %d key '%s', expected '%s'", where, h, have[h].key(), want[h].key());
            check(Arrays.equals(want[h].value(), have[h].value()), "%s: header %d value %s, expected %s",
                    where, h, hex(have[h].value()), hex(want[h].value()));
        }
        check(r.leaderEpoch().isPresent() && r.leaderEpoch().get() >= 0,
                "%s: record batch carries no partition leader epoch (%s)", where, r.leaderEpoch());
    }

    static TopicPartition tp(String topic, int p) {
        return new TopicPartition(topic, p);
    }
}
