package kaas.compat;

import static kaas.compat.Support.admin;
import static kaas.compat.Support.await;
import static kaas.compat.Support.awaitFailure;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;
import static kaas.compat.Support.createTopic;
import static kaas.compat.Support.producer;
import static kaas.compat.Support.uniqueTopic;

import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Set;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.SecurityDisabledException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

/**
 * AdminClient scenarios for the cluster-inspection APIs UIs and tools use: ACLs (no authorizer:
 * SECURITY_DISABLED), authorized operations, DescribeLogDirs, ListPartitionReassignments and
 * DescribeProducers. Every expectation holds against Apache Kafka 4.4 without an authorizer.
 */
final class AdminApis {
    private AdminApis() {}

    /** What Kafka without an authorizer allows on a topic. */
    static final Set<AclOperation> TOPIC_OPERATIONS = EnumSet.of(AclOperation.READ, AclOperation.WRITE,
            AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS);

    /** What Kafka without an authorizer allows on the cluster. */
    static final Set<AclOperation> CLUSTER_OPERATIONS = EnumSet.of(AclOperation.CREATE, AclOperation.ALTER,
            AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE);

    /** DescribeAcls, CreateAcls and DeleteAcls fail with SecurityDisabledException. */
    static void acls(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            SecurityDisabledException e = awaitFailure(admin.describeAcls(AclBindingFilter.ANY).values(),
                    SecurityDisabledException.class, "describeAcls");
            checkEq("No Authorizer is configured on the broker", e.getMessage(), "describeAcls message");

            AclBinding read = new AclBinding(new ResourcePattern(ResourceType.TOPIC, "some-topic", PatternType.LITERAL),
                    new AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW));
            AclBinding write = new AclBinding(new ResourcePattern(ResourceType.GROUP, "grp", PatternType.PREFIXED),
                    new AccessControlEntry("User:bob", "*", AclOperation.WRITE, AclPermissionType.DENY));
            var created = admin.createAcls(List.of(read, write));
            for (AclBinding b : List.of(read, write)) {
                e = awaitFailure(created.values().get(b), SecurityDisabledException.class, "createAcls " + b);
                checkEq("No Authorizer is configured.", e.getMessage(), "createAcls message");
            }

