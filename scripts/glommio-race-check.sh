#!/usr/bin/env bash
# Checks that kaas stays clear of a glommio 0.9 bug that frees a task twice.
#
# When a task's last waker is dropped on another executor's thread, glommio takes the task's
# reference count to zero and only then takes a new reference to send the task home; if the
# task has finished and its JoinHandle is dropped on its own executor in that instant, the
# JoinHandle frees it, and the waker frees it again when it arrives (net/README.md). The
# window is a few instructions wide, so the bug shows only under hours of load.
#
# This builds kaas against a copy of glommio in which a foreign waker pauses 20 µs inside
# that window (and between waking the task and dropping its reference, so the task can
# finish first), starts it, and drives end-to-end load over 16 partitions (both shards, so
# most requests wait on the other shard). It fails if kaas dies. With request handlers
# awaited through their JoinHandle (the code before this check existed), kaas aborted with
# `double free or corruption (fasttop)` within the first 16 s.
#
#   scripts/glommio-race-check.sh        (RACE_WORK_DIR: scratch space, default target/glommio-race)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${RACE_WORK_DIR:-$repo/target/glommio-race}"
port="${RACE_PORT:-39871}"
cd "$repo"

glommio_src="$(cargo metadata --format-version 1 --locked | python3 -c '
import json, sys
packages = json.load(sys.stdin)["packages"]
print(next(p["manifest_path"] for p in packages if p["name"] == "glommio").rsplit("/", 1)[0])')"

rm -rf "$work/glommio" "$work/tree" "$work/data"
mkdir -p "$work"
cp -r "$glommio_src" "$work/glommio"
python3 - "$work/glommio/src/task/raw.rs" <<'EOF'
import sys
path = sys.argv[1]
source = open(path).read()
pause = ("let until = std::time::Instant::now() + std::time::Duration::from_micros(20); "
         "while std::time::Instant::now() < until { std::hint::spin_loop(); }")
edits = [
    ("            Self::do_wake(ptr);\n            Self::drop_waker(ptr);",
     "            Self::do_wake(ptr);\n"
     "            if Self::thread_id() != Some(Self::from_ptr(ptr).my_id()) { " + pause + " }\n"
     "            Self::drop_waker(ptr);"),
    ("                    if Self::decrement_references(&*(raw.header as *mut Header)) == 0 {\n",
     "                    if Self::decrement_references(&*(raw.header as *mut Header)) == 0 {\n"
     "                        " + pause + "\n"),
]
for old, new in edits:
    if source.count(old) != 1:
        sys.exit("glommio's task code changed: check whether the foreign-waker race is still "
                 "there before adapting this check")
    source = source.replace(old, new)
open(path, "w").write(source)
EOF

# A copy of the tree, so that the patch does not touch this checkout's Cargo.lock.
mkdir -p "$work/tree"
git ls-files -z | xargs -0 cp --parents -t "$work/tree"
echo "building kaas against the widened glommio"
(cd "$work/tree" && cargo build --release -p kaas --quiet \
  --config "patch.crates-io.glommio.path=\"$work/glommio\"" --target-dir "$work/target")
cargo build -p kaas-bench --quiet --locked
bench="${CARGO_TARGET_DIR:-$repo/target}/debug/kaas-bench"

source "$repo/perf/lib.sh"
# kaas binds with SO_REUSEPORT: a broker left on the port would silently take connections.
if port_open "$port" || port_open "$((port + 1))"; then
  echo "port $port or $((port + 1)) is in use; set RACE_PORT" >&2
  exit 1
fi
start_kaas "$work/target/release/kaas" "$work" "$port" "$((port + 1))"
trap 'kill "$kaas_pid" 2>/dev/null || true' EXIT

for round in 1 2 3; do
  timeout 120 "$bench" run --bootstrap "127.0.0.1:$port" --target race \
    --workload end-to-end --partitions 16 --record-size 1024 --acks all --rate 50000 \
    --samples 1 --warmup 2 --sample 8 --no-plot --quiet --report "$work/round-$round.json" \
    >"$work/bench-$round.log" 2>&1 || true
  if ! kill -0 "$kaas_pid" 2>/dev/null; then
    echo "FAIL: kaas died under cross-shard load with the widened race window (round $round):" >&2
    tail -n 5 "$work/kaas.log" >&2
    exit 1
  fi
  if ! grep -q "end-to-end latency" "$work/bench-$round.log"; then
    echo "FAIL: the load did not run (round $round):" >&2
    tail -n 20 "$work/bench-$round.log" >&2
    exit 1
  fi
  echo "round $round: kaas alive; $(grep 'end-to-end latency' "$work/bench-$round.log" | tail -n 1)"
done
echo "kaas survived the widened glommio race window"
