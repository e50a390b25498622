#!/usr/bin/env bash
# Runs the client projects' own transaction tests against a running broker:
#
#   franz-go/TestTxnEtl   pkg/kgo/txn_test.go of franz-go (the version in ../go/go.mod)
#   librdkafka/0103       tests/0103-transactions.c
#   librdkafka/0098       tests/0098-consumer-txn.cpp (with its Java TransactionProducerCli)
#   librdkafka/0129       tests/0129-fetch_aborted_msgs.c
#
#   tests/clients/upstream/run.sh [--list] BOOTSTRAP [TEST...]
#
# TEST is one of the names above (default: all). Prints `PASS <test> (<secs>)` or
# `FAIL <test>: <reason>` per test, ends with `N passed, M failed` and exits 1 if any failed.
# Each test's full output is kept in $UPSTREAM_WORK/logs/<client>-<test>.log.
#
# What it fetches and builds (once, into $UPSTREAM_WORK, reused afterwards):
# - franz-go: the module github.com/twmb/franz-go at the version ../go/go.mod pins, from the
#   Go module proxy (`go mod download`; module zips carry the _test.go files), copied to a
#   writable directory, and its kgo test binary (`go test -c`).
# - librdkafka: the git tag $LIBRDKAFKA_REF from $LIBRDKAFKA_GIT (a URL, or a local clone or
#   bare repository, read with `git archive`), `./configure && make libs`, then
#   `make -C tests build`. Needs gcc/g++, make, libssl-dev, zlib1g-dev, libzstd-dev, liblz4-dev
#   and rapidjson-dev (0098 needs RapidJSON; without it the test would skip itself).
# - For 0098: a KAFKA_PATH directory whose libs/ holds kafka-clients 4.4.0 and its
#   dependencies (resolved from Maven Central by ../../kafka/pom.xml, as start-kafka.sh does) and
#   whose bin/kafka-run-class.sh runs a class with them; the test compiles tests/java with javac.
#
# Deliberate changes to the upstream tests, made to the extracted copy:
# - librdkafka's tests create their topics with replication factor 3 (its own CI runs three
#   brokers); here they ask for the broker's default (-1, CreateTopics v4+) so that they run
#   against one broker.
# - The librdkafka test runner is told the broker version (TEST_KAFKA_VERSION, default 4.4.0);
#   its default of 2.4.0 would skip the KIP-360 part of 0103.
#
# Environment:
#   UPSTREAM_WORK        work directory (default: tests/clients/upstream/target)
#   LIBRDKAFKA_GIT       where librdkafka comes from
#                        (default https://github.com/confluentinc/librdkafka.git)
#   LIBRDKAFKA_REF       librdkafka tag (default v2.15.0)
#   TEST_KAFKA_VERSION   broker version the librdkafka tests assume (default 4.4.0)
#   KGO_TEST_RF          replication factor of franz-go's test topics (default 1)
#   KGO_TEST_RECORDS     records TestTxnEtl pushes through (franz-go's default: 500000)
#   KGO_LOG_LEVEL        franz-go test logging: info (default), debug, none
#   TEST_DEBUG           librdkafka `debug` for every test client (e.g. protocol,eos,msg)
#   TEST_TIMEOUT         seconds per test (default 600)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
all_tests=(franz-go/TestTxnEtl librdkafka/0103 librdkafka/0098 librdkafka/0129)

if [[ "${1:-}" == "--list" ]]; then
  printf '%s\n' "${all_tests[@]}"
  exit 0
