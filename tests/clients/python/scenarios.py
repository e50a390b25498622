#!/usr/bin/env python3
"""librdkafka (confluent-kafka for Python) compatibility scenarios.

    python3 scenarios.py --bootstrap 127.0.0.1:9092 --scenario all
    python3 scenarios.py --bootstrap 127.0.0.1:9092 --scenario errors --records 500 --seed 7

Each scenario checks its own results and prints ``PASS <scenario>``; on any mismatch it prints
``FAIL <scenario>: <reason>`` and exits 1. Topics get random suffixes so scenarios can run one
after another against the same broker, and every wait is bounded.

Consumers never join a group: they use assign() with explicit offsets, never subscribe() and
never commit. confluent-kafka refuses to build a Consumer without group.id, so a throw-away
group.id is set; nothing here depends on the group coordinator.
"""

import argparse
import faulthandler
import random
import sys
import threading
import time
import traceback
import uuid
import warnings

import confluent_kafka
from confluent_kafka import (OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, Consumer, IsolationLevel, KafkaError,
                             KafkaException, Producer, TopicCollection, TopicPartition)
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewPartitions, NewTopic, OffsetSpec)

OP_TIMEOUT = 30.0
SCENARIO_LIMIT = 600.0  # seconds; past it the process dumps its stacks and exits 1
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


class Failure(Exception):
    """A mismatch between what the broker did and what the scenario expects."""


def check(cond, msg, *args):
    if not cond:
        raise Failure(msg % args if args else msg)


def check_eq(expected, actual, what):
    if expected != actual:
        raise Failure(f"{what}: expected {expected!r} but got {actual!r}")


def short(b):
    if b is None:
        return "None"
    return b[:16].hex() + (f"...({len(b)} bytes)" if len(b) > 16 else "")


def unique_topic(name):
    return f"py-{name}-{uuid.uuid4().hex[:10]}"


def wait_until(what, timeout, cond, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return
        if time.monotonic() > deadline:
            raise Failure(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def result(fut, what):
    """Waits for an admin future; raises Failure on error or time-out."""
    try:
        return fut.result(timeout=OP_TIMEOUT)
    except KafkaException as e:
        raise Failure(f"{what} failed: {e.args[0]}") from e
    except Exception as e:  # concurrent.futures.TimeoutError and friends
        raise Failure(f"{what} failed: {e!r}") from e


def expect_error(fut, code, what):
    """Waits for an admin future that must fail with the given KafkaError code."""
    try:
        value = fut.result(timeout=OP_TIMEOUT)
    except KafkaException as e:
        err = e.args[0]
        check(err.code() == code, "%s: expected %s but got %s", what, KafkaError(code).name(), err)
        return err
    except Exception as e:
        raise Failure(f"{what}: expected {KafkaError(code).name()} but got {e!r}") from e
    raise Failure(f"{what}: expected {KafkaError(code).name()} but it succeeded with {value!r}")


class Ctx:
    def __init__(self, bootstrap, records, seed):
        self.bootstrap = bootstrap
        self.records = records
        self.seed = seed

    def rnd(self, salt):
        return random.Random(f"{self.seed}-{salt}")

    def admin(self):
        return AdminClient({"bootstrap.servers": self.bootstrap, "client.id": "kaas-py-admin"})

    def producer(self, **overrides):
        conf = {"bootstrap.servers": self.bootstrap, "client.id": "kaas-py-producer",
                "enable.idempotence": True, "acks": "all", "message.timeout.ms": 60000}
        conf.update(overrides)
        return Producer(conf)

    def consumer(self, **overrides):
        conf = {"bootstrap.servers": self.bootstrap, "client.id": "kaas-py-consumer",
                "group.id": "kaas-py-unused-" + uuid.uuid4().hex[:8],
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest"}
        conf.update(overrides)
        return Consumer(conf)


# ---- topics --------------------------------------------------------------------------------

def create_topic(ctx, admin, topic, partitions, config=None):
    fs = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})],
                             operation_timeout=OP_TIMEOUT, request_timeout=OP_TIMEOUT)
    result(fs[topic], f"create_topics {topic}")
    wait_for_topic(admin, topic, partitions)


def wait_for_topic(admin, topic, partitions):
    """Waits until Metadata shows every partition with a leader and each answers ListOffsets.

    Real Kafka can list a leader a moment before the partition accepts requests; an acks=0
    produce in that window is silently dropped, so every scenario waits for this first.
    """
    def ready():
        md = admin.list_topics(topic, timeout=10)
        t = md.topics.get(topic)
        return (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values()))
    wait_until(f"topic {topic} with {partitions} partitions", 30, ready, 0.2)

    def offsets_ok():
        fs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                                request_timeout=10)
        try:
            for f in fs.values():
                f.result(timeout=15)
            return True
        except Exception:
            return False
    wait_until(f"ListOffsets on {topic}", 30, offsets_ok, 0.2)


# ---- records -------------------------------------------------------------------------------

HEADER_CHARS = "abcdefghijklmnopqrstuvwxyz-_.0123456789éß€日本"


def text(rnd, n):
    words = ["kafka ", "stream ", "broker ", "record ", "offset ", "partition ", "batch ", "log "]
    out = []
    size = 0
    while size < n:
        w = rnd.choice(words)
        out.append(w)
        size += len(w)
    return "".join(out)[:n].encode()


def rbytes(rnd, n):
    return rnd.randbytes(n)


def generate(rnd, topic, partitions, n):
    """Random records: keys sometimes None or empty, values None/empty/text/bytes (a few tens of
    KiB), 0-4 headers (repeated keys and None values included), mostly explicit CreateTime from
    the last hour, mostly an explicit partition (the rest go through the partitioner)."""
    base = int(time.time() * 1000) - 3_600_000 + 60_000
    recs = []
    for i in range(n):
        r = rnd.randrange(100)
        key = None if r < 8 else b"" if r < 13 else rbytes(rnd, rnd.randint(1, 64))
        v = rnd.randrange(100)
        if v < 4:
            value = None
        elif v < 9:
            value = b""
        elif v < 50:
            value = text(rnd, rnd.randint(1, 2048))
        elif v < 95:
            value = rbytes(rnd, rnd.randint(1, 1024))
        else:
            value = text(rnd, rnd.randint(8192, 65536)) if rnd.random() < 0.5 else rbytes(rnd, rnd.randint(8192, 32768))
        headers = []
        for h in range(rnd.randrange(5)):
            hk = headers[0][0] if h > 0 and rnd.random() < 0.15 else "".join(
                rnd.choice(HEADER_CHARS) for _ in range(rnd.randrange(17)))
            hv = None if rnd.random() < 0.1 else rbytes(rnd, rnd.randrange(48))
            headers.append((hk, hv))
        ts = base + i * 7 + rnd.randrange(5) if rnd.random() < 0.7 else None
        part = rnd.randrange(partitions) if rnd.random() < 0.7 else None
        recs.append({"topic": topic, "key": key, "value": value, "headers": headers,
                     "timestamp": ts, "partition": part})
    return recs


class Sent:
    def __init__(self, rec):
        self.rec = rec
        self.partition = None
        self.offset = None
        self.timestamp = None
        self.error = None


def produce(producer, records, what="produce"):
    """Produces every record, flushes, returns one Sent per record with its delivery report."""
    sent = [Sent(r) for r in records]

    def report(s):
        def cb(err, msg):
            s.error = err
            s.partition = msg.partition()
            s.offset = msg.offset()
            s.timestamp = msg.timestamp()
        return cb

    for s in sent:
        r = s.rec
        kwargs = {"key": r["key"], "value": r["value"], "on_delivery": report(s)}
        if r["headers"]:
            kwargs["headers"] = r["headers"]
        if r["timestamp"] is not None:
            kwargs["timestamp"] = r["timestamp"]
        if r["partition"] is not None:
            kwargs["partition"] = r["partition"]
        deadline = time.monotonic() + OP_TIMEOUT
        while True:
            try:
                producer.produce(r["topic"], **kwargs)
                break
            except BufferError:
                check(time.monotonic() < deadline, "%s: the producer queue stayed full", what)
                producer.poll(0.05)
        producer.poll(0)
    remaining = producer.flush(60)
    check(remaining == 0, "%s: %d records still undelivered after 60s", what, remaining)
    for i, s in enumerate(sent):
        check(s.partition is not None, "%s: no delivery report for record %d", what, i)
        check(s.error is None, "%s: delivery of record %d failed: %s", what, i, s.error)
    return sent


def consume_all(ctx, topic, partitions, want, start=OFFSET_BEGINNING, settle=0.3, **overrides):
    """Reads the partitions from `start` until exactly `want` records arrived (bounded)."""
    c = ctx.consumer(**overrides)
    try:
        c.assign([TopicPartition(topic, p, start) for p in range(partitions)])
        return poll_exactly(c, want, 90, settle)
    finally:
        c.close()


def poll_exactly(c, want, timeout, settle=0.3):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        for m in c.consume(num_messages=500, timeout=0.2):
            check(m.error() is None, "consume error: %s", m.error())
            out.append(m)
    check(len(out) >= want, "consumed only %d of %d records within %ss", len(out), want, timeout)
    end = time.monotonic() + settle
    while time.monotonic() < end:
        for m in c.consume(num_messages=500, timeout=0.1):
            check(m.error() is None, "consume error: %s", m.error())
            out.append(m)
    check(len(out) == want, "consumed %d records but expected exactly %d", len(out), want)
    return out


