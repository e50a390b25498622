#!/usr/bin/env bash
# Builds the kaas container image offline, FROM scratch: the kaas binary (debug info
# stripped), the shared libraries `ldd` lists for it and the dynamic loader, nothing else.
# No base image is pulled, so it works without a registry.
#
#   scripts/build-image.sh [--binary PATH] [--tag NAME]
#
# Without --binary it builds `cargo build --release --locked -p kaas` first. The image runs
# /kaas with KAAS_DATA_DIR=/data and exposes 9092 (Kafka), 9094 (heartbeat) and 9644
# (admin). Storage is buildah's vfs driver (no overlay or fuse needed); set BUILDAH_OPTS
# (e.g. "--root DIR --runroot DIR") to keep it elsewhere. Push it with `buildah push`.
# Installs buildah from Debian if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

binary=""
tag="localhost/kaas:latest"
while (($#)); do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    *) echo "usage: $0 [--binary PATH] [--tag NAME]" >&2; exit 2 ;;
  esac
done

if ! command -v buildah >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >/dev/null
fi
if [[ -z "$binary" ]]; then
  CARGO_INCREMENTAL=0 cargo build --release --locked -p kaas
  binary=target/release/kaas
fi

# shellcheck disable=SC2086 # BUILDAH_OPTS is a list of options
bah() { buildah ${BUILDAH_OPTS:-} --storage-driver vfs "$@"; }

container=$(bah from scratch)
cleanup() { bah umount "$container" >/dev/null 2>&1 || true; bah rm "$container" >/dev/null 2>&1 || true; }
trap cleanup EXIT
root=$(bah mount "$container")

strip --strip-debug -o "$root/kaas" "$binary"
chmod 0755 "$root/kaas"
# Every library ldd resolves (`name => /path (addr)`) and the loader (`/path (addr)`), at the
# paths the binary looks for them.
for library in $(ldd "$binary" | awk '/=> \// { print $3 } /^\t\// { print $1 }'); do
  mkdir -p "$root$(dirname "$library")"
  cp -L "$library" "$root$library"
done
# The data directory, and the mount points a container runtime fills in.
mkdir -p "$root/data" "$root/tmp" "$root/proc" "$root/sys" "$root/dev"
chmod 1777 "$root/tmp"

bah config \
  --entrypoint '["/kaas"]' --cmd '' \
  --env KAAS_DATA_DIR=/data \
  --port 9092 --port 9094 --port 9644 \
  --workingdir / \
  --label org.opencontainers.image.title=kaas \
  --label org.opencontainers.image.description="A Kafka-compatible broker on io_uring" \
  "$container"
bah umount "$container" >/dev/null
bah commit --quiet "$container" "$tag" >/dev/null
echo "built $tag from $binary"
