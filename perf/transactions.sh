#!/usr/bin/env bash
# Transactional produce on kaas and Apache Kafka, side by side, alternating (issue 26).
#
#   perf/transactions.sh [--reps N] [--rate R] [--out DIR] [--no-build]
#                        [-- <extra kaas-bench run flags>]
#   perf/transactions.sh --summarize [--out DIR]   # the table again from DIR/runs/*.json
#
# Starts kaas (release build, default settings), kafka-default (Kafka's flush policy: no
# fsync) and kafka-flush (log.flush.interval.messages=1), each with a fresh data directory,
# then for each repetition runs on every broker, one after another:
#   idempotent          enable.idempotence=true, not transactional, open throttle (the
#                       baseline)
#   transactional       --transactional --transaction-ms 100, open throttle
#   transactional-rate  the same at a fixed --rate R records/s (default 50000), which every
#                       broker sustains: the commit then waits for one linger's worth of
#                       records, not for a client queue full of them
# with 1 KiB records, 16 partitions, acks=all, one producer, 3 s warm-up and 3 samples of
# 5 s, a fresh topic per run, after a `sync` and 3 s of quiet.
#
# Writes to DIR (default /tmp/kaas-transactions): runs/<broker>-<mode>-<rep>.json (every
# report), transactions.json (one summary line per run) and transactions.md (medians over
# the repetitions per broker and mode, the targets of issue 26).
#
# Environment: CARGO_TARGET_DIR, PERF_WORK_DIR (broker data, default /tmp/kaas-perf-txn),
# KAAS_PORT / KAFKA_DEFAULT_PORT / KAFKA_FLUSH_PORT (47392 / 47492 / 47592; each Kafka also
# uses port+1, kaas port+552), KEEP_WORK=1 keeps the data directories. Needs jq.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
reps=3
rate=50000
out=/tmp/kaas-transactions
build=1
summarize_only=0
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --reps) reps="$2"; shift ;;
    --rate) rate="$2"; shift ;;
    --out) out="$2"; shift ;;
    --no-build) build=0 ;;
    --summarize) summarize_only=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

work="${PERF_WORK_DIR:-/tmp/kaas-perf-txn}"
kaas_port="${KAAS_PORT:-47392}"
kafka_default_port="${KAFKA_DEFAULT_PORT:-47492}"
kafka_flush_port="${KAFKA_FLUSH_PORT:-47592}"
kaas_admin_port="$((kaas_port + 552))"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
bin="$CARGO_TARGET_DIR/release"

log() { echo "[transactions $(date +%H:%M:%S)] $*" >&2; }

source "$repo/perf/lib.sh"

# summarize_run BROKER MODE REP REPORT: one JSON line of a run's figures (ms).
summarize_run() {
  jq -c --arg broker "$1" --arg mode "$2" --argjson rep "$3" '
    def ms: if . == null then null else . / 1000 end;
    {
      broker: $broker, mode: $mode, rep: $rep, complete: .complete,
      records_per_s: .summary.records_per_s, mb_per_s: .summary.mb_per_s,
      produce_p50_ms: (.summary.produce_latency.p50_us | ms),
      produce_p99_ms: (.summary.produce_latency.p99_us | ms),
      commits: .summary.transactions.commits,
      committed_records_per_s: .summary.transactions.committed_records_per_s,
      records_per_transaction: .summary.transactions.records_per_transaction,
      commit_p50_ms: (.summary.transactions.commit_latency.p50_us | ms),
      commit_p99_ms: (.summary.transactions.commit_latency.p99_us | ms),
      commit_max_ms: (.summary.transactions.commit_latency.max_us | ms),
      end_txn_p50_ms: (.summary.transactions.end_txn_latency.p50_us | ms),
      end_txn_p99_ms: (.summary.transactions.end_txn_latency.p99_us | ms)
    }' "$4"
}

# print_table SUMMARIES: medians over the repetitions, per broker and mode, as Markdown.
print_table() {
  jq -s -r '
    def median: sort | if length == 0 then null
      elif length % 2 == 1 then .[length / 2 | floor]
      else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    def cell: if . == null then "–" else (. * 100 | round / 100 | tostring) end;
    def med(f): map(f | select(. != null)) | median;
    group_by([.broker, .mode]) | map({
        broker: .[0].broker, mode: .[0].mode, runs: length,
        rps: med(.records_per_s), mbs: med(.mb_per_s),
        p99: med(.produce_p99_ms), c50: med(.commit_p50_ms), c99: med(.commit_p99_ms),
        cmax: med(.commit_max_ms), end50: med(.end_txn_p50_ms), end99: med(.end_txn_p99_ms),
        rpt: med(.records_per_transaction)
      }) as $rows
    | ($rows | map(select(.broker == "kaas" and .mode == "idempotent")) | .[0].rps) as $base
    | "| broker | mode | runs | records/s | MB/s | vs kaas idempotent | produce p99 ms | commit p50 ms | commit p99 ms | commit max ms | EndTxn p50 ms | EndTxn p99 ms | records/txn |",
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
      ($rows[] | "| \(.broker) | \(.mode) | \(.runs) | \(.rps | round) | \(.mbs | cell) | \(if $base and .mode != "transactional-rate" then (.rps / $base | cell) else "–" end) | \(.p99 | cell) | \(.c50 | cell) | \(.c99 | cell) | \(.cmax | cell) | \(.end50 | cell) | \(.end99 | cell) | \(.rpt | if . == null then "–" else round end) |")
  ' "$1"
}