def verify(what, sent, consumed, start_offset=0):
    """Per partition in send order: dense offsets from start_offset, identical key/value/headers
    (None and empty kept apart), CreateTime equal to the producer's, same offset as reported."""
    expected = {}
    for s in sent:
        expected.setdefault(s.partition, []).append(s)
    got = {}
    for m in consumed:
        got.setdefault(m.partition(), []).append(m)
    check(set(got) <= set(expected), "%s: records consumed from partitions %s, produced to %s",
          what, sorted(got), sorted(expected))
    for p, exp in expected.items():
        act = got.get(p, [])
        check(len(exp) == len(act), "%s: partition %d: produced %d records, consumed %d",
              what, p, len(exp), len(act))
        for i, (s, m) in enumerate(zip(exp, act)):
            where = f"{what} partition {p} #{i}"
            r = s.rec
            check(m.offset() == start_offset + i, "%s: offset %d, expected %d", where, m.offset(), start_offset + i)
            if s.offset is not None and s.offset >= 0:
                check(m.offset() == s.offset, "%s: consumed at %d, delivery report said %d", where, m.offset(), s.offset)
            check(m.key() == r["key"], "%s: key %s, expected %s", where, short(m.key()), short(r["key"]))
            check(m.value() == r["value"], "%s: value %s, expected %s", where, short(m.value()), short(r["value"]))
            want_ts = r["timestamp"] if r["timestamp"] is not None else s.timestamp[1]
            check(m.timestamp() == (TIMESTAMP_CREATE_TIME, want_ts), "%s: timestamp %s, expected CreateTime %d",
                  where, m.timestamp(), want_ts)
            headers = m.headers() or []
            check(headers == r["headers"], "%s: headers %s, expected %s", where, headers, r["headers"])
            le = m.leader_epoch()
            check(le is not None and le >= 0, "%s: record batch carries no partition leader epoch (%s)", where, le)


def watermarks(ctx, topic, partition):
    c = ctx.consumer()
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=OP_TIMEOUT, cached=False)
    finally:
        c.close()


# ---- scenarios -----------------------------------------------------------------------------

def produce_consume(ctx):
    """Every codec librdkafka offers x acks (all + idempotence, 1, 0): thousands of random records
    with keys and headers, read back with assign() and compared byte for byte."""
    admin = ctx.admin()
    for codec in CODECS:
        for acks in ["all", "1", "0"]:
            what = f"compression={codec} acks={acks}"
            topic = unique_topic(f"pc-{codec}-{acks}")
            create_topic(ctx, admin, topic, 3)
            conf = {"compression.type": codec, "acks": acks, "linger.ms": 5}
            if acks != "all":
                conf["enable.idempotence"] = False
            # Stays open until the records were read back: with acks=0 nothing confirms delivery.
            producer = ctx.producer(**conf)
            sent = produce(producer, generate(ctx.rnd(what), topic, 3, ctx.records), what)
            if acks != "0":
                for s in sent:
                    check(s.offset >= 0, "%s: delivery report without offset", what)
            consumed = consume_all(ctx, topic, 3, len(sent))
            verify(what, sent, consumed)
            for p in range(3):
                n = sum(1 for s in sent if s.partition == p)
                check_eq((0, n), watermarks(ctx, topic, p), f"{what}: watermarks of partition {p}")
            producer.flush(10)
            print(f"  {what}: {len(sent)} records verified", flush=True)


def fetch_limits(ctx):
    """Fetch byte limits far below single record sizes must still return the first batch so the
    consumer progresses (librdkafka's fetch.max.bytes / max.partition.fetch.bytes)."""
    rnd = ctx.rnd("fetch-limits")
    admin = ctx.admin()
    topic = unique_topic("fetch-limits")
    create_topic(ctx, admin, topic, 3)
    recs = []
    for i in range(300):
        size = rnd.randint(200_000, 300_000) if i % 10 == 0 else rnd.randint(1, 3000)
        recs.append({"topic": topic, "key": rbytes(rnd, 8), "value": rbytes(rnd, size), "headers": [],
                     "timestamp": None, "partition": i % 3})
    sent = produce(ctx.producer(**{"linger.ms": 20}), recs)
    # librdkafka's floor for fetch.max.bytes is message.max.bytes, whose floor is 1000.
    tiny = {"fetch.max.bytes": 1000, "max.partition.fetch.bytes": 1, "message.max.bytes": 1000}
    verify("tiny fetch limits", sent, consume_all(ctx, topic, 3, len(sent), **tiny))
    moderate = {"fetch.max.bytes": 100_000, "max.partition.fetch.bytes": 40_000, "message.max.bytes": 100_000}
    verify("moderate fetch limits", sent, consume_all(ctx, topic, 3, len(sent), **moderate))


def long_poll(ctx):
    """fetch.min.bytes far above what exists and fetch.wait.max.ms=500: the broker answers after
    the wait with what it has; records produced while the consumer waits arrive. Content only."""
    rnd = ctx.rnd("long-poll")
    admin = ctx.admin()
    topic = unique_topic("long-poll")
    create_topic(ctx, admin, topic, 1)
    c = ctx.consumer(**{"fetch.min.bytes": 1_000_000, "fetch.wait.max.ms": 500})
    producer = ctx.producer()
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            for m in c.consume(num_messages=100, timeout=0.3):
                raise Failure(f"got a message from an empty topic: {m.error() or m.offset()}")

        def recs(n, size):
            return [{"topic": topic, "key": rbytes(rnd, 4), "value": rbytes(rnd, size), "headers": [],
                     "timestamp": None, "partition": 0} for _ in range(n)]
        first = produce(producer, recs(20, 50))
        verify("small batch under fetch.min.bytes", first, poll_exactly(c, 20, 20, 0))

        later = recs(100, 100)
        done = {}

        def bursts():
            try:
                acc = []
                for b in range(5):
                    time.sleep(0.25)
                    acc += produce(producer, later[b * 20:b * 20 + 20])
                done["sent"] = acc
            except Exception as e:  # reported below
                done["error"] = e
        th = threading.Thread(target=bursts)
        th.start()
        got = poll_exactly(c, 100, 30, 0)
        th.join(30)
        check("error" not in done, "producing during the long poll failed: %s", done.get("error"))
        check("sent" in done, "the producing thread did not finish")
        verify("records produced during the long poll", done["sent"], got, 20)
    finally:
        c.close()


def idempotence(ctx):
    """Idempotent producer (InitProducerId, sequences) with many small batches in flight, then a
    second producer (new producer id) on the same partitions: dense offsets, no duplicates."""
    rnd = ctx.rnd("idempotence")
    admin = ctx.admin()
    topic = unique_topic("idempotence")
    create_topic(ctx, admin, topic, 3)
    n = max(ctx.records, 1000)
    sent = []
    for rnd_no in range(2):
        p = ctx.producer(**{"enable.idempotence": True, "max.in.flight": 5, "batch.size": 512,
                            "linger.ms": 0})
        recs = [{"topic": topic, "key": rbytes(rnd, 6), "value": f"round-{rnd_no}-seq-{i:06d}".encode(),
                 "headers": [("seq", str(i).encode())], "timestamp": None, "partition": i % 3} for i in range(n)]
        sent += produce(p, recs)
    nxt = {}
    for s in sent:
        check_eq(nxt.get(s.partition, 0), s.offset, f"offset reported for partition {s.partition}")
        nxt[s.partition] = s.offset + 1
    verify("idempotent producers", sent, consume_all(ctx, topic, 3, len(sent)))


def auto_create(ctx):
    """Metadata auto-creation by a producer (librdkafka asks the broker to create the topic);
    a consumer assigned to a missing topic (allow.auto.create.topics=false) must not create it."""
    rnd = ctx.rnd("auto-create")
    admin = ctx.admin()
    topic = unique_topic("auto-create")
    recs = [{"topic": topic, "key": rbytes(rnd, 5), "value": rbytes(rnd, 30), "headers": [],
             "timestamp": None, "partition": 0} for _ in range(50)]
    sent = produce(ctx.producer(), recs)
    md = admin.list_topics(topic, timeout=OP_TIMEOUT).topics[topic]
    check(md.error is None and len(md.partitions) >= 1, "auto-created topic metadata: %s", md.error)
    verify("auto-created topic", sent, consume_all(ctx, topic, len(md.partitions), len(sent)))

    missing = unique_topic("not-auto-created")
    c = ctx.consumer(**{"allow.auto.create.topics": False})
    try:
        c.assign([TopicPartition(missing, 0, OFFSET_BEGINNING)])
        end = time.monotonic() + 2
        while time.monotonic() < end:
            m = c.poll(0.2)
            check(m is None or m.error() is not None, "got a record from a missing topic")
    finally:
        c.close()
    fs = admin.describe_topics(TopicCollection([missing]), request_timeout=OP_TIMEOUT)
    expect_error(fs[missing], KafkaError.UNKNOWN_TOPIC_OR_PART, "describe_topics of a topic only a consumer asked about")


def config_map(admin, topic):
    res = ConfigResource("TOPIC", topic)
    return result(admin.describe_configs([res], request_timeout=OP_TIMEOUT)[res], f"describe_configs {topic}")


def check_dynamic(cfg, name, value):
    e = cfg.get(name)
    check(e is not None, "describe_configs lacks %s", name)
    check_eq(value, e.value, f"value of {name}")
    check_eq(ConfigSource.DYNAMIC_TOPIC_CONFIG.value, e.source, f"source of {name}")
    check(not e.is_default, "%s reported as default", name)


def check_not_dynamic(cfg, name):
    e = cfg.get(name)
    check(e is not None, "describe_configs lacks %s", name)
    check(e.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value, "%s still overridden (%s)", name, e.value)


TOPIC_CONFIGS = {"retention.ms": "3600000", "retention.bytes": "104857600", "segment.bytes": "16777216",
                 "max.message.bytes": "2097152", "cleanup.policy": "delete"}


