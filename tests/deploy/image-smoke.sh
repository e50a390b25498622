#!/usr/bin/env bash
# Smoke test of the container image: builds it with scripts/build-image.sh (from the binary
# given, in a private buildah store under a temporary directory), opens it with
# `buildah from` + `buildah mount`, starts /kaas in it with chroot (proc, sys and dev bound in,
# as a runtime would provide them; `podman run` does not work on these machines), and has
# librdkafka produce and consume through it. Everything is stopped and removed on exit.
#
#   tests/deploy/image-smoke.sh BINARY KAFKA_PORT ADMIN_PORT
set -euo pipefail
cd "$(dirname "$0")/../.."
binary=$1 kafka_port=$2 admin_port=$3

work=$(mktemp -d)
export BUILDAH_OPTS="--root $work/root --runroot $work/run"
# shellcheck disable=SC2086
bah() { buildah $BUILDAH_OPTS --storage-driver vfs "$@"; }
container="" root="" pid=""
cleanup() {
  if [[ -n "$pid" ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  if [[ -n "$root" ]]; then
    for m in dev sys proc; do umount -l "$root/$m" 2>/dev/null || true; done
  fi
  [[ -n "$container" ]] && { bah umount "$container" >/dev/null 2>&1 || true; bah rm "$container" >/dev/null 2>&1 || true; }
  bah rmi --all --force >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

scripts/build-image.sh --binary "$binary" --tag localhost/kaas:smoke
container=$(bah from localhost/kaas:smoke)
root=$(bah mount "$container")
# Nothing but what the script put there: no shell, no package manager.
find "$root" -type f | sed "s|^$root||" | sort
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"

KAAS_DATA_DIR=/data chroot "$root" /kaas --listen "127.0.0.1:$kafka_port" --admin-listen "127.0.0.1:$admin_port" \
  --shards 1 &
pid=$!
for _ in $(seq 300); do
  if curl -fsS "http://127.0.0.1:$admin_port/healthz" >/dev/null 2>&1; then break; fi
  kill -0 "$pid" 2>/dev/null || { echo "kaas exited in the image" >&2; exit 1; }
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$admin_port/healthz"
python3 tests/deploy/produce_consume.py "127.0.0.1:$kafka_port" 100
kill -TERM "$pid"
wait "$pid"
pid=""
# The records went to the image's own /data.
test -n "$(ls "$root/data")"
echo "image smoke test passed"
