#!/usr/bin/env bash
# kaas and Apache Kafka side by side, on this machine, in one run.
#
#   perf/run.sh [--quick] [--no-profile] [--out DIR] [-- <extra kaas-bench matrix flags>]
#
# 1. builds kaas and kaas-bench (release);
# 2. measures the machine's physical limits (O_DIRECT sequential write on the disk the
#    brokers use, loopback TCP, memcpy);
# 3. starts, each with a fresh data directory under $PERF_WORK_DIR (default /tmp/kaas-perf):
#      kaas           every acknowledged write fdatasync'd (its only mode)
#      kafka-default  Apache Kafka 4.x, KRaft single node, its default flush policy (none:
#                     acknowledged writes sit in the page cache)
#      kafka-flush    the same with log.flush.interval.messages=1 (fsync per append, equal
#                     durability to kaas)
#    (Kafka comes from tests/kafka/start-kafka.sh: Maven artifacts, JDK 17);
# 4. runs `kaas-bench matrix` against the three in alternation (every target runs a cell
#    before the next cell starts);
# 5. if perf works here, profiles kaas alone under three loads (produce 1 KiB and 16 KiB at
#    open throttle, end-to-end 1 KiB at the matrix's fixed rate): perf stat of kaas and of
#    the client, io_uring latency per opcode from tracepoints (what kaas waits for), and
#    cpu-clock samples with DWARF call stacks rendered as flame graphs by inferno;
# 6. stops everything and removes the data directories.
#
# Results go to DIR (default: perf/): RESULTS.md, matrix.json, limits.json, runs/*.json,
# plots/*.png, flamegraph-*.svg, profile-*.txt.
#
# Environment: CARGO_TARGET_DIR (build directory), PERF_WORK_DIR (broker data, scratch
# files), KAAS_PORT / KAFKA_DEFAULT_PORT / KAFKA_FLUSH_PORT (47092 / 47192 / 47292; each
# Kafka also uses port+1 for its controller), KEEP_WORK=1 keeps the data directories.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=0
profile=1
out="$repo/perf"
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-profile) profile=0 ;;
    --out) out="$2"; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
