#!/usr/bin/env bash
# Failover time of a three-broker kaas cluster on a real Kubernetes API server: from kill -9
# (or SIGSTOP) of a broker to its partitions answering produce on another broker.
#
#   perf/failover.sh [--runs N] [--cases LIST] [--partitions N] [--out FILE] [-- <extra kaas flags>]
#
# Cases (default all four, comma-separated): broker-kill (kill -9 of a broker that is not the
# controller), controller-kill (kill -9 of the Lease holder), broker-stop and controller-stop
# (SIGSTOP instead). For each of N runs (default 5) and each case it starts a fresh cluster:
# a namespace of its own on the test API server (tests/kube-apiserver, built by
# scripts/kube-apiserver.sh), the CRDs of deploy/crds, an EndpointSlice of three ready
# brokers, three release `kaas` processes (pods kaas-0..2 on 127.32.<n>.1-3 with the default
# ports, one shared data directory, `--assignment-source kube`, KUBECONFIG, POD_NAMESPACE and
# MY_POD_IP set) and a KafkaTopic of --partitions partitions (default 6; 3000 puts 1,000 on
# each broker); waits until every broker leads partitions,
# then runs tests/clients/python/cluster_failover.py `probe`: a librdkafka producer (idempotent,
# acks=all) already connected to every leader sends the signal itself and at once one record
# to each partition the victim led. Reported per case, medians and ranges over the runs:
#   assigned: signal -> an assignment.json in which other brokers lead all those partitions;
#   answered: signal -> the last of those records acknowledged (what a client sees; includes
#             up to ~1 s of the client's own request timeout when the leader is paused).
# Extra kaas flags (e.g. `-- --lease-duration-ms 5000 --lease-renew-period-ms 1000`) go to
# every broker; without them the brokers' defaults apply.
#
# Environment: KAAS_BIN (default: $CARGO_TARGET_DIR/release/kaas, built here with
# `cargo build --release -p kaas`), CARGO_TARGET_DIR (default target/), PERF_WORK_DIR
# (default /tmp/kaas-failover), KEEP_WORK=1 keeps the brokers' logs and data, PERF_RUST_LOG
# (default warn) is the brokers' RUST_LOG (e.g. `info` for the timestamps of a breakdown:
# Lease acquired, brokers dialling in, assignment written).
# Figures are only meaningful on a quiet machine; run it with nothing else building.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=5
partitions=6
cases="broker-kill,controller-kill,broker-stop,controller-stop"
out=""
kaas_flags=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs="$2"; shift ;;
    --cases) cases="$2"; shift ;;
    --partitions) partitions="$2"; shift ;;
    --out) out="$2"; shift ;;
    --) shift; kaas_flags=("$@"); break ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"
work="${PERF_WORK_DIR:-/tmp/kaas-failover}"
script="$repo/tests/clients/python/cluster_failover.py"
topic=bench
log() { echo "[failover $(date +%H:%M:%S)] $*" >&2; }