def admin_ops(ctx):
    """DescribeCluster, CreateTopics with configs, Metadata, DescribeTopics, DescribeConfigs,
    IncrementalAlterConfigs (SET/DELETE/validate_only), CreatePartitions, DeleteTopics."""
    admin = ctx.admin()
    port = int(ctx.bootstrap.rsplit(":", 1)[1])
    cl = result(admin.describe_cluster(request_timeout=OP_TIMEOUT), "describe_cluster")
    check_eq(1, len(cl.nodes), "number of nodes")
    node = cl.nodes[0]
    check_eq(port, node.port, "port of the advertised node")
    check(cl.cluster_id, "empty cluster id")
    check(cl.controller is not None and cl.controller.id == node.id, "controller %s is not node %s", cl.controller, node)
    md = admin.list_topics(timeout=OP_TIMEOUT)
    check_eq(1, len(md.brokers), "brokers in Metadata")
    check(md.cluster_id == cl.cluster_id, "cluster id differs: %s vs %s", md.cluster_id, cl.cluster_id)

    topic = unique_topic("admin")
    create_topic(ctx, admin, topic, 3, TOPIC_CONFIGS)
    desc = result(admin.describe_topics(TopicCollection([topic]), request_timeout=OP_TIMEOUT)[topic], "describe_topics")
    check_eq(3, len(desc.partitions), "partitions in describe_topics")
    check(desc.topic_id is not None and str(desc.topic_id) != "AAAAAAAAAAAAAAAAAAAAAA", "no topic id: %s", desc.topic_id)
    for p in desc.partitions:
        check_eq(node.id, p.leader.id, f"leader of partition {p.id}")
        check_eq([node.id], [r.id for r in p.replicas], f"replicas of partition {p.id}")
        check_eq([node.id], [r.id for r in p.isr], f"isr of partition {p.id}")
    check(topic in admin.list_topics(timeout=OP_TIMEOUT).topics, "list_topics lacks %s", topic)

    cfg = config_map(admin, topic)
    for k, v in TOPIC_CONFIGS.items():
        check_dynamic(cfg, k, v)
    for k in ["compression.type", "min.insync.replicas", "message.timestamp.type"]:
        check_not_dynamic(cfg, k)

    res = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.bytes", "8388608", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("max.message.bytes", "500000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.bytes", None, incremental_operation=AlterConfigOpType.DELETE)])
    result(admin.incremental_alter_configs([res], request_timeout=OP_TIMEOUT)[res], "incremental_alter_configs")
    wait_until("altered configs", 15, lambda: config_map(admin, topic)["retention.ms"].value == "7200000", 0.2)
    cfg = config_map(admin, topic)
    check_dynamic(cfg, "retention.ms", "7200000")
    check_dynamic(cfg, "segment.bytes", "8388608")
    check_dynamic(cfg, "max.message.bytes", "500000")
    check_dynamic(cfg, "cleanup.policy", "delete")
    check_not_dynamic(cfg, "retention.bytes")

    res = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
    result(admin.incremental_alter_configs([res], validate_only=True, request_timeout=OP_TIMEOUT)[res],
           "incremental_alter_configs validate_only")
    check_dynamic(config_map(admin, topic), "retention.ms", "7200000")

    res = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("retention.ms", "not-a-number", incremental_operation=AlterConfigOpType.SET)])
    expect_error(admin.incremental_alter_configs([res], request_timeout=OP_TIMEOUT)[res],
                 KafkaError.INVALID_CONFIG, "incremental_alter_configs retention.ms=not-a-number")

    result(admin.create_partitions([NewPartitions(topic, 5)], request_timeout=OP_TIMEOUT)[topic], "create_partitions 3->5")
    wait_for_topic(admin, topic, 5)
    sent = produce(ctx.producer(), [{"topic": topic, "key": b"k", "value": b"to-new-partition", "headers": [],
                                     "timestamp": None, "partition": 4}])
    check_eq((4, 0), (sent[0].partition, sent[0].offset), "partition/offset of a record in a new partition")

    result(admin.delete_topics([topic], operation_timeout=OP_TIMEOUT, request_timeout=OP_TIMEOUT)[topic], "delete_topics")
    wait_until("the deleted topic to vanish", 30,
               lambda: topic not in admin.list_topics(timeout=10).topics, 0.2)
    expect_error(admin.describe_topics(TopicCollection([topic]), request_timeout=OP_TIMEOUT)[topic],
                 KafkaError.UNKNOWN_TOPIC_OR_PART, "describe_topics of a deleted topic")


def list_offsets(ctx):
    """ListOffsets earliest/latest/max-timestamp/by timestamp via AdminClient.list_offsets and
    Consumer.offsets_for_times, on an uncompressed, a zstd partition and an empty partition."""
    rnd = ctx.rnd("list-offsets")
    admin = ctx.admin()
    topic = unique_topic("list-offsets")
    create_topic(ctx, admin, topic, 3)
    base = int(time.time() * 1000) - 600_000
    for p, codec in [(0, "none"), (1, "zstd")]:
        recs = [{"topic": topic, "key": rbytes(rnd, 4), "value": rbytes(rnd, 40), "headers": [],
                 "timestamp": base + 5000 if i == 60 else base + i * 10, "partition": p} for i in range(100)]
        produce(ctx.producer(**{"compression.type": codec, "linger.ms": 50}), recs)

    def lo(p, spec, what):
        tp = TopicPartition(topic, p)
        info = result(admin.list_offsets({tp: spec}, request_timeout=OP_TIMEOUT)[tp], f"list_offsets {what}")
        return info.offset, info.timestamp

    for p in (0, 1):
        check_eq(0, lo(p, OffsetSpec.earliest(), "earliest")[0], f"earliest p{p}")
        check_eq(100, lo(p, OffsetSpec.latest(), "latest")[0], f"latest p{p}")
        check_eq((60, base + 5000), lo(p, OffsetSpec.max_timestamp(), "max"), f"max timestamp p{p}")
        check_eq((21, base + 210), lo(p, OffsetSpec.for_timestamp(base + 205), "ts"), f"by timestamp p{p}")
        check_eq((0, base), lo(p, OffsetSpec.for_timestamp(base), "ts first"), f"by first timestamp p{p}")
        check_eq((59, base + 590), lo(p, OffsetSpec.for_timestamp(base + 590), "ts 59"), f"by timestamp of 59 p{p}")
        check_eq((60, base + 5000), lo(p, OffsetSpec.for_timestamp(base + 600), "ts 600"), f"by timestamp 600 p{p}")
        check_eq(-1, lo(p, OffsetSpec.for_timestamp(base + 5001), "ts after")[0], f"by timestamp after all p{p}")
    check_eq(0, lo(2, OffsetSpec.earliest(), "earliest empty")[0], "earliest of an empty partition")
    check_eq(0, lo(2, OffsetSpec.latest(), "latest empty")[0], "latest of an empty partition")
    check_eq(-1, lo(2, OffsetSpec.max_timestamp(), "max empty")[0], "max timestamp of an empty partition")
    check_eq(-1, lo(2, OffsetSpec.for_timestamp(base), "ts empty")[0], "by timestamp in an empty partition")

    c = ctx.consumer()
    try:
        res = c.offsets_for_times([TopicPartition(topic, 0, base + 205), TopicPartition(topic, 1, base + 5000),
                                   TopicPartition(topic, 2, base)],
                                  timeout=OP_TIMEOUT)
        got = {tp.partition: tp.offset for tp in res}
        for tp in res:
            check(tp.error is None, "offsets_for_times error on %d: %s", tp.partition, tp.error)
        check_eq({0: 21, 1: 60, 2: -1}, got, "offsets_for_times")
        res = c.offsets_for_times([TopicPartition(topic, 0, base + 10_000)], timeout=OP_TIMEOUT)
        check_eq(-1, res[0].offset, "offsets_for_times past the end")
        for p, want in [(0, (0, 100)), (1, (0, 100)), (2, (0, 0))]:
            check_eq(want, c.get_watermark_offsets(TopicPartition(topic, p), timeout=OP_TIMEOUT, cached=False),
                     f"watermarks of p{p}")
        c.assign([TopicPartition(topic, 1, 60)])
        got = poll_exactly(c, 40, 30, 0.1)
        check_eq((60, (TIMESTAMP_CREATE_TIME, base + 5000)), (got[0].offset(), got[0].timestamp()),
                 "first record after assigning at the offset found by timestamp")
    finally:
        c.close()


def delete_records(ctx):
    """DeleteRecords moves the log start; ListOffsets earliest and the watermarks follow; reading
    from the beginning starts there; deleting below the start is a no-op; OFFSET_END deletes all."""
    rnd = ctx.rnd("delete-records")
    admin = ctx.admin()
    topic = unique_topic("delete-records")
    create_topic(ctx, admin, topic, 1)
    recs = [{"topic": topic, "key": rbytes(rnd, 4), "value": rbytes(rnd, 100), "headers": [("i", str(i).encode())],
             "timestamp": None, "partition": 0} for i in range(100)]
    sent = produce(ctx.producer(**{"linger.ms": 0, "batch.size": 1024}), recs)
    tp = TopicPartition(topic, 0)

    def delete_before(off, what):
        fs = admin.delete_records([TopicPartition(topic, 0, off)], request_timeout=OP_TIMEOUT)
        return result(fs[tp], what).low_watermark

    check_eq(40, delete_before(40, "delete_records before 40"), "low watermark after delete_records(40)")
    check_eq(40, result(admin.list_offsets({tp: OffsetSpec.earliest()})[tp], "earliest").offset, "earliest after delete")
    check_eq((40, 100), watermarks(ctx, topic, 0), "watermarks after delete_records")
    verify("after delete_records(40)", sent[40:], consume_all(ctx, topic, 1, 60), 40)
    check_eq(40, delete_before(10, "delete_records below the start"), "low watermark after deleting below it")
    check_eq(100, delete_before(confluent_kafka.OFFSET_END, "delete_records to the end"), "low watermark after deleting all")
    more = produce(ctx.producer(), [{"topic": topic, "key": b"k", "value": b"after", "headers": [],
                                     "timestamp": None, "partition": 0}])
    check_eq(100, more[0].offset, "offset of the first record after deleting everything")
    verify("after deleting everything", more, consume_all(ctx, topic, 1, 1), 100)


