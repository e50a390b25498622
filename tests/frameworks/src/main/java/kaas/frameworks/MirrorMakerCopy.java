package kaas.frameworks;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.mirror.MirrorMaker;

/**
 * MirrorMaker 2 (its dedicated driver, as connect-mirror-maker.sh runs it) copies a topic from
 * cluster "source" to cluster "target": every record, in each partition in order, with its
 * key, value, headers and timestamp, must be in "source.<topic>" on the target. The two
 * bootstrap addresses may be one cluster (the copy is then a second topic beside the first).
 *
 * <p>Arguments: --source host:port --target host:port
 */
public final class MirrorMakerCopy {
  private static final int PARTITIONS = 3;
  private static final int RECORDS = 3000;

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = Harness.args(argv);
    String source = Harness.required(args, "source");
    String target = Harness.required(args, "target");
    String topic = "mirrored-" + UUID.randomUUID().toString().substring(0, 8);
    String copy = "source." + topic;

    try (Admin admin = Harness.admin(source)) {
      Harness.createTopic(admin, topic, PARTITIONS, Map.of());
    }
    List<ProducerRecord<byte[], byte[]>> sent = produce(source, topic);
    Harness.log("produced " + sent.size() + " records to " + topic);

    Map<String, String> mm2 = new HashMap<>();
    mm2.put("clusters", "source, target");
    mm2.put("source.bootstrap.servers", source);
    mm2.put("target.bootstrap.servers", target);
    mm2.put("source->target.enabled", "true");
    mm2.put("source->target.topics", topic);
    mm2.put("target->source.enabled", "false");
    mm2.put("replication.factor", "1");
    mm2.put("checkpoints.topic.replication.factor", "1");
    mm2.put("heartbeats.topic.replication.factor", "1");
    mm2.put("offset-syncs.topic.replication.factor", "1");
    mm2.put("offset.storage.replication.factor", "1");
    mm2.put("status.storage.replication.factor", "1");
    mm2.put("config.storage.replication.factor", "1");
    mm2.put("refresh.topics.interval.seconds", "1");
    mm2.put("emit.heartbeats.interval.seconds", "1");
    mm2.put("emit.checkpoints.interval.seconds", "1");
    mm2.put("offset.flush.interval.ms", "1000");
    // Every plugin on the class path has a ServiceLoader manifest: no slow class-path scan.
    mm2.put("plugin.discovery", "service_load");

    Harness.log("starting MirrorMaker 2: source " + source + " -> target " + target);
    MirrorMaker mirrorMaker = new MirrorMaker(mm2, List.of("target"));
    mirrorMaker.start();
    try {
      List<ConsumerRecord<byte[], byte[]>> copied = new ArrayList<>();
      Harness.await(Duration.ofSeconds(120), "all " + RECORDS + " records in " + copy, () -> {
        try (Admin admin = Harness.admin(target)) {
          if (!admin.listTopics().names().get().contains(copy)) {
            return false;
          }
          copied.clear();
          copied.addAll(Harness.readAll(target, copy, Duration.ofSeconds(30)));
          return copied.size() >= RECORDS;
        } catch (Exception e) {
          return false;
        }
      });
      compare(sent, copied);
      Harness.log("every record is in " + copy + " on the target");
    } finally {
      mirrorMaker.stop();
      mirrorMaker.awaitStop();
    }
    Harness.log("PASS mirror-maker-copy");
  }

  private static List<ProducerRecord<byte[], byte[]>> produce(String bootstrap, String topic)
      throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, "lz4");
    List<ProducerRecord<byte[], byte[]>> sent = new ArrayList<>();
    long baseTimestamp = System.currentTimeMillis() - 60_000;
    List<java.util.concurrent.Future<?>> futures = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
      for (int i = 0; i < RECORDS; i++) {
        RecordHeaders headers = new RecordHeaders();
        headers.add("seq", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
        byte[] key = i % 10 == 0 ? null : ("key-" + i % 97).getBytes(StandardCharsets.UTF_8);
        byte[] value = ("value " + i + " " + "v".repeat(i % 200)).getBytes(StandardCharsets.UTF_8);
        ProducerRecord<byte[], byte[]> record =
            new ProducerRecord<>(topic, i % PARTITIONS, baseTimestamp + i, key, value, headers);
        futures.add(producer.send(record));
        sent.add(record);
      }
      producer.flush();
      for (java.util.concurrent.Future<?> future : futures) {
        future.get();
      }
    }
    return sent;
  }

  private static String describe(org.apache.kafka.common.header.Header header) {
    return header == null ? "none" : new String(header.value(), StandardCharsets.UTF_8);
  }

  /** Same records per partition, in order, field by field. */
  private static void compare(List<ProducerRecord<byte[], byte[]>> sent,
      List<ConsumerRecord<byte[], byte[]>> copied) {
    Harness.check(copied.size() == sent.size(),
        "the copy has " + copied.size() + " records, " + sent.size() + " were produced");
    for (int partition = 0; partition < PARTITIONS; partition++) {
      int p = partition;
      List<ProducerRecord<byte[], byte[]>> want =
          sent.stream().filter(r -> r.partition() == p).toList();
      List<ConsumerRecord<byte[], byte[]>> got =
          copied.stream().filter(r -> r.partition() == p).toList();
      Harness.check(want.size() == got.size(),
          "partition " + p + ": " + got.size() + " copied, " + want.size() + " produced");
      for (int i = 0; i < want.size(); i++) {
        ProducerRecord<byte[], byte[]> w = want.get(i);
        ConsumerRecord<byte[], byte[]> g = got.get(i);
        String where = "partition " + p + " record " + i + " (produced seq "
            + new String(w.headers().lastHeader("seq").value(), StandardCharsets.UTF_8)
            + ", copied seq " + describe(g.headers().lastHeader("seq")) + " at offset "
            + g.offset() + ")";
        Harness.check(java.util.Arrays.equals(w.key(), g.key()), where + ": key differs");
        Harness.check(java.util.Arrays.equals(w.value(), g.value()), where + ": value differs");
        Harness.check(w.timestamp() == g.timestamp(), where + ": timestamp differs");
        Harness.check(java.util.Arrays.equals(
                w.headers().lastHeader("seq").value(), g.headers().lastHeader("seq").value()),
            where + ": header differs");
      }
    }
  }
}