if [[ $summarize_only == 1 ]]; then
  summaries="$out/transactions.json"
  : >"$summaries"
  for report in "$out"/runs/*.json; do
    name="$(basename "$report" .json)"          # <broker>-<mode>-<rep>
    rep="${name##*-}"
    rest="${name%-*}"
    for mode in transactional-rate transactional idempotent; do
      if [[ $rest == *-"$mode" ]]; then
        summarize_run "${rest%-"$mode"}" "$mode" "$rep" "$report" >>"$summaries"
        break
      fi
    done
  done
  print_table "$summaries" | tee "$out/transactions.md"
  exit 0
fi
for port in "$kaas_port" "$kaas_admin_port" "$kafka_default_port" "$((kafka_default_port + 1))" \
            "$kafka_flush_port" "$((kafka_flush_port + 1))"; do
  if port_open "$port"; then
    echo "port $port is already in use; set KAAS_PORT / KAFKA_DEFAULT_PORT / KAFKA_FLUSH_PORT" >&2
    exit 1
  fi
done

if [[ $build == 1 ]]; then
  log "building kaas and kaas-bench into $CARGO_TARGET_DIR"
  (cd "$repo" && cargo build --release -p kaas -p kaas-bench)
fi

kaas_pid=""
cleanup() {
  set +e
  if [[ -n "$kaas_pid" ]] && kill -0 "$kaas_pid" 2>/dev/null; then
    kill -TERM "$kaas_pid"
    wait "$kaas_pid" 2>/dev/null
  fi
  for dir in "$work/kafka-default" "$work/kafka-flush"; do
    [[ -f "$dir/kafka.pid" ]] && "$repo/tests/kafka/stop-kafka.sh" "$dir" >/dev/null
  done
  [[ "${KEEP_WORK:-0}" != 1 ]] && rm -rf "$work"
}
trap cleanup EXIT

rm -rf "$work" "$out/runs"
mkdir -p "$work" "$out/runs"

log "starting kaas on 127.0.0.1:$kaas_port"
start_kaas "$bin/kaas" "$work/kaas" "$kaas_port" "$kaas_admin_port"
common_props="log.segment.delete.delay.ms=1000"
log "starting kafka-default on 127.0.0.1:$kafka_default_port"
KAFKA_EXTRA_PROPS="$common_props" \
  "$repo/tests/kafka/start-kafka.sh" "$work/kafka-default" "$kafka_default_port" >/dev/null
log "starting kafka-flush on 127.0.0.1:$kafka_flush_port"
KAFKA_EXTRA_PROPS="$common_props"$'\n'"log.flush.interval.messages=1" \
  "$repo/tests/kafka/start-kafka.sh" "$work/kafka-flush" "$kafka_flush_port" >/dev/null

declare -A bootstrap=(
  [kaas]="127.0.0.1:$kaas_port"
  [kafka-default]="127.0.0.1:$kafka_default_port"
  [kafka-flush]="127.0.0.1:$kafka_flush_port"
)
declare -A mode_flags=(
  [idempotent]="--producer-prop enable.idempotence=true"
  [transactional]="--transactional --transaction-ms 100"
  [transactional-rate]="--transactional --transaction-ms 100 --rate $rate"
)

summaries="$out/transactions.json"
: >"$summaries"
for rep in $(seq 1 "$reps"); do
  for broker in kaas kafka-default kafka-flush; do
    for mode in idempotent transactional transactional-rate; do
      sync
      sleep 3
      report="$out/runs/$broker-$mode-$rep.json"
      log "rep $rep/$reps: $broker $mode"
      # shellcheck disable=SC2086 # mode_flags holds several flags
      "$bin/kaas-bench" run --bootstrap "${bootstrap[$broker]}" --target "$broker" \
        --workload produce --record-size 1024 --partitions 16 --acks all \
        --warmup 3 --sample 5 --samples 3 --quiet --no-plot --report "$report" \
        ${mode_flags[$mode]} "${extra[@]}" >"$work/last-run.out" 2>&1 \
        || log "run incomplete: $(tail -n 3 "$work/last-run.out" | tr '\n' ' ')"
      cat "$work/last-run.out" >&2
      summarize_run "$broker" "$mode" "$rep" "$report" >>"$summaries" \
        || log "no report for $broker $mode rep $rep"
    done
  done
done

print_table "$summaries" | tee "$out/transactions.md"
log "reports in $out/runs, summary lines in $summaries, table in $out/transactions.md"
