package kaas.frameworks;

import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.connect.cli.ConnectDistributed;
import org.apache.kafka.connect.runtime.Connect;

/**
 * Kafka Connect in distributed mode (its config, offset and status topics, which it creates
 * with cleanup.policy=compact and checks), with the FileStream source and sink connectors: a
 * file goes through a source connector into a topic and back out through a sink connector,
 * and the two files must be equal byte for byte.
 *
 * <p>With {@code --exactly-once true} the workers run KIP-618's exactly-once source support:
 * the leader writes the config topic in transactions and the source task writes its records
 * and offsets in transactions; the sink reads {@code read_committed}.
 *
 * <p>Arguments: --bootstrap host:port --work DIR [--exactly-once true]
 */
public final class ConnectFileRoundTrip {
  private static final int LINES = 3000;

  public static void main(String[] argv) throws Exception {
    Map<String, String> args = Harness.args(argv);
    String bootstrap = Harness.required(args, "bootstrap");
    Path work = Path.of(Harness.required(args, "work"));
    boolean exactlyOnce = Boolean.parseBoolean(args.getOrDefault("exactly-once", "false"));
    Files.createDirectories(work);
    String run = UUID.randomUUID().toString().substring(0, 8);
    String topic = "connect-lines-" + run;
    Path input = work.resolve("input.txt");
    Path output = work.resolve("output.txt");
    byte[] expected = inputFile();
    Files.write(input, expected);

    try (Admin admin = Harness.admin(bootstrap)) {
      Harness.createTopic(admin, topic, 1, Map.of());
    }

    int restPort;
    try (ServerSocket socket = new ServerSocket(0)) {
      restPort = socket.getLocalPort();
    }
    Map<String, String> worker = new HashMap<>();
    worker.put("bootstrap.servers", bootstrap);
    worker.put("group.id", "connect-cluster-" + run);
    worker.put("config.storage.topic", "connect-configs-" + run);
    worker.put("offset.storage.topic", "connect-offsets-" + run);
    worker.put("status.storage.topic", "connect-status-" + run);
    worker.put("config.storage.replication.factor", "1");
    worker.put("offset.storage.replication.factor", "1");
    worker.put("status.storage.replication.factor", "1");
    worker.put("key.converter", "org.apache.kafka.connect.storage.StringConverter");
    worker.put("value.converter", "org.apache.kafka.connect.storage.StringConverter");
    worker.put("listeners", "http://127.0.0.1:" + restPort);
    worker.put("rest.advertised.host.name", "127.0.0.1");
    worker.put("offset.flush.interval.ms", "1000");
    // Every plugin on the class path has a ServiceLoader manifest: no slow class-path scan.
    worker.put("plugin.discovery", "service_load");
    if (exactlyOnce) {
      worker.put("exactly.once.source.support", "enabled");
      worker.put("consumer.isolation.level", "read_committed");
    }

    Harness.log("starting Connect (distributed), REST on " + restPort);
    Connect<?> connect = new ConnectDistributed().startConnect(worker);
    try {
      HttpClient http = HttpClient.newHttpClient();
      String rest = "http://127.0.0.1:" + restPort;
      createConnector(http, rest, "file-source-" + run,
          "\"connector.class\":\"org.apache.kafka.connect.file.FileStreamSourceConnector\","
              + "\"tasks.max\":\"1\",\"file\":\"" + input + "\",\"topic\":\"" + topic + "\"");
      createConnector(http, rest, "file-sink-" + run,
          "\"connector.class\":\"org.apache.kafka.connect.file.FileStreamSinkConnector\","
              + "\"tasks.max\":\"1\",\"file\":\"" + output + "\",\"topics\":\"" + topic + "\"");

      Harness.await(Duration.ofSeconds(90), "the sink file to equal the source file",
          () -> {
            try {
              return Files.exists(output) && Files.size(output) >= expected.length;
            } catch (java.io.IOException e) {
              return false;
            }
          });
      byte[] actual = Files.readAllBytes(output);
      Harness.check(Arrays.equals(expected, actual),
          "the sink file (" + actual.length + " bytes) differs from the source file ("
              + expected.length + " bytes)");
      Harness.log("sink file equals source file: " + expected.length + " bytes, " + LINES + " lines");

      try (Admin admin = Harness.admin(bootstrap)) {
        for (String internal : new String[] {"connect-configs-", "connect-offsets-", "connect-status-"}) {
          Config config = Harness.topicConfig(admin, internal + run);
          String policy = config.get("cleanup.policy").value();
          Harness.check("compact".equals(policy),
              internal + run + " has cleanup.policy=" + policy + ", expected compact");
        }
      }
      String status = get(http, rest + "/connectors/file-source-" + run + "/status");
      Harness.check(status.contains("\"RUNNING\"") && !status.contains("FAILED"),
          "the source connector is not running: " + status);
    } finally {
      connect.stop();
      connect.awaitStop();
    }
    Harness.log("PASS connect-file-round-trip" + (exactlyOnce ? " (exactly-once source)" : ""));
  }

  /** Lines of varied length and characters (multi-byte UTF-8, tabs, quotes), no empty ones. */
  private static byte[] inputFile() {
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < LINES; i++) {
      text.append("line ").append(i).append('\t');
      text.append("päyload ✓ \"quoted\" ".repeat(1 + i % 7));
      text.append("x".repeat(i % 113)).append('\n');
    }
    return text.toString().getBytes(StandardCharsets.UTF_8);
  }

  private static void createConnector(HttpClient http, String rest, String name, String config)
      throws Exception {
    String body = "{\"name\":\"" + name + "\",\"config\":{" + config + "}}";
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (true) {
      HttpResponse<String> response = http.send(
          HttpRequest.newBuilder(URI.create(rest + "/connectors"))
              .header("Content-Type", "application/json")
              .POST(HttpRequest.BodyPublishers.ofString(body))
              .build(),
          HttpResponse.BodyHandlers.ofString());
      if (response.statusCode() == 201) {
        Harness.log("created connector " + name);
        return;
      }
      // 409 / 503: the worker is still joining its group or rebalancing; Connect asks to retry.
      if (System.nanoTime() > deadline
          || (response.statusCode() != 409 && response.statusCode() != 503)) {
        throw new AssertionError("creating " + name + ": HTTP " + response.statusCode() + " "
            + response.body());
      }
      Thread.sleep(500);
    }
  }

  private static String get(HttpClient http, String url) throws Exception {
    return http.send(HttpRequest.newBuilder(URI.create(url)).GET().build(),
        HttpResponse.BodyHandlers.ofString()).body();
  }
}
