#!/usr/bin/env bash
# Runs every test of kaas on a fresh machine: installs what the tests need (and builds the
# real kube-apiserver the Kubernetes adapter tests run against), then checks
# formatting and lints, runs the Rust tests (unit, property, crash, integration against the
# real binary) and the real-client suites (Java, librdkafka via Python, franz-go), then
# checks that kaas survives a glommio race widened on purpose (scripts/glommio-race-check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# A fresh build gains nothing from incremental state, and it costs disk.
export CARGO_INCREMENTAL=0

step() { printf '\n==> %s\n' "$*"; }

step "system packages"
missing=()
for tool in cmake pkg-config; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
dpkg -s libcurl4-openssl-dev >/dev/null 2>&1 || missing+=(libcurl4-openssl-dev)
dpkg -s libssl-dev >/dev/null 2>&1 || missing+=(libssl-dev)
# The seccomp profile wrapper (deploy/seccomp/run-under-profile) and the image build.
dpkg -s python3-seccomp >/dev/null 2>&1 || missing+=(python3-seccomp)
command -v buildah >/dev/null || missing+=(buildah)
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

step "real Kafka clients"
tests/clients/prepare.sh

step "test Kubernetes API server (Go; cold build 5-8 min, then cached)"
scripts/kube-apiserver.sh >/dev/null

step "format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings

step "Rust tests"
cargo test --workspace --locked

step "glommio double-free race, widened"
scripts/glommio-race-check.sh

echo
echo "all tests passed"
