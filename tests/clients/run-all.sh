#!/usr/bin/env bash
# Runs every client compatibility scenario (Java kafka-clients, librdkafka via confluent-kafka
# for Python, franz-go) against one broker, stopping at the first failure.
#
#   tests/clients/run-all.sh <host:port>       # a broker that is already running
#   tests/clients/run-all.sh --with-kafka      # start Apache Kafka (tests/kafka), run, stop it
#
# Builds/installs what is missing first: pip install -r python/requirements.txt, mvn package
# (java/target/kaas-java-scenarios.jar), go build (go/scenarios).
#
# Environment:
#   SUITES="java python go"   which suites to run, in this order
#   RECORDS=2000              records per produce/consume run
#   SEED=<n>                  random seed passed to every suite (default: one per suite run)
#   SUITE_TIMEOUT=900         hard limit in seconds for each suite
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
suites="${SUITES:-java python go}"
records="${RECORDS:-2000}"
suite_timeout="${SUITE_TIMEOUT:-900}"

usage() {
  echo "usage: $0 <bootstrap host:port> | --with-kafka" >&2
  exit 2
}
[[ $# -eq 1 ]] || usage

kafka_dir=""
cleanup() {
  if [[ -n "$kafka_dir" ]]; then
    "$repo/tests/kafka/stop-kafka.sh" "$kafka_dir" >/dev/null 2>&1 || true
    rm -rf "$kafka_dir"
  fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

if [[ "$1" == "--with-kafka" ]]; then
  kafka_dir="$(mktemp -d /tmp/kaas-apache-kafka.XXXXXX)"
  port="$(free_port)"
  cport="$(free_port)"
  echo "== starting Apache Kafka on 127.0.0.1:$port (data in $kafka_dir)"
  "$repo/tests/kafka/start-kafka.sh" "$kafka_dir" "$port" "$cport" >/dev/null
  bootstrap="127.0.0.1:$port"
else
  bootstrap="$1"
fi

host="${bootstrap%:*}"
port="${bootstrap##*:}"
if ! (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
  echo "nothing accepts connections at $bootstrap" >&2
  exit 1
fi

seed_args() {
  if [[ -n "${SEED:-}" ]]; then
    printf -- '%s\n' "$1" "$SEED"
  fi
}

build_java() {
  local jar="$here/java/target/kaas-java-scenarios.jar"
  if [[ ! -f "$jar" ]] || [[ -n "$(find "$here/java/src" "$here/java/pom.xml" -newer "$jar" -print -quit)" ]]; then
    echo "== building java scenarios (mvn package)"
    mvn -q -B -f "$here/java/pom.xml" package -DskipTests
  fi
}

build_python() {
  local want
  want="$(sed -n 's/^confluent-kafka==//p' "$here/python/requirements.txt")"
  if ! python3 -c "import confluent_kafka, sys; sys.exit(0 if confluent_kafka.version()[0] == '$want' or confluent_kafka.version() == '$want' else 1)" 2>/dev/null; then
    echo "== installing python requirements (confluent-kafka $want)"
    python3 -m pip install --quiet -r "$here/python/requirements.txt"
  fi
}

build_go() {
  echo "== building go scenarios (go build)"
  (cd "$here/go" && go build -o scenarios .)
}

run_suite() {
  local name="$1"
  shift
  local log
  log="$(mktemp /tmp/kaas-client-$name.XXXXXX.log)"
  echo "== running $name scenarios against $bootstrap"
  local start=$SECONDS rc=0
  timeout --kill-after=10 "$suite_timeout" "$@" 2>"$log.err" | tee "$log" || rc=$?
  local took=$((SECONDS - start))
  local passed
  passed="$(grep -c '^PASS ' "$log" || true)"
  total_passed=$((total_passed + passed))
  local status="ok"
  [[ $rc -eq 0 ]] || status="FAILED (exit $rc)"
  summary+=("$(printf '%-7s %3d passed  %4ds  %s' "$name" "$passed" "$took" "$status")")
  if [[ $rc -ne 0 ]]; then
    if [[ $rc -eq 124 ]]; then
      echo "FAIL $name: the suite did not finish within ${suite_timeout}s"
    fi
    echo "-- last lines of $name stderr ($log.err):"
    tail -n 40 "$log.err" || true
    failed=1
    return 1
  fi
  rm -f "$log" "$log.err"
}

total_passed=0
failed=0
summary=()
for suite in $suites; do
  case "$suite" in
    java)
      build_java
      # shellcheck disable=SC2046
      run_suite java java -jar "$here/java/target/kaas-java-scenarios.jar" --bootstrap "$bootstrap" \
        --scenario all --records "$records" $(seed_args --seed) || break
      ;;
    python)
      build_python
      # shellcheck disable=SC2046
      run_suite python python3 "$here/python/scenarios.py" --bootstrap "$bootstrap" \
        --scenario all --records "$records" $(seed_args --seed) || break
      ;;
    go)
      build_go
      # shellcheck disable=SC2046
      run_suite go "$here/go/scenarios" -bootstrap "$bootstrap" -scenario all -records "$records" \
        $(seed_args -seed) || break
      ;;
    *)
      echo "unknown suite $suite (known: java python go)" >&2
      exit 2
      ;;
  esac
done

echo
echo "== summary ($bootstrap)"
for line in "${summary[@]}"; do
  echo "  $line"
done
echo "$total_passed passed, $failed failed"
exit "$failed"
