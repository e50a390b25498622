# Shared by the perf scripts (sourced, not run): port checks and starting kaas.

# True when something listens on 127.0.0.1:$1.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# start_kaas BINARY DIR PORT ADMIN_PORT [FLAGS...]: starts kaas with its data in DIR/data,
# its log in DIR/kaas.log, Kafka on 127.0.0.1:PORT and the admin endpoint on ADMIN_PORT, then
# waits for the Kafka port. Sets kaas_pid. Exits when kaas dies or does not listen in 10 s.
start_kaas() {
  local binary="$1" dir="$2" port="$3" admin_port="$4"
  shift 4
  mkdir -p "$dir"
  "$binary" --data-dir "$dir/data" --listen "127.0.0.1:$port" \
    --admin-listen "127.0.0.1:$admin_port" "$@" >"$dir/kaas.log" 2>&1 &
  kaas_pid=$!
  for _ in $(seq 1 100); do
    port_open "$port" && return 0
    kill -0 "$kaas_pid" 2>/dev/null || { cat "$dir/kaas.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "kaas did not listen on port $port within 10 s" >&2
  exit 1
}
