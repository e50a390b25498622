#!/usr/bin/env python3
"""librdkafka (confluent-kafka) clients of the fault-injection test (tests/cluster_fault_schedule.rs).

Each role writes what it did as event lines, which the test's checker
(tests/support/fault_checker.rs) reads; times are wall-clock milliseconds:

    fault_clients.py --bootstrap H:P,.. produce --topic T --partitions N --producer ID
                     --until STOP --log FILE [--pace-ms MS]
    fault_clients.py --bootstrap H:P,.. consume --topic T --group G --protocol classic|consumer
                     --member M --until STOP --log FILE
    fault_clients.py --bootstrap H:P,.. dump    --topic T --partitions N --groups G,G,..
                     --log FILE

produce: an idempotent producer (acks=all) sends records round-robin over the partitions,
paced, until the file STOP exists, then flushes (at most 120 s). The value of the record of
send number SEQ (from 0) is "ID-SEQ" and goes to partition SEQ % N. Each acknowledgement is
"ACK <ms> ID SEQ <partition> <offset>", each record given up "NACK <ms> ID SEQ <partition>
<error>". A fatal error (the idempotent producer's state lost) is logged as "FATAL <error>"
and a new producer carries on with the next SEQ.

consume: a member of group G (classic, or KIP-848 with `group.protocol=consumer`) subscribes
from the earliest offset, logs every record it receives as "POLL <ms> G M <partition>
<offset> <value>", and after each poll commits, synchronously, the offset after the last
record of each partition in it, logging "COMMIT <ms> G M <partition> <offset>" for each
partition the coordinator accepted. Once STOP exists it goes on until its polls have returned
nothing for 10 s (at most 120 s), then closes.

dump: reads every partition from offset 0 to its high watermark with a fresh consumer and
writes "LOG <partition> <offset> <value>" for each record, "WATERMARKS <partition> <low>
<high>", then each group's committed offsets as "COMMITTED <group> <partition> <offset>"
(partitions without a commit left out).

Each role prints PASS <role> ... or FAIL <reason> on stdout and exits 0 or 1; every wait is
bounded.
"""

import argparse
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition


# Once told to stop, a member stops when its polls have returned nothing for this long (a
# rebalance can keep a member without partitions for a few seconds).
IDLE_SECONDS = 10


def now_ms():
    return int(time.time() * 1000)


def fail(reason):
    print("FAIL " + reason, flush=True)
    sys.exit(1)


class EventLog:
    """Event lines to a file, flushed at least every 200 ms (the test follows them live)."""

    def __init__(self, path):
        self.out = open(path, "a")
        self.flushed = time.time()

    def write(self, line):
        self.out.write(line + "\n")
        if time.time() - self.flushed > 0.2:
            self.flush()

    def flush(self):
        self.out.flush()
        self.flushed = time.time()


def new_producer(args):
    return Producer({
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 2,
        # Long enough for any fault of the schedule: a record is given up only when the
        # cluster stays unavailable for two minutes.
        "message.timeout.ms": 120000,
        "topic.metadata.refresh.interval.ms": 1000,
        # The idempotent producer's state changes (producer id and epoch, epoch bumps, the
        # errors that cause them) on stderr: what a duplicate is traced back to.
        "debug": "eos",
    })


def produce(args):
    log = EventLog(args.log)
    counts = {"acked": 0, "failed": 0, "fatal": 0}

    def delivered(err, msg):
        seq = int(msg.value().decode().rsplit("-", 1)[1])
        if err is None:
            counts["acked"] += 1
            log.write("ACK %d %s %d %d %d" % (now_ms(), args.producer, seq, msg.partition(),
                                              msg.offset()))
        else:
            counts["failed"] += 1
            log.write("NACK %d %s %d %d %s" % (now_ms(), args.producer, seq, msg.partition(),
                                               str(err).replace("\n", " ")))

    producer = new_producer(args)
    seq = 0
    while not os.path.exists(args.until):
        value = ("%s-%d" % (args.producer, seq)).encode()
        try:
            producer.produce(args.topic, value=value, partition=seq % args.partitions,
                             on_delivery=delivered)
            seq += 1
        except BufferError:
            pass  # the queue is full while the cluster is unavailable: send it again later
        except KafkaException as error:
            if not error.args[0].fatal():
                raise
            counts["fatal"] += 1
            log.write("FATAL %d %s" % (now_ms(), str(error).replace("\n", " ")))
            producer.flush(10)
            producer = new_producer(args)
        producer.poll(0)
        if time.time() - log.flushed > 0.2:
            log.flush()
        time.sleep(args.pace_ms / 1000.0)
    left = producer.flush(120)
    log.flush()
    if left:
        fail("produce: %d records neither acknowledged nor given up after 120 s" % left)
    print("PASS produce sent %d acked %d failed %d fatal %d" %
          (seq, counts["acked"], counts["failed"], counts["fatal"]), flush=True)


