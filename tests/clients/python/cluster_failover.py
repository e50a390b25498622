#!/usr/bin/env python3
"""librdkafka (confluent-kafka) roles of the Kubernetes cluster test
(tests/cluster_survives_broker_and_controller_loss.rs) and of perf/failover.sh.

Not a scenario of scenarios.py: these run against three kaas brokers while the Rust test (or
the perf script) kills, pauses and resumes them, so the caller starts each role itself:

    cluster_failover.py --bootstrap H:P,.. produce   --topic T --partitions N --until STOP
                        --acked FILE [--progress FILE] [--pace-ms MS] [--gaps FILE]
    cluster_failover.py --bootstrap H:P,.. consume   --topic T --group G --protocol classic|consumer
                        --acked FILE [--progress FILE]
    cluster_failover.py --bootstrap H:P,.. committed --topic T --group G --at-least FILE
    cluster_failover.py --bootstrap H:P,.. probe     --topic T --partitions-list P,P,..
                        --victim ID --kill-pid PID --signal 9|19 --assignment FILE

produce: an idempotent producer (acks=all) sends records round-robin over the partitions,
paced, until the file STOP exists; then flushes and writes every acknowledged record to the
acked FILE as "partition offset value" (the format of cluster_moves.py, whose `verify` phase
reads it), through a rename so a reader never sees half of it. It fails if any record is not
acknowledged. --progress FILE holds the number acknowledged so far (rewritten every 200 ms).
--gaps FILE gets, per partition, "partition seconds": the longest time between two of its
acknowledgements (from the first acknowledgement on), what a rolling restart costs a producer.

consume: a group member (classic or KIP-848 `group.protocol=consumer`) consumes from the
earliest offset and commits every record synchronously (retrying what the client calls
retriable, e.g. while the coordinator moves), until the acked FILE exists and every record in
it was consumed. It fails if an acknowledged record is never consumed or has another value, if
a record not acknowledged is consumed, or if a record is delivered again after its commit
succeeded (committed offsets lost or gone back). At the end it commits its final positions and
checks, with a fresh client, that the group's committed offsets are exactly those.
--progress FILE holds {"consumed": n, "committed": {partition: offset}} (every 200 ms).

committed: fails unless the group's committed offsets are at least those of the `committed`
map of a consumer's progress FILE (a snapshot taken before a broker was killed).

probe (perf/failover.sh): with a producer connected to every leader (one record per listed
partition acknowledged first), sends signal 9 (kill) or 19 (SIGSTOP) to broker ID's process
PID, then at once one record to each listed partition (those broker ID led), and prints
"ASSIGNED <s> ANSWERED <s>": seconds from the signal to an assignment FILE
(assignment.json) in which another broker leads every listed partition, and to the last of
the records acknowledged. The producer gives up on an unanswered request after 1 s (a paused
leader never answers) and refreshes metadata every 20 ms while a leader is unknown, so
ANSWERED is at most about a second above what the cluster itself takes.

Each role prints PASS (or ANSWERED) or FAIL <reason> and exits 0 or 1; every wait is bounded.
"""

import argparse
import json
import os
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def fail(reason):
    print("FAIL " + reason, flush=True)
    sys.exit(1)


def write_atomically(path, text):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "w") as out:
        out.write(text)
    os.rename(tmp, path)


def load_acked(path):
    acked = {}
    with open(path) as lines:
        for line in lines:
            partition, offset, value = line.split()
            acked[(int(partition), int(offset))] = value
    return acked


