#!/usr/bin/env bash
# Builds the test Kubernetes API server (tests/kube-apiserver: kube-apiserver v1.37.2 with an
# embedded etcd, and kubectl in the same binary) into target/kube-apiserver/kube-apiserver.
# Skips the build when the binary was built from the same sources with the same Go.
# A cold build fetches ~90 MB of modules through the Go module proxy and compiles for 5-8
# minutes on 2 cores; a warm one takes seconds. Prints the binary's path on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

src=tests/kube-apiserver
out_dir="${CARGO_TARGET_DIR:-target}/kube-apiserver"
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
bin="$out_dir/kube-apiserver"
version=v1.37.2

if ! command -v go >/dev/null; then
  # Debian's golang-go (1.19) is too old for the go.mod's toolchain line and cannot fetch
  # a newer one (that needs Go 1.21 or later).
  echo "kube-apiserver.sh: Go is not installed; install Go 1.21 or later (1.26 is used;" \
    "an older 1.21+ fetches it through the module proxy). Debian's golang-go 1.19 is too old." >&2
  exit 1
fi
go_version=$(cd "$src" && go env GOVERSION)
case "$go_version" in
  go1.2[6-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
  *)
    echo "kube-apiserver.sh: $src needs Go 1.26 or later, 'go' gives $go_version" >&2
    exit 1
    ;;
esac

stamp=$( (echo "$go_version"; cd "$src" && cat go.mod go.sum ./*.go) | sha256sum | cut -d' ' -f1)
if [[ -x "$bin" && -f "$bin.stamp" && "$(cat "$bin.stamp")" == "$stamp" ]]; then
  echo "$bin"
  exit 0
fi

ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  # Without these /version answers v0.0.0-master.
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=37"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
start=$(date +%s)
(cd "$src" && go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$bin.tmp.$$" .)
# Test binaries may build at the same time: each writes its own file, the rename is atomic.
mv "$bin.tmp.$$" "$bin"
echo "$stamp" >"$bin.stamp"
echo "kube-apiserver.sh: built $bin in $(($(date +%s) - start)) s" >&2
echo "$bin"
