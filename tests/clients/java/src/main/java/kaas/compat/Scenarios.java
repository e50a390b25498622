package kaas.compat;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Kafka Java client (kafka-clients 4.x) compatibility scenarios.
 *
 * <pre>
 *   java -jar kaas-java-scenarios.jar --bootstrap 127.0.0.1:9092 --scenario all
 *   java -jar kaas-java-scenarios.jar --bootstrap 127.0.0.1:9092 --scenario errors --records 500 --seed 42
 * </pre>
 *
 * Every scenario checks its own results, prints {@code PASS <scenario>} and exits 0, or prints
 * {@code FAIL <scenario>: <reason>} and exits 1. Topics get random suffixes, so scenarios can run
 * one after another against the same broker. Every wait is bounded.
 */
public final class Scenarios {
    /** Settings shared by all scenarios. */
    record Ctx(String bootstrap, int records, long seed) {
        SplittableRandom rnd(String salt) {
            return new SplittableRandom(seed ^ salt.hashCode());
        }
    }

    interface Scenario {
        void run(Ctx ctx) throws Exception;
    }

    static final Map<String, Scenario> SCENARIOS = new LinkedHashMap<>();

    /** The most any one scenario may take. */
    static final long SCENARIO_LIMIT_MINUTES = 10;

    static {
        SCENARIOS.put("produce-consume", ProduceConsume::produceConsume);
        SCENARIOS.put("fetch-limits", ProduceConsume::fetchLimits);
        SCENARIOS.put("long-poll", ProduceConsume::longPoll);
        SCENARIOS.put("idempotence", ProduceConsume::idempotence);
        SCENARIOS.put("auto-create", ProduceConsume::autoCreate);
        SCENARIOS.put("seek-epoch", ProduceConsume::seekWithLeaderEpoch);
        SCENARIOS.put("admin", AdminOps::topicsAndConfigs);
        SCENARIOS.put("topic-configs", TopicConfigs::topicConfigs);
        SCENARIOS.put("group-configs", TopicConfigs::groupConfigs);
        SCENARIOS.put("replica-assignment", TopicConfigs::replicaAssignment);
        SCENARIOS.put("list-offsets", AdminOps::listOffsets);
        SCENARIOS.put("delete-records", AdminOps::deleteRecords);
        SCENARIOS.put("errors", Errors::errors);
        SCENARIOS.put("group-rebalance", Groups::rebalance);
        SCENARIOS.put("group-static", Groups::staticMembership);
        SCENARIOS.put("group-kip848", Groups::kip848);
        SCENARIOS.put("group-admin", Groups::admin);
        SCENARIOS.put("group-empty-kept", GroupEmptyKept::emptyGroupKept);
        SCENARIOS.put("group-kip848-churn", GroupKip848Churn::churn);
        SCENARIOS.put("admin-acls", AdminApis::acls);
        SCENARIOS.put("admin-authorized-operations", AdminApis::authorizedOperations);
        SCENARIOS.put("admin-log-dirs", AdminApis::logDirs);
        SCENARIOS.put("admin-reassignments", AdminApis::reassignments);
        SCENARIOS.put("admin-producers", AdminApis::producers);
        SCENARIOS.put("offsets-topic", OffsetsTopic::offsetsTopic);
        SCENARIOS.put("record-rules", RecordRules::recordRules);
        SCENARIOS.put("cluster-moves", ClusterMoves::clusterMoves);
        SCENARIOS.put("txn-commit-abort", Transactions::commitAbort);
        SCENARIOS.put("txn-consume-transform-produce", Transactions::consumeTransformProduce);
        SCENARIOS.put("txn-fencing", Transactions::fencing);
        SCENARIOS.put("txn-timeout", Transactions::timeout);
        SCENARIOS.put("txn-admin", Transactions::adminApis);
        SCENARIOS.put("txn-admin-abort", Transactions::adminAbort);
    }

    public static void main(String[] args) {
        if (args.length > 0 && args[0].equals("--member")) {
            // A group member in a child process (see GroupMember).
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "error");
            System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
            GroupMember.memberMain(args);
            Runtime.getRuntime().halt(0);
        }
        // The clients log through slf4j-simple; keep them quiet unless something is wrong.
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel",
                System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "error"));
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");

        String bootstrap = null;
        String scenario = "all";
        int records = 2000;
        long seed = System.nanoTime();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (a) {
                case "--bootstrap", "-bootstrap" -> { bootstrap = v; i++; }
                case "--scenario", "-scenario" -> { scenario = v; i++; }
                case "--records", "-records" -> { records = Integer.parseInt(v); i++; }
                case "--seed", "-seed" -> { seed = Long.parseLong(v); i++; }
                case "--list", "-list" -> {
                    SCENARIOS.keySet().forEach(System.out::println);
                    return;
                }
                default -> usage("unknown argument " + a);
            }
        }
        if (bootstrap == null) usage("--bootstrap is required");
        if (scenario == null) usage("--scenario needs a value");
        Ctx ctx = new Ctx(bootstrap, records, seed);
        System.out.println("java scenarios: kafka-clients " + clientVersion()
                + ", bootstrap " + bootstrap + ", seed " + seed + ", records " + records);

        Map<String, Scenario> toRun = new LinkedHashMap<>();
        if (scenario.equals("all")) {
            toRun.putAll(SCENARIOS);
        } else {
            for (String name : scenario.split(",")) {
                Scenario s = SCENARIOS.get(name);
                if (s == null) usage("unknown scenario " + name + "; known: " + SCENARIOS.keySet());
                toRun.put(name, s);
            }
        }
        int passed = 0;
        var watchdog = java.util.concurrent.Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "scenario-watchdog");
            t.setDaemon(true);
            return t;
        });
        for (var e : toRun.entrySet()) {
            long t0 = System.nanoTime();
            final int passedSoFar = passed;
            // Every wait inside a scenario is bounded; this is the last line of defence.
            var timer = watchdog.schedule(() -> {
                System.out.println("FAIL " + e.getKey() + ": did not finish within " + SCENARIO_LIMIT_MINUTES + " minutes");
                System.out.println(passedSoFar + " passed, 1 failed");
                System.out.flush();
                Runtime.getRuntime().halt(1);
            }, SCENARIO_LIMIT_MINUTES, java.util.concurrent.TimeUnit.MINUTES);
            try {
                e.getValue().run(ctx);
                timer.cancel(false);
            } catch (Throwable t) {
                System.out.println("FAIL " + e.getKey() + ": " + t.getMessage());
                t.printStackTrace(System.err);
                System.out.println(passed + " passed, 1 failed");
                System.out.flush();
                Runtime.getRuntime().halt(1);
            }
            passed++;
            System.out.printf("PASS %s (%.1fs)%n", e.getKey(), (System.nanoTime() - t0) / 1e9);
        }
        System.out.println(passed + " passed, 0 failed");
        System.out.flush();
        // Client threads are all closed, but do not let a stray one keep the JVM alive.
        Runtime.getRuntime().halt(0);
    }

    static String clientVersion() {
        try (var in = Scenarios.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            java.util.Properties p = new java.util.Properties();
            if (in != null) p.load(in);
            return p.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }

    private static void usage(String msg) {
        System.err.println(msg);
        System.err.println("usage: Scenarios --bootstrap HOST:PORT [--scenario NAME[,NAME...]|all] [--records N] [--seed S] [--list]");
        System.err.println("scenarios: " + SCENARIOS.keySet());
        System.exit(2);
    }
}