def produce(args):
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 2,
        "message.timeout.ms": 60000,
        "topic.metadata.refresh.interval.ms": 1000,
    })
    acked, errors = [], []
    last_ack, longest_gap = {}, {}

    def delivered(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.offset(), msg.value().decode()))
            now, partition = time.monotonic(), msg.partition()
            if partition in last_ack:
                gap = now - last_ack[partition]
                longest_gap[partition] = max(longest_gap.get(partition, 0.0), gap)
            last_ack[partition] = now
        else:
            errors.append(str(err))

    sent, last_progress = 0, 0.0
    deadline = time.time() + args.max_seconds
    while not os.path.exists(args.until) and time.time() < deadline:
        producer.produce(args.topic, value=("r%d" % sent).encode(),
                         partition=sent % args.partitions, on_delivery=delivered)
        sent += 1
        producer.poll(0)
        if args.progress and time.time() - last_progress > 0.2:
            write_atomically(args.progress, "%d\n" % len(acked))
            last_progress = time.time()
        time.sleep(args.pace_ms / 1000.0)
    left = producer.flush(60)
    write_atomically(args.acked, "".join("%d %d %s\n" % a for a in acked))
    if args.gaps:
        write_atomically(args.gaps, "".join("%d %.3f\n" % (p, longest_gap.get(p, 0.0))
                                             for p in sorted(last_ack)))
    if args.progress:
        write_atomically(args.progress, "%d\n" % len(acked))
    if not os.path.exists(args.until):
        fail("produce: the stop file never appeared in %s s" % args.max_seconds)
    if left or errors or len(acked) != sent:
        fail("produce: %d acked of %d, %d unflushed, errors %s" %
             (len(acked), sent, left, errors[:3]))
    print("PASS produce %d" % len(acked), flush=True)


def commit(consumer, topic, partition, offset, deadline):
    """Commits `offset` for `partition`; retries retriable errors until `deadline`. Whether the
    commit succeeded."""
    while True:
        try:
            consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
            return True
        except KafkaException as error:
            if not error.args[0].retriable() or time.time() > deadline:
                print("commit of %d at %d failed: %s" % (partition, offset, error), flush=True)
                return False
            time.sleep(0.1)


