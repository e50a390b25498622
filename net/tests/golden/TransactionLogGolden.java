// Prints `__transaction_state` keys and values serialized by Apache Kafka's own classes, as hex.
// Run from the workspace root: java -cp "tests/kafka/target/lib/*" net/tests/golden/TransactionLogGolden.java
// The lines it prints are the golden bytes of net/src/transactions/log_format.rs's tests.

import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.protocol.MessageUtil;
import org.apache.kafka.coordinator.transaction.TransactionLog;
import org.apache.kafka.coordinator.transaction.TransactionState;
import org.apache.kafka.coordinator.transaction.TxnTransitMetadata;
import org.apache.kafka.coordinator.transaction.generated.TransactionLogValue;
import org.apache.kafka.server.common.TransactionVersion;

public class TransactionLogGolden {
    static String hex(byte[] bytes) {
        StringBuilder out = new StringBuilder();
        for (byte b : bytes) out.append(String.format("%02x", b));
        return out.toString();
    }

    static void print(String name, byte[] bytes) {
        System.out.println(name + " " + hex(bytes));
    }

    static TransactionLogValue.PartitionsSchema partitions(String topic, Integer... ids) {
        return new TransactionLogValue.PartitionsSchema().setTopic(topic).setPartitionIds(List.of(ids));
    }

    public static void main(String[] args) {
        print("key_my_txn", TransactionLog.keyToBytes("my-txn"));
        print("key_empty", TransactionLog.keyToBytes(""));
        print("key_unicode", TransactionLog.keyToBytes("tx-\u00e9\uD83D\uDE00"));

        TransactionLogValue ongoing = new TransactionLogValue()
            .setProducerId(1000L)
            .setProducerEpoch((short) 5)
            .setTransactionTimeoutMs(60000)
            .setTransactionStatus((byte) 1)
            .setTransactionPartitions(List.of(partitions("orders", 2, 0), partitions("__consumer_offsets", 17)))
            .setTransactionLastUpdateTimestampMs(1700000000123L)
            .setTransactionStartTimestampMs(1700000000000L);
        print("value_v0_ongoing", MessageUtil.toVersionPrefixedBytes((short) 0, ongoing));
        print("value_v1_ongoing_no_tags", MessageUtil.toVersionPrefixedBytes((short) 1, ongoing));

        TransactionLogValue empty = new TransactionLogValue()
            .setProducerId(42L)
            .setProducerEpoch((short) 0)
            .setTransactionTimeoutMs(900000)
            .setTransactionStatus((byte) 0)
            .setTransactionPartitions(null)
            .setTransactionLastUpdateTimestampMs(1L)
            .setTransactionStartTimestampMs(-1L);
        print("value_v0_empty_null_partitions", MessageUtil.toVersionPrefixedBytes((short) 0, empty));
        print("value_v1_empty_null_partitions", MessageUtil.toVersionPrefixedBytes((short) 1, empty));

        TransactionLogValue prepareCommit = new TransactionLogValue()
            .setProducerId(5000L)
            .setPreviousProducerId(4999L)
            .setNextProducerId(5001L)
            .setProducerEpoch((short) 32767)
            .setNextProducerEpoch((short) 7)
            .setTransactionTimeoutMs(30000)
            .setTransactionStatus((byte) 2)
            .setTransactionPartitions(List.of(partitions("t", 0, 1, 2)))
            .setTransactionLastUpdateTimestampMs(1700000005000L)
            .setTransactionStartTimestampMs(1700000004000L)
            .setClientTransactionVersion((short) 2);
        print("value_v1_prepare_commit_all_tags", MessageUtil.toVersionPrefixedBytes((short) 1, prepareCommit));

        TransactionLogValue completeAbort = new TransactionLogValue()
            .setProducerId(7L)
            .setProducerEpoch((short) 3)
            .setTransactionTimeoutMs(10000)
            .setTransactionStatus((byte) 5)
            .setTransactionPartitions(List.of())
            .setTransactionLastUpdateTimestampMs(1700000009000L)
            .setTransactionStartTimestampMs(1700000008000L)
            .setClientTransactionVersion((short) 2);
        print("value_v1_complete_abort_empty_list", MessageUtil.toVersionPrefixedBytes((short) 1, completeAbort));

        // Through Kafka's TransactionLog.valueToBytes, as its coordinator writes them.
        Set<TopicPartition> one = new HashSet<>(Set.of(new TopicPartition("orders", 3)));
        TxnTransitMetadata ongoingTv2 = new TxnTransitMetadata(
            8000L, 7999L, -1L, (short) 12, (short) 11, 60000, TransactionState.ONGOING, new HashSet<>(one),
            1700000100000L, 1700000100500L, TransactionVersion.TV_2);
        print("transit_tv2_ongoing", TransactionLog.valueToBytes(ongoingTv2, TransactionVersion.TV_2));
        TxnTransitMetadata emptyTv0 = new TxnTransitMetadata(
            8001L, -1L, -1L, (short) 0, (short) -1, 60000, TransactionState.EMPTY, new HashSet<>(),
            -1L, 1700000200000L, TransactionVersion.TV_0);
        print("transit_tv0_server_empty", TransactionLog.valueToBytes(emptyTv0, TransactionVersion.TV_0));
        print("transit_tv2_server_empty", TransactionLog.valueToBytes(emptyTv0, TransactionVersion.TV_2));
        TxnTransitMetadata completeCommit = new TxnTransitMetadata(
            9001L, 9000L, -1L, (short) 0, (short) 32766, 60000, TransactionState.COMPLETE_COMMIT, new HashSet<>(),
            1700000300000L, 1700000301000L, TransactionVersion.TV_2);
        print("transit_tv2_complete_commit", TransactionLog.valueToBytes(completeCommit, TransactionVersion.TV_2));
    }
}
