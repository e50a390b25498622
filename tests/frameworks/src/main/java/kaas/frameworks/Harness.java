package kaas.frameworks;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/** What every runner needs: arguments, deadlines, topics, configs and reading a topic whole. */
final class Harness {
  private Harness() {}

  /** `--name value` pairs. */
  static Map<String, String> args(String[] argv) {
    Map<String, String> out = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) {
      if (!argv[i].startsWith("--")) {
        throw new IllegalArgumentException("expected --name value, got " + argv[i]);
      }
      out.put(argv[i].substring(2), argv[i + 1]);
    }
    return out;
  }

  static String required(Map<String, String> args, String name) {
    String value = args.get(name);
    if (value == null) {
      throw new IllegalArgumentException("missing --" + name);
    }
    return value;
  }

  static void log(String message) {
    System.out.println("[" + java.time.LocalTime.now() + "] " + message);
    System.out.flush();
  }

  /** Polls `done` every 200 ms until it holds; fails with `what` after `timeout`. */
  static void await(Duration timeout, String what, BooleanSupplier done) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!done.getAsBoolean()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("timed out after " + timeout.toSeconds() + " s waiting for " + what);
      }
      Thread.sleep(200);
    }
  }

  static Admin admin(String bootstrap) {
    Properties p = new Properties();
    p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
    return Admin.create(p);
  }

  static void createTopic(Admin admin, String name, int partitions, Map<String, String> configs)
      throws Exception {
    admin.createTopics(List.of(new NewTopic(name, partitions, (short) 1).configs(configs)))
        .all()
        .get(30, TimeUnit.SECONDS);
  }

  /** The topic's config entries as DescribeConfigs reports them. */
  static Config topicConfig(Admin admin, String topic) throws Exception {
    ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    return admin.describeConfigs(List.of(resource)).all().get(30, TimeUnit.SECONDS).get(resource);
  }

  static void check(boolean condition, String message) {
    if (!condition) {
      throw new AssertionError(message);
    }
  }

  /** Every record of `topic` from the beginning to the end offsets seen at the start. */
  static List<ConsumerRecord<byte[], byte[]>> readAll(String bootstrap, String topic, Duration timeout)
      throws InterruptedException {
    return readAll(bootstrap, topic, timeout, "read_uncommitted");
  }

  /** Every record of the topic up to its end offsets, read at {@code isolation}. */
  static List<ConsumerRecord<byte[], byte[]>> readAll(String bootstrap, String topic, Duration timeout,
      String isolation) throws InterruptedException {
    Properties p = new Properties();
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
      List<TopicPartition> partitions = new ArrayList<>();
      consumer.partitionsFor(topic, Duration.ofSeconds(30))
          .forEach(info -> partitions.add(new TopicPartition(topic, info.partition())));
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions, Duration.ofSeconds(30));
      long deadline = System.nanoTime() + timeout.toNanos();
      while (partitions.stream().anyMatch(tp -> consumer.position(tp) < end.get(tp))) {
        if (System.nanoTime() > deadline) {
          throw new AssertionError("reading " + topic + " did not reach its end offsets " + end);
        }
        consumer.poll(Duration.ofMillis(500)).forEach(out::add);
      }
    }
    return out;
  }
}