def errors(ctx):
    """Error codes as librdkafka reports them."""
    rnd = ctx.rnd("errors")
    admin = ctx.admin()
    topic = unique_topic("errors")
    create_topic(ctx, admin, topic, 3)

    def create(nt):
        return admin.create_topics([nt], request_timeout=OP_TIMEOUT)[nt.topic]
    expect_error(create(NewTopic(topic, 3, 1)), KafkaError.TOPIC_ALREADY_EXISTS, "create_topics of an existing topic")
    expect_error(admin.create_partitions([NewPartitions(topic, 2)], request_timeout=OP_TIMEOUT)[topic],
                 KafkaError.INVALID_PARTITIONS, "create_partitions shrinking 3 -> 2")
    expect_error(admin.create_partitions([NewPartitions(topic, 3)], request_timeout=OP_TIMEOUT)[topic],
                 KafkaError.INVALID_PARTITIONS, "create_partitions to the current count")
    # Kafka refuses a factor above the broker count; kaas keeps no replicas and accepts any positive
    # factor, so only a non-positive one is checked here.
    expect_error(create(NewTopic(unique_topic("errors-rf"), 1, 0)), KafkaError.INVALID_REPLICATION_FACTOR,
                 "create_topics with replication factor 0")
    expect_error(create(NewTopic(f"bad/name-{uuid.uuid4().hex[:6]}", 1, 1)), KafkaError.TOPIC_EXCEPTION,
                 "create_topics with '/' in the name")
    expect_error(create(NewTopic(unique_topic("errors-cfg"), 1, 1, config={"retention.ms": "forever"})),
                 KafkaError.INVALID_CONFIG, "create_topics with retention.ms=forever")
    res = ConfigResource("TOPIC", topic, incremental_configs=[
        ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET)])
    expect_error(admin.incremental_alter_configs([res], request_timeout=OP_TIMEOUT)[res], KafkaError.INVALID_CONFIG,
                 "incremental_alter_configs of an unknown config name")

    missing = unique_topic("missing")
    expect_error(admin.describe_topics(TopicCollection([missing]), request_timeout=OP_TIMEOUT)[missing],
                 KafkaError.UNKNOWN_TOPIC_OR_PART, "describe_topics of a missing topic")
    expect_error(admin.delete_topics([missing], request_timeout=OP_TIMEOUT)[missing],
                 KafkaError.UNKNOWN_TOPIC_OR_PART, "delete_topics of a missing topic")
    res = ConfigResource("TOPIC", missing)
    expect_error(admin.describe_configs([res], request_timeout=OP_TIMEOUT)[res], KafkaError.UNKNOWN_TOPIC_OR_PART,
                 "describe_configs of a missing topic")
    expect_error(admin.create_partitions([NewPartitions(missing, 4)], request_timeout=OP_TIMEOUT)[missing],
                 KafkaError.UNKNOWN_TOPIC_OR_PART, "create_partitions of a missing topic")
    # librdkafka's admin handle is a producer-type handle, whose allow.auto.create.topics
    # defaults to true; turn it off so Metadata must report the topic as missing.
    no_create = AdminClient({"bootstrap.servers": ctx.bootstrap, "client.id": "kaas-py-admin",
                             "allow.auto.create.topics": False})
    md = no_create.list_topics(missing, timeout=OP_TIMEOUT).topics.get(missing)
    check(md is not None and md.error is not None and md.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART,
          "Metadata for a missing topic without auto-create: %s", md and md.error)

    # MESSAGE_TOO_LARGE: one record bigger than the topic's max.message.bytes.
    big_topic = unique_topic("too-large")
    create_topic(ctx, admin, big_topic, 1, {"max.message.bytes": "10000"})
    p = ctx.producer(**{"linger.ms": 0})
    reports = []
    p.produce(big_topic, key=b"big", value=rbytes(rnd, 20_000), partition=0,
              on_delivery=lambda err, msg: reports.append(err))
    check_eq(0, p.flush(60), "undelivered after flush")
    check(reports and reports[0] is not None and reports[0].code() == KafkaError.MSG_SIZE_TOO_LARGE,
          "20000-byte record to a topic with max.message.bytes=10000: %s", reports)
    ok = produce(p, [{"topic": big_topic, "key": b"small", "value": rbytes(rnd, 5000), "headers": [],
                      "timestamp": None, "partition": 0}])
    check_eq(0, ok[0].offset, "offset of the first record that fit")
    verify("after MSG_SIZE_TOO_LARGE", ok, consume_all(ctx, big_topic, 1, 1))

    # OFFSET_OUT_OF_RANGE below the log start (after DeleteRecords) and past the end.
    oor = unique_topic("out-of-range")
    create_topic(ctx, admin, oor, 1)
    recs = [{"topic": oor, "key": rbytes(rnd, 4), "value": rbytes(rnd, 64), "headers": [], "timestamp": None,
             "partition": 0} for _ in range(100)]
    sent = produce(ctx.producer(**{"batch.size": 512, "linger.ms": 0}), recs)
    tp0 = TopicPartition(oor, 0)
    result(admin.delete_records([TopicPartition(oor, 0, 50)], request_timeout=OP_TIMEOUT)[tp0], "delete_records 50")
    expect_error(admin.delete_records([TopicPartition(oor, 0, 500)], request_timeout=OP_TIMEOUT)[tp0],
                 KafkaError.OFFSET_OUT_OF_RANGE, "delete_records beyond the high watermark")
    for bad in (0, 49, 150):
        c = ctx.consumer(**{"auto.offset.reset": "error"})
        try:
            c.assign([TopicPartition(oor, 0, bad)])
            deadline = time.monotonic() + 20
            err = None
            while err is None and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is None:
                    continue
                check(m.error() is not None, "got record at offset %d from out-of-range offset %d", m.offset(), bad)
                err = m.error()
            check(err is not None, "no error for a fetch at out-of-range offset %d", bad)
            check(err.code() == KafkaError._AUTO_OFFSET_RESET and "out of range" in err.str().lower(),
                  "fetch at offset %d: expected an offset-out-of-range reset error, got %s", bad, err)
        finally:
            c.close()
    verify("reset to earliest after out of range", sent[50:],
           consume_all(ctx, oor, 1, 50, start=10, **{"auto.offset.reset": "earliest"}), 50)
    verify("fetch at the new log start", sent[50:], consume_all(ctx, oor, 1, 50, start=50), 50)


# ---- consumer groups -----------------------------------------------------------------------
#
# A group member consumes one topic, commits synchronously after processing every batch and
# reports what it does as event lines (the same format as the Java and Go suites):
#   M <member id>            after a poll, whenever the member id changed
#   A <partition> <offset>   a partition was assigned; the group's committed offset at that moment
#                            (-1 when nothing was committed)
#   V <partition>            a partition was revoked or lost
#   R <partition> <offset>   a record was processed (and then committed)
#   C <reason>               a commit failed (allowed: the next owner re-reads from the commit)
#   E <reason>               anything unexpected (fails the scenario)
# A member runs on a thread of this process or as a child process (--member) that writes the
# lines to stdout, so that the scenario can SIGKILL it like a crashed consumer.

GROUP_SESSION_MS = 6000
SETTLE_LIMIT = 60.0


def unique_group(name):
    return f"py-grp-{name}-{uuid.uuid4().hex[:10]}"


def member_config(bootstrap, group, **overrides):
    conf = {"bootstrap.servers": bootstrap, "client.id": "kaas-py-member", "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": GROUP_SESSION_MS, "heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": 30000, "partition.assignment.strategy": "roundrobin"}
    conf.update(overrides)
    return conf


def run_member(conf, topic, emit, stopped):
    c = Consumer(conf)

    def on_assign(consumer, parts):
        if not parts:
            return
        committed = consumer.committed([TopicPartition(topic, p.partition) for p in parts], timeout=OP_TIMEOUT)
        for tp in sorted(committed, key=lambda t: t.partition):
            emit(f"A {tp.partition} {tp.offset if tp.offset >= 0 else -1}")

    def on_revoke(consumer, parts):
        for tp in parts:
            emit(f"V {tp.partition}")

    try:
        c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        last_id = ""
        while not stopped():
            msgs = c.consume(num_messages=50, timeout=0.2)
            processed = False
            for m in msgs:
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        emit(f"E consume: {m.error()}")
                    continue
                emit(f"R {m.partition()} {m.offset()}")
                processed = True
            if processed:
                try:
                    c.commit(asynchronous=False)
                except KafkaException as e:
                    emit(f"C {e.args[0]}")
                time.sleep(0.02)
            mid = c.memberid()
            if mid and mid != last_id:
                last_id = mid
                emit(f"M {mid}")
        try:
            c.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:
                emit(f"C final {e.args[0]}")
    finally:
        c.close()


class Member:
    def __init__(self, name, topic, conf):
        self.name, self.topic, self.conf = name, topic, conf
        self._events, self._lock = [], threading.Lock()
        self._stop = False
        self.proc = None
        self.done = threading.Event()

    def emit(self, line):
        with self._lock:
            self._events.append(line)

    def events(self):
        with self._lock:
            return list(self._events)

    def member_id(self):
        for e in reversed(self.events()):
            if e.startswith("M "):
                return e.split(" ")[1]
        return None

    def count(self, kind):
        return sum(1 for e in self.events() if e.startswith(kind + " "))

    def owned(self):
        own = set()
        for e in self.events():
            f = e.split(" ")
            if f[0] == "A":
                own.add(int(f[1]))
            elif f[0] == "V":
                own.discard(int(f[1]))
        return own

    def start(self):
        def body():
            try:
                run_member(self.conf, self.topic, self.emit, lambda: self._stop)
            except Exception as e:  # reported as an event, fails the scenario
                self.emit(f"E {e!r}")
            finally:
                self.done.set()
        threading.Thread(target=body, daemon=True, name=f"member-{self.name}").start()
        return self

    def spawn(self):
        import json
        import subprocess
        self.proc = subprocess.Popen([sys.executable, __file__, "--member", "--bootstrap", self.conf["bootstrap.servers"],
                                      "--topic", self.topic, "--config", json.dumps(self.conf)],
                                     stdout=subprocess.PIPE, text=True)

        def reader():
            for line in self.proc.stdout:
                self.emit(line.rstrip("\n"))
            self.proc.wait()
            self.done.set()
        threading.Thread(target=reader, daemon=True, name=f"member-{self.name}-reader").start()
        return self

    def close(self):
        """Commit and close (LeaveGroup); a child gets SIGTERM."""
        if self.proc is not None:
            self.proc.terminate()
        else:
            self._stop = True
        check(self.done.wait(OP_TIMEOUT), "member %s did not stop", self.name)

    def kill(self):
        """SIGKILL a child: it dies without committing or leaving."""
        check(self.proc is not None, "member %s is not a child process", self.name)
        self.proc.kill()
        check(self.done.wait(OP_TIMEOUT), "killed member %s did not go away", self.name)

    def kill_quietly(self):
        self._stop = True
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()


def member_main(args):
    """Child-process side of Member.spawn: consume until SIGTERM (commit, close) or SIGKILL."""
    import json
    import signal
    conf = json.loads(args.config)
    lock = threading.Lock()

    def emit(line):
        with lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        run_member(conf, args.topic, emit, stop.is_set)
    except Exception as e:
        emit(f"E {e!r}")
        return 1
    return 0


def describe_group(admin, group):
    return result(admin.describe_consumer_groups([group], request_timeout=OP_TIMEOUT)[group], f"describe_consumer_groups {group}")


