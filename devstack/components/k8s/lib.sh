# Helpers of the k8s devstack component. Sourced after _common.sh and versions.sh.

pidfile() { echo "$K8S_STATE/run/$1.pid"; }
logfile() { echo "$K8S_STATE/logs/$1.log"; }

# find_process NAME: pid of a live NAME process of this devstack (our binary, our state
# directory on its command line), found through /proc; empty when there is none.
find_process() {
  local f pid args
  for f in /proc/[0-9]*/cmdline; do
    pid="${f#/proc/}"; pid="${pid%/cmdline}"
    args="$(tr '\0' ' ' 2>/dev/null <"$f")" || continue
    case "$args" in
      "$K8S_BIN_DIR/$1 "*"$K8S_STATE/"*) echo "$pid"; return 0 ;;
    esac
  done
  return 1
}

# running NAME: a live NAME process of this devstack exists. Its pid file is the fast path
# (checked against the command line, in case the pid was reused); a process whose pid file
# was lost is found through /proc and adopted, so nothing is ever started twice.
running() {
  local pf pid; pf="$(pidfile "$1")"
  if pid_alive "$pf" && tr '\0' ' ' <"/proc/$(cat "$pf")/cmdline" 2>/dev/null | grep -q "^$K8S_BIN_DIR/$1 "; then
    return 0
  fi
  pid="$(find_process "$1")" || return 1
  mkdir -p "$(dirname "$pf")"
  echo "$pid" >"$pf"
}

all_running() {
  local c
  for c in "${K8S_COMPONENTS[@]}"; do running "$c" || return 1; done
}

# start NAME BINARY ARGS...: run detached in its own session, log to a file, record the pid.
start() {
  local name="$1"; shift
  local lf; lf="$(logfile "$name")"
  [ -x "$1" ] || die "$name: binary $1 missing (build failed?)" "$K8S_CACHE_DIR/build.log"
  log "k8s: starting $name (log: $lf)"
  echo "---- $(date -Is) starting $name" >>"$lf"
  # Close the lock descriptors of `up`/`build` so a daemon never holds their locks.
  setsid nohup "$@" >>"$lf" 2>&1 </dev/null 8>&- 9>&- &
  echo $! >"$(pidfile "$name")"
  sleep 0.2
  kill -0 "$!" 2>/dev/null || die "$name exited right after start" "$lf"
}

# wait_ready SECONDS NAME COMMAND...: like wait_until, but fails at once (with NAME's log
# tail) when the NAME process has died instead of waiting out the timeout.
wait_ready() {
  local timeout="$1" name="$2"; shift 2
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    running "$name" || die "$name exited during start-up" "$(logfile "$name")"
    [ "$(date +%s)" -lt "$deadline" ] || die "timed out after ${timeout}s waiting for $name to become ready" "$(logfile "$name")"
    sleep 0.5
  done
}

# check_port_free PORT NAME: fail clearly when something else already listens there.
check_port_free() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    die "$2: port 127.0.0.1:$1 is already in use by another process (stale devstack? try devstack/down k8s)" ""
  fi
}

_curl() { curl -sf --max-time 3 "$@"; }

etcd_healthy() {
  _curl --cacert "$PKI/ca.crt" --cert "$PKI/apiserver-etcd-client.crt" \
    --key "$PKI/apiserver-etcd-client.key" "https://127.0.0.1:$ETCD_CLIENT_PORT/health" |
    grep -q '"health":"true"'
}

apiserver_ready() {
  [ -f "$PKI/admin.crt" ] || return 1
  _curl --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" \
    "$APISERVER_URL/readyz" | grep -qx ok
}

# component_healthy PORT NAME: the component's secure /healthz answers ok.
component_healthy() {
  running "$2" || return 1
  _curl --cacert "$PKI/ca.crt" "https://127.0.0.1:$1/healthz" | grep -qx ok
}

kc() { "$K8S_BIN_DIR/kubectl" --kubeconfig="$KUBECONFIG_ADMIN" --request-timeout=10s "$@"; }

FAKE_NODES=(kwok-node-0 kwok-node-1)
nodes_ready() {
  local out n
  out="$(kc get nodes "${FAKE_NODES[@]}" \
    -o 'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null)" || return 1
  for n in "${FAKE_NODES[@]}"; do grep -qx "$n=True" <<<"$out" || return 1; done
}

# Container logs for `kubectl logs` on kwok pods: KWOK runs no containers, so every
# container of every pod on a fake node serves the same CRI-format log file.
write_kwok_logs_config() {
  local logs="$K8S_STATE/kwok/container.log"
  if [ ! -s "$logs" ]; then
    printf '%s stdout F %s\n' \
      "2025-01-01T00:00:00.000000000Z" "tfk8s devstack: simulated container on a KWOK fake node" \
      "2025-01-01T00:00:01.000000000Z" "tfk8s devstack: no process ran; this log is a fixed placeholder" \
      >"$logs"
  fi
  cat >"$K8S_STATE/kwok/logs.yaml" <<YAML
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: tfk8s-all-pods
spec:
  logs:
  - logsFile: $logs
    previousLogsFile: $logs
    follow: false
YAML
}
