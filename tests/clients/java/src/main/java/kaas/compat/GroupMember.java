package kaas.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One consumer of a group, used by the group scenarios inside the scenario process (a thread) or
 * as a child process ({@code Scenarios --member}) that can be SIGKILLed like a crashed consumer.
 * It commits synchronously after processing every poll and reports what it does as event lines:
 *
 * <pre>
 *   M member-id generation   after a poll, whenever the member id or generation changed
 *   A partition committed    a partition was assigned; the group's committed offset for it at that
 *                            moment (-1 when nothing was committed)
 *   V partition              a partition was revoked or lost
 *   R partition offset       a record was processed (and then committed)
 *   C reason                 a commit failed (allowed: the next owner re-reads from the commit)
 *   E reason                 anything unexpected (fails the scenario)
 * </pre>
 */
final class GroupMember {
    final String name;
    final String topic;
    final Map<String, Object> config;
    private final List<String> events = new ArrayList<>();
    private volatile boolean stop;
    private final CountDownLatch done = new CountDownLatch(1);
    private Process process;

    GroupMember(String name, String topic, Map<String, Object> config) {
        this.name = name;
        this.topic = topic;
        this.config = config;
    }

    synchronized void emit(String line) {
        events.add(line);
    }

    synchronized List<String> events() {
        return new ArrayList<>(events);
    }

    /** The last member id the member reported, or null before it joined. */
    String memberId() {
        List<String> ev = events();
        for (int i = ev.size() - 1; i >= 0; i--) {
            if (ev.get(i).startsWith("M ")) return ev.get(i).split(" ")[1];
        }
        return null;
    }

    int generation() {
        List<String> ev = events();
        for (int i = ev.size() - 1; i >= 0; i--) {
            if (ev.get(i).startsWith("M ")) return Integer.parseInt(ev.get(i).split(" ")[2]);
        }
        return -1;
    }

    int count(String kind) {
        int n = 0;
        for (String e : events()) if (e.startsWith(kind + " ")) n++;
        return n;
    }

    /** The member's own view of its partitions, rebuilt from its A/V events. */
    Set<Integer> owned() {
        Set<Integer> own = new TreeSet<>();
        for (String e : events()) {
            String[] f = e.split(" ");
            if (f[0].equals("A")) own.add(Integer.parseInt(f[1]));
            if (f[0].equals("V")) own.remove(Integer.parseInt(f[1]));
        }
        return own;
    }

    /** Starts the member on a thread of this process. */
    GroupMember start(String bootstrap) {
        Thread t = new Thread(() -> {
            try {
                consume(bootstrap, topic, config, this::emit, () -> stop);
            } catch (Throwable e) {
                emit("E " + e);
            } finally {
                done.countDown();
            }
        }, "group-member-" + name);
        t.setDaemon(true);
        t.start();
        return this;
    }

    /** Starts the member as a child JVM running this jar. */
    GroupMember spawn(String bootstrap) throws Exception {
        Path jar = Path.of(Scenarios.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        String javaBin = ProcessHandle.current().info().command().orElse("java");
        List<String> cmd = new ArrayList<>(List.of(javaBin, "-cp", jar.toString(), "kaas.compat.Scenarios",
                "--member", "--bootstrap", bootstrap, "--topic", topic));
        for (var e : config.entrySet()) {
            cmd.add("--config");
            cmd.add(e.getKey() + "=" + e.getValue());
        }
        process = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        Thread reader = new Thread(() -> {
            try (var in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) emit(line);
            } catch (Exception e) {
                emit("E reading the child's events: " + e);
            } finally {
                done.countDown();
            }
        }, "group-member-" + name + "-reader");
        reader.setDaemon(true);
        reader.start();
        return this;
    }