def wait_settled(admin, group, topic, partitions, members):
    """Waits until the group is Stable with exactly these members, the assignment covers every
    partition exactly once and each member's own view matches it."""
    why = [""]

    def settled():
        by_id = {}
        for m in members:
            mid = m.member_id()
            if mid is None:
                why[0] = f"{m.name} has not joined"
                return False
            by_id[mid] = m
        try:
            d = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=10)
        except Exception as e:
            why[0] = repr(e)
            return False
        if d.state != confluent_kafka.ConsumerGroupState.STABLE:
            why[0] = f"state {d.state}"
            return False
        if len(d.members) != len(members):
            why[0] = f"{len(d.members)} members"
            return False
        cover = [0] * partitions
        for md in d.members:
            m = by_id.get(md.member_id)
            if m is None:
                why[0] = f"unexpected member {md.member_id}"
                return False
            parts = {tp.partition for tp in md.assignment.topic_partitions if tp.topic == topic}
            for p in parts:
                cover[p] += 1
            if parts != m.owned():
                why[0] = f"{m.name} owns {sorted(m.owned())}, assigned {sorted(parts)}"
                return False
        if any(n != 1 for n in cover):
            why[0] = f"coverage {cover}"
            return False
        return True
    try:
        wait_until(f"group {group} to settle with {len(members)} members", SETTLE_LIMIT, settled, 0.2)
    except Failure as f:
        raise Failure(f"{f} (last: {why[0]})") from None


def end_offsets(admin, topic, partitions):
    fs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                            request_timeout=OP_TIMEOUT)
    return {tp.partition: result(f, "list_offsets latest").offset for tp, f in fs.items()}


def group_committed(admin, group, topic):
    from confluent_kafka import ConsumerGroupTopicPartitions
    fs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=OP_TIMEOUT)
    res = result(fs[group], f"list_consumer_group_offsets {group}")
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic and tp.offset >= 0}


def wait_committed_at_end(admin, group, topic, partitions):
    ends = end_offsets(admin, topic, partitions)
    why = [""]

    def at_end():
        c = group_committed(admin, group, topic)
        why[0] = f"committed {c}, end {ends}"
        return c == ends
    try:
        wait_until(f"committed offsets of {group} to reach the end offsets", 90, at_end, 0.3)
    except Failure as f:
        raise Failure(f"{f} ({why[0]})") from None
    return ends


def check_member_events(m, seen):
    """No errors; the first record from a newly assigned partition is the group's committed offset
    at assignment (0 when none); later ones dense; nothing from partitions it does not own. Returns
    how many takeovers started from a committed offset above 0."""
    nxt, first, resumed = {}, {}, 0
    for e in m.events():
        f = e.split(" ")
        if f[0] == "E":
            raise Failure(f"member {m.name}: {e}")
        if f[0] == "A":
            first[int(f[1])] = max(0, int(f[2]))
            nxt[int(f[1])] = -1
        elif f[0] == "V":
            nxt.pop(int(f[1]), None)
        elif f[0] == "R":
            p, off = int(f[1]), int(f[2])
            check(p in nxt, "member %s processed %d/%d without owning the partition", m.name, p, off)
            if nxt[p] == -1:
                check(off == first[p], "member %s: first record from newly assigned partition %d is offset %d, "
                      "but the group's committed offset at assignment was %d", m.name, p, off, first[p])
                resumed += off > 0
            else:
                check(off == nxt[p], "member %s: partition %d jumped from %d to %d", m.name, p, nxt[p] - 1, off)
            nxt[p] = off + 1
            seen.setdefault(p, set()).add(off)
    return resumed


def produce_n(producer, topic, partitions, n, start):
    for i in range(start, start + n):
        producer.produce(topic, value=f"record-{i}".encode(), partition=i % partitions)
    check(producer.flush(OP_TIMEOUT) == 0, "records still unsent after %ss", OP_TIMEOUT)


class BackgroundProducer:
    """Produces six records every 50 ms until closed."""

    def __init__(self, ctx, topic, partitions):
        self.count, self.error, self._stop = 0, None, threading.Event()
        self.producer = ctx.producer(**{"linger.ms": 0})

        def body():
            i = 1 << 20
            try:
                while not self._stop.wait(0.05):
                    produce_n(self.producer, topic, partitions, 6, i)
                    i += 6
                    self.count += 6
            except Exception as e:
                self.error = e
        self.thread = threading.Thread(target=body, daemon=True, name="background-producer")
        self.thread.start()

    def close(self):
        if self._stop.is_set():
            return self.count
        self._stop.set()
        self.thread.join(60)
        if self.error:
            raise Failure(f"background producer: {self.error}")
        return self.count


def group_rebalance(ctx):
    """Classic protocol with librdkafka's eager roundrobin assignor: three members, a fourth (a
    child process) joins, one leaves (close → LeaveGroup), the child is SIGKILLed and the group
    notices by session timeout. Every record is processed, takeovers start at the committed
    offsets, the assignment covers every partition once when settled, and the final commits
    equal the end offsets."""
    partitions = 12
    admin = ctx.admin()
    topic, group = unique_topic("group-rebalance"), unique_group("group-rebalance")
    create_topic(ctx, admin, topic, partitions)
    p = ctx.producer()
    produce_n(p, topic, partitions, ctx.records, 0)
    bg = BackgroundProducer(ctx, topic, partitions)
    members = []
    try:
        conf = member_config(ctx.bootstrap, group)
        m1, m2, m3 = (Member(f"m{i}", topic, conf).start() for i in (1, 2, 3))
        members += [m1, m2, m3]
        wait_settled(admin, group, topic, partitions, [m1, m2, m3])
        m4 = Member("m4-child", topic, conf).spawn()
        members.append(m4)
        wait_settled(admin, group, topic, partitions, [m1, m2, m3, m4])
        wait_until("the child member to process records", 30, lambda: m4.count("R") > 0)

        m1_id = m1.member_id()
        m1.close()
        d = describe_group(admin, group)
        check(all(md.member_id != m1_id for md in d.members), "member %s closed (LeaveGroup) but the group still lists it", m1_id)
        wait_settled(admin, group, topic, partitions, [m2, m3, m4])

        m4_id = m4.member_id()
        m4.kill()
        d = describe_group(admin, group)
        check(any(md.member_id == m4_id for md in d.members),
              "a SIGKILLed member (no LeaveGroup) vanished from the group before its session timed out")
        wait_settled(admin, group, topic, partitions, [m2, m3])
        extra = bg.close()
        ends = wait_committed_at_end(admin, group, topic, partitions)
        check_eq(ctx.records + extra, sum(ends.values()), "records in the topic")
        m2.close()
        m3.close()
        seen, resumed = {}, 0
        for m in members:
            resumed += check_member_events(m, seen)
        check(resumed > 0, "no partition changed hands after records were committed; nothing was checked")
        for part, end in ends.items():
            missing = [o for o in range(end) if o not in seen.get(part, set())]
            check(not missing, "records %s of partition %d were never processed", missing[:10], part)
        check_eq(ends, group_committed(admin, group, topic), "committed offsets after the members closed")
    finally:
        for m in members:
            m.kill_quietly()
        bg.close()

# ---- compression.type: the broker re-encodes batches in the topic's codec ----------------------

def raw_fetch_batches(bootstrap, topic, partition, offset):
    """One Fetch v4 on a plain socket (librdkafka hides batch headers): returns (codec id,
    records count) of each whole batch the broker answers from `offset`."""
    import socket
    import struct

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    name = topic.encode()
    body = struct.pack(">iiiib", -1, 0, 0, 64 << 20, 0)
    body += struct.pack(">i", 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", 1) + struct.pack(">iqi", partition, offset, 64 << 20)
    client_id = b"kaas-py-raw"
    header = struct.pack(">hhih", 1, 4, 7, len(client_id)) + client_id
    frame = header + body
    with socket.create_connection((host, int(port)), timeout=OP_TIMEOUT) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)

        def read(n):
            buf = b""
            while len(buf) < n:
                chunk = sock.recv(n - len(buf))
                check(chunk, "raw fetch: connection closed")
                buf += chunk
            return buf

        (size,) = struct.unpack(">i", read(4))
        resp = read(size)
    pos = 4 + 4  # correlation id, throttle time
    (topics,) = struct.unpack_from(">i", resp, pos)
    check_eq(1, topics, "raw fetch: topics in the response")
    (name_len,) = struct.unpack_from(">h", resp, pos + 4)
    pos += 6 + name_len
    (partitions,) = struct.unpack_from(">i", resp, pos)
    check_eq(1, partitions, "raw fetch: partitions in the response")
    pos += 4
    _, error, _, _ = struct.unpack_from(">ihqq", resp, pos)
    check_eq(0, error, "raw fetch: partition error")
    pos += 4 + 2 + 8 + 8
    (aborted,) = struct.unpack_from(">i", resp, pos)
    pos += 4 + max(aborted, 0) * 16
    (records_len,) = struct.unpack_from(">i", resp, pos)
    records = resp[pos + 4:pos + 4 + max(records_len, 0)]
    batches = []
    at = 0
    while at + 61 <= len(records):
        (batch_len,) = struct.unpack_from(">i", records, at + 8)
        if at + 12 + batch_len > len(records):
            break  # a partial batch at the end of the response
        (attributes,) = struct.unpack_from(">h", records, at + 21)
        (count,) = struct.unpack_from(">i", records, at + 57)
        batches.append((attributes & 0x07, count))
        at += 12 + batch_len
    return batches


