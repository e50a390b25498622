#!/usr/bin/env python3
"""librdkafka (confluent-kafka) phases of the cluster-mode test (tests/partitions_move_between_brokers.rs).

Not a scenario of scenarios.py: these phases need a cluster of several kaas brokers whose
assignment the Rust test changes while they run, so the test calls each phase itself:

    cluster_moves.py --bootstrap H:P,H:P produce --topic T --partitions N --records R --acked FILE
    cluster_moves.py --bootstrap H:P,H:P verify  --topic T --partitions N --acked FILE
    cluster_moves.py --bootstrap H:P,H:P consume --topic T --group G --records R --committed FILE

produce: an idempotent producer (acks=all) sends R records round-robin over the partitions,
paced so the test can move partitions and kill brokers meanwhile; every acknowledged record is
written to FILE as "partition offset value". It fails if a record is not acknowledged.
verify: reads every partition from the start and checks that every acknowledged record is
there exactly once at its acknowledged offset, nothing else is there, and offsets are dense.
consume: consumes R records in group G, committing each synchronously; prints and writes to
FILE the committed positions. With --check it instead reads the group's committed offsets
and fails unless they are at least FILE's and at most the partition's end.
Each phase prints PASS or FAIL <reason> and exits 0 or 1; every wait is bounded.

The files are the one format every client's records are checked in: the Java and franz-go
cluster-moves scenarios (tests/clients/java ClusterMoves.java, tests/clients/go/cluster_moves.go)
print "ACKED <partition> <offset> <value>" and "COMMITTED <partition> <offset>" lines, which the
Rust tests append to an acked FILE (verify then checks all clients' records of the topic at
once) or write as a committed FILE (consume --check, with that client's group).
"""

import argparse
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

DEADLINE = 60.0


def fail(reason):
    print("FAIL " + reason, flush=True)
    sys.exit(1)


def produce(args):
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 2,
        "message.timeout.ms": 45000,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    acked, errors = [], []

    def delivered(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value().decode()))
        else:
            errors.append(str(err))

    for i in range(args.records):
        producer.produce(args.topic, value=("r%d" % i).encode(), partition=i % args.partitions,
                         on_delivery=delivered)
        producer.poll(0)
        time.sleep(args.pace_ms / 1000.0)
    left = producer.flush(DEADLINE)
    with open(args.acked, "w") as out:
        for partition, offset, value in acked:
            out.write("%d %d %s\n" % (partition, offset, value))
    if left or errors or len(acked) != args.records:
        fail("produce: %d acked of %d, %d unflushed, errors %s" %
             (len(acked), args.records, left, errors[:3]))
    print("PASS produce %d" % len(acked), flush=True)


def verify(args):
    expected = {}
    with open(args.acked) as acked:
        for line in acked:
            partition, offset, value = line.split()
            expected.setdefault(int(partition), {})[int(offset)] = value
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "verify-unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    for partition in range(args.partitions):
        tp = TopicPartition(args.topic, partition)
        low, high = consumer.get_watermark_offsets(tp, timeout=30)
        want = expected.get(partition, {})
        if low != 0 or high != len(want):
            fail("verify: partition %d has offsets [%d, %d), %d acked" %
                 (partition, low, high, len(want)))
        consumer.assign([TopicPartition(args.topic, partition, 0)])
        seen = {}
        deadline = time.time() + DEADLINE
        while len(seen) < high and time.time() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            seen[msg.offset()] = msg.value().decode()
        if sorted(seen) != list(range(high)):
            fail("verify: partition %d read %d of %d offsets" % (partition, len(seen), high))
        if seen != want:
            bad = [o for o in want if seen.get(o) != want[o]][:3]
            fail("verify: partition %d differs from the acknowledged records at %s" %
                 (partition, bad))
        values = list(seen.values())
        if len(set(values)) != len(values):
            fail("verify: partition %d holds a record twice" % partition)
    consumer.close()
    print("PASS verify", flush=True)


def consume(args):
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": args.group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 10000, "topic.metadata.refresh.interval.ms": 1000})
    if args.check:
        with open(args.committed) as committed:
            want = {int(p): int(o) for p, o in (line.split() for line in committed)}
        parts = [TopicPartition(args.topic, p) for p in want]
        got = {tp.partition: tp.offset for tp in consumer.committed(parts, timeout=30)}
        ends = {p: consumer.get_watermark_offsets(TopicPartition(args.topic, p), timeout=30)[1]
                for p in want}
        consumer.close()
        for partition, offset in want.items():
            if got.get(partition, -1) < offset:
                fail("consume --check: partition %d committed %s, expected %d" %
                     (partition, got.get(partition), offset))
            # No consumer commits past the end of the log: such an offset was written by
            # something else (a stale coordinator).
            if got[partition] > ends[partition]:
                fail("consume --check: partition %d committed %d past its end %d" %
                     (partition, got[partition], ends[partition]))
        print("PASS committed %s" % sorted(got.items()), flush=True)
        return
    consumer.subscribe([args.topic])
    positions, count = {}, 0
    deadline = time.time() + DEADLINE
    while count < args.records and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        commit = TopicPartition(args.topic, msg.partition(), msg.offset() + 1)
        try:
            consumer.commit(offsets=[commit], asynchronous=False)
        except Exception as error:  # NOT_COORDINATOR while the group moves: retry once found
            print("commit retried: %s" % error, flush=True)
            continue
        positions[msg.partition()] = msg.offset() + 1
        count += 1
        time.sleep(args.pace_ms / 1000.0)
    consumer.close()
    with open(args.committed, "w") as out:
        for partition, offset in sorted(positions.items()):
            out.write("%d %d\n" % (partition, offset))
    if count < args.records:
        fail("consume: %d of %d records" % (count, args.records))
    print("PASS consume %s" % sorted(positions.items()), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("phase", choices=["produce", "verify", "consume"])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--records", type=int, default=100)
    parser.add_argument("--pace-ms", type=float, default=2.0)
    parser.add_argument("--acked")
    parser.add_argument("--group")
    parser.add_argument("--committed")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    {"produce": produce, "verify": verify, "consume": consume}[args.phase](args)


if __name__ == "__main__":
    main()