def group_config(args, group):
    config = {"bootstrap.servers": args.bootstrap, "group.id": group,
              "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "topic.metadata.refresh.interval.ms": 1000}
    if args.protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = 10000
        config["heartbeat.interval.ms"] = 1000
    return config


def consume(args):
    log = EventLog(args.log)
    consumer = Consumer(group_config(args, args.group))
    consumer.subscribe([args.topic])
    polled = commits = failed_commits = 0
    last_record = time.time()
    stop_seen = None
    while True:
        now = time.time()
        if stop_seen is None and os.path.exists(args.until):
            stop_seen = now
        if stop_seen is not None and now - stop_seen > 120:
            break
        messages = consumer.consume(num_messages=500, timeout=0.5)
        if not messages and stop_seen is not None and time.time() - last_record > IDLE_SECONDS:
            break
        ends = {}
        for msg in messages:
            if msg.error():
                continue
            polled += 1
            partition, offset = msg.partition(), msg.offset()
            log.write("POLL %d %s %s %d %d %s" % (now_ms(), args.group, args.member, partition,
                                                  offset, msg.value().decode()))
            ends[partition] = max(ends.get(partition, 0), offset + 1)
        if messages:
            last_record = time.time()
        if not ends:
            log.flush()
            continue
        offsets = [TopicPartition(args.topic, p, o) for p, o in sorted(ends.items())]
        try:
            answered = consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            # A rebalance or a coordinator moving: the next poll's commit carries on.
            failed_commits += 1
            log.write("COMMIT-FAILED %d %s %s %s" % (now_ms(), args.group, args.member,
                                                     str(error).replace("\n", " ")))
            continue
        done = now_ms()
        for tp in answered:
            if tp.error is None:
                commits += 1
                log.write("COMMIT %d %s %s %d %d" % (done, args.group, args.member,
                                                     tp.partition, tp.offset))
            else:
                failed_commits += 1
        log.flush()
    consumer.close()
    log.flush()
    print("PASS consume polled %d commits %d failed commits %d" %
          (polled, commits, failed_commits), flush=True)


def dump(args):
    log = EventLog(args.log)
    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "fault-dump-unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.max.bytes": 4 * 1024 * 1024})
    total = 0
    for partition in range(args.partitions):
        tp = TopicPartition(args.topic, partition)
        low, high = consumer.get_watermark_offsets(tp, timeout=30)
        log.write("WATERMARKS %d %d %d" % (partition, low, high))
        consumer.assign([TopicPartition(args.topic, partition, low)])
        position = low
        deadline = time.time() + 120
        while position < high:
            if time.time() > deadline:
                fail("dump: partition %d read up to %d of [%d, %d) in 120 s" %
                     (partition, position, low, high))
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        print("dump: partition %d: %s" % (partition, msg.error()), flush=True)
                    continue
                if msg.offset() >= high:
                    continue
                log.write("LOG %d %d %s" % (partition, msg.offset(), msg.value().decode()))
                position = max(position, msg.offset() + 1)
                total += 1
    consumer.close()
    parts = [TopicPartition(args.topic, p) for p in range(args.partitions)]
    for group in args.groups.split(","):
        reader = Consumer({"bootstrap.servers": args.bootstrap, "group.id": group,
                           "enable.auto.commit": False})
        for tp in reader.committed(parts, timeout=30):
            if tp.error is None and tp.offset >= 0:
                log.write("COMMITTED %s %d %d" % (group, tp.partition, tp.offset))
        reader.close()
    log.flush()
    print("PASS dump %d records" % total, flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("role", choices=["produce", "consume", "dump"])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--producer", default="py")
    parser.add_argument("--pace-ms", type=float, default=10.0)
    parser.add_argument("--until")
    parser.add_argument("--log", required=True)
    parser.add_argument("--group")
    parser.add_argument("--groups", default="")
    parser.add_argument("--member", default="m")
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    args = parser.parse_args()
    {"produce": produce, "consume": consume, "dump": dump}[args.role](args)


if __name__ == "__main__":
    main()
