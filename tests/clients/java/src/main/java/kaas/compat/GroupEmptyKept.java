package kaas.compat;

import static kaas.compat.Support.await;
import static kaas.compat.Support.awaitFailure;
import static kaas.compat.Support.check;
import static kaas.compat.Support.checkEq;

import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;

/**
 * What {@code kafka-consumer-groups --delete-offsets} then {@code --delete} does: an Empty group
 * whose last committed offset was deleted (OffsetDelete) is still a group, Empty, until
 * DeleteGroups removes it (or offset retention does, much later). Checked for a group created
 * by an admin commit and for one whose only consumer committed and closed.
 */
final class GroupEmptyKept {
    private GroupEmptyKept() {}

    static void emptyGroupKept(Scenarios.Ctx ctx) throws Exception {
        String topic = Support.uniqueTopic("group-empty-kept");
        String adminGroup = Groups.uniqueGroup("empty-kept-admin");
        String memberGroup = Groups.uniqueGroup("empty-kept-member");
        try (Admin admin = Support.admin(ctx.bootstrap())) {
            Support.createTopic(admin, topic, 2, null);
            List<TopicPartition> tps = Support.partitions(topic, 2);
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (TopicPartition tp : tps) offsets.put(tp, new OffsetAndMetadata(5));
            await(admin.alterConsumerGroupOffsets(adminGroup, offsets).all(), "alterConsumerGroupOffsets");

            Map<String, Object> conf = Groups.classic(memberGroup);
            conf.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
            try (KafkaConsumer<byte[], byte[]> c = Support.consumer(ctx.bootstrap(), conf)) {
                c.subscribe(List.of(topic));
                long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
                while (c.assignment().size() < 2) {
                    check(System.nanoTime() < deadline, "the consumer got no assignment: %s", c.assignment());
                    c.poll(Duration.ofMillis(100));
                }
                c.commitSync(offsets);
            }

            for (String group : List.of(adminGroup, memberGroup)) {
                checkEq(new HashSet<>(tps), committed(admin, group), "committed partitions of " + group);
                await(admin.deleteConsumerGroupOffsets(group, new HashSet<>(tps)).all(), "deleteConsumerGroupOffsets " + group);
                checkEq(Set.of(), committed(admin, group), "committed partitions of " + group + " after deleting them");
            }
            // Give the coordinator time to act on groups without offsets, as it might.
            Support.sleep(1000);
            for (String group : List.of(adminGroup, memberGroup)) {
                GroupState state = Groups.describe(admin, group).groupState();
                checkEq(GroupState.EMPTY, state, "state of " + group + " after its last offset was deleted");
                await(admin.deleteConsumerGroups(List.of(group)).all(), "deleteConsumerGroups " + group);
                awaitFailure(admin.deleteConsumerGroups(List.of(group)).all(), GroupIdNotFoundException.class,
                        "deleteConsumerGroups of the deleted " + group);
            }
        }
    }

    private static Set<TopicPartition> committed(Admin admin, String group) {
        Map<TopicPartition, OffsetAndMetadata> m = await(
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata(), "listConsumerGroupOffsets " + group);
        Set<TopicPartition> out = new HashSet<>();
        m.forEach((tp, o) -> {
            if (o != null) out.add(tp);
        });
        return out;
    }
}
