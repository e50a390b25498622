#!/usr/bin/env bash
# What validating compressed batches on produce costs: two kaas binaries side by side, produce
# throughput with librdkafka compressing lz4 and then zstd.
#
#   perf/validation-cost.sh BASE_BINARY HEAD_BINARY [--out DIR]
#
# BASE_BINARY is a release build from before the change (for example built by
# perf/compare-builds.sh into $CARGO_TARGET_DIR/compare-base/release/kaas), HEAD_BINARY one
# with it. Both start with fresh data directories and `kaas-bench matrix` runs them in
# alternation (base, then head, cell by cell): 1 KiB records, acks=all, 16 partitions,
# 5 samples per codec, so the ratios come from one run on one machine. Results:
# DIR/lz4/RESULTS.md and DIR/zstd/RESULTS.md (default /tmp/kaas-validation-cost); ratios are
# head / base.
#
# Environment: CARGO_TARGET_DIR (where kaas-bench is built), PERF_WORK_DIR (default
# /tmp/kaas-validation-work), BASE_PORT / HEAD_PORT (default 49292 / 49392; admin at port+552).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -ge 2 && $1 != -* ]] || { sed -n '2,16p' "$0"; exit 2; }
base_bin="$1" head_bin="$2"; shift 2
out=/tmp/kaas-validation-cost
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
work="${PERF_WORK_DIR:-/tmp/kaas-validation-work}"
base_port="${BASE_PORT:-49292}"
head_port="${HEAD_PORT:-49392}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
source "$repo/perf/lib.sh"

pids=()
cleanup() {
  set +e
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work" "$out"

# Built together with kaas, as compare-builds.sh does (the same features, so no rebuild).
(cd "$repo" && cargo build --release -p kaas -p kaas-bench)
start_kaas "$base_bin" "$work/base" "$base_port" "$((base_port + 552))"
pids+=("$kaas_pid")
start_kaas "$head_bin" "$work/head" "$head_port" "$((head_port + 552))"
pids+=("$kaas_pid")

for codec in lz4 zstd; do
  "$CARGO_TARGET_DIR/release/kaas-bench" matrix --workloads produce --sizes 1024 --acks all \
    --partitions 16 --samples 5 --producer-prop "compression.type=$codec" \
    --target "base=127.0.0.1:$base_port" --target "head=127.0.0.1:$head_port" \
    --describe "base=kaas before compressed-batch validation ($base_bin)" \
    --describe "head=kaas validating compressed batches ($head_bin)" \
    --subject head --baseline base --out "$out/$codec"
done
echo "results: $out/lz4/RESULTS.md $out/zstd/RESULTS.md" >&2
