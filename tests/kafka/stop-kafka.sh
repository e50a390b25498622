#!/usr/bin/env bash
# Stop a broker started by start-kafka.sh.
#
#   tests/kafka/stop-kafka.sh <data-dir>
#
# Sends SIGTERM (controlled shutdown), waits up to STOP_TIMEOUT seconds (default 60),
# then SIGKILL. The data directory is kept; remove it yourself for a fresh broker.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 <data-dir>" >&2
  exit 2
fi
pid_file="$1/kafka.pid"
if [[ ! -f "$pid_file" ]]; then
  echo "no pid file at $pid_file; nothing to stop" >&2
  exit 0
fi
pid="$(cat "$pid_file")"
if ! kill -0 "$pid" 2>/dev/null; then
  echo "broker pid $pid is not running" >&2
  rm -f "$pid_file"
  exit 0
fi
kill -TERM "$pid"
deadline=$((SECONDS + ${STOP_TIMEOUT:-60}))
while kill -0 "$pid" 2>/dev/null; do
  if (( SECONDS >= deadline )); then
    echo "broker pid $pid did not stop in time; killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
    break
  fi
  sleep 0.2
done
rm -f "$pid_file"
echo "stopped $pid"
