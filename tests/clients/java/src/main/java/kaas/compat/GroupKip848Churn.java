package kaas.compat;

import static kaas.compat.Support.check;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;

/**
 * KIP-848 members (group.protocol=consumer) with a rebalance listener that commits and takes
 * its time, each changing its subscription six to eight times and closing in the middle of a
 * reconciliation, while two members stay. Every close must succeed promptly: a member that
 * cannot leave waits for the close timeout, and a commit refused in onPartitionsRevoked
 * (STALE_MEMBER_EPOCH when the coordinator's idea of the member's assignment drifted from the
 * client's) makes close() throw. The staying members must then own every partition, and the
 * group must be Empty once everyone closed: a coordinator that stops reconciling leaves the
 * stayers short of partitions until some rebalance timeout.
 */
final class GroupKip848Churn {
    private GroupKip848Churn() {}

    private static final int PARTITIONS = 4;
    private static final int CHURNERS = 9;
    /** A close takes a heartbeat round trip and the revocation callback; 30 s is the client's limit. */
    private static final Duration CLOSE_LIMIT = Duration.ofSeconds(15);
    private static final Duration SETTLE_LIMIT = Duration.ofSeconds(30);

    /** One member on its own thread: the consumer is not thread-safe. */
    static final class Member implements Runnable {
        final String name;
        final Map<String, Object> config;
        final String bootstrap;
        final List<List<String>> subscriptions;
        final long changeEveryMs;
        final long revokeSleepMs;
        volatile boolean stop;
        volatile Set<TopicPartition> owned = Set.of();
        volatile long closeMs = -1;
        final AtomicReference<Throwable> error = new AtomicReference<>();
        final ConcurrentLinkedQueue<String> log = new ConcurrentLinkedQueue<>();
        Thread thread;

        Member(String name, String bootstrap, Map<String, Object> config, List<List<String>> subscriptions,
               long changeEveryMs, long revokeSleepMs) {
            this.name = name;
            this.bootstrap = bootstrap;
            this.config = config;
            this.subscriptions = subscriptions;
            this.changeEveryMs = changeEveryMs;
            this.revokeSleepMs = revokeSleepMs;
        }

        Member start() {
            thread = new Thread(this, "member-" + name);
            thread.setDaemon(true);
            thread.start();
            return this;
        }

