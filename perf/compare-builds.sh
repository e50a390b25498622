#!/usr/bin/env bash
# Two builds of kaas side by side: did a change make it faster or slower?
#
#   perf/compare-builds.sh BASE_REV [--out DIR] [-- <extra kaas-bench matrix flags>]
#
# Builds kaas at BASE_REV (in a temporary git worktree) and at the working tree, starts both
# with fresh data directories, and runs `kaas-bench matrix` against them in alternation
# (`base`, then `head`, cell by cell), so the ratios come from one run on one machine.
# Default grid: 1 KiB and 16 KiB records, acks=all, 1 and 16 partitions, produce and consume,
# 5 samples; flags after `--` replace that grid (kaas-bench matrix's own defaults apply to
# what they leave out; for example `-- --workloads produce --sizes 100 --acks all`).
# Results: DIR/RESULTS.md (default /tmp/kaas-compare), ratios are head / base.
#
# Environment: CARGO_TARGET_DIR (the working tree's build), PERF_WORK_DIR (default
# /tmp/kaas-compare-work), BASE_PORT / HEAD_PORT (default 49092 / 49192; admin at port+552).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -ge 1 && $1 != -* ]] || { sed -n '2,15p' "$0"; exit 2; }
base_rev="$1"; shift
out=/tmp/kaas-compare
matrix_flags=(--sizes 1024,16384 --acks all --partitions 1,16 --workloads produce,consume --samples 5)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift ;;
    --) shift; matrix_flags=("$@"); break ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

work="${PERF_WORK_DIR:-/tmp/kaas-compare-work}"
base_port="${BASE_PORT:-49092}"
head_port="${HEAD_PORT:-49192}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
log() { echo "[compare $(date +%H:%M:%S)] $*" >&2; }
source "$repo/perf/lib.sh"

pids=()
cleanup() {
  set +e
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  git -C "$repo" worktree remove --force "$work/base-tree" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work" "$out"

log "building head (working tree) and base ($base_rev)"
(cd "$repo" && cargo build --release -p kaas -p kaas-bench)
git -C "$repo" worktree add --detach "$work/base-tree" "$base_rev" >/dev/null
(cd "$work/base-tree" && CARGO_TARGET_DIR="$CARGO_TARGET_DIR/compare-base" cargo build --release -p kaas)

start_kaas "$CARGO_TARGET_DIR/compare-base/release/kaas" "$work/base" "$base_port" \
  "$((base_port + 552))"
pids+=("$kaas_pid")
start_kaas "$CARGO_TARGET_DIR/release/kaas" "$work/head" "$head_port" "$((head_port + 552))"
pids+=("$kaas_pid")

log "running the matrix"
"$CARGO_TARGET_DIR/release/kaas-bench" matrix "${matrix_flags[@]}" \
  --target "base=127.0.0.1:$base_port" --target "head=127.0.0.1:$head_port" \
  --describe "base=kaas at $(git -C "$repo" rev-parse --short "$base_rev")" \
  --describe "head=kaas at the working tree" \
  --subject head --baseline base --out "$out"
log "results: $out/RESULTS.md"