broker_pids=()
apiserver_pid=""
cleanup() {
  set +e
  stop_brokers
  if [[ -n "$apiserver_pid" ]]; then
    kill -TERM "$apiserver_pid" 2>/dev/null
    wait "$apiserver_pid" 2>/dev/null
  fi
  [[ "${KEEP_WORK:-0}" == 1 ]] || rm -rf "$work"
}
stop_brokers() {
  local pid
  for pid in "${broker_pids[@]}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
    { wait "$pid"; } 2>/dev/null || true
  done
  broker_pids=()
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work"

if [[ -z "${KAAS_BIN:-}" ]]; then
  log "building kaas (release)"
  (cd "$repo" && nice -n 10 cargo build --release --locked -p kaas)
  KAAS_BIN="$CARGO_TARGET_DIR/release/kaas"
fi
apiserver_bin="$(cd "$repo" && scripts/kube-apiserver.sh)"

# The API server stops when its stdin closes: the coprocess pipe this script holds.
coproc APISERVER { exec "$apiserver_bin" --dir "$work/apiserver" --cleanup 2>"$work/apiserver.log"; }
apiserver_pid=$APISERVER_PID
kubeconfig=""
while read -r -t 180 word port path <&"${APISERVER[0]}"; do
  if [[ "$word" == READY ]]; then kubeconfig="$path"; break; fi
done
[[ -n "$kubeconfig" ]] || { tail -20 "$work/apiserver.log" >&2; echo "the API server did not start" >&2; exit 1; }
kubectl() { "$apiserver_bin" kubectl --kubeconfig "$kubeconfig" "$@"; }
log "API server on port $port"
kubectl apply -k "$repo/deploy/crds" >/dev/null
kubectl wait --for condition=established --timeout=60s \
  crd/kafkatopics.kaas.io crd/kafkaclusterassignments.kaas.io >/dev/null

# A 127.32.<n>.0/24 whose default ports nobody listens on.
port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
subnet=""
for i in $(seq 0 249); do
  n=$(( ($$ + i) % 250 + 1 ))
  busy=0
  for id in 1 2 3; do
    for p in 9092 9094 9644; do
      if port_open "127.32.$n.$id" "$p"; then busy=1; fi
    done
  done
  if [[ $busy == 0 ]]; then subnet=$n; break; fi
done
[[ -n "$subnet" ]] || { echo "no free loopback subnet" >&2; exit 1; }
ip() { echo "127.32.$subnet.$(( $1 + 1 ))"; }
bootstrap="$(ip 0):9092,$(ip 1):9092,$(ip 2):9092"

# Prints "<controller> <victim's pid> <victim> <partitions it leads>" once every broker leads
# a partition of the topic in assignment.json and /healthz shows that version everywhere.
wait_for_cluster() {
  python3 - "$1" "$partitions" "$(ip 0)" "$(ip 1)" "$(ip 2)" <<'EOF'
import json, sys, time, urllib.request
path, partitions, addrs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
deadline = time.time() + 120
while time.time() < deadline:
    try:
        a = json.load(open(path))
        leaders = [p["leader"] for p in a["partitions"].get("bench", [])]
        if len(leaders) == partitions and set(leaders) == {0, 1, 2}:
            version = a["assignment_version"]
            applied = [json.load(urllib.request.urlopen("http://%s:9644/healthz" % h, timeout=2))
                       .get("assignment_version", 0) for h in addrs]
            if all(v >= version for v in applied):
                print(json.dumps(leaders))
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.1)
sys.exit("the cluster did not assign every broker partitions within 120 s")
EOF
}