def compression_type(ctx):
    """compression.type=zstd on a topic: batches produced with lz4 and uncompressed are stored
    (and fetched) as zstd, and the records read back are the ones sent, byte for byte."""
    admin = ctx.admin()
    topic = unique_topic("ctype")
    create_topic(ctx, admin, topic, 1, {"compression.type": "zstd"})
    sent = []
    for codec in ["lz4", "none"]:
        what = f"producer compression={codec} into a zstd topic"
        producer = ctx.producer(**{"compression.type": codec, "linger.ms": 5})
        sent += produce(producer, generate(ctx.rnd(what), topic, 1, ctx.records // 2), what)
    consumed = consume_all(ctx, topic, 1, len(sent))
    verify("zstd topic", sent, consumed)
    batches = []
    while sum(n for _, n in batches) < len(sent):
        more = raw_fetch_batches(ctx.bootstrap, topic, 0, sum(n for _, n in batches))
        check(more, "raw fetch returned no whole batch after %d records", sum(n for _, n in batches))
        batches += more
    check_eq(len(sent), sum(n for _, n in batches), "records in the fetched batches")
    codecs = sorted({codec for codec, _ in batches})
    check_eq([4], codecs, f"codecs of the {len(batches)} fetched batches (4 = zstd)")


# ---- group: a lone member changes its subscription ----------------------------------------

RESUBSCRIBE_LIMIT = 20.0  # seconds; the rebalance timeout here is librdkafka's 300 s default


def poll_until_assigned(c, assigned, want, what):
    """Polls until the rebalance callback reported exactly `want`; returns the seconds taken."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < RESUBSCRIBE_LIMIT:
        c.poll(0.2)
        if assigned["now"] == want:
            return time.monotonic() - t0
    raise Failure(f"{what}: assignment {sorted(assigned['now'])} after {RESUBSCRIBE_LIMIT:.0f} s, "
                  f"want {sorted(want)} (a rejoin left no member to wait for, yet the broker held "
                  f"the JoinGroup, up to the 300 s rebalance timeout)")


def group_resubscribe(ctx):
    """The only member of a classic group (range, default max.poll.interval.ms = 300 s rebalance
    timeout) subscribes to A, then to A and B, then to a regex that a newly created topic also
    matches: each change is a JoinGroup with the member's id and new metadata, which every
    broker must answer at once with the next generation (every member has rejoined), so the new
    assignment arrives within seconds."""
    admin = ctx.admin()
    prefix = unique_topic("resub")
    a, b, c_topic = f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"
    for t in (a, b):
        create_topic(ctx, admin, t, 2)
    group = unique_group("resubscribe")
    assigned = {"now": set()}

    def on_assign(consumer, parts):
        assigned["now"] = {(tp.topic, tp.partition) for tp in parts}

    def on_revoke(consumer, parts):
        assigned["now"] = set()

    conf = {"bootstrap.servers": ctx.bootstrap, "client.id": "kaas-py-resubscribe", "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": GROUP_SESSION_MS, "heartbeat.interval.ms": 1000,
            "partition.assignment.strategy": "range", "topic.metadata.refresh.interval.ms": 1000}
    c = Consumer(conf)
    try:
        c.subscribe([a], on_assign=on_assign, on_revoke=on_revoke)
        poll_until_assigned(c, assigned, {(a, 0), (a, 1)}, "subscribed to A")
        c.subscribe([a, b], on_assign=on_assign, on_revoke=on_revoke)
        took = poll_until_assigned(c, assigned, {(a, 0), (a, 1), (b, 0), (b, 1)}, "subscribed to A and B")
        print(f"  A+B assignment after {took:.2f} s", flush=True)
        c.subscribe([f"^{prefix}-.*"], on_assign=on_assign, on_revoke=on_revoke)
        create_topic(ctx, admin, c_topic, 1)
        took = poll_until_assigned(c, assigned, {(a, 0), (a, 1), (b, 0), (b, 1), (c_topic, 0)},
                                   "regex subscription after a matching topic was created")
        print(f"  regex assignment with the new topic after {took:.2f} s", flush=True)
    finally:
        c.close()

# ---- Legacy AlterConfigs (API key 33): whole-resource replacement ------------------------------


def legacy_alter(admin, restype, name, configs, validate_only=False):
    """AlterConfigs (key 33, which librdkafka's deprecated alter_configs sends) for one resource."""
    res = ConfigResource(restype, name, set_config=configs)
    return admin.alter_configs([res], request_timeout=OP_TIMEOUT, validate_only=validate_only)[res]


def overrides(admin, topic):
    return {k: e.value for k, e in config_map(admin, topic).items()
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def wait_overrides(admin, topic, want, what):
    """Kafka's broker serves DescribeConfigs from its metadata cache, which can trail an accepted
    AlterConfigs for a moment (KRaft): waits up to 15 s for the overrides to be `want`."""
    last = [None]

    def ok():
        last[0] = overrides(admin, topic)
        return last[0] == want
    try:
        wait_until(what, 15, ok, 0.1)
    except Failure:
        raise Failure(f"{what}: expected {want!r} but got {last[0]!r}") from None


def legacy_alter_configs(ctx):
    """AlterConfigs replaces a topic's overrides whole (configs not named go back to their
    defaults), validate_only changes nothing, an invalid value or unknown name is INVALID_CONFIG
    and changes nothing, a missing topic is UNKNOWN_TOPIC_OR_PARTITION, a read-only broker
    setting is INVALID_REQUEST."""
    warnings.simplefilter("ignore", DeprecationWarning)
    admin = ctx.admin()
    topic = unique_topic("legacy-alter")
    for f in admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "3600000", "segment.ms": "7000000"})],
                                 request_timeout=OP_TIMEOUT).values():
        result(f, "create_topics")

    def created():
        try:
            return overrides(admin, topic).get("retention.ms") == "3600000"
        except Failure:  # Kafka may answer UNKNOWN_TOPIC_OR_PARTITION until the topic propagates
            return False
    wait_until("topic configs to be visible", 15, created)

    result(legacy_alter(admin, "TOPIC", topic, {"segment.ms": "50000", "cleanup.policy": "compact"}), "alter_configs")
    wait_overrides(admin, topic, {"segment.ms": "50000", "cleanup.policy": "compact"},
                   "overrides after alter_configs (retention.ms not named, so reset)")

    result(legacy_alter(admin, "TOPIC", topic, {"retention.ms": "7"}, validate_only=True), "alter_configs validate_only")
    check_eq({"segment.ms": "50000", "cleanup.policy": "compact"}, overrides(admin, topic),
             "overrides after a validate_only alter_configs")

    err = expect_error(legacy_alter(admin, "TOPIC", topic, {"segment.ms": "0"}), KafkaError.INVALID_CONFIG,
                       "alter_configs segment.ms=0")
    check_eq("Invalid value 0 for configuration segment.ms: Value must be at least 1", err.str(), "message")
    err = expect_error(legacy_alter(admin, "TOPIC", topic, {"no.such": "1"}), KafkaError.INVALID_CONFIG,
                       "alter_configs no.such")
    check_eq("Unknown topic config name: no.such", err.str(), "message")
    check_eq({"segment.ms": "50000", "cleanup.policy": "compact"}, overrides(admin, topic),
             "overrides after refused alter_configs")

    expect_error(legacy_alter(admin, "TOPIC", topic + "-missing", {"segment.ms": "50000"}),
                 KafkaError.UNKNOWN_TOPIC_OR_PART, "alter_configs of a missing topic")

    node = result(admin.describe_cluster(request_timeout=OP_TIMEOUT), "describe_cluster").nodes[0]
    err = expect_error(legacy_alter(admin, "BROKER", str(node.id), {"num.partitions": "3"}, validate_only=True),
                       KafkaError.INVALID_REQUEST, "alter_configs of num.partitions")
    check_eq("Cannot update these configs dynamically: [num.partitions]", err.str(), "message")

    result(legacy_alter(admin, "TOPIC", topic, {}), "alter_configs with no configs")
    wait_overrides(admin, topic, {}, "overrides after alter_configs with no configs")
    for f in admin.delete_topics([topic], request_timeout=OP_TIMEOUT).values():
        result(f, "delete_topics")


# ---- group: KIP-848 members churn their subscriptions and close mid-reconciliation ----------

CHURN_CLOSE_LIMIT = 15.0   # seconds a close may take (a heartbeat round trip and the callbacks)
CHURN_SETTLE_LIMIT = 30.0  # seconds for the staying members to own everything afterwards


class ChurnMember:
    """A group.protocol=consumer member on its own thread whose rebalance callbacks take their
    time; it walks through `subscriptions` (one every `every` seconds) and closes after the last
    one, or polls until stopped when `every` is 0."""

    def __init__(self, name, conf, subscriptions, every, callback_sleep):
        self.name, self.conf, self.subscriptions = name, conf, subscriptions
        self.every, self.callback_sleep = every, callback_sleep
        self.owned, self.log, self.error, self.close_secs = set(), [], None, None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _on_assign(self, consumer, parts):
        self.log.append(f"assigned {[(p.topic, p.partition) for p in parts]}")
        self.owned |= {(p.topic, p.partition) for p in parts}
        if parts:
            time.sleep(self.callback_sleep / 2)

    def _on_revoke(self, consumer, parts):
        self.log.append(f"revoked {[(p.topic, p.partition) for p in parts]}")
        self.owned -= {(p.topic, p.partition) for p in parts}
        if parts:
            time.sleep(self.callback_sleep)

    def _on_lost(self, consumer, parts):
        self.log.append(f"lost {[(p.topic, p.partition) for p in parts]}")
        self.owned -= {(p.topic, p.partition) for p in parts}

    def _run(self):
        c = Consumer(self.conf)
        try:
            nxt, change_at = 0, 0.0
            while not self.stop.is_set():
                now = time.monotonic()
                if nxt < len(self.subscriptions) and now >= change_at:
                    self.log.append(f"subscribe {self.subscriptions[nxt]}")
                    c.subscribe(self.subscriptions[nxt], on_assign=self._on_assign,
                                on_revoke=self._on_revoke, on_lost=self._on_lost)
                    nxt, change_at = nxt + 1, now + self.every
                elif nxt == len(self.subscriptions) and self.every > 0 and now >= change_at:
                    break
                c.poll(0.05)
        except Exception as e:  # reported by wait_closed
            self.error = e
        finally:
            t0 = time.monotonic()
            try:
                c.close()
            except Exception as e:
                self.error = self.error or e
            self.close_secs = time.monotonic() - t0
            self.log.append(f"closed after {self.close_secs:.2f} s")

    def wait_closed(self, limit):
        self.thread.join(limit)
        check(not self.thread.is_alive(), "member %s did not finish within %s s; log: %s", self.name, limit, self.log)
        check(self.error is None, "member %s failed: %s; log: %s", self.name, self.error, self.log)
        check(self.close_secs is not None and self.close_secs < CHURN_CLOSE_LIMIT,
              "member %s took %s s to close; log: %s", self.name, self.close_secs, self.log)