fi
if [[ $# -lt 1 || "$1" == -* ]]; then
  echo "usage: $0 [--list] BOOTSTRAP [TEST...]   (tests: ${all_tests[*]})" >&2
  exit 2
fi
bootstrap="$1"
shift
tests=("$@")
[[ ${#tests[@]} -gt 0 ]] || tests=("${all_tests[@]}")
for t in "${tests[@]}"; do
  [[ " ${all_tests[*]} " == *" $t "* ]] || { echo "unknown test: $t" >&2; exit 2; }
done

work="${UPSTREAM_WORK:-$here/target}"
mkdir -p "$work/logs"
work="$(cd "$work" && pwd)"
librdkafka_git="${LIBRDKAFKA_GIT:-https://github.com/confluentinc/librdkafka.git}"
librdkafka_ref="${LIBRDKAFKA_REF:-v2.15.0}"
kafka_version="${TEST_KAFKA_VERSION:-4.4.0}"
test_timeout="${TEST_TIMEOUT:-600}"

say() { echo "[upstream] $*" >&2; }

# --- franz-go ---------------------------------------------------------------------------

franz_version() {
  awk '$1 == "github.com/twmb/franz-go" { print $2 }' "$repo/tests/clients/go/go.mod"
}

# Prints the directory of a writable franz-go tree with the kgo test binary built.
prepare_franz_go() {
  local version dir src
  version="$(franz_version)"
  [[ -n "$version" ]] || { say "no franz-go version in tests/clients/go/go.mod"; return 1; }
  dir="$work/franz-go-$version"
  if [[ ! -x "$dir/kgo.test" ]]; then
    say "franz-go $version: downloading the module and building its kgo tests"
    src="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "github.com/twmb/franz-go@$version" |
      sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
    [[ -d "$src/pkg/kgo" ]] || { say "go mod download gave no source for franz-go $version"; return 1; }
    rm -rf "$dir"
    cp -R "$src" "$dir"
    chmod -R u+w "$dir"
    (cd "$dir" && go test -c -o kgo.test ./pkg/kgo) >&2
  fi
  echo "$dir"
}

# --- librdkafka -------------------------------------------------------------------------

prepare_librdkafka() {
  local dir="$work/librdkafka-$librdkafka_ref"
  if [[ ! -x "$dir/tests/test-runner" ]]; then
    say "librdkafka $librdkafka_ref: fetching from $librdkafka_git and building (a few minutes)"
    rm -rf "$dir"
    mkdir -p "$dir"
    if [[ -d "$librdkafka_git" ]]; then
      git -C "$librdkafka_git" archive "$librdkafka_ref" | tar -x -C "$dir"
    else
      git clone --quiet --depth 1 --branch "$librdkafka_ref" "$librdkafka_git" "$dir.clone" >&2
      git -C "$dir.clone" archive HEAD | tar -x -C "$dir"
      rm -rf "$dir.clone"
    fi
    # Topics with the broker's default replication factor instead of 3 (see the header).
    sed -i 's/create_topic_wait_exists(\(.*\), 3, 5000);/create_topic_wait_exists(\1, -1, 5000);/' \
      "$dir/tests/0103-transactions.c" "$dir/tests/0098-consumer-txn.cpp"
    (
      cd "$dir"
      ./configure --disable-gssapi >"$work/logs/librdkafka-configure.log" 2>&1
      grep -q 'RAPIDJSON' "$work/logs/librdkafka-configure.log" || {
        say "librdkafka configure found no RapidJSON (install rapidjson-dev); 0098 would be skipped"
        exit 1
      }
      make -j"$(nproc)" libs >"$work/logs/librdkafka-build.log" 2>&1
      make -j"$(nproc)" -C tests build >>"$work/logs/librdkafka-build.log" 2>&1
    ) || { say "librdkafka build failed; see $work/logs/librdkafka-*.log"; rm -f "$dir/tests/test-runner"; return 1; }
  fi
  echo "$dir"
}

# A Kafka "installation" with just what tests/java and run-class.sh use: libs/ with
# kafka-clients and bin/kafka-run-class.sh.
prepare_kafka_path() {
  local kp="$work/kafka-path" lib
  lib="${KAFKA_LIB_DIR:-$repo/tests/kafka/target/lib}"
  if ! compgen -G "$lib/kafka-clients-*.jar" >/dev/null; then
    say "resolving Apache Kafka's jars into $lib"
    mvn -q -B -f "$repo/tests/kafka/pom.xml" dependency:copy-dependencies -DoutputDirectory="$lib" >&2
  fi
  mkdir -p "$kp/libs" "$kp/bin"
  local jar
  for jar in "$lib"/kafka-clients-*.jar "$lib"/slf4j-api-*.jar "$lib"/lz4-java-*.jar \
    "$lib"/snappy-java-*.jar "$lib"/zstd-jni-*.jar; do
    [[ -e "$jar" ]] && ln -sf "$jar" "$kp/libs/"
  done
  cat >"$kp/bin/kafka-run-class.sh" <<'SH'
#!/usr/bin/env bash
# Runs a Java class with the kafka-clients jars beside this directory (libs/*).
kafka_path="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exec java ${KAFKA_HEAP_OPTS:-} -cp "${CLASSPATH:+$CLASSPATH:}$kafka_path/libs/*" "$@"
SH
  chmod +x "$kp/bin/kafka-run-class.sh"
  echo "$kp"
}

# --- running ----------------------------------------------------------------------------

passed=0
failed=0
report() { # status test secs reason
  if [[ "$1" == PASS ]]; then
    passed=$((passed + 1))
    echo "PASS $2 ($3 s)"
  else
    failed=$((failed + 1))
    echo "FAIL $2: $4 ($3 s; log $work/logs/${2//\//-}.log)"
  fi
}

run_franz_go() {
  local name="$1" test="${1#franz-go/}" dir log start rc=0
  log="$work/logs/${name//\//-}.log"
  dir="$(prepare_franz_go)" || { report FAIL "$name" 0 "could not build franz-go's tests"; return; }
  start=$SECONDS
  (
    cd "$dir/pkg/kgo"
    KGO_SEEDS="$bootstrap" KGO_TEST_RF="${KGO_TEST_RF:-1}" \
      timeout -k 10 "$test_timeout" "$dir/kgo.test" -test.run "^${test}\$" -test.v \
      -test.timeout "$((test_timeout - 10))s"
  ) >"$log" 2>&1 || rc=$?
  local secs=$((SECONDS - start))
  if [[ $rc -eq 0 ]] && grep -q "^--- PASS: $test " "$log"; then
    report PASS "$name" "$secs"
  else
    local why
    why="$(grep -m3 -E '^\s+[a-z_0-9]+\.go:[0-9]+: |^panic:|^--- FAIL' "$log" | tr -s ' \t' ' ' | paste -sd ';' - || true)"
    [[ $rc -eq 124 ]] && why="timed out after ${test_timeout}s; $why"
    report FAIL "$name" "$secs" "exit $rc: ${why:-see log}"
  fi
}

run_librdkafka() {
  local name="$1" num="${1#librdkafka/}" dir kp log start rc=0
  log="$work/logs/${name//\//-}.log"
  dir="$(prepare_librdkafka)" || { report FAIL "$name" 0 "could not build librdkafka's tests"; return; }
  kp="$(prepare_kafka_path)"
  printf 'bootstrap.servers=%s\n' "$bootstrap" >"$dir/tests/test.conf"
  start=$SECONDS
  (
    cd "$dir/tests"
    # -L: leave out the tests that need no broker (0103_transactions_local);
    # -p1: one test at a time.
    TESTS="$num" TEST_KAFKA_VERSION="$kafka_version" KAFKA_PATH="$kp" \
      LD_LIBRARY_PATH="../src:../src-cpp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      timeout -k 10 "$test_timeout" ./test-runner -L -p1
  ) >"$log" 2>&1 || rc=$?
  local secs=$((SECONDS - start))
  # The summary table has a row per test: the broker test must have PASSED (the local one
  # is left out by -L: "Filtered due to negative test flags"), and a skipped
  # sub-test (`[ name: SKIP: reason ]`) counts as a failure.
  local plain="$log.plain"
  sed 's/\x1b\[[0-9;]*m//g' "$log" >"$plain"
  if [[ $rc -eq 0 ]] && grep -qE "^\| ${num}_[a-z_]+ +\| +PASSED" "$plain" &&
    ! grep -E "^\| ${num}_[a-z_]+ +\| +(FAILED|SKIPPED)" "$plain" | grep -qv 'negative test flags' &&
    ! grep -qE ': SKIP: ' "$plain"; then
    report PASS "$name" "$secs"
  else
    local why
    why="$(grep -m3 -E 'TEST FAILURE|Test assert|: SKIP: |\| +(FAILED|SKIPPED) ' "$plain" | tr -s ' \t' ' ' | paste -sd ';' - || true)"
    [[ $rc -eq 124 ]] && why="timed out after ${test_timeout}s; $why"
    report FAIL "$name" "$secs" "exit $rc: ${why:-see log}"
  fi
}

say "broker $bootstrap; work directory $work"
for t in "${tests[@]}"; do
  case "$t" in
    franz-go/*) run_franz_go "$t" ;;
    librdkafka/*) run_librdkafka "$t" ;;
  esac
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