def group_config(args):
    config = {"bootstrap.servers": args.bootstrap, "group.id": args.group,
              "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "topic.metadata.refresh.interval.ms": 1000}
    if args.protocol == "consumer":
        config["group.protocol"] = "consumer"
    else:
        config["session.timeout.ms"] = 10000
        config["heartbeat.interval.ms"] = 1000
    return config


def committed_offsets(args, partitions):
    checker = Consumer(group_config(args))
    try:
        parts = [TopicPartition(args.topic, p) for p in partitions]
        return {tp.partition: tp.offset for tp in checker.committed(parts, timeout=30)}
    finally:
        checker.close()


def consume(args):
    consumer = Consumer(group_config(args))
    consumer.subscribe([args.topic])
    seen, committed, twice = {}, {}, []
    acked, last_progress, last_check = None, 0.0, 0.0
    deadline = time.time() + args.max_seconds
    done = False
    while not done and time.time() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            partition, offset = msg.partition(), msg.offset()
            if offset < committed.get(partition, 0):
                twice.append((partition, offset))
            seen[(partition, offset)] = msg.value().decode()
            if commit(consumer, args.topic, partition, offset + 1, time.time() + 20):
                committed[partition] = max(committed.get(partition, 0), offset + 1)
        now = time.time()
        if args.progress and now - last_progress > 0.2:
            write_atomically(args.progress, json.dumps(
                {"consumed": len(seen), "committed": {str(p): o for p, o in committed.items()}}))
            last_progress = now
        if now - last_check > 1.0:
            last_check = now
            if acked is None and os.path.exists(args.acked):
                acked = load_acked(args.acked)
            done = acked is not None and all(k in seen for k in acked)
    ends = {}
    for (partition, offset) in seen:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    final_ok = all(commit(consumer, args.topic, p, o, time.time() + 20) for p, o in ends.items())
    consumer.close()
    if acked is None:
        fail("consume: no acked file within %s s" % args.max_seconds)
    missing = [k for k in acked if k not in seen]
    if missing:
        fail("consume: %d acknowledged records never consumed, e.g. %s" %
             (len(missing), sorted(missing)[:3]))
    wrong = [k for k in acked if seen[k] != acked[k]]
    if wrong:
        fail("consume: records with other values than acknowledged at %s" % sorted(wrong)[:3])
    extra = [k for k in seen if k not in acked]
    if extra:
        fail("consume: %d records consumed that were never acknowledged, e.g. %s" %
             (len(extra), sorted(extra)[:3]))
    if twice:
        fail("consume: %d records delivered again after their commit, e.g. %s" %
             (len(twice), twice[:3]))
    if not final_ok:
        fail("consume: the final commit failed")
    got = committed_offsets(args, sorted(ends))
    if got != ends:
        fail("consume: committed offsets %s, expected %s" % (sorted(got.items()), sorted(ends.items())))
    print("PASS consume %d committed %s" % (len(seen), sorted(ends.items())), flush=True)


def check_committed(args):
    with open(args.at_least) as snapshot:
        want = {int(p): o for p, o in json.load(snapshot)["committed"].items()}
    if not want:
        fail("committed: the snapshot holds no commits")
    got = committed_offsets(args, sorted(want))
    low = {p: (got.get(p), o) for p, o in want.items() if got.get(p, -1) < o}
    if low:
        fail("committed: below the snapshot (got, snapshot) at %s" % sorted(low.items()))
    print("PASS committed %s" % sorted(got.items()), flush=True)


def leaders(path):
    """Partition -> leader of `path` (an assignment.json), {} while it cannot be read."""
    try:
        with open(path) as text:
            assignment = json.load(text)
    except (OSError, ValueError):
        return {}
    partitions = assignment.get("partitions", {})
    if not isinstance(partitions, dict):
        return {}
    return {(topic, i): p.get("leader") for topic, entries in partitions.items()
            for i, p in enumerate(entries) if isinstance(p, dict)}


def probe(args):
    partitions = [int(p) for p in args.partitions_list.split(",")]
    producer = Producer({
        "bootstrap.servers": args.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 0,
        "message.timeout.ms": 60000,
        # A paused broker never answers: give up on any request to it after 1 s, not 30 or
        # 60 (socket.timeout.ms bounds every request, Metadata included).
        "request.timeout.ms": 1000,
        "socket.timeout.ms": 1000,
        "retry.backoff.ms": 20,
        "retry.backoff.max.ms": 100,
        "topic.metadata.refresh.fast.interval.ms": 20,
        "topic.metadata.refresh.interval.ms": 500,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 100,
    })
    errors, answered = [], []

    def delivered(err, msg):
        if err is None:
            answered.append(time.monotonic())
        else:
            errors.append(str(err))

    # Warm up: metadata known and a connection to every leader open before the clock starts.
    for partition in partitions:
        producer.produce(args.topic, value=b"warm-up", partition=partition, on_delivery=delivered)
    if producer.flush(30) or errors:
        fail("probe: the warm-up was not acknowledged: %s" % errors[:3])
    answered.clear()
    moved = []
    watched = [(args.topic, p) for p in partitions]

    def watch():
        while time.monotonic() < start + 60:
            now = leaders(args.assignment)
            if now and all(now.get(tp) not in (None, args.victim) for tp in watched):
                moved.append(time.monotonic())
                return
            time.sleep(0.005)

    start = time.monotonic()
    os.kill(args.kill_pid, args.signal)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    for partition in partitions:
        producer.produce(args.topic, value=b"probe", partition=partition, on_delivery=delivered)
    left = producer.flush(60)
    watcher.join(60)
    if left or errors or len(answered) != len(partitions):
        fail("probe: %d unanswered, errors %s" % (left, errors[:3]))
    if not moved:
        fail("probe: the assignment never moved the partitions off broker %d" % args.victim)
    print("ASSIGNED %.3f ANSWERED %.3f" % (moved[0] - start, max(answered) - start), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("role", choices=["produce", "consume", "committed", "probe"])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--partitions-list", default="0")
    parser.add_argument("--pace-ms", type=float, default=5.0)
    parser.add_argument("--until")
    parser.add_argument("--acked")
    parser.add_argument("--progress")
    parser.add_argument("--gaps")
    parser.add_argument("--group")
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic")
    parser.add_argument("--at-least")
    parser.add_argument("--max-seconds", type=float, default=100.0)
    parser.add_argument("--kill-pid", type=int)
    parser.add_argument("--signal", type=int, default=9)
    parser.add_argument("--victim", type=int)
    parser.add_argument("--assignment")
    args = parser.parse_args()
    {"produce": produce, "consume": consume, "committed": check_committed,
     "probe": probe}[args.role](args)


if __name__ == "__main__":
    main()
