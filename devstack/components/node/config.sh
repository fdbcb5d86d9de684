# shellcheck shell=bash disable=SC2034
# Settings and helpers of the node component: a real Kubernetes node (containerd + runc +
# kubelet + CNI bridge + kube-proxy + CoreDNS + kube-router's firewall) on this host.
# Sourced after _common.sh.
NODE_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$NODE_DIR/versions.sh"
source "$NODE_DIR/lib.sh"

NODE_NAME="${TFK8S_NODE_NAME:-tfk8s-node-0}"
NODE_LABEL="tfk8s.io/real-node=true"
# Every label the node carries: NODE_LABEL, and type=local, the label the example DAG's form
# (dags/tfk8s_retrain.py, node_type) selects. `up` sets them on every start (the kubelet's
# --node-labels apply only when it first registers the Node).
NODE_LABELS=("$NODE_LABEL" type=local)
# The Node object of the retired node agent (devstack/components/nodeagent, removed in 0.2.0):
# `up` deletes it when an older devstack left it behind.
NODE_RETIRED_NODES=(tfk8s-local-0)
NODE_TAINT_KEY="tfk8s.io/real-node"
# Pods: one bridge, one /24; the bridge's address is the node IP (the host as pods see it).
NODE_BRIDGE="${TFK8S_NODE_BRIDGE:-tfk8s-cni0}"
NODE_SUBNET="${TFK8S_NODE_SUBNET:-10.214.0.0/24}"
NODE_SUBNET_BASE="${NODE_SUBNET%/*}"
NODE_HOST_ADDR="${NODE_SUBNET_BASE%.*}.$(( ${NODE_SUBNET_BASE##*.} + 1 ))"
NODE_PREFIX_LEN="${NODE_SUBNET#*/}"
NODE_SERVICE_CIDR="10.96.0.0/16"   # the apiserver's --service-cluster-ip-range
NODE_HOST_NAME="${TFK8S_NODE_HOST_NAME:-$(hostname)}"

# Ports: below the stack's 16443 and 16945-16985.
NODE_KUBELET_PORT="${TFK8S_NODE_KUBELET_PORT:-16270}"       # kubelet API on the node IP
NODE_KUBELET_HEALTHZ_PORT=$(( NODE_KUBELET_PORT + 1 ))      # 127.0.0.1
NODE_PROXY_METRICS_PORT=$(( NODE_KUBELET_PORT + 2 ))        # kube-proxy, 127.0.0.1
NODE_PROXY_HEALTHZ_PORT=$(( NODE_KUBELET_PORT + 3 ))        # kube-proxy, 127.0.0.1
NODE_ROUTER_HEALTH_PORT=$(( NODE_KUBELET_PORT + 4 ))        # kube-router, all addresses (it has no bind flag)
NODE_DNS_HEALTH_PORT=$(( NODE_KUBELET_PORT + 5 ))           # CoreDNS health, 127.0.0.1
NODE_DNS_READY_PORT=$(( NODE_KUBELET_PORT + 6 ))            # CoreDNS ready, 127.0.0.1

NODE_STATE="$TFK8S_DEVSTACK_HOME/node"
# containerd's state and sockets: short paths (the shim's socket directory must stay
# within 38 characters) on tmpfs, as /run/containerd would be.
NODE_RUN="${TFK8S_NODE_RUN:-/run/tfk8s-node}"
NODE_SOCK="$NODE_RUN/containerd.sock"
NODE_CGROUP="tfk8s-node"              # the kubelet's cgroupRoot, in every hierarchy
NODE_CNS=k8s.io                       # containerd namespace of CRI
NODE_PAUSE_VERSION=3.10.2             # what containerd v2.4.2 and kubeadm 1.36 pin
NODE_PAUSE_IMAGE="tfk8s.local/pause:$NODE_PAUSE_VERSION"
NODE_PAUSE_TAR="$NODE_IMAGE_DIR/pause-$NODE_PAUSE_VERSION.oci.tar"
NODE_PKI="$NODE_STATE/pki"
NODE_CNI_CONF_DIR="$NODE_STATE/cni-conf"
NODE_CERTS_D="$NODE_STATE/certs.d"
NODE_KUBELET_ROOT="$NODE_STATE/kubelet"
NODE_POD_LOGS="$NODE_STATE/pod-logs"
# Values of the host's sysctls before the first `up`; `down` writes them back.
NODE_SYSCTL_SAVED="$NODE_STATE/sysctl.saved"
NODE_HOST_SAVED="$NODE_STATE/host.saved"
# What the node changes: ip_forward and bridge-nf-call-iptables (set here), the kubelet's
# kernel defaults (protectKernelDefaults: false), and what kube-proxy may set.
NODE_SYSCTLS=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.conf.all.route_localnet
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait)