command_line="perf/run.sh"
[[ $quick == 1 ]] && command_line+=" --quick"
[[ $profile == 0 ]] && command_line+=" --no-profile"
[[ ${#extra[@]} -gt 0 ]] && command_line+=" -- ${extra[*]}"

work="${PERF_WORK_DIR:-/tmp/kaas-perf}"
kaas_port="${KAAS_PORT:-47092}"
kafka_default_port="${KAFKA_DEFAULT_PORT:-47192}"
kafka_flush_port="${KAFKA_FLUSH_PORT:-47292}"
kaas_admin_port="$((kaas_port + 552))"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
bin="$CARGO_TARGET_DIR/release"

log() { echo "[perf $(date +%H:%M:%S)] $*" >&2; }

source "$repo/perf/lib.sh"
for port in "$kaas_port" "$kaas_admin_port" "$kafka_default_port" "$((kafka_default_port + 1))" \
            "$kafka_flush_port" "$((kafka_flush_port + 1))"; do
  if port_open "$port"; then
    echo "port $port is already in use; set KAAS_PORT / KAFKA_DEFAULT_PORT / KAFKA_FLUSH_PORT" >&2
    exit 1
  fi
done

log "building kaas and kaas-bench into $CARGO_TARGET_DIR"
(cd "$repo" && cargo build --release -p kaas -p kaas-bench)

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
  if [[ "${KEEP_WORK:-0}" != 1 ]]; then
    rm -rf "$work"
  fi
}
trap cleanup EXIT

rm -rf "$work"
mkdir -p "$work" "$out"
rm -rf "$out/runs" "$out/plots"
rm -f "$out"/flamegraph-*.svg "$out"/profile-*.txt "$out/matrix.json" "$out/limits.json"

log "physical limits (disk under $work)"
"$bin/kaas-bench" limits --dir "$work/limits" --out "$out/limits.json"
rm -rf "$work/limits"

log "starting kaas on 127.0.0.1:$kaas_port"
start_kaas "$bin/kaas" "$work/kaas" "$kaas_port" "$kaas_admin_port"

# Both Kafkas delete a deleted topic's files after 1 s instead of 60 s, so that the
# matrix's fresh topic per run does not pile up on disk; it does not change the write path.
common_props="log.segment.delete.delay.ms=1000"
log "starting kafka-default on 127.0.0.1:$kafka_default_port"
KAFKA_EXTRA_PROPS="$common_props" \
  "$repo/tests/kafka/start-kafka.sh" "$work/kafka-default" "$kafka_default_port" >/dev/null
log "starting kafka-flush on 127.0.0.1:$kafka_flush_port"
KAFKA_EXTRA_PROPS="$common_props"$'\n'"log.flush.interval.messages=1" \
  "$repo/tests/kafka/start-kafka.sh" "$work/kafka-flush" "$kafka_flush_port" >/dev/null

kafka_version="$(basename "$(ls "$repo"/tests/kafka/target/lib/kafka_2.13-*.jar | grep -v -- -test | head -1)" .jar)"
kafka_version="${kafka_version#kafka_2.13-}"

matrix_flags=()
[[ $quick == 1 ]] && matrix_flags+=(--quick)
log "running the matrix"
"$bin/kaas-bench" matrix "${matrix_flags[@]}" \
  --target "kaas=127.0.0.1:$kaas_port" \
  --target "kafka-default=127.0.0.1:$kafka_default_port" \
  --target "kafka-flush=127.0.0.1:$kafka_flush_port" \
  --describe "kaas=kaas $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?'), default settings ($(nproc) shards); every acknowledged write (acks=1 and acks=all) is fdatasync'd before the reply." \
  --describe "kafka-default=Apache Kafka $kafka_version, KRaft single node (tests/kafka/start-kafka.sh: heap 512 MiB–1 GiB, num.network.threads=2, num.io.threads=4), Kafka's default flush policy: no fsync, acknowledged writes may sit in the page cache; log.segment.delete.delay.ms=1000." \
  --describe "kafka-flush=the same Kafka with log.flush.interval.messages=1: every append is fsync'd before it is acknowledged, the durability kaas gives." \
  --subject kaas --baseline kafka-default \
  --disk-dir "$work" \
  --limits "$out/limits.json" \
  --command "$command_line" \
  --out "$out" \
  "${extra[@]}"

kaas_alive() { kill -0 "$kaas_pid" 2>/dev/null; }
if ! kaas_alive; then
  log "kaas exited during the matrix; the last lines of its log:"
  tail -n 40 "$work/kaas/kaas.log" >&2
  cp "$work/kaas/kaas.log" "$out/kaas-exit.log"
  printf '## kaas exited during the run\n\nIts log: [kaas-exit.log](kaas-exit.log).\n\n' >>"$out/RESULTS.md"
fi

if [[ $profile == 1 ]] && kaas_alive; then
  if perf stat -e task-clock true >/dev/null 2>&1; then
    inferno_root="$CARGO_TARGET_DIR/tools"
    if [[ ! -x "$inferno_root/bin/inferno-flamegraph" ]]; then
      log "installing inferno (flame graph renderer) into $inferno_root"
      cargo install --quiet --locked --root "$inferno_root" inferno
    fi
    profile_one() { # name, kaas-bench run flags...
      local name="$1"; shift
      log "profiling kaas: $name"
      "$bin/kaas-bench" run --bootstrap "127.0.0.1:$kaas_port" --target kaas --quiet --no-plot \
        --warmup 3 --sample 16 --samples 1 --report "$work/profile-$name.json" "$@" \
        >"$work/profile-$name.out" 2>&1 &
      local bench=$!
      sleep 5
      if ! kaas_alive; then
        log "kaas is not running; no profile"
        wait "$bench" || true
        return 0
      fi
      local txt="$out/profile-$name.txt"
      # The broker and the client share the machine: count both over the same 3 s.
      perf stat -e task-clock,context-switches,cpu-migrations,page-faults -p "$bench" \
        -o "$work/client-$name.txt" -- sleep 3 &
      local client_stat=$!
      perf stat -e task-clock,context-switches,cpu-migrations,page-faults -p "$kaas_pid" \
        -o "$txt" -- sleep 3 || true
      wait "$client_stat" || true
      # On-CPU: where kaas spends its CPU.
      perf record -q -e cpu-clock -F 497 --call-graph dwarf,32768 -p "$kaas_pid" \
        -o "$work/perf-$name.data" -- sleep 4 2>/dev/null || true
      # Off-CPU: how long kaas waits for each kind of io_uring operation (fdatasync, DMA
      # writes, socket reads and writes), from the io_uring tracepoints.
      perf record -q -e io_uring:io_uring_submit_req,io_uring:io_uring_complete -p "$kaas_pid" \
        -o "$work/uring-$name.data" -- sleep 3 2>/dev/null || true
      wait "$bench" || true
      {
        echo
        echo "The same 3 s, the kaas-bench process (librdkafka client):"
        cat "$work/client-$name.txt"
        echo
        echo "kaas-bench run $* (during the profile):"
        tail -n 4 "$work/profile-$name.out"
        echo
        perf script -i "$work/uring-$name.data" 2>/dev/null | "$bin/kaas-bench" uring-latency || true
        echo
        echo "kaas threads, CPU seconds since start (utime+stime):"
        for task in /proc/"$kaas_pid"/task/*; do
          awk -v name="$(cat "$task/comm" 2>/dev/null)" \
            '{printf "  %-20s %.2f\n", name, ($14+$15)/100}' "$task/stat" 2>/dev/null || true
        done
      } >>"$txt"
      perf script -i "$work/perf-$name.data" --no-inline 2>/dev/null \
        | "$inferno_root/bin/inferno-collapse-perf" >"$work/perf-$name.folded"
      "$inferno_root/bin/inferno-flamegraph" --title "kaas: $name" \
        <"$work/perf-$name.folded" >"$out/flamegraph-$name.svg"
      rm -f "$work/perf-$name.data" "$work/uring-$name.data"
    }
    # Throughput targets: 1 KiB acks=all (vs Kafka) and 16 KiB (vs the O_DIRECT limit).
    profile_one produce-1KiB-acks-all-p16 --workload produce --record-size 1024 --acks all --partitions 16
    profile_one produce-16KiB-acks-all-p16 --workload produce --record-size 16384 --acks all --partitions 16
    # Latency target: end-to-end at the matrix's fixed rate for 1 KiB, acks=all, 16 partitions.
    e2e_rate="$(grep -o '"rate": [0-9.]*' "$out/runs/end-to-end-1024B-acksall-p16-kaas.json" 2>/dev/null \
      | head -1 | awk '{printf "%d", $2}')"
    if [[ -n "$e2e_rate" && "$e2e_rate" != 0 ]]; then
      profile_one "end-to-end-1KiB-acks-all-p16-${e2e_rate}rps" --workload end-to-end \
        --record-size 1024 --acks all --partitions 16 --rate "$e2e_rate"
    fi
    {
      echo "## Profiles of kaas"
      echo
      echo "While kaas-bench loaded kaas alone: \`perf stat\` software counters of kaas and of the client, per-opcode io_uring latency (submit → complete, from the io_uring tracepoints: how long kaas waits for fdatasync, DMA writes and sockets), per-thread CPU time (\`profile-*.txt\`), and cpu-clock samples with DWARF call stacks (flame graphs)."
      echo
      for txt in "$out"/profile-*.txt; do
        base="$(basename "$txt" .txt)"
        echo "- ${base#profile-}: [counters and io_uring latency]($(basename "$txt")), [flame graph](flamegraph-${base#profile-}.svg)"
      done
      echo
    } >>"$out/RESULTS.md"
  else
    log "perf does not work here; no flame graphs"
    printf '## Profiles of kaas\n\nperf could not sample on this machine; no flame graphs.\n\n' >>"$out/RESULTS.md"
  fi
fi
if [[ -f "$out/FINDINGS.md" ]]; then
  printf '## Analysis\n\nWritten by hand about the committed run: [FINDINGS.md](FINDINGS.md).\n' >>"$out/RESULTS.md"
fi
log "done: $out/RESULTS.md"
