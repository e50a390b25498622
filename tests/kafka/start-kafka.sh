#!/usr/bin/env bash
# Start a real Apache Kafka 4.x broker in KRaft combined mode (broker+controller,
# one node) for compatibility tests and side-by-side benchmarks.
#
#   tests/kafka/start-kafka.sh <data-dir> <port> [controller-port]
#
# - The broker and its dependencies are resolved from Maven Central with mvn into
#   tests/kafka/target/lib on first use (KAFKA_LIB_DIR overrides the location).
# - <data-dir> holds server.properties, the broker's own logs (logs/), the pid file
#   (kafka.pid) and the partition data (log.dirs = <data-dir>/data). It is formatted
#   on first start and reused afterwards.
# - The PLAINTEXT listener binds 127.0.0.1:<port>; the controller listener binds
#   127.0.0.1:<controller-port> (default <port>+1).
# - Waits until the broker accepts connections and prints its pid on stdout.
#
# Environment: KAFKA_HEAP_OPTS (default "-Xms512m -Xmx1g"), KAFKA_EXTRA_PROPS
# (extra server.properties lines, newline separated), START_TIMEOUT (seconds, 120).
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 <data-dir> <port> [controller-port]" >&2
  exit 2
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
data_dir="$1"
port="$2"
cport="${3:-$((port + 1))}"
lib="${KAFKA_LIB_DIR:-$here/target/lib}"
heap="${KAFKA_HEAP_OPTS:--Xms512m -Xmx1g}"
timeout_s="${START_TIMEOUT:-120}"

mkdir -p "$data_dir"
data_dir="$(cd "$data_dir" && pwd)"
pid_file="$data_dir/kafka.pid"

if [[ -f "$pid_file" ]] && kill -0 "$(cat "$pid_file")" 2>/dev/null; then
  echo "a broker is already running from $data_dir (pid $(cat "$pid_file"))" >&2
  exit 1
fi

port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
for p in "$port" "$cport"; do
  if port_open "$p"; then
    echo "port $p on 127.0.0.1 is already in use" >&2
    exit 1
  fi
done

# Resolve the broker from Maven Central once.
if ! compgen -G "$lib/kafka_2.13-*.jar" >/dev/null; then
  echo "resolving Apache Kafka into $lib ..." >&2
  mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$lib" >&2
fi
classpath="$lib/*"

mkdir -p "$data_dir/logs" "$data_dir/data"
config="$data_dir/server.properties"
cat >"$config" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$data_dir/data
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
auto.create.topics.enable=true
delete.topic.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=6000
group.max.session.timeout.ms=300000
group.coordinator.rebalance.protocols=classic,consumer
group.consumer.assignors=uniform,range
group.consumer.session.timeout.ms=10000
group.consumer.min.session.timeout.ms=6000
group.consumer.max.session.timeout.ms=60000
group.consumer.heartbeat.interval.ms=1000
group.consumer.min.heartbeat.interval.ms=1000
group.consumer.max.heartbeat.interval.ms=15000
num.network.threads=2
num.io.threads=4
PROPS
if [[ -n "${KAFKA_EXTRA_PROPS:-}" ]]; then
  printf '%s\n' "$KAFKA_EXTRA_PROPS" >>"$config"
fi

java_opts=(-server $heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20
  -Djava.awt.headless=true
  -Dkafka.logs.dir="$data_dir/logs"
  -Dlog4j2.configurationFile="$here/log4j2.properties")

if [[ ! -f "$data_dir/data/meta.properties" ]]; then
  cluster_id="$(java -cp "$classpath" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
  java "${java_opts[@]}" -cp "$classpath" kafka.tools.StorageTool format \
      --config "$config" --cluster-id "$cluster_id" >"$data_dir/logs/format.out" 2>&1 || {
    echo "formatting $data_dir/data failed:" >&2
    cat "$data_dir/logs/format.out" >&2
    exit 1
  }
fi

nohup java "${java_opts[@]}" -cp "$classpath" kafka.Kafka "$config" \
    >"$data_dir/logs/kafka.out" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$pid_file"

deadline=$((SECONDS + timeout_s))
until port_open "$port" && grep -q "Kafka Server started" "$data_dir/logs/server.log" 2>/dev/null; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "the broker exited during start-up; last lines of its logs:" >&2
    tail -n 30 "$data_dir/logs/kafka.out" "$data_dir/logs/server.log" >&2 2>/dev/null || true
    rm -f "$pid_file"
    exit 1
  fi
  if (( SECONDS >= deadline )); then
    echo "the broker did not start within ${timeout_s}s; stopping it" >&2
    kill "$pid" 2>/dev/null || true
    tail -n 30 "$data_dir/logs/server.log" >&2 2>/dev/null || true
    exit 1
  fi
  sleep 0.5
done
echo "$pid"