K8S_STATE_DIR="$TFK8S_DEVSTACK_HOME/k8s"
NODE_KUBECONFIG="$K8S_STATE_DIR/kubeconfig"    # the admin one: acceptable for a devstack
NODE_CA="$K8S_STATE_DIR/pki/ca.crt"
NODE_CA_KEY="$K8S_STATE_DIR/pki/ca.key"
NODE_KUBECTL="$TFK8S_CACHE/k8s-$K8S_VERSION/bin/kubectl"

# Start order; `down` stops them in reverse (the kubelet first, then the pods).
NODE_PROCS=(containerd coredns kube-proxy kube-router kubelet)

node_pidfile() { echo "$NODE_STATE/run/$1.pid"; }
node_logfile() { echo "$NODE_STATE/logs/$1.log"; }

# node_proc_pid NAME: pid of our live NAME process (our binary, our state on its command line).
node_proc_pid() {
  local pf pid f; pf="$(node_pidfile "$1")"
  if pid_alive "$pf"; then
    pid="$(cat "$pf")"
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^$NODE_BIN_DIR/$1 "; then echo "$pid"; return 0; fi
  fi
  for f in $(grep -laF -- "$NODE_BIN_DIR/$1" /proc/[0-9]*/cmdline 2>/dev/null || true); do
    pid="${f#/proc/}"; pid="${pid%/cmdline}"
    if tr '\0' ' ' <"$f" 2>/dev/null | grep -q "^$NODE_BIN_DIR/$1 .*\($NODE_STATE\|$NODE_RUN\|=$NODE_NAME\)"; then
      mkdir -p "$(dirname "$pf")"; echo "$pid" >"$pf"; echo "$pid"; return 0
    fi
  done
  return 1
}
node_running() { node_proc_pid "$1" >/dev/null; }

# node_start NAME ARGS...: run our NAME binary detached, log to a file, record the pid.
node_start() {
  local name="$1"; shift
  local lf; lf="$(node_logfile "$name")"
  mkdir -p "$NODE_STATE/run" "$NODE_STATE/logs"
  log "node: starting $name (log: $lf)"
  echo "---- $(date -Is) starting $name" >>"$lf"
  PATH="$NODE_BIN_DIR:$PATH" setsid nohup "$NODE_BIN_DIR/$name" "$@" >>"$lf" 2>&1 </dev/null 8>&- 9>&- &
  echo $! >"$(node_pidfile "$name")"
  sleep 0.3
  kill -0 "$!" 2>/dev/null || die "node: $name exited right after start" "$lf"
}

# node_wait SECONDS NAME WHAT COMMAND...: poll COMMAND, failing at once when NAME died.
node_wait() {
  local timeout="$1" name="$2" what="$3"; shift 3
  local deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    node_running "$name" || die "node: $name exited while waiting for $what" "$(node_logfile "$name")"
    [ "$(date +%s)" -lt "$deadline" ] || die "node: timed out after ${timeout}s waiting for $what" "$(node_logfile "$name")"
    sleep 0.5
  done
}

node_kubectl() { "$NODE_KUBECTL" --kubeconfig="$NODE_KUBECONFIG" --request-timeout=10s "$@"; }

