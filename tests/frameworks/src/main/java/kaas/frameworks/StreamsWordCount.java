package kaas.frameworks;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
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
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams word count with a changelogged state store: lines go in,
 * the counts come out, and the latest count of every word must be exact. Streams creates its
 * repartition topic (delete) and the store's changelog (compact) itself. Then the application
 * is stopped, its local state wiped, and started again: it restores the store from the
 * changelog, counts a second batch of lines, and the totals must again be exact.
 *
 * <p>With {@code --guarantee exactly_once_v2} the application runs in transactions (one
 * transactional producer per thread, offsets committed with the output, Transactions V2) and
 * every topic is read back {@code read_committed}.
 *
 * <p>Arguments: --bootstrap host:port --work DIR [--guarantee at_least_once|exactly_once_v2]
 */
public final class StreamsWordCount {
  private static final String[] WORDS = {
    "kafka", "streams", "state", "store", "changelog", "compact", "count", "word", "ünïcode", "x"
  };

  /** The processing guarantee of this run. */
  private static String guarantee = StreamsConfig.AT_LEAST_ONCE;

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = Harness.args(argv);
    String bootstrap = Harness.required(args, "bootstrap");
    Path work = Path.of(Harness.required(args, "work"));
    guarantee = args.getOrDefault("guarantee", StreamsConfig.AT_LEAST_ONCE);
    String run = UUID.randomUUID().toString().substring(0, 8);
    String app = "wordcount-" + run;
    String input = app + "-lines";
    String output = app + "-counts";
    try (Admin admin = Harness.admin(bootstrap)) {
      Harness.createTopic(admin, input, 2, Map.of());
      Harness.createTopic(admin, output, 2, Map.of());
    }

    Map<String, Long> expected = new TreeMap<>();
    produceLines(bootstrap, input, 0, 400, expected);
    runUntilCounted(bootstrap, work.resolve("state-1"), app, input, output, expected);

    try (Admin admin = Harness.admin(bootstrap)) {
      String changelog = app + "-counts-store-changelog";
      String policy = Harness.topicConfig(admin, changelog).get("cleanup.policy").value();
      Harness.check("compact".equals(policy), changelog + " has cleanup.policy=" + policy);
      Map<String, Long> restored = latestPerKey(bootstrap, changelog);
      Harness.check(restored.equals(expected),
          "the changelog's latest values " + restored + " differ from " + expected);
      Harness.log(changelog + " holds the exact counts (cleanup.policy=compact)");
    }

    // A fresh state directory: the store can only come back from the changelog.
    produceLines(bootstrap, input, 400, 300, expected);
    runUntilCounted(bootstrap, work.resolve("state-2"), app, input, output, expected);
    Harness.log("PASS streams-word-count (" + guarantee + ")");
  }

  private static Topology topology(String input, String output) {
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
        .flatMapValues(line -> Arrays.asList(line.split(" ")))
        .groupBy((key, word) -> word, Grouped.with(Serdes.String(), Serdes.String()))
        .count(Materialized.as("counts-store"))
        .toStream()
        .to(output, Produced.with(Serdes.String(), Serdes.Long()));
    return builder.build();
  }

  private static void runUntilCounted(String bootstrap, Path stateDir, String app, String input,
      String output, Map<String, Long> expected) throws Exception {
    Files.createDirectories(stateDir);
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    // Streams does not leave its group on close: the restarted instance waits for the old
    // member's session to expire, so keep it at the broker's minimum.
    p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
    p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1000");
    KafkaStreams streams = new KafkaStreams(topology(input, output), p);
    streams.setUncaughtExceptionHandler(e -> {
      Harness.log("stream thread failed: " + e);
      e.printStackTrace();
      return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
          .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    Harness.log("starting Kafka Streams application " + app + " in " + stateDir);
    streams.start();
    try {
      Harness.await(Duration.ofSeconds(90), "the counts in " + output + " to equal " + expected,
          () -> {
            if (streams.state() == KafkaStreams.State.ERROR
                || streams.state() == KafkaStreams.State.PENDING_ERROR
                || streams.state() == KafkaStreams.State.NOT_RUNNING) {
              throw new AssertionError("the application stopped: " + streams.state());
            }
            try {
              return latestPerKey(bootstrap, output).equals(expected);
            } catch (InterruptedException e) {
              return false;
            }
          });
      Harness.log("counts exact: " + expected);
    } finally {
      streams.close(Duration.ofSeconds(30));
    }
  }

  private static void produceLines(String bootstrap, String topic, int from, int count,
      Map<String, Long> expected) throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
      for (int i = from; i < from + count; i++) {
        StringBuilder line = new StringBuilder();
        for (int w = 0; w <= i % 5; w++) {
          String word = WORDS[(i * 7 + w * 3) % WORDS.length];
          expected.merge(word, 1L, Long::sum);
          line.append(w == 0 ? "" : " ").append(word);
        }
        producer.send(new ProducerRecord<>(topic, "line-" + i, line.toString()));
      }
      producer.flush();
    }
    Harness.log("produced " + count + " lines to " + topic);
  }

  /** How this run reads topics back: committed data only when it runs in transactions. */
  private static String isolation() {
    return StreamsConfig.AT_LEAST_ONCE.equals(guarantee) ? "read_uncommitted" : "read_committed";
  }

  /** The latest value of every key in the topic (String keys, Long values). */
  private static Map<String, Long> latestPerKey(String bootstrap, String topic)
      throws InterruptedException {
    Map<String, Long> latest = new TreeMap<>();
    StringDeserializer keys = new StringDeserializer();
    LongDeserializer values = new LongDeserializer();
    List<ConsumerRecord<byte[], byte[]>> records =
        Harness.readAll(bootstrap, topic, Duration.ofSeconds(30), isolation());
    for (ConsumerRecord<byte[], byte[]> record : records) {
      latest.put(keys.deserialize(topic, record.key()), values.deserialize(topic, record.value()));
    }
    return latest;
  }
}