results="$work/results.txt"
: >"$results"
run_case() {
  local case="$1" run="$2" ns="failover-$$-$1-$2"
  local dir="$work/$ns"
  mkdir -p "$dir/data/__cluster"
  kubectl create namespace "$ns" >/dev/null
  {
    echo "apiVersion: discovery.k8s.io/v1"
    echo "kind: EndpointSlice"
    echo "metadata: {name: kaas-perf, labels: {kubernetes.io/service-name: kaas}}"
    echo "addressType: IPv4"
    echo "ports: [{name: kafka, port: 9092, protocol: TCP}]"
    echo "endpoints:"
    for id in 0 1 2; do
      # The API refuses loopback addresses here; brokers are matched by targetRef.name.
      echo "- {addresses: [\"192.0.2.$(( id + 1 ))\"], conditions: {ready: true}, targetRef: {kind: Pod, name: kaas-$id, namespace: $ns}}"
    done
  } >"$dir/slice.yaml"
  kubectl apply -n "$ns" -f "$dir/slice.yaml" >/dev/null
  for id in 0 1 2; do
    MY_POD_NAME="kaas-$id" MY_POD_IP="$(ip $id)" POD_NAMESPACE="$ns" KUBECONFIG="$kubeconfig" RUST_LOG="${PERF_RUST_LOG:-warn}" \
      "$KAAS_BIN" --assignment-source kube --data-dir "$dir/data" \
      --listen "$(ip $id):9092" --admin-listen "$(ip $id):9644" \
      --heartbeat-listen "$(ip $id):9094" --advertised-host "$(ip $id)" \
      "${kaas_flags[@]}" >"$dir/kaas-$id.log" 2>&1 &
    broker_pids[$id]=$!
  done
  printf 'apiVersion: kaas.io/v1\nkind: KafkaTopic\nmetadata: {name: %s}\nspec: {topicName: %s, partitions: %d}\n' \
    "$topic" "$topic" "$partitions" >"$dir/topic.yaml"
  kubectl apply -n "$ns" -f "$dir/topic.yaml" >/dev/null
  local leaders controller victim signal owned
  leaders="$(wait_for_cluster "$dir/data/__cluster/assignment.json")"
  controller="$(kubectl get lease kaas-controller -n "$ns" -o jsonpath='{.spec.holderIdentity}')"
  controller="${controller#kaas-}"
  case "$case" in
    controller-*) victim="$controller" ;;
    *) victim=$(( (controller + 1) % 3 )) ;;
  esac
  case "$case" in
    *-kill) signal=9 ;;
    *-stop) signal=19 ;;
  esac
  owned="$(python3 -c 'import json,sys; print(",".join(str(i) for i, b in enumerate(json.loads(sys.argv[1])) if b == int(sys.argv[2])))' "$leaders" "$victim")"
  local answer
  answer="$(python3 "$script" --bootstrap "$bootstrap" probe --topic "$topic" \
    --partitions-list "$owned" --victim "$victim" --kill-pid "${broker_pids[$victim]}" \
    --signal "$signal" --assignment "$dir/data/__cluster/assignment.json")" || {
    echo "$answer" >&2
    for id in 0 1 2; do
      echo "broker $id /healthz: $(curl -s -m 2 "http://$(ip $id):9644/healthz")" >&2
    done
    log "$case run $run failed; logs in $dir"; KEEP_WORK=1; exit 1; }
  read -r _ assigned _ answered <<<"$answer"
  local shown="$owned"
  (( ${#owned} <= 60 )) || shown="$(tr ',' '\n' <<<"$owned" | wc -l) of them"
  log "$case run $run: victim $victim (controller $controller), partitions $shown: assigned ${assigned} s, answered ${answered} s"
  echo "$case $assigned $answered" >>"$results"
  stop_brokers
  for id in 0 1 2; do
    for p in 9092 9094 9644; do
      while port_open "$(ip $id)" "$p"; do sleep 0.05; done
    done
  done
  [[ "${KEEP_WORK:-0}" == 1 ]] || rm -rf "$dir"
}

IFS=, read -r -a case_list <<<"$cases"
for run in $(seq 1 "$runs"); do
  for case in "${case_list[@]}"; do
    run_case "$case" "$run"
  done
done

table="$(python3 - "$results" "$runs" "${kaas_flags[*]:-}" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    case, assigned, answered = line.split()
    rows.setdefault(case, []).append((float(assigned), float(answered)))
flags = sys.argv[3] or "the brokers' defaults"
print("Failover, %s runs per case, kaas flags: %s" % (sys.argv[2], flags))
print()
print("| case | assigned: median (min-max) | answered: median (min-max) |")
print("|---|---|---|")
for case, samples in rows.items():
    cols = []
    for i in (0, 1):
        values = [s[i] for s in samples]
        cols.append("%.2f s (%.2f-%.2f)" % (statistics.median(values), min(values), max(values)))
    print("| %s | %s | %s |" % (case, cols[0], cols[1]))
EOF
)"
echo "$table"
[[ -z "$out" ]] || echo "$table" >"$out"