def group_kip848_churn(ctx):
    """KIP-848 (group.protocol=consumer): two members stay subscribed to three topics while five
    others, with rebalance callbacks that sleep, change their subscriptions several times and
    close right after their last change, in the middle of a reconciliation. Every close returns
    promptly, the two stayers then own every partition of a Stable group, and the group is Empty
    once they close too."""
    rnd = ctx.rnd("group-kip848-churn")
    admin = ctx.admin()
    base = unique_topic("kip848-churn")
    topics = [f"{base}-{x}" for x in "abc"]
    for t in topics:
        create_topic(ctx, admin, t, 4)
    group = unique_group("kip848-churn")
    conf = {"bootstrap.servers": ctx.bootstrap, "client.id": "kaas-py-churn", "group.id": group,
            "group.protocol": "consumer", "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    everything = {(t, p) for t in topics for p in range(4)}
    stayers = [ChurnMember(f"stay-{i}", conf, [topics], 0, 0.1).start() for i in (1, 2)]
    churners = []
    try:
        for i in range(5):
            subs = []
            for _ in range(3 + rnd.randrange(3)):
                sub = [t for t in topics if rnd.random() < 0.5] or [rnd.choice(topics)]
                subs.append(sub)
            churners.append(ChurnMember(f"churn-{i}", conf, subs, 0.3 + rnd.random() * 0.9,
                                        0.05 + rnd.random() * 0.3).start())
            time.sleep(0.15 + rnd.random() * 0.4)
        for m in churners:
            m.wait_closed(40)
        last = {}

        def settled():
            d = describe_group(admin, group)
            described = {(tp.topic, tp.partition) for md in d.members for tp in md.assignment.topic_partitions}
            owned = set().union(*(m.owned for m in stayers))
            last["now"] = f"{d.state}, {len(d.members)} members, described {len(described)}, stayers own {len(owned)}"
            return (d.state == confluent_kafka.ConsumerGroupState.STABLE and len(d.members) == 2
                    and described == everything and owned == everything)
        try:
            wait_until("the two staying members to own every partition", CHURN_SETTLE_LIMIT, settled, 0.2)
        except Failure as e:
            raise Failure(f"{e}; last: {last.get('now')}; stayer logs: {[m.log[-6:] for m in stayers]}")
        for m in stayers:
            m.stop.set()
        for m in stayers:
            m.wait_closed(20)
        wait_until("the group to be empty", 15,
                   lambda: describe_group(admin, group).state == confluent_kafka.ConsumerGroupState.EMPTY, 0.2)
        print(f"  slowest close {max(m.close_secs for m in stayers + churners):.2f} s", flush=True)
    finally:
        for m in stayers + churners:
            m.stop.set()


def group_kip848_regex_internal(ctx):
    """KIP-848 (group.protocol=consumer): a subscription to the regex `^__consumer_offsets$` is
    resolved by the broker against every topic, internal ones included, as Kafka 4.4 resolves
    it: the member is assigned every partition of `__consumer_offsets` and no other topic."""
    admin = ctx.admin()
    metadata = admin.list_topics(timeout=10)
    internal = metadata.topics.get("__consumer_offsets")
    check(internal is not None, "Metadata lists __consumer_offsets")
    want = {("__consumer_offsets", p) for p in internal.partitions}
    group = unique_group("kip848-regex-internal")
    c = confluent_kafka.Consumer({"bootstrap.servers": ctx.bootstrap, "group.id": group,
                                  "group.protocol": "consumer", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["^__consumer_offsets$"])
        owned = {}

        def assigned():
            c.poll(0.2)
            owned["now"] = {(tp.topic, tp.partition) for tp in c.assignment()}
            return owned["now"] == want
        try:
            wait_until("the member to own every partition of __consumer_offsets", 30, assigned, 0)
        except Failure as e:
            raise Failure(f"{e}; owns {sorted(owned.get('now', set()))[:5]}... "
                          f"({len(owned.get('now', set()))} of {len(want)})")
    finally:
        c.close()


# ---- transactions (librdkafka: Transactions V1, AddPartitionsToTxn + EndTxn) --------------------

def unique_txn_id(name):
    return f"py-txn-{name}-{uuid.uuid4().hex[:10]}"


def txn_producer(ctx, txn_id, **overrides):
    return ctx.producer(**{"transactional.id": txn_id, "client.id": "kaas-py-txn-producer",
                           "linger.ms": 5, **overrides})


def latest_offsets(admin, topic, partitions, level):
    fs = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                            isolation_level=level, request_timeout=OP_TIMEOUT)
    return {tp.partition: result(f, f"list_offsets latest {level}").offset for tp, f in fs.items()}


def wait_stable(admin, topic, partitions):
    """Waits until read_committed end offsets equal the high watermarks (all markers written)."""
    last = [None, None]

    def stable():
        last[0] = latest_offsets(admin, topic, partitions, IsolationLevel.READ_COMMITTED)
        last[1] = latest_offsets(admin, topic, partitions, IsolationLevel.READ_UNCOMMITTED)
        return last[0] == last[1]
    try:
        wait_until(f"read_committed end offsets of {topic} to reach the high watermarks", OP_TIMEOUT, stable, 0.1)
    except Failure as f:
        raise Failure(f"{f} (read_committed {last[0]}, read_uncommitted {last[1]})") from None
    return last[1]


def consumer_highs(ctx, topic, partitions, level):
    c = ctx.consumer(**{"isolation.level": level})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=OP_TIMEOUT, cached=False)[1]
                for p in range(partitions)}
    finally:
        c.close()


def verify_at(what, sent, consumed):
    """Transactional partitions have gaps (one offset per marker): per partition in send order,
    each record at the offset its delivery report gave, identical key/value/headers/timestamp."""
    expected = {}
    for s in sent:
        expected.setdefault(s.partition, []).append(s)
    got = {}
    for m in consumed:
        got.setdefault(m.partition(), []).append(m)
    check(set(got) <= set(expected), "%s: records consumed from partitions %s, expected only %s",
          what, sorted(got), sorted(expected))
    for p, exp in expected.items():
        act = got.get(p, [])
        check(len(exp) == len(act), "%s: partition %d: expected %d records, consumed %d (offsets %s)",
              what, p, len(exp), len(act), [m.offset() for m in act])
        for i, (s, m) in enumerate(zip(exp, act)):
            where = f"{what} partition {p} #{i}"
            r = s.rec
            check(m.offset() == s.offset, "%s: consumed at %d, delivery report said %d", where, m.offset(), s.offset)
            check(m.key() == r["key"], "%s: key %s, expected %s", where, short(m.key()), short(r["key"]))
            check(m.value() == r["value"], "%s: value %s, expected %s", where, short(m.value()), short(r["value"]))
            want_ts = r["timestamp"] if r["timestamp"] is not None else s.timestamp[1]
            check(m.timestamp() == (TIMESTAMP_CREATE_TIME, want_ts), "%s: timestamp %s, expected CreateTime %d",
                  where, m.timestamp(), want_ts)
            check((m.headers() or []) == r["headers"], "%s: headers %s, expected %s", where, m.headers(), r["headers"])
            le = m.leader_epoch()
            check(le is not None and le >= 0, "%s: record batch carries no partition leader epoch (%s)", where, le)


def txn_records(rnd, topic, n, tag):
    """Random records for one transaction, the first three forced onto partitions 0, 1 and 2."""
    recs = generate(rnd, topic, 3, n)
    for i, r in enumerate(recs):
        if i < 3:
            r["partition"] = i
        r["headers"] = r["headers"] + [("txn", tag.encode())]
    return recs