            AclBindingFilter topics = new AclBindingFilter(
                    new ResourcePattern(ResourceType.TOPIC, "some-topic", PatternType.LITERAL).toFilter(),
                    AclBindingFilter.ANY.entryFilter());
            var deleted = admin.deleteAcls(List.of(AclBindingFilter.ANY, topics));
            for (AclBindingFilter f : List.of(AclBindingFilter.ANY, topics)) {
                e = awaitFailure(deleted.values().get(f), SecurityDisabledException.class, "deleteAcls " + f);
                checkEq("No Authorizer is configured.", e.getMessage(), "deleteAcls message");
            }
        }
    }

    /** Topic and cluster authorized operations: every operation when asked for, null otherwise. */
    static void authorizedOperations(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("authz-ops");
            createTopic(admin, topic, 2, Map.of());
            TopicDescription with = await(admin.describeTopics(List.of(topic),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicNames(),
                    "describeTopics with authorized operations").get(topic);
            checkEq(TOPIC_OPERATIONS, with.authorizedOperations(), "topic authorized operations");
            TopicDescription without = await(admin.describeTopics(List.of(topic)).allTopicNames(),
                    "describeTopics").get(topic);
            checkEq(null, without.authorizedOperations(), "topic authorized operations when not asked for");

            checkEq(CLUSTER_OPERATIONS, await(admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(true)).authorizedOperations(),
                    "describeCluster with authorized operations"), "cluster authorized operations");
            checkEq(null, await(admin.describeCluster().authorizedOperations(), "describeCluster"),
                    "cluster authorized operations when not asked for");
            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics " + topic);
        }
    }

    static ReplicaInfo replica(Map<String, LogDirDescription> dirs, TopicPartition tp) {
        for (LogDirDescription d : dirs.values()) {
            ReplicaInfo r = d.replicaInfos().get(tp);
            if (r != null) return r;
        }
        throw new Support.Failure("describeLogDirs lacks " + tp + " in " + dirs.keySet());
    }

    /** DescribeLogDirs: one directory with its volume's size; a partition's size grows with its data. */
    static void logDirs(Scenarios.Ctx ctx) throws Exception {
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("log-dirs");
            createTopic(admin, topic, 2, Map.of());
            Node node = await(admin.describeCluster().nodes(), "describeCluster nodes").iterator().next();
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);

            Map<String, LogDirDescription> before = await(admin.describeLogDirs(List.of(node.id())).allDescriptions(),
                    "describeLogDirs").get(node.id());
            check(before != null && before.size() == 1, "expected one log dir, got %s", before);
            var dir = before.entrySet().iterator().next();
            check(dir.getKey().startsWith("/"), "log dir %s is not an absolute path", dir.getKey());
            checkEq(null, dir.getValue().error(), "log dir error");
            OptionalLong total = dir.getValue().totalBytes();
            OptionalLong usable = dir.getValue().usableBytes();
            check(total.isPresent() && total.getAsLong() > 0, "total bytes %s", total);
            check(usable.isPresent() && usable.getAsLong() >= 0 && usable.getAsLong() <= total.getAsLong(),
                    "usable bytes %s of %s", usable, total);
            for (TopicPartition tp : List.of(p0, p1)) {
                ReplicaInfo r = replica(before, tp);
                checkEq(0L, r.size(), "size of empty " + tp);
                checkEq(0L, r.offsetLag(), "offset lag of " + tp);
                check(!r.isFuture(), "%s is reported as a future replica", tp);
            }

            int records = 200;
            byte[] value = new byte[1000];
            try (KafkaProducer<byte[], byte[]> p = producer(ctx.bootstrap(), Map.of())) {
                for (int i = 0; i < records; i++) p.send(new ProducerRecord<>(topic, 0, null, value));
                p.flush();
            }
            Map<String, LogDirDescription> after = await(admin.describeLogDirs(List.of(node.id())).allDescriptions(),
                    "describeLogDirs after producing").get(node.id());
            long size0 = replica(after, p0).size();
            check(size0 >= (long) records * value.length, "size of %s after %d x %d bytes is %d",
                    p0, records, value.length, size0);
            check(size0 < (long) records * value.length * 2, "size of %s is %d, more than twice the data", p0, size0);
            checkEq(0L, replica(after, p1).size(), "size of " + p1 + " that got no records");

            // DescribeReplicaLogDirs (the same request, for one replica) finds the partition's directory.
            var replica = new org.apache.kafka.common.TopicPartitionReplica(topic, 0, node.id());
            var info = await(admin.describeReplicaLogDirs(List.of(replica)).all(), "describeReplicaLogDirs").get(replica);
            check(info != null, "describeReplicaLogDirs lacks %s", replica);
            checkEq(dir.getKey(), info.getCurrentReplicaLogDir(), "log dir of " + replica);
            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics " + topic);
        }
    }

    /** ListPartitionReassignments: none, for all partitions and for named ones. */
    static void reassignments(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("reassign");
            createTopic(admin, topic, 2, Map.of());
            checkEq(Map.of(), await(admin.listPartitionReassignments().reassignments(),
                    "listPartitionReassignments"), "ongoing reassignments");
            checkEq(Map.of(), await(admin.listPartitionReassignments(Set.of(new TopicPartition(topic, 0),
                    new TopicPartition(topic, 7), new TopicPartition(topic + "-missing", 0))).reassignments(),
                    "listPartitionReassignments of named partitions"), "ongoing reassignments of named partitions");
            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics " + topic);
        }
    }

    static ProducerState onlyProducer(Admin admin, TopicPartition tp) {
        List<ProducerState> states = await(admin.describeProducers(List.of(tp)).partitionResult(tp),
                "describeProducers " + tp).activeProducers();
        checkEq(1, states.size(), "active producers of " + tp + " " + states);
        return states.get(0);
    }

    /** DescribeProducers: the idempotent producer's id, epoch, last sequence and timestamp per partition. */
    static void producers(Scenarios.Ctx ctx) {
        try (Admin admin = admin(ctx.bootstrap())) {
            String topic = uniqueTopic("producers");
            createTopic(admin, topic, 3, Map.of());
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            TopicPartition p2 = new TopicPartition(topic, 2);
            checkEq(List.of(), await(admin.describeProducers(List.of(p0)).partitionResult(p0),
                    "describeProducers before producing").activeProducers(), "producers of an empty partition");

            long t0 = System.currentTimeMillis() - 60_000;
            try (KafkaProducer<byte[], byte[]> p = producer(ctx.bootstrap(),
                    Map.of(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true, ProducerConfig.ACKS_CONFIG, "all"))) {
                for (int i = 0; i < 30; i++) p.send(new ProducerRecord<>(topic, 0, t0 + i, null, new byte[10]));
                for (int i = 0; i < 5; i++) p.send(new ProducerRecord<>(topic, 1, t0 + 100 + i, null, new byte[10]));
                p.flush();
            }
            ProducerState s0 = onlyProducer(admin, p0);
            ProducerState s1 = onlyProducer(admin, p1);
            check(s0.producerId() >= 0, "producer id %d", s0.producerId());
            checkEq(s0.producerId(), s1.producerId(), "producer id on both partitions one producer wrote");
            checkEq(0, s0.producerEpoch(), "producer epoch");
            checkEq(29, s0.lastSequence(), "last sequence on " + p0);
            checkEq(4, s1.lastSequence(), "last sequence on " + p1);
            checkEq(t0 + 29, s0.lastTimestamp(), "last timestamp on " + p0);
            checkEq(t0 + 104, s1.lastTimestamp(), "last timestamp on " + p1);
            checkEq(OptionalInt.empty(), s0.coordinatorEpoch(), "coordinator epoch");
            checkEq(OptionalLong.empty(), s0.currentTransactionStartOffset(), "transaction start offset");
            checkEq(List.of(), await(admin.describeProducers(List.of(p2)).partitionResult(p2),
                    "describeProducers of a partition nobody wrote").activeProducers(), "producers of " + p2);

            // A second producer is another id on the same partition.
            try (KafkaProducer<byte[], byte[]> p = producer(ctx.bootstrap(), Map.of())) {
                p.send(new ProducerRecord<>(topic, 1, t0 + 200, null, new byte[10]));
                p.flush();
            }
            List<ProducerState> both = await(admin.describeProducers(List.of(p1)).partitionResult(p1),
                    "describeProducers after a second producer").activeProducers();
            checkEq(2, both.size(), "producers of " + p1 + " " + both);
            Optional<ProducerState> second = both.stream().filter(s -> s.producerId() != s0.producerId()).findFirst();
            check(second.isPresent(), "no second producer id in %s", both);
            checkEq(0, second.get().lastSequence(), "last sequence of the second producer");
            checkEq(t0 + 200, second.get().lastTimestamp(), "last timestamp of the second producer");

            await(admin.deleteTopics(List.of(topic)).all(), "deleteTopics " + topic);
        }
    }
}
