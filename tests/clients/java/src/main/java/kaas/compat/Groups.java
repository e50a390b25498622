package kaas.compat;

import static kaas.compat.Support.await;
import static kaas.compat.Support.awaitFailure;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.errors.GroupNotEmptyException;
import org.apache.kafka.common.errors.GroupSubscribedToTopicException;
import org.apache.kafka.common.errors.UnknownMemberIdException;

/**
 * Consumer-group scenarios: rebalances with a member that leaves and one that is SIGKILLed
 * (classic protocol, cooperative-sticky), static membership, the KIP-848 consumer protocol with
 * the server-side assignors, and the group admin APIs.
 */
final class Groups {
    private Groups() {}

    static final Duration SETTLE = Duration.ofSeconds(60);

    static String uniqueGroup(String name) {
        return "java-grp-" + name + "-" + Long.toHexString(ThreadLocalRandom.current().nextLong() & 0xffffffffffL);
    }

    /** Classic-protocol member settings: short sessions, cooperative-sticky. */
    static Map<String, Object> classic(String group) {
        Map<String, Object> m = new HashMap<>();
        m.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        m.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        m.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        m.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 6000);
        m.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 1000);
        m.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 30000);
        return m;
    }

    static Map<String, Object> nextGen(String group, String assignor) {
        Map<String, Object> m = new HashMap<>();
        m.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        m.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        m.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        m.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 30000);
        return m;
    }

    // ---- producing -------------------------------------------------------------------------

    static void produceN(KafkaProducer<byte[], byte[]> p, String topic, int partitions, int n, int from) {
        List<java.util.concurrent.Future<?>> fs = new ArrayList<>();
        for (int i = from; i < from + n; i++) {
            fs.add(p.send(new ProducerRecord<>(topic, i % partitions, null, ("record-" + i).getBytes())));
        }
        p.flush();
        for (var f : fs) await(f, "produce to " + topic);
    }

    /** Produces a few records every 50 ms until closed; close() returns how many. */
    static final class Background implements AutoCloseable {
        private final AtomicBoolean stop = new AtomicBoolean();
        private final AtomicInteger produced = new AtomicInteger();
        private final Thread thread;
        private volatile Throwable error;

        Background(String bootstrap, String topic, int partitions) {
            thread = new Thread(() -> {
                try (var p = Support.producer(bootstrap, Map.of("linger.ms", 0))) {
                    int i = 1 << 20;
                    while (!stop.get()) {
                        Support.sleep(50);
                        produceN(p, topic, partitions, 6, i);
                        i += 6;
                        produced.addAndGet(6);
                    }
                } catch (Throwable t) {
                    error = t;
                }
            }, "background-producer");
            thread.setDaemon(true);
            thread.start();
        }

        @Override
        public void close() throws InterruptedException {
            if (stop.getAndSet(true)) return;
            thread.join(60000);
            if (error != null) throw new Support.Failure("background producer: " + error, error);
        }

        int produced() {
            return produced.get();
        }
    }

    // ---- group state -----------------------------------------------------------------------

    static ConsumerGroupDescription describe(Admin admin, String group) {
        return await(admin.describeConsumerGroups(List.of(group)).describedGroups().get(group), "describeConsumerGroups " + group);
    }

    /**
     * Waits until the group is Stable with exactly these members, its assignment covers every
     * partition exactly once, and every member's own view matches. Returns partitions by member name.
     */
    static Map<String, Set<Integer>> waitSettled(Admin admin, String group, String topic, int partitions,
                                                 List<GroupMember> members) {
        String[] why = {""};
        Map<String, Set<Integer>> result = new TreeMap<>();
        try {
            Support.waitUntil("group " + group + " to settle with " + members.size() + " members", SETTLE, () -> {
                result.clear();
                Map<String, GroupMember> byId = new HashMap<>();
                for (GroupMember m : members) {
                    if (m.memberId() == null) { why[0] = m.name + " has not joined"; return false; }
                    byId.put(m.memberId(), m);
                }
                ConsumerGroupDescription d;
                try {
                    d = admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                } catch (Exception e) {
                    why[0] = e.toString();
                    return false;
                }
                if (d.groupState() != GroupState.STABLE) { why[0] = "state " + d.groupState(); return false; }
                if (d.members().size() != members.size()) { why[0] = d.members().size() + " members"; return false; }
                int[] cover = new int[partitions];
                for (MemberDescription md : d.members()) {
                    GroupMember m = byId.get(md.consumerId());
                    if (m == null) { why[0] = "unexpected member " + md.consumerId(); return false; }
                    Set<Integer> parts = new TreeSet<>();
                    for (TopicPartition tp : md.assignment().topicPartitions()) {
                        if (tp.topic().equals(topic)) { parts.add(tp.partition()); cover[tp.partition()]++; }
                    }
                    if (!parts.equals(m.owned())) { why[0] = m.name + " owns " + m.owned() + ", assigned " + parts; return false; }
                    result.put(m.name, parts);
                }
                for (int p = 0; p < partitions; p++) {
                    if (cover[p] != 1) { why[0] = "partition " + p + " assigned " + cover[p] + " times"; return false; }
                }
                return true;
            });
        } catch (Support.Failure f) {
            throw new Support.Failure(f.getMessage() + " (last: " + why[0] + ")");
        }
        return result;
    }

    static Map<Integer, Long> endOffsets(Admin admin, String topic, int partitions) {
        Map<TopicPartition, OffsetSpec> specs = new HashMap<>();
        for (TopicPartition tp : Support.partitions(topic, partitions)) specs.put(tp, OffsetSpec.latest());
        Map<Integer, Long> out = new TreeMap<>();
        await(admin.listOffsets(specs).all(), "listOffsets latest").forEach((tp, info) -> out.put(tp.partition(), info.offset()));
        return out;
    }

    static Map<Integer, Long> committed(Admin admin, String group, String topic) {
        Map<Integer, Long> out = new TreeMap<>();
        await(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets " + group)
                .forEach((tp, o) -> {
                    if (tp.topic().equals(topic) && o != null) out.put(tp.partition(), o.offset());
                });
        return out;
    }

    static Map<Integer, Long> waitCommittedAtEnd(Admin admin, String group, String topic, int partitions) {
        Map<Integer, Long> ends = endOffsets(admin, topic, partitions);
        String[] why = {""};
        try {
            Support.waitUntil("committed offsets of " + group + " to reach the end offsets", Duration.ofSeconds(90), () -> {
                Map<Integer, Long> c = committed(admin, group, topic);
                why[0] = "committed " + c + ", end " + ends;
                return c.equals(ends);
            });
        } catch (Support.Failure f) {
            throw new Support.Failure(f.getMessage() + " (" + why[0] + ")");
        }
        return ends;
    }

    /**
     * Checks one member's events: no errors; the first record it processes from a newly assigned
     * partition is the group's committed offset at assignment (0 when none), later ones are dense;
     * no record of a partition it does not own. Adds processed offsets to seen; returns how many
     * takeovers started from a committed offset above 0.
     */
    static int checkEvents(GroupMember m, Map<Integer, Set<Long>> seen) {
        Map<Integer, Long> next = new HashMap<>();
        Map<Integer, Long> first = new HashMap<>();
        int resumed = 0;
        for (String e : m.events()) {
            String[] f = e.split(" ");
            switch (f[0]) {
                case "E" -> throw new Support.Failure("member " + m.name + ": " + e);
                case "A" -> {
                    int p = Integer.parseInt(f[1]);
                    first.put(p, Math.max(0, Long.parseLong(f[2])));
                    next.put(p, -1L);
                }
                case "V" -> next.remove(Integer.parseInt(f[1]));
                case "R" -> {
                    int p = Integer.parseInt(f[1]);
                    long off = Long.parseLong(f[2]);
                    Long want = next.get(p);
                    check(want != null, "member %s processed %d/%d without owning the partition", m.name, p, off);
                    if (want == -1L) {
                        check(off == first.get(p), "member %s: first record from newly assigned partition %d is offset %d, but the group's committed offset at assignment was %d",
                                m.name, p, off, first.get(p));
                        if (off > 0) resumed++;
                    } else {
                        check(off == want, "member %s: partition %d jumped from %d to %d", m.name, p, want - 1, off);
                    }
                    next.put(p, off + 1);
                    seen.computeIfAbsent(p, k -> new HashSet<>()).add(off);
                }
                default -> { }
            }
        }
        return resumed;
    }

    static void checkCoverage(Map<Integer, Set<Long>> seen, Map<Integer, Long> ends) {
        ends.forEach((p, end) -> {
            for (long o = 0; o < end; o++) {
                if (!seen.getOrDefault(p, Set.of()).contains(o)) {
                    throw new Support.Failure("record " + p + "/" + o + " (end " + end + ") was never processed by any member");
                }
            }
        });
    }

    static void checkAll(List<GroupMember> all, Map<Integer, Long> ends) {
        Map<Integer, Set<Long>> seen = new HashMap<>();
        int resumed = 0;
        for (GroupMember m : all) resumed += checkEvents(m, seen);
        check(resumed > 0, "no partition changed hands after records were committed; nothing was checked");
        checkCoverage(seen, ends);
    }

    // ---- scenarios -------------------------------------------------------------------------

    /**
     * Classic protocol, CooperativeStickyAssignor: three members, a fourth (a child JVM) joins, one
     * leaves (close → LeaveGroup), the child is SIGKILLed and the group notices by session timeout.
     */
    static void rebalance(Scenarios.Ctx ctx) throws Exception {
        final int partitions = 12;
        String topic = Support.uniqueTopic("group-rebalance");
        String group = uniqueGroup("group-rebalance");
        List<GroupMember> all = new ArrayList<>();
        try (Admin admin = Support.admin(ctx.bootstrap())) {
            Support.createTopic(admin, topic, partitions, null);
            try (var p = Support.producer(ctx.bootstrap(), Map.of())) {
                produceN(p, topic, partitions, ctx.records(), 0);
            }
            try (Background bg = new Background(ctx.bootstrap(), topic, partitions)) {
                GroupMember m1 = new GroupMember("m1", topic, classic(group)).start(ctx.bootstrap());
                GroupMember m2 = new GroupMember("m2", topic, classic(group)).start(ctx.bootstrap());
                GroupMember m3 = new GroupMember("m3", topic, classic(group)).start(ctx.bootstrap());
                all.addAll(List.of(m1, m2, m3));
                waitSettled(admin, group, topic, partitions, List.of(m1, m2, m3));
                GroupMember m4 = new GroupMember("m4-child", topic, classic(group)).spawn(ctx.bootstrap());
                all.add(m4);
                waitSettled(admin, group, topic, partitions, List.of(m1, m2, m3, m4));
                Support.waitUntil("the child member to process records", Duration.ofSeconds(30), () -> m4.count("R") > 0);

                String m1Id = m1.memberId();
                m1.close();
                check(describe(admin, group).members().stream().noneMatch(md -> md.consumerId().equals(m1Id)),
                        "member %s closed (LeaveGroup) but the group still lists it", m1Id);
                waitSettled(admin, group, topic, partitions, List.of(m2, m3, m4));

                String m4Id = m4.memberId();
                m4.kill();
                check(describe(admin, group).members().stream().anyMatch(md -> md.consumerId().equals(m4Id)),
                        "a SIGKILLed member (no LeaveGroup) vanished from the group before its session timed out");
                waitSettled(admin, group, topic, partitions, List.of(m2, m3));
                bg.close();
                Map<Integer, Long> ends = waitCommittedAtEnd(admin, group, topic, partitions);
                checkEq((long) ctx.records() + bg.produced(), ends.values().stream().mapToLong(Long::longValue).sum(), "records in the topic");
                m2.close();
                m3.close();
                checkAll(all, ends);
                checkEq(ends, committed(admin, group, topic), "committed offsets after the members closed");
            }
        } finally {
            all.forEach(GroupMember::killQuietly);
        }
    }

    /**
     * Static membership: a static member (a child JVM) closes — the classic consumer sends no
     * LeaveGroup for a group.instance.id — and a new JVM with the same instance id rejoins within
     * the session timeout: the others see no rebalance and the new one resumes the same partitions
     * at the committed offsets.
     */
    static void staticMembership(Scenarios.Ctx ctx) throws Exception {
        final int partitions = 6;
        String topic = Support.uniqueTopic("group-static");
        String group = uniqueGroup("group-static");
        List<GroupMember> all = new ArrayList<>();
        try (Admin admin = Support.admin(ctx.bootstrap())) {
            Support.createTopic(admin, topic, partitions, null);
            try (var p = Support.producer(ctx.bootstrap(), Map.of())) {
                produceN(p, topic, partitions, ctx.records() / 2, 0);
            }
            try (Background bg = new Background(ctx.bootstrap(), topic, partitions)) {
                List<Map<String, Object>> cfg = new ArrayList<>();
                for (int i = 1; i <= 3; i++) {
                    Map<String, Object> c = classic(group);
                    c.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "static-" + i);
                    c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 20000);
                    cfg.add(c);
                }
                GroupMember m1 = new GroupMember("static-1", topic, cfg.get(0)).start(ctx.bootstrap());
                GroupMember m2 = new GroupMember("static-2", topic, cfg.get(1)).start(ctx.bootstrap());
                all.addAll(List.of(m1, m2));
                waitSettled(admin, group, topic, partitions, List.of(m1, m2));
                GroupMember old = new GroupMember("static-3-first", topic, cfg.get(2)).spawn(ctx.bootstrap());
                all.add(old);
                waitSettled(admin, group, topic, partitions, List.of(m1, m2, old));
                Support.waitUntil("the static child to process records", Duration.ofSeconds(30), () -> old.count("R") > 0);
                Support.sleep(1500);
                Set<Integer> oldParts = old.owned();
                int gen = m1.generation();
                checkEq(gen, m2.generation(), "generation of static-2");
                Map<String, List<Integer>> before = new HashMap<>();
                for (GroupMember m : List.of(m1, m2)) before.put(m.name, List.of(m.count("A"), m.count("V"), m.generation()));

                String oldId = old.memberId();
                old.close();
                ConsumerGroupDescription d = describe(admin, group);
                check(d.members().stream().anyMatch(md -> md.consumerId().equals(oldId)),
                        "the static member closed without LeaveGroup but the group no longer lists it");
                checkEq(GroupState.STABLE, d.groupState(), "group state while the static member is away");
                Map<Integer, Long> lastProcessed = new HashMap<>();
                Map<Integer, Long> oldAssigned = new HashMap<>();
                for (String e : old.events()) {
                    String[] f = e.split(" ");
                    if (f[0].equals("R")) lastProcessed.merge(Integer.parseInt(f[1]), Long.parseLong(f[2]), Math::max);
                    if (f[0].equals("A")) oldAssigned.put(Integer.parseInt(f[1]), Long.parseLong(f[2]));
                }

                GroupMember again = new GroupMember("static-3-again", topic, cfg.get(2)).spawn(ctx.bootstrap());
                all.add(again);
                Map<String, Set<Integer>> settled = waitSettled(admin, group, topic, partitions, List.of(m1, m2, again));
                checkEq(oldParts, settled.get("static-3-again"), "partitions of the rejoined static member");
                checkEq(gen, again.generation(), "generation seen by the rejoined static member");
                Map<Integer, Long> seenAtAssign = new HashMap<>();
                for (String e : again.events()) {
                    String[] f = e.split(" ");
                    if (f[0].equals("A")) seenAtAssign.put(Integer.parseInt(f[1]), Long.parseLong(f[2]));
                }
                for (int p : oldParts) {
                    long want = lastProcessed.containsKey(p) ? lastProcessed.get(p) + 1 : oldAssigned.get(p);
                    final int part = p;
                    List<String> tail = old.events().stream().filter(e -> e.startsWith("R " + part + " ") || !e.startsWith("R ")).toList();
                    checkEq(want, seenAtAssign.get(p), "committed offset of partition " + p + " seen by the rejoined member (the first process's last events: "
                            + tail.subList(Math.max(0, tail.size() - 8), tail.size()) + ")");
                }
                Support.waitUntil("the rejoined member to process records", Duration.ofSeconds(30), () -> again.count("R") > 0);
                Support.sleep(1500);
                for (GroupMember m : List.of(m1, m2)) {
                    checkEq(before.get(m.name), List.of(m.count("A"), m.count("V"), m.generation()),
                            m.name + " (assigned callbacks, revoked callbacks, generation) across the static restart");
                }
                bg.close();
                Map<Integer, Long> ends = waitCommittedAtEnd(admin, group, topic, partitions);
                m1.close();
                m2.close();
                again.close();
                checkAll(all, ends);
            }
        } finally {
            all.forEach(GroupMember::killQuietly);
        }
    }

    /**
     * KIP-848 (group.protocol=consumer) with the server-side "uniform" assignor: three members, a
     * fourth joins, one leaves; then a group with the "range" assignor.
     */
    static void kip848(Scenarios.Ctx ctx) throws Exception {
        final int partitions = 12;
        String topic = Support.uniqueTopic("group-kip848");
        String group = uniqueGroup("group-kip848");
        String rangeGroup = uniqueGroup("group-kip848-range");
        List<GroupMember> all = new ArrayList<>();
        List<GroupMember> ranged = new ArrayList<>();
        try (Admin admin = Support.admin(ctx.bootstrap())) {
            Support.createTopic(admin, topic, partitions, null);
            try (var p = Support.producer(ctx.bootstrap(), Map.of())) {
                produceN(p, topic, partitions, ctx.records(), 0);
            }
            try (Background bg = new Background(ctx.bootstrap(), topic, partitions)) {
                GroupMember m1 = new GroupMember("m1", topic, nextGen(group, "uniform")).start(ctx.bootstrap());
                GroupMember m2 = new GroupMember("m2", topic, nextGen(group, "uniform")).start(ctx.bootstrap());
                GroupMember m3 = new GroupMember("m3", topic, nextGen(group, "uniform")).start(ctx.bootstrap());
                all.addAll(List.of(m1, m2, m3));
                waitSettled(admin, group, topic, partitions, List.of(m1, m2, m3));
                checkConsumerGroup(admin, group, 3);
                GroupMember m4 = new GroupMember("m4", topic, nextGen(group, "uniform")).start(ctx.bootstrap());
                all.add(m4);
                waitSettled(admin, group, topic, partitions, List.of(m1, m2, m3, m4));
                Support.waitUntil("m4 to process records", Duration.ofSeconds(30), () -> m4.count("R") > 0);
                String m1Id = m1.memberId();
                m1.close();
                check(describe(admin, group).members().stream().noneMatch(md -> md.consumerId().equals(m1Id)),
                        "member %s left but the group still lists it", m1Id);
                waitSettled(admin, group, topic, partitions, List.of(m2, m3, m4));
                checkConsumerGroup(admin, group, 3);

                GroupMember r1 = new GroupMember("r1", topic, nextGen(rangeGroup, "range")).start(ctx.bootstrap());
                GroupMember r2 = new GroupMember("r2", topic, nextGen(rangeGroup, "range")).start(ctx.bootstrap());
                ranged.addAll(List.of(r1, r2));
                Map<String, Set<Integer>> settled = waitSettled(admin, rangeGroup, topic, partitions, ranged);
                checkConsumerGroup(admin, rangeGroup, 2);
                for (var e : settled.entrySet()) {
                    List<Integer> parts = new ArrayList<>(e.getValue());
                    checkEq(6, parts.size(), "partitions of " + e.getKey() + " with the range assignor");
                    checkEq(parts.get(0) + 5, parts.get(5), "contiguous range for " + e.getKey() + ": " + parts);
                }

                bg.close();
                Map<Integer, Long> ends = waitCommittedAtEnd(admin, group, topic, partitions);
                Map<Integer, Long> rEnds = waitCommittedAtEnd(admin, rangeGroup, topic, partitions);
                for (GroupMember m : List.of(m2, m3, m4, r1, r2)) m.close();
                checkAll(all, ends);
                Map<Integer, Set<Long>> seen = new HashMap<>();
                for (GroupMember m : ranged) checkEvents(m, seen);
                checkCoverage(seen, rEnds);
            }
        } finally {
            all.forEach(GroupMember::killQuietly);
            ranged.forEach(GroupMember::killQuietly);
        }
    }

    static void checkConsumerGroup(Admin admin, String group, int members) {
        ConsumerGroupDescription d = describe(admin, group);
        checkEq(GroupType.CONSUMER, d.type(), "type of " + group);
        checkEq(members, d.members().size(), "members of " + group);
        for (MemberDescription m : d.members()) {
            check(!m.assignment().topicPartitions().isEmpty(), "member %s has no assignment", m.consumerId());
            check(m.memberEpoch().isPresent() && m.memberEpoch().get() > 0, "member %s epoch %s", m.consumerId(), m.memberEpoch());
        }
        var listed = await(admin.listGroups(new ListGroupsOptions().withTypes(Set.of(GroupType.CONSUMER))).all(), "listGroups type=consumer");
        check(listed.stream().anyMatch(g -> g.groupId().equals(group) && g.type().equals(java.util.Optional.of(GroupType.CONSUMER))),
                "listGroups type=consumer does not list %s", group);
        var classicListed = await(admin.listGroups(new ListGroupsOptions().withTypes(Set.of(GroupType.CLASSIC))).all(), "listGroups type=classic");
        check(classicListed.stream().noneMatch(g -> g.groupId().equals(group)), "listGroups type=classic lists the consumer group %s", group);
    }

    /**
     * Group admin APIs: list (state and type filters), describe, list/alter/delete offsets,
     * delete groups, and offsets of a deleted topic.
     */
    static void admin(Scenarios.Ctx ctx) throws Exception {
        String topic = Support.uniqueTopic("group-admin");
        String other = Support.uniqueTopic("group-admin-other");
        String doomed = Support.uniqueTopic("group-admin-deleted");
        String active = uniqueGroup("group-admin-active");
        String idle = uniqueGroup("group-admin-idle");
        GroupMember m = null;
        try (Admin admin = Support.admin(ctx.bootstrap())) {
            Support.createTopic(admin, topic, 3, null);
            Support.createTopic(admin, other, 1, null);
            Support.createTopic(admin, doomed, 2, null);
            try (var p = Support.producer(ctx.bootstrap(), Map.of())) {
                produceN(p, topic, 3, 300, 0);
                produceN(p, other, 1, 50, 0);
                produceN(p, doomed, 2, 20, 0);
            }
            m = new GroupMember("active", topic, classic(active)).start(ctx.bootstrap());
            waitSettled(admin, active, topic, 3, List.of(m));
            waitCommittedAtEnd(admin, active, topic, 3);

            Map<TopicPartition, OffsetAndMetadata> idleOffsets = Map.of(
                    new TopicPartition(topic, 0), new OffsetAndMetadata(10, "m-0"),
                    new TopicPartition(topic, 2), new OffsetAndMetadata(30),
                    new TopicPartition(other, 0), new OffsetAndMetadata(5, "other"),
                    new TopicPartition(doomed, 1), new OffsetAndMetadata(7));
            await(admin.alterConsumerGroupOffsets(idle, idleOffsets).all(), "alterConsumerGroupOffsets of a new group");

            // listGroups with filters.
            var all = await(admin.listGroups(ListGroupsOptions.forConsumerGroups()).all(), "listGroups");
            Map<String, GroupListing> byId = new HashMap<>();
            all.forEach(g -> byId.put(g.groupId(), g));
            check(byId.containsKey(active) && byId.containsKey(idle), "listGroups lacks %s or %s", active, idle);
            checkEq(java.util.Optional.of(GroupState.STABLE), byId.get(active).groupState(), "listed state of the active group");
            checkEq(java.util.Optional.of(GroupState.EMPTY), byId.get(idle).groupState(), "listed state of the offsets-only group");
            checkEq(java.util.Optional.of(GroupType.CLASSIC), byId.get(active).type(), "listed type of the active group");
            var stable = ids(await(admin.listGroups(ListGroupsOptions.forConsumerGroups().inGroupStates(Set.of(GroupState.STABLE))).all(), "listGroups Stable"));
            check(stable.contains(active) && !stable.contains(idle), "listGroups Stable: %s", stable);
            var empty = ids(await(admin.listGroups(ListGroupsOptions.forConsumerGroups().inGroupStates(Set.of(GroupState.EMPTY))).all(), "listGroups Empty"));
            check(empty.contains(idle) && !empty.contains(active), "listGroups Empty: %s", empty);
            var consumerType = ids(await(admin.listGroups(new ListGroupsOptions().withTypes(Set.of(GroupType.CONSUMER))).all(), "listGroups type consumer"));
            check(!consumerType.contains(active) && !consumerType.contains(idle), "listGroups type=consumer lists classic groups: %s", consumerType);

            // describeConsumerGroups.
            ConsumerGroupDescription da = describe(admin, active);
            checkEq(GroupState.STABLE, da.groupState(), "described state");
            checkEq(GroupType.CLASSIC, da.type(), "described type");
            checkEq("cooperative-sticky", da.partitionAssignor(), "described assignor");
            checkEq(1, da.members().size(), "described members");
            MemberDescription md = da.members().iterator().next();
            checkEq(m.memberId(), md.consumerId(), "described member id");
            checkEq("kaas-java-member", md.clientId(), "described client id");
            checkEq(new HashSet<>(Support.partitions(topic, 3)), md.assignment().topicPartitions(), "described assignment");
            ConsumerGroupDescription di = describe(admin, idle);
            checkEq(GroupState.EMPTY, di.groupState(), "described state of the offsets-only group");
            checkEq(0, di.members().size(), "members of the offsets-only group");

            // listConsumerGroupOffsets.
            var fetched = await(admin.listConsumerGroupOffsets(idle).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets");
            checkEq(idleOffsets.keySet(), fetched.keySet(), "partitions with committed offsets");
            for (var e : idleOffsets.entrySet()) {
                checkEq(e.getValue().offset(), fetched.get(e.getKey()).offset(), "committed offset of " + e.getKey());
                checkEq(e.getValue().metadata(), fetched.get(e.getKey()).metadata(), "committed metadata of " + e.getKey());
            }
            checkEq(endOffsets(admin, topic, 3), committed(admin, active, topic), "active group's committed offsets");

            // alterConsumerGroupOffsets: fine for an Empty group, refused while it has members.
            Map<TopicPartition, OffsetAndMetadata> alter = Map.of(new TopicPartition(topic, 1), new OffsetAndMetadata(20));
            await(admin.alterConsumerGroupOffsets(idle, alter).all(), "alterConsumerGroupOffsets of an Empty group");
            checkEq(20L, committed(admin, idle, topic).get(1), "altered offset");
            awaitFailure(admin.alterConsumerGroupOffsets(active, alter).all(), UnknownMemberIdException.class,
                    "alterConsumerGroupOffsets of a group with members");

            // deleteConsumerGroupOffsets.
            awaitFailure(admin.deleteConsumerGroupOffsets(active, Set.of(new TopicPartition(topic, 0))).all(),
                    GroupSubscribedToTopicException.class, "deleteConsumerGroupOffsets while the group consumes the topic");
            await(admin.deleteConsumerGroupOffsets(idle, Set.of(new TopicPartition(other, 0))).all(), "deleteConsumerGroupOffsets");
            fetched = await(admin.listConsumerGroupOffsets(idle).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets after delete");
            check(!fetched.containsKey(new TopicPartition(other, 0)), "a deleted offset is still listed");
            check(fetched.containsKey(new TopicPartition(topic, 0)), "deleteConsumerGroupOffsets removed more than asked");
            awaitFailure(admin.deleteConsumerGroupOffsets(uniqueGroup("missing"), Set.of(new TopicPartition(other, 0))).all(),
                    GroupIdNotFoundException.class, "deleteConsumerGroupOffsets of an unknown group");

            // deleteConsumerGroups.
            awaitFailure(admin.deleteConsumerGroups(List.of(active)).all(), GroupNotEmptyException.class,
                    "deleteConsumerGroups of a group with members");
            awaitFailure(admin.deleteConsumerGroups(List.of(uniqueGroup("missing"))).all(), GroupIdNotFoundException.class,
                    "deleteConsumerGroups of an unknown group");

            // Offsets of a deleted topic leave OffsetFetch.
            await(admin.deleteTopics(List.of(doomed)).all(), "deleteTopics");
            Support.waitUntil("the offsets of a deleted topic to leave OffsetFetch", Duration.ofSeconds(30), () ->
                    !await(admin.listConsumerGroupOffsets(idle).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets")
                            .containsKey(new TopicPartition(doomed, 1)));
            check(committed(admin, idle, topic).containsKey(0), "deleting a topic removed the offsets of another topic");

            // Once the member left: delete offsets, then the groups.
            m.close();
            m = null;
            Support.waitUntil("the group to be Empty after its member left", Duration.ofSeconds(30),
                    () -> describe(admin, active).groupState() == GroupState.EMPTY);
            await(admin.deleteConsumerGroupOffsets(active, Set.of(new TopicPartition(topic, 0))).all(), "deleteConsumerGroupOffsets after the member left");
            await(admin.deleteConsumerGroups(List.of(active, idle)).all(), "deleteConsumerGroups");
            var left = ids(await(admin.listGroups().all(), "listGroups after delete"));
            check(!left.contains(active) && !left.contains(idle), "deleted groups are still listed");
            check(await(admin.listConsumerGroupOffsets(idle).partitionsToOffsetAndMetadata(), "offsets of a deleted group").isEmpty(),
                    "a deleted group still has offsets");
        } finally {
            if (m != null) m.close();
        }
    }

    static Set<String> ids(java.util.Collection<GroupListing> gs) {
        Set<String> out = new TreeSet<>();
        gs.forEach(g -> out.add(g.groupId()));
        return out;
    }
}