def txn_commit_abort(ctx):
    """A committed transaction over three partitions, an aborted one and another committed one
    (random keys, values, headers): read_committed sees exactly the committed records at the
    offsets the delivery reports gave, read_uncommitted all of them; while the third transaction
    is open list_offsets latest under read_committed is that transaction's first offset on each
    partition; afterwards both isolation levels report the same end offsets, the records plus one
    marker per transaction and partition."""
    rnd = ctx.rnd("txn-commit-abort")
    n = max(30, min(ctx.records // 10, 200))
    admin = ctx.admin()
    topic = unique_topic("txn-commit-abort")
    create_topic(ctx, admin, topic, 3)
    p = txn_producer(ctx, unique_txn_id("commit-abort"))
    p.init_transactions(OP_TIMEOUT)

    p.begin_transaction()
    first = produce(p, txn_records(rnd, topic, n, "first"), "first transaction")
    p.commit_transaction(OP_TIMEOUT)

    p.begin_transaction()
    aborted = produce(p, txn_records(rnd, topic, n // 2, "aborted"), "aborted transaction")
    p.abort_transaction(OP_TIMEOUT)

    before = wait_stable(admin, topic, 3)
    p.begin_transaction()
    third = produce(p, txn_records(rnd, topic, n, "third"), "third transaction")
    first_offsets, last_offsets = {}, {}
    for s in third:
        first_offsets[s.partition] = min(first_offsets.get(s.partition, s.offset), s.offset)
        last_offsets[s.partition] = max(last_offsets.get(s.partition, 0), s.offset + 1)
    check_eq(before, first_offsets, "first offsets of the open transaction (= end offsets before it)")
    check_eq(first_offsets, latest_offsets(admin, topic, 3, IsolationLevel.READ_COMMITTED),
             "list_offsets latest read_committed while a transaction is open")
    check_eq(last_offsets, latest_offsets(admin, topic, 3, IsolationLevel.READ_UNCOMMITTED),
             "list_offsets latest read_uncommitted while a transaction is open")
    p.commit_transaction(OP_TIMEOUT)

    ends = wait_stable(admin, topic, 3)
    everything = first + aborted + third
    want = {part: 3 for part in range(3)}  # one marker per transaction and partition
    for s in everything:
        want[s.partition] += 1
    check_eq(want, ends, "end offsets (records + one marker per transaction)")
    check_eq(ends, consumer_highs(ctx, topic, 3, "read_committed"), "read_committed consumer high watermarks")
    check_eq(ends, consumer_highs(ctx, topic, 3, "read_uncommitted"), "read_uncommitted consumer high watermarks")
    committed = first + third
    verify_at("read_committed", committed,
              consume_all(ctx, topic, 3, len(committed), settle=1.0, **{"isolation.level": "read_committed",
                                                                          "fetch.max.bytes": 8 << 20}))
    verify_at("read_uncommitted", everything,
              consume_all(ctx, topic, 3, len(everything), settle=1.0, **{"isolation.level": "read_uncommitted",
                                                                           "fetch.max.bytes": 8 << 20}))
    result(admin.delete_topics([topic], operation_timeout=OP_TIMEOUT)[topic], f"delete_topics {topic}")


CTP_PER_PARTITION = 10


def produce_input(ctx, topic, rnd_round):
    p = ctx.producer()
    recs = [{"topic": topic, "key": f"k{i}".encode(), "value": f"in-{part}-{rnd_round * CTP_PER_PARTITION + i}".encode(),
             "headers": [], "timestamp": None, "partition": part}
            for part in range(3) for i in range(CTP_PER_PARTITION)]
    produce(p, recs, f"input round {rnd_round}")


def poll_n(c, want, what):
    out = []
    deadline = time.monotonic() + 60
    while len(out) < want and time.monotonic() < deadline:
        for m in c.consume(num_messages=100, timeout=0.2):
            check(m.error() is None, "%s: consume error %s", what, m.error())
            out.append(m)
    check(len(out) == want, "%s: polled %d records, expected %d", what, len(out), want)
    return out


def transform(p, records, out_topic):
    """Writes the transformed records into the open transaction; returns the offsets to commit."""
    nxt = {}
    for m in records:
        p.produce(out_topic, key=m.key(), value=b"out:" + m.value(), partition=m.partition(),
                  headers=[("src-offset", str(m.offset()).encode())])
        nxt[m.partition()] = max(nxt.get(m.partition(), 0), m.offset() + 1)
    check(p.flush(OP_TIMEOUT) == 0, "transformed records still undelivered after %ss", OP_TIMEOUT)
    return nxt


def values_by_partition(records):
    out = {}
    for m in records:
        out.setdefault(m.partition(), []).append(m.value())
    return out


def wait_group_offsets(admin, group, topic, want, what):
    last = [None]

    def ok():
        last[0] = group_committed(admin, group, topic)
        return last[0] == want
    try:
        wait_until(what, OP_TIMEOUT, ok, 0.2)
    except Failure as f:
        raise Failure(f"{f} (committed {last[0]}, expected {want})") from None


def txn_send_offsets(ctx):
    """Consume-transform-produce: a classic group member (read_committed) reads an input topic and
    writes transformed records in a transaction with send_offsets_to_transaction(positions,
    consumer_group_metadata()). A committed round makes those offsets the group's; an aborted
    round leaves them and its output is invisible to read_committed; the member seeks back to the
    committed offsets and commits the same input again. In the end read_committed output holds
    every input record exactly once, in order, and the group's offsets are the input's end."""
    admin = ctx.admin()
    src = unique_topic("txn-ctp-in")
    dst = unique_topic("txn-ctp-out")
    group = unique_group("txn-ctp")
    create_topic(ctx, admin, src, 3)
    create_topic(ctx, admin, dst, 3)
    produce_input(ctx, src, 0)
    per_round = 3 * CTP_PER_PARTITION
    c = Consumer(member_config(ctx.bootstrap, group, **{"isolation.level": "read_committed"}))
    p = txn_producer(ctx, unique_txn_id("ctp"))
    try:
        p.init_transactions(OP_TIMEOUT)
        c.subscribe([src])

        def run_round(records, commit):
            p.begin_transaction()
            nxt = transform(p, records, dst)
            p.send_offsets_to_transaction([TopicPartition(src, part, off) for part, off in nxt.items()],
                                          c.consumer_group_metadata(), OP_TIMEOUT)
            if commit:
                p.commit_transaction(OP_TIMEOUT)
            else:
                p.abort_transaction(OP_TIMEOUT)
            return nxt

        sent1 = run_round(poll_n(c, per_round, "round 1 input"), True)
        check_eq({0: 10, 1: 10, 2: 10}, sent1, "offsets sent in round 1")
        wait_group_offsets(admin, group, src, sent1, "the group's offsets after the committed round 1")

        produce_input(ctx, src, 1)
        r2 = poll_n(c, per_round, "round 2 input")
        run_round(r2, False)
        wait_stable(admin, dst, 3)
        time.sleep(0.5)
        check_eq(sent1, group_committed(admin, group, src), "the group's offsets after the aborted round 2")
        got = c.committed([TopicPartition(src, part) for part in range(3)], timeout=OP_TIMEOUT)
        check_eq(sent1, {tp.partition: tp.offset for tp in got}, "consumer.committed() after the aborted round 2")
        check_eq(per_round, len(consume_all(ctx, dst, 3, per_round, settle=1.0, **{"isolation.level": "read_committed"})),
                 "read_committed output after the aborted round")

        for tp in got:
            c.seek(tp)
        r3 = poll_n(c, per_round, "round 3 input (after seeking back)")
        check_eq(values_by_partition(r2), values_by_partition(r3), "input re-read after the abort")
        sent3 = run_round(r3, True)
        check_eq({0: 20, 1: 20, 2: 20}, sent3, "offsets sent in round 3")
        wait_group_offsets(admin, group, src, sent3, "the group's offsets after the committed round 3")
    finally:
        c.close()
    wait_stable(admin, dst, 3)
    visible = values_by_partition(consume_all(ctx, dst, 3, 2 * per_round, settle=1.0,
                                              **{"isolation.level": "read_committed"}))
    want = {part: [f"out:in-{part}-{i}".encode() for i in range(2 * CTP_PER_PARTITION)] for part in range(3)}
    check_eq(want, visible, "read_committed output (every input record exactly once, in order)")
    check_eq(3 * per_round, len(consume_all(ctx, dst, 3, 3 * per_round, settle=1.0,
                                            **{"isolation.level": "read_uncommitted"})),
             "read_uncommitted output (the aborted round included)")
    for t, f in admin.delete_topics([src, dst], operation_timeout=OP_TIMEOUT).items():
        result(f, f"delete_topics {t}")


def simple_records(topic, tag, n):
    return [{"topic": topic, "key": f"k{i}".encode(), "value": f"{tag}-{i}".encode(), "headers": [],
             "timestamp": None, "partition": 0} for i in range(n)]


FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def txn_fencing(ctx):
    """A second producer with the same transactional.id calls init_transactions while the first
    one's transaction is open: the open transaction is aborted and the first producer is fenced
    (the produce after the fence and the commit fail with a fatal fencing error), the second
    producer's transaction commits; read_committed sees only the second producer's records and
    nothing the first sent after the fence was appended."""
    admin = ctx.admin()
    topic = unique_topic("txn-fencing")
    create_topic(ctx, admin, topic, 1)
    txn_id = unique_txn_id("fencing")
    p1 = txn_producer(ctx, txn_id)
    p1.init_transactions(OP_TIMEOUT)
    p1.begin_transaction()
    first = produce(p1, simple_records(topic, "first", 5), "first producer")

    p2 = txn_producer(ctx, txn_id)
    p2.init_transactions(OP_TIMEOUT)

    # Without an error_cb confluent-kafka raises librdkafka's fatal error from flush().
    flush_err = None
    try:
        p1.produce(topic, value=b"fenced", partition=0)
        p1.flush(OP_TIMEOUT)
    except KafkaException as e:
        flush_err = e.args[0]
    check(flush_err is not None, "the fenced producer's flush raised no error")
    check(flush_err.fatal() and flush_err.code() in FENCED, "the fenced producer's flush raised %s, "
          "not a fatal fencing error", flush_err)
    commit_err = None
    try:
        p1.commit_transaction(OP_TIMEOUT)
    except KafkaException as e:
        commit_err = e.args[0]
    check(commit_err is not None, "the fenced producer's commit succeeded")
    check(commit_err.code() in FENCED, "the fenced producer's commit failed with %s, not a fencing error", commit_err)
    check(commit_err.fatal(), "the fenced producer's commit error is not fatal: %s", commit_err)
    print(f"txn-fencing: after the fence: flush {flush_err}; commit {commit_err}", file=sys.stderr)
    p1.purge()

    p2.begin_transaction()
    second = produce(p2, simple_records(topic, "second", 5), "second producer")
    p2.commit_transaction(OP_TIMEOUT)

    ends = wait_stable(admin, topic, 1)
    check_eq({0: 12}, ends, "end offset (5 aborted + marker + 5 committed + marker)")
    verify_at("read_committed", second,
              consume_all(ctx, topic, 1, 5, settle=1.0, **{"isolation.level": "read_committed"}))
    verify_at("read_uncommitted", first + second,
              consume_all(ctx, topic, 1, 10, settle=1.0, **{"isolation.level": "read_uncommitted"}))
    result(admin.delete_topics([topic], operation_timeout=OP_TIMEOUT)[topic], f"delete_topics {topic}")


SCENARIOS = {
    "produce-consume": produce_consume,
    "fetch-limits": fetch_limits,
    "long-poll": long_poll,
    "idempotence": idempotence,
    "auto-create": auto_create,
    "admin": admin_ops,
    "legacy-alter-configs": legacy_alter_configs,
    "list-offsets": list_offsets,
    "delete-records": delete_records,
    "errors": errors,
    "group-rebalance": group_rebalance,
    "group-resubscribe": group_resubscribe,
    "group-kip848-churn": group_kip848_churn,
    "group-kip848-regex-internal": group_kip848_regex_internal,
    "compression-type": compression_type,
    "txn-commit-abort": txn_commit_abort,
    "txn-send-offsets": txn_send_offsets,
    "txn-fencing": txn_fencing,
}


def _version():
    v = confluent_kafka.version()
    return v[0] if isinstance(v, tuple) else v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--scenario", default="all", help="a name, a comma-separated list, or 'all'")
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=random.SystemRandom().randrange(1 << 40))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--member", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.member:
        return member_main(args)
    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    names = list(SCENARIOS) if args.scenario == "all" else args.scenario.split(",")
    for n in names:
        if n not in SCENARIOS:
            print(f"unknown scenario {n}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
            return 2
    print(f"python scenarios: confluent-kafka {_version()}, librdkafka {confluent_kafka.libversion()[0]}, "
          f"bootstrap {args.bootstrap}, seed {args.seed}, records {args.records}", flush=True)
    ctx = Ctx(args.bootstrap, args.records, args.seed)
    passed = 0
    for n in names:
        t0 = time.monotonic()
        faulthandler.dump_traceback_later(SCENARIO_LIMIT, exit=True)
        try:
            SCENARIOS[n](ctx)
            faulthandler.cancel_dump_traceback_later()
        except Exception as e:  # Failure or anything unexpected
            print(f"FAIL {n}: {e}", flush=True)
            traceback.print_exc()
            print(f"{passed} passed, 1 failed", flush=True)
            return 1
        passed += 1
        print(f"PASS {n} ({time.monotonic() - t0:.1f}s)", flush=True)
    print(f"{passed} passed, 0 failed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