        @Override
        public void run() {
            KafkaConsumer<byte[], byte[]> c = Support.consumer(bootstrap, config);
            Set<TopicPartition> mine = new HashSet<>();
            AtomicReference<KafkaConsumer<byte[], byte[]>> self = new AtomicReference<>(c);
            ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    log.add("revoked " + parts);
                    if (!parts.isEmpty()) {
                        // What applications do: commit what was processed before letting go.
                        self.get().commitSync();
                        Support.sleep(revokeSleepMs);
                    }
                    mine.removeAll(parts);
                    owned = Set.copyOf(mine);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    log.add("assigned " + parts);
                    mine.addAll(parts);
                    owned = Set.copyOf(mine);
                    if (!parts.isEmpty()) Support.sleep(revokeSleepMs / 2);
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    log.add("lost " + parts);
                    mine.removeAll(parts);
                    owned = Set.copyOf(mine);
                }
            };
            try {
                int next = 0;
                long changeAt = 0;
                long processed = 0;
                while (!stop) {
                    long now = System.currentTimeMillis();
                    if (next < subscriptions.size() && now >= changeAt) {
                        log.add("subscribe " + subscriptions.get(next));
                        c.subscribe(subscriptions.get(next), listener);
                        next++;
                        changeAt = now + changeEveryMs;
                    } else if (next == subscriptions.size() && changeEveryMs > 0 && now >= changeAt) {
                        break; // a churning member closes right after its last change
                    }
                    processed += c.poll(Duration.ofMillis(50)).count();
                }
            } catch (Throwable t) {
                error.compareAndSet(null, t);
            } finally {
                long t0 = System.nanoTime();
                try {
                    c.close();
                } catch (Throwable t) {
                    error.compareAndSet(null, t);
                }
                closeMs = (System.nanoTime() - t0) / 1_000_000;
                log.add("closed after " + closeMs + " ms");
            }
        }

        void awaitExit(Duration limit) throws InterruptedException {
            thread.join(limit.toMillis());
            check(!thread.isAlive(), "member %s did not finish within %s; log: %s", name, limit, log);
            check(error.get() == null, "member %s failed: %s (cause %s); log: %s", name, error.get(),
                    error.get() == null ? null : error.get().getCause(), log);
            check(closeMs >= 0 && closeMs < CLOSE_LIMIT.toMillis(),
                    "member %s took %d ms to close (limit %s); log: %s", name, closeMs, CLOSE_LIMIT, log);
        }
    }

    static void churn(Scenarios.Ctx ctx) throws Exception {
        SplittableRandom rnd = ctx.rnd("group-kip848-churn");
        System.out.println("  seed " + ctx.seed());
        String base = Support.uniqueTopic("kip848-churn");
        List<String> topics = List.of(base + "-a", base + "-b", base + "-c");
        String group = Groups.uniqueGroup("group-kip848-churn");
        List<Member> all = new ArrayList<>();
        try (Admin admin = Support.admin(ctx.bootstrap())) {
            for (String t : topics) Support.createTopic(admin, t, PARTITIONS, null);
            try (var p = Support.producer(ctx.bootstrap(), Map.of())) {
                for (String t : topics) Groups.produceN(p, t, PARTITIONS, 400, 0);
            }
            Map<String, Object> conf = Groups.nextGen(group, "uniform");
            List<Member> stayers = List.of(
                    new Member("stay-1", ctx.bootstrap(), conf, List.of(topics), 0, 100),
                    new Member("stay-2", ctx.bootstrap(), conf, List.of(topics), 0, 100));
            for (Member m : stayers) all.add(m.start());
            List<Member> churners = new ArrayList<>();
            for (int i = 0; i < CHURNERS; i++) {
                List<List<String>> subs = new ArrayList<>();
                int changes = 6 + rnd.nextInt(3);
                for (int k = 0; k < changes; k++) {
                    List<String> sub = new ArrayList<>();
                    for (String t : topics) if (rnd.nextBoolean()) sub.add(t);
                    if (sub.isEmpty()) sub.add(topics.get(rnd.nextInt(topics.size())));
                    subs.add(sub);
                }
                Member m = new Member("churn-" + i, ctx.bootstrap(), conf, subs, 50 + rnd.nextInt(900),
                        50 + rnd.nextInt(300));
                churners.add(m);
                all.add(m);
                m.start();
                Support.sleep(rnd.nextInt(400));
            }
            for (Member m : churners) m.awaitExit(Duration.ofSeconds(40));

            Set<TopicPartition> everything = new HashSet<>();
            for (String t : topics) everything.addAll(Support.partitions(t, PARTITIONS));
            AtomicReference<String> last = new AtomicReference<>("nothing described yet");
            waitUntil("the two staying members to own every partition in a Stable group", last, () -> {
                ConsumerGroupDescription d = Groups.describe(admin, group);
                Set<TopicPartition> described = new HashSet<>();
                for (MemberDescription md : d.members()) described.addAll(md.assignment().topicPartitions());
                Set<TopicPartition> owned = new HashSet<>();
                for (Member m : stayers) owned.addAll(m.owned);
                last.set(d.groupState() + ", " + d.members().size() + " members, described " + described.size()
                        + " partitions, stayers own " + owned.size());
                return d.groupState() == GroupState.STABLE && d.members().size() == 2
                        && described.equals(everything) && owned.equals(everything);
            });
            for (Member m : stayers) m.stop = true;
            for (Member m : stayers) m.awaitExit(Duration.ofSeconds(20));
            Support.waitUntil("the group to be empty after every member closed", Duration.ofSeconds(15),
                    () -> Groups.describe(admin, group).groupState() == GroupState.EMPTY);
            long slowest = all.stream().mapToLong(m -> m.closeMs).max().orElse(0);
            System.out.println("  slowest close " + slowest + " ms");
        } finally {
            for (Member m : all) m.stop = true;
        }
    }

    /** Support.waitUntil, with the last observation in the failure. */
    private static void waitUntil(String what, AtomicReference<String> last, java.util.function.BooleanSupplier cond) {
        long deadline = System.nanoTime() + SETTLE_LIMIT.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new Support.Failure("timed out after " + SETTLE_LIMIT + " waiting for " + what + "; last: " + last.get());
            }
            Support.sleep(100);
        }
    }
}
