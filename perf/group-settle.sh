#!/usr/bin/env bash
# How long a 10-member consumer group takes to settle after a member joins: kaas and Apache
# Kafka side by side, on this machine, in one run.
#
#   perf/group-settle.sh [--samples N] [--rounds N] [--members N] [--partitions N] [--out DIR]
#
# 1. builds kaas and kaas-bench (release);
# 2. starts kaas and Apache Kafka 4.x (tests/kafka/start-kafka.sh, KRaft single node), each
#    on free ports with a fresh data directory, both with group.initial.rebalance.delay.ms=0
#    and a 1 s KIP-848 heartbeat interval (the classic members' heartbeat.interval.ms);
# 3. for each group setup — classic/range (eager), classic/cooperative-sticky, and the
#    KIP-848 consumer protocol with the broker's default assignor — runs
#    `kaas-bench group-settle` --rounds times against kaas then Kafka, alternating, each run
#    taking --samples samples (a fresh group per sample, one fresh topic per run);
# 4. writes DIR/GROUP_SETTLE.md (the table) and DIR/group-settle.json (every report), then
#    stops both brokers and removes their data.
#
# Defaults: --samples 6, --rounds 2 (12 samples per broker and setup), --members 10,
# --partitions 60, --out perf/. Environment: CARGO_TARGET_DIR (build directory),
# KEEP_WORK=1 keeps the brokers' data directories and logs.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
samples=6
rounds=2
members=10
partitions=60
out="$repo/perf"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --samples) samples="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --members) members="$2"; shift ;;
    --partitions) partitions="$2"; shift ;;
    --out) out="$2"; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
command_line="perf/group-settle.sh --samples $samples --rounds $rounds --members $members --partitions $partitions"

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
bin="$CARGO_TARGET_DIR/release"

log() { echo "[group-settle $(date +%H:%M:%S)] $*" >&2; }

source "$repo/perf/lib.sh"
taken_ports=()
# A port in 40000-59999 that nothing listens on and this script has not handed out.
free_port() {
  local port
  while :; do
    port=$((40000 + RANDOM % 20000))
    [[ " ${taken_ports[*]} " == *" $port "* ]] && continue
    port_open "$port" && continue
    echo "$port"
    return
  done
}
kaas_port="$(free_port)"; taken_ports+=("$kaas_port")
kaas_admin_port="$(free_port)"; taken_ports+=("$kaas_admin_port")
kafka_port="$(free_port)"; taken_ports+=("$kafka_port")
kafka_controller_port="$(free_port)"; taken_ports+=("$kafka_controller_port")

log "building kaas and kaas-bench into $CARGO_TARGET_DIR"
(cd "$repo" && cargo build --release -p kaas -p kaas-bench)

