package kaas.frameworks;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A compacted topic read back by the Java consumer holds exactly the latest value of every key:
 * many versions of each key are produced, the segment rolls (segment.ms), one more record lands
 * in the new active segment, and the cleaner must leave one record per key, the newest, with
 * offsets still increasing.
 *
 * <p>Arguments: --bootstrap host:port
 */
public final class CompactedLatestValue {
  private static final int KEYS = 200;
  private static final int VERSIONS = 20;

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = Harness.args(argv);
    String bootstrap = Harness.required(args, "bootstrap");
    String topic = "compacted-" + UUID.randomUUID().toString().substring(0, 8);
    try (Admin admin = Harness.admin(bootstrap)) {
      Harness.createTopic(admin, topic, 1, Map.of(
          "cleanup.policy", "compact",
          "segment.ms", "1000",
          "min.cleanable.dirty.ratio", "0.01",
          "min.compaction.lag.ms", "0"));
    }

    Map<String, String> latest = new TreeMap<>();
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      for (int version = 0; version < VERSIONS; version++) {
        for (int k = 0; k < KEYS; k++) {
          String key = "key-" + k;
          String value = key + " version " + version + " " + "p".repeat((k * 31 + version) % 300);
          producer.send(new ProducerRecord<>(topic, key, value));
          latest.put(key, value);
        }
      }
      producer.flush();
      // The segment holding every version above rolls on the first append after segment.ms;
      // the record that rolls it stays alone in the active segment, which is never cleaned.
      Thread.sleep(2000);
      producer.send(new ProducerRecord<>(topic, "roll", "rolls the segment")).get();
      latest.put("roll", "rolls the segment");
    }
    Harness.log("produced " + KEYS * VERSIONS + " records over " + KEYS + " keys to " + topic);

    Map<String, String> readBack = new HashMap<>();
    int[] lastCount = {0};
    Harness.await(Duration.ofSeconds(120), "the cleaner to leave one record per key", () -> {
      try {
        List<ConsumerRecord<byte[], byte[]>> records =
            Harness.readAll(bootstrap, topic, Duration.ofSeconds(30));
        lastCount[0] = records.size();
        if (records.size() != latest.size()) {
          return false;
        }
        readBack.clear();
        long previous = -1;
        for (ConsumerRecord<byte[], byte[]> record : records) {
          Harness.check(record.offset() > previous, "offsets must increase");
          previous = record.offset();
          readBack.put(new String(record.key(), StandardCharsets.UTF_8),
              new String(record.value(), StandardCharsets.UTF_8));
        }
        return true;
      } catch (InterruptedException e) {
        return false;
      }
    });
    Harness.check(readBack.equals(latest),
        "the compacted topic does not hold exactly the latest value of every key");
    Harness.log("read back exactly the latest value of each of " + latest.size() + " keys");
    Harness.log("PASS compacted-latest-value");
  }
}