# node_ensure_labels: the node's labels as NODE_LABELS says, and no Node of the retired node agent
# left behind. A retired Node that is Ready still has its agent running (an older checkout's devstack
# on this machine): it is left alone, and deleted by a later `up` once that agent has stopped.
node_ensure_labels() {
  node_kubectl label node "$NODE_NAME" --overwrite "${NODE_LABELS[@]}" >/dev/null ||
    die "node: could not label node $NODE_NAME with ${NODE_LABELS[*]}"
  local n ready
  for n in "${NODE_RETIRED_NODES[@]}"; do
    ready=$(node_kubectl get node "$n" --ignore-not-found \
      -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) || continue
    if [ "$ready" = True ]; then
      log "node: node $n (the retired node agent's) is still Ready: its agent runs; left alone"
    elif [ -n "$(node_kubectl get node "$n" --ignore-not-found -o name 2>/dev/null)" ]; then
      node_kubectl delete node "$n" --ignore-not-found --wait=false >/dev/null ||
        die "node: could not delete node $n (the retired node agent's)"
      log "node: deleted node $n (the retired node agent's, not Ready: no agent runs it)"
    fi
  done
}

node_ready() {
  [ "$(node_kubectl get node "$NODE_NAME" \
      -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}
kubelet_healthy() { curl -sf --max-time 3 "http://127.0.0.1:$NODE_KUBELET_HEALTHZ_PORT/healthz" | grep -qx ok; }
proxy_healthy() { curl -s --max-time 3 -o /dev/null "http://127.0.0.1:$NODE_PROXY_HEALTHZ_PORT/healthz"; }
router_healthy() { curl -sf --max-time 3 -o /dev/null "http://127.0.0.1:$NODE_ROUTER_HEALTH_PORT/healthz"; }
dns_ready() { curl -sf --max-time 3 -o /dev/null "http://127.0.0.1:$NODE_DNS_READY_PORT/ready"; }

# cgroup hierarchies (v1 controllers, name=systemd, and the hybrid unified one).
node_hierarchies() { awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo | grep '^/sys/fs/cgroup/'; }
node_cgroups() { local h; for h in $(node_hierarchies); do [ -d "$h/$NODE_CGROUP" ] && echo "$h/$NODE_CGROUP"; done; return 0; }
# Processes in our cgroups (containers) and with our paths on their command line (shims).
node_stray_pids() {
  local h f pid
  for h in $(node_hierarchies); do
    [ -d "$h/$NODE_CGROUP" ] && find "$h/$NODE_CGROUP" -name cgroup.procs -exec cat {} + 2>/dev/null
  done
  for f in $(grep -laF -e "$NODE_RUN/" -e "$NODE_STATE/" /proc/[0-9]*/cmdline 2>/dev/null || true); do
    pid="${f#/proc/}"; pid="${pid%/cmdline}"
    # Not the grep above, nor a shell of ours (this script).
    case "$(tr '\0' ' ' <"$f" 2>/dev/null)" in grep\ *|"") ;; *) [ "$pid" = "$$" ] || [ "$pid" = "${BASHPID:-}" ] || echo "$pid" ;; esac
  done
  return 0
}
node_mounts() { awk -v a="$NODE_STATE/" -v b="$NODE_RUN/" 'index($5, a) == 1 || index($5, b) == 1 || $5 == substr(a, 1, length(a) - 1) || $5 == substr(b, 1, length(b) - 1) { print $5 }' /proc/self/mountinfo; }
# iptables chains of the node: kubelet and kube-proxy (KUBE-), kube-router (KUBE-ROUTER-,
# KUBE-NWPLCY-, KUBE-POD-FW-, KUBE-SRC-), CNI portmap (CNI-).
NODE_CHAIN_RE='^(KUBE-|CNI-)'
node_chains() {
  local ipt t
  for ipt in iptables ip6tables; do
    for t in filter nat mangle raw; do
      "$ipt" -w 5 -t "$t" -S 2>/dev/null | awk -v ipt="$ipt" -v t="$t" '$1 == "-N" { print ipt, t, $2 }'
    done
  done | awk -v re="$NODE_CHAIN_RE" '$3 ~ re'
}
node_ipsets() { ipset list -n 2>/dev/null | grep -E '^(KUBE-|kube-router|inet6:KUBE-)' || true; }