work="$(mktemp -d "${TMPDIR:-/tmp}/kaas-group-settle.XXXXXX")"
kaas_pid=""
cleanup() {
  set +e
  if [[ -n "$kaas_pid" ]] && kill -0 "$kaas_pid" 2>/dev/null; then
    kill -TERM "$kaas_pid"
    wait "$kaas_pid" 2>/dev/null
  fi
  [[ -f "$work/kafka/kafka.pid" ]] && "$repo/tests/kafka/stop-kafka.sh" "$work/kafka" >/dev/null
  if [[ "${KEEP_WORK:-0}" == 1 ]]; then
    log "kept $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

log "starting kaas on 127.0.0.1:$kaas_port"
mkdir -p "$work/runs" "$out"
start_kaas "$bin/kaas" "$work/kaas" "$kaas_port" "$kaas_admin_port" \
  --group-initial-rebalance-delay-ms 0 \
  --group-consumer-heartbeat-interval-ms 1000

# start-kafka.sh already sets group.initial.rebalance.delay.ms=0. Kafka's KIP-848 heartbeat
# interval defaults to 5 s with a 5 s floor; both brokers use 1 s, like the classic members.
log "starting Apache Kafka on 127.0.0.1:$kafka_port (controller $kafka_controller_port)"
KAFKA_EXTRA_PROPS=$'group.consumer.min.heartbeat.interval.ms=1000\ngroup.consumer.heartbeat.interval.ms=1000' \
  "$repo/tests/kafka/start-kafka.sh" "$work/kafka" "$kafka_port" "$kafka_controller_port" >/dev/null
kafka_version="$(basename "$(ls "$repo"/tests/kafka/target/lib/kafka_2.13-*.jar | grep -v -- -test | head -1)" .jar)"
kafka_version="${kafka_version#kafka_2.13-}"

setups=("classic-range:--assignment-strategy range"
        "classic-cooperative-sticky:--assignment-strategy cooperative-sticky"
        "consumer:--group-protocol consumer")
for setup in "${setups[@]}"; do
  name="${setup%%:*}"
  read -r -a flags <<<"${setup#*:}"
  for round in $(seq 1 "$rounds"); do
    for broker in kaas kafka; do
      port="$kaas_port"; [[ $broker == kafka ]] && port="$kafka_port"
      log "$name, round $round, $broker"
      "$bin/kaas-bench" group-settle --bootstrap "127.0.0.1:$port" --target "$broker" \
        --members "$members" --partitions "$partitions" --samples "$samples" "${flags[@]}" \
        --json "$work/runs/$name-$broker-$round.json" || log "$name on $broker: incomplete"
    done
  done
done

if ! kill -0 "$kaas_pid" 2>/dev/null; then
  log "kaas exited during the run; the last lines of its log:"
  tail -n 40 "$work/kaas/kaas.log" >&2
fi

jq -s '.' "$work"/runs/*.json >"$out/group-settle.json"

# One row per setup and broker: every sample of every round.
table_row() { # setup broker
  jq -r --arg setup "$1" --arg broker "$2" '
    [.[] | select(.target == $broker and (.settings | (.assignment_strategy // "") as $s
       | (if .group_protocol == "consumer" then "consumer" else "classic-" + $s end)) == $setup)]
    | [.[].samples[] | .settle_ms // empty] as $all
    | ($all | sort) as $sorted
    | ($sorted | length) as $n
    | (if $n == 0 then null elif $n % 2 == 1 then $sorted[($n - 1) / 2]
       else ($sorted[$n / 2 - 1] + $sorted[$n / 2]) / 2 end) as $median
    | [$n, ([.[].samples[]] | length), $median, $sorted[0], $sorted[-1],
       ($all | map(. * 10 | round / 10 | tostring) | join(", "))] | @tsv' "$out/group-settle.json"
}
fmt() { [[ -z "$1" ]] && echo "–" || printf '%.0f' "$1"; }

revision="$(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')"
{
  echo "# Consumer group settle time after a member joins: kaas vs Apache Kafka"
  echo
  echo "A group of $((members - 1)) consumers on a $partitions-partition topic is settled; a ${members}th"
  echo "subscribes. Each sample is the time from its \`subscribe\` to the last rebalance callback"
  echo "that leaves all $members members with a non-empty share, every partition held exactly once"
  echo "and shares differing by at most one (\`kaas-bench group-settle\`, librdkafka"
  echo "$(jq -r '.[0].machine.librdkafka' "$out/group-settle.json"); see \`bench/README.md\`)."
  echo "Every sample uses a fresh group; runs alternate kaas, Kafka, kaas, Kafka per setup."
  echo
  echo '```sh'
  echo "$command_line"
  echo '```'
  echo
  echo "| setup | broker | settled | median ms | min ms | max ms | kaas / Kafka (median) |"
  echo "|---|---|---|---|---|---|---|"
  for setup in "${setups[@]}"; do
    name="${setup%%:*}"
    IFS=$'\t' read -r kaas_n kaas_total kaas_median kaas_min kaas_max _ < <(table_row "$name" kaas)
    IFS=$'\t' read -r kafka_n kafka_total kafka_median kafka_min kafka_max _ < <(table_row "$name" kafka)
    ratio="–"
    if [[ -n "$kaas_median" && -n "$kafka_median" ]]; then
      ratio="$(awk -v a="$kaas_median" -v b="$kafka_median" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "–" }')"
    fi
    echo "| $name | kaas | $kaas_n/$kaas_total | $(fmt "$kaas_median") | $(fmt "$kaas_min") | $(fmt "$kaas_max") | $ratio |"
    echo "| $name | Kafka $kafka_version | $kafka_n/$kafka_total | $(fmt "$kafka_median") | $(fmt "$kafka_min") | $(fmt "$kafka_max") | |"
  done
  echo
  echo "Every sample (ms, in run order):"
  echo
  for setup in "${setups[@]}"; do
    name="${setup%%:*}"
    for broker in kaas kafka; do
      echo "- $name, $broker: $(table_row "$name" "$broker" | cut -f6)"
    done
  done
  echo
  cat <<'TEXT'
## Reading the numbers

- Classic protocol: the members already in the group hear of the join at their next
  heartbeat (1 s interval), so a sample is mostly the wait for that heartbeat, then the
  rejoin and sync (range: one rebalance; cooperative-sticky: two, the second after the
  revoking members' next heartbeat). The samples therefore follow the join delays in a
  saw-tooth, and the minimum is close to the brokers' own cost of a rebalance.
- KIP-848: the joiner gets its partitions on its second heartbeat, after their owners
  released them, so every sample is about one heartbeat interval whatever the phase.
- A sample one heartbeat interval above its neighbours is a rebalance that needed one more
  heartbeat round.

TEXT
  echo "## Setup"
  echo
  echo "- kaas $revision: \`--group-initial-rebalance-delay-ms 0 --group-consumer-heartbeat-interval-ms 1000\`, otherwise defaults."
  echo "- Apache Kafka $kafka_version, KRaft single node from \`tests/kafka/start-kafka.sh\` (\`group.initial.rebalance.delay.ms=0\`), plus \`group.consumer.heartbeat.interval.ms=1000\` and \`group.consumer.min.heartbeat.interval.ms=1000\`."
  echo "- classic members: \`session.timeout.ms=10000\`, \`heartbeat.interval.ms=1000\`, no offset commits; range is eager (every rebalance revokes everything), cooperative-sticky incremental (moved partitions are revoked in one rebalance and assigned in a second)."
  echo "- consumer (KIP-848) members: \`group.protocol=consumer\`, the broker's default assignor (uniform on both), broker-side session timeout (45 s) and the 1 s heartbeat above."
  echo "- A settled state counts once it held unchanged for 500 ms; the sample ends at the callback that produced it."
  echo "- The joiner subscribes 500 ms plus a delay after the callback that settled the first $((members - 1)); within a run the delays are spread evenly over 1 s (one heartbeat interval: sample *i* of *n* waits (*i* + 0.5) / *n* s), because existing members hear of the join at their next heartbeat. Both brokers get the same delays."
  echo "- Machine: $(jq -r '.[0].machine | "\(.cpu_model), \(.cpus) CPUs, kernel \(.kernel)"' "$out/group-settle.json"); client and both brokers share it."
  echo "- Every report: [group-settle.json](group-settle.json)."
  errors="$(jq -r '.[] | .target as $t | .errors[] | "- \($t): \(.)"' "$out/group-settle.json")"
  if [[ -n "$errors" ]]; then
    echo
    echo "## Errors"
    echo
    echo "$errors"
  fi
} >"$out/GROUP_SETTLE.md"
log "done: $out/GROUP_SETTLE.md"