    /** Stops the member: commit, close (LeaveGroup unless static). A child gets SIGTERM. */
    void close() throws InterruptedException {
        if (process != null) {
            // ProcessHandle signals without closing our end of the pipes (Process.destroy closes
            // them, losing the child's last events).
            process.toHandle().destroy();
        } else {
            stop = true;
        }
        Support.check(done.await(30, TimeUnit.SECONDS), "member %s did not stop within 30 s", name);
        if (process != null) process.waitFor(30, TimeUnit.SECONDS);
    }

    /** SIGKILLs a child member: it dies without committing or leaving the group. */
    void kill() throws InterruptedException {
        Support.check(process != null, "member %s is not a child process", name);
        process.toHandle().destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
        done.await(30, TimeUnit.SECONDS);
    }

    void killQuietly() {
        if (process != null && process.isAlive()) process.destroyForcibly();
        stop = true;
    }

    /** The consume loop shared by threads and child processes. */
    static void consume(String bootstrap, String topic, Map<String, Object> overrides, Consumer<String> emit,
                        java.util.function.BooleanSupplier stopped) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "kaas-java-member");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 20000);
        p.putAll(overrides);
        KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        try {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    if (parts.isEmpty()) return;
                    Map<TopicPartition, OffsetAndMetadata> committed = c.committed(new HashSet<>(parts), Duration.ofSeconds(30));
                    for (TopicPartition tp : parts.stream().sorted(java.util.Comparator.comparingInt(TopicPartition::partition)).toList()) {
                        OffsetAndMetadata o = committed.get(tp);
                        emit.accept("A " + tp.partition() + " " + (o == null ? -1 : o.offset()));
                    }
                }

                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    for (TopicPartition tp : parts) emit.accept("V " + tp.partition());
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    for (TopicPartition tp : parts) emit.accept("V " + tp.partition());
                }
            });
            String lastId = "";
            int lastGen = -2;
            while (!stopped.getAsBoolean()) {
                var recs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<byte[], byte[]> r : recs) emit.accept("R " + r.partition() + " " + r.offset());
                if (!recs.isEmpty()) {
                    try {
                        c.commitSync(Duration.ofSeconds(30));
                    } catch (org.apache.kafka.common.errors.RebalanceInProgressException
                             | org.apache.kafka.clients.consumer.CommitFailedException e) {
                        emit.accept("C " + e.getClass().getSimpleName());
                    }
                    Support.sleep(20);
                }
                var gm = c.groupMetadata();
                if (!gm.memberId().isEmpty() && (!gm.memberId().equals(lastId) || gm.generationId() != lastGen)) {
                    lastId = gm.memberId();
                    lastGen = gm.generationId();
                    emit.accept("M " + lastId + " " + lastGen);
                }
            }
            try {
                c.commitSync(Duration.ofSeconds(30));
            } catch (org.apache.kafka.common.errors.RebalanceInProgressException
                     | org.apache.kafka.clients.consumer.CommitFailedException e) {
                emit.accept("C final " + e.getClass().getSimpleName());
            }
        } catch (WakeupException e) {
            // closing
        } finally {
            c.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(30)));
        }
    }

    /** Child-process entry point: {@code --member --bootstrap B --topic T --config k=v ...}. */
    static void memberMain(String[] args) {
        String bootstrap = null, topic = null;
        Map<String, Object> config = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--member" -> { }
                case "--bootstrap" -> bootstrap = args[++i];
                case "--topic" -> topic = args[++i];
                case "--config" -> {
                    String[] kv = args[++i].split("=", 2);
                    config.put(kv[0], kv[1]);
                }
                default -> throw new IllegalArgumentException("unknown member argument " + args[i]);
            }
        }
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, StandardCharsets.UTF_8);
        Object lock = new Object();
        Consumer<String> emit = line -> {
            synchronized (lock) {
                out.println(line);
            }
        };
        CountDownLatch finished = new CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.set(true);
            try {
                finished.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        try {
            consume(bootstrap, topic, config, emit, stop::get);
        } catch (Throwable e) {
            emit.accept("E " + e);
        } finally {
            out.flush();
            finished.countDown();
        }
    }
}
