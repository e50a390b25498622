#!/usr/bin/env python3
"""librdkafka (confluent-kafka) transactions for the cluster-mode test
(tests/cluster_transactions_survive_broker_loss.rs).

Not a scenario of scenarios.py: the Rust test kills brokers while these phases run.

    cluster_transactions.py --bootstrap H:P,H:P produce --topic T --partitions N --txn-id ID
        --transactions K --outcomes FILE
    cluster_transactions.py --bootstrap H:P,H:P verify --topic T --partitions N --outcomes FILE

produce: one transactional producer (Transactions V1) runs K transactions, each one record
per partition ("<txn> <partition>"), aborting every fifth on purpose; a transaction whose
commit fails with an abortable error is aborted and run again under the next number. Each
outcome is appended to FILE as "COMMITTED <txn>" or "ABORTED <txn>" once librdkafka returned
it. It prints "STARTED" after its first commit, so the test knows when to kill brokers.
verify: reads every partition read_committed up to its end offsets (which must be reached:
no transaction is left open) and checks that every committed transaction's records are
there exactly once and no aborted transaction's record is. Each phase prints PASS or
FAIL <reason> and exits 0 or 1; every wait is bounded.
"""

import argparse
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

DEADLINE = 90.0


def fail(reason):
    print("FAIL " + reason, flush=True)
    sys.exit(1)


def record(outcomes, line):
    with open(outcomes, "a") as out:
        out.write(line + "\n")


def produce(args):
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "transactional.id": args.txn_id,
        "transaction.timeout.ms": 10000,
        "message.timeout.ms": 10000,
        "topic.metadata.refresh.interval.ms": 1000,
        "linger.ms": 1,
    })
    producer.init_transactions(60)
    txn = 0
    deadline = time.time() + args.transactions * 2.0 + 120
    while txn < args.transactions:
        if time.time() > deadline:
            fail("transactions did not finish in time (at %d)" % txn)
        abort_on_purpose = txn % 5 == 4
        try:
            producer.begin_transaction()
            for partition in range(args.partitions):
                producer.produce(args.topic, value=("%d %d" % (txn, partition)).encode(),
                                 partition=partition)
            if abort_on_purpose:
                producer.abort_transaction(60)
                record(args.outcomes, "ABORTED %d" % txn)
            else:
                producer.commit_transaction(60)
                record(args.outcomes, "COMMITTED %d" % txn)
                if txn == 0:
                    print("STARTED", flush=True)
        except KafkaException as e:
            error = e.args[0]
            if error.txn_requires_abort():
                producer.abort_transaction(60)
                record(args.outcomes, "ABORTED %d" % txn)
            elif error.retriable():
                # The outcome is unknown: the commit is retried until it is known.
                while True:
                    try:
                        producer.commit_transaction(60)
                        record(args.outcomes, "COMMITTED %d" % txn)
                        break
                    except KafkaException as again:
                        if again.args[0].txn_requires_abort():
                            producer.abort_transaction(60)
                            record(args.outcomes, "ABORTED %d" % txn)
                            break
                        if not again.args[0].retriable():
                            fail("transaction %d: %s" % (txn, again.args[0]))
                        time.sleep(0.2)
            else:
                fail("transaction %d: %s" % (txn, error))
        txn += 1
        time.sleep(args.pace_ms / 1000.0)
    print("PASS produce %d transactions" % txn, flush=True)


def verify(args):
    outcomes = {}
    with open(args.outcomes) as lines:
        for line in lines:
            kind, txn = line.split()
            outcomes[int(txn)] = kind
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": "verify-unused",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    })
    partitions = [TopicPartition(args.topic, p, 0) for p in range(args.partitions)]
    ends = {}
    for tp in partitions:
        low, high = consumer.get_watermark_offsets(tp, timeout=30)
        ends[tp.partition] = high
    consumer.assign(partitions)
    seen = {}
    positions = {p: 0 for p in range(args.partitions)}
    deadline = time.time() + DEADLINE
    while any(positions[p] < ends[p] for p in positions):
        if time.time() > deadline:
            fail("read_committed did not reach the end offsets %s (at %s): a transaction "
                 "stays open" % (ends, positions))
        message = consumer.poll(0.5)
        if message is None:
            for tp in consumer.position(partitions):
                positions[tp.partition] = max(positions[tp.partition], tp.offset)
            continue
        if message.error():
            continue
        txn, partition = map(int, message.value().decode().split())
        if partition != message.partition():
            fail("record %r in partition %d" % (message.value(), message.partition()))
        seen[(txn, partition)] = seen.get((txn, partition), 0) + 1
        positions[message.partition()] = message.offset() + 1
    consumer.close()
    for (txn, partition), count in seen.items():
        if count != 1:
            fail("transaction %d's record in partition %d read %d times" % (txn, partition, count))
        if outcomes.get(txn) == "ABORTED":
            fail("aborted transaction %d visible in partition %d" % (txn, partition))
    committed = [txn for txn, kind in outcomes.items() if kind == "COMMITTED"]
    for txn in committed:
        for partition in range(args.partitions):
            if (txn, partition) not in seen:
                fail("committed transaction %d lost its record in partition %d" % (txn, partition))
    print("PASS verify: %d committed, %d aborted transactions" % (
        len(committed), len(outcomes) - len(committed)), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("phase", choices=["produce", "verify"])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--txn-id")
    parser.add_argument("--transactions", type=int, default=100)
    parser.add_argument("--pace-ms", type=float, default=20.0)
    parser.add_argument("--outcomes", required=True)
    args = parser.parse_args()
    if args.phase == "produce":
        produce(args)
    else:
        verify(args)


if __name__ == "__main__":
    main()
