#!/usr/bin/env bash
# Installs and builds the real-client suites: confluent-kafka (librdkafka) from PyPI, the
# Java scenarios with kafka-clients from Maven Central, the Go scenarios with franz-go from
# the Go module proxy. run-all.sh and the Rust test `real_clients` use what this builds.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
  -r "$here/python/requirements.txt"
mvn -q -B -f "$here/java/pom.xml" package -DskipTests
(cd "$here/go" && go build -o scenarios .)
# Kafka Connect, MirrorMaker 2 and Kafka Streams runners (tests/frameworks_run_on_kaas.rs).
mvn -q -B -f "$here/../frameworks/pom.xml" package -DskipTests
echo "client suites ready: $(python3 -c 'import confluent_kafka; print("confluent-kafka", confluent_kafka.__version__)'), java $(ls "$here/java/target/kaas-java-scenarios.jar"), go $here/go/scenarios, frameworks $(ls "$here/../frameworks/target/kaas-frameworks.jar")"
