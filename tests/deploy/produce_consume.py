"""Produces N records to a new topic through librdkafka (confluent-kafka) and consumes them
back in a group; exits non-zero unless every record comes back. Used by the seccomp and
image smoke tests: python3 produce_consume.py HOST:PORT [N]"""
import sys
import uuid

from confluent_kafka import Consumer, Producer

bootstrap = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 100
topic = "smoke-" + uuid.uuid4().hex[:8]

producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
delivered = []
for i in range(count):
    producer.produce(topic, key=str(i).encode(), value=f"value-{i}".encode(),
                     on_delivery=lambda err, msg: delivered.append(err))
left = producer.flush(30)
if left or len(delivered) != count or any(delivered):
    sys.exit(f"produce failed: {left} left, {len(delivered)} reports, errors {set(delivered)}")

consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "smoke-" + topic,
                     "auto.offset.reset": "earliest"})
consumer.subscribe([topic])
seen = set()
for _ in range(300):
    msg = consumer.poll(0.1)
    if msg is None:
        if len(seen) == count:
            break
        continue
    if msg.error():
        sys.exit(f"consume failed: {msg.error()}")
    seen.add(msg.value().decode())
consumer.close()
if seen != {f"value-{i}" for i in range(count)}:
    sys.exit(f"consumed {len(seen)} of {count} records")
print(f"produced and consumed {count} records on {topic}")
