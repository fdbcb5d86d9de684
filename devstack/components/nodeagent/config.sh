# Settings of the nodeagent devstack component. Sourced after _common.sh.
NA_HOME="$TFK8S_DEVSTACK_HOME/nodeagent"
NA_NODE="${TFK8S_NODEAGENT_NODE:-tfk8s-local-0}"
NA_PORT="${TFK8S_NODEAGENT_PORT:-16260}"            # kubelet API (logs); KWOK has 16250
NA_SUBNET="${TFK8S_NODEAGENT_SUBNET:-10.213.0.0/24}" # pod addresses; .1 is the bridge
NA_BRIDGE="${TFK8S_NODEAGENT_BRIDGE:-tfk8s-br0}"
# The host as pods see it: the bridge's address (the subnet's first address). A server for
# pods (training code, data) listens on it or on 0.0.0.0; 127.0.0.1 in a pod is the pod's own.
NA_SUBNET_BASE="${NA_SUBNET%/*}"
NA_HOST_ADDR="${NA_SUBNET_BASE%.*}.$(( ${NA_SUBNET_BASE##*.} + 1 ))"
# This machine's host name resolves to NA_HOST_ADDR in every pod's hosts file (HDFS names its
# DataNode by it in WebHDFS redirects).
NA_HOST_NAME="${TFK8S_NODEAGENT_HOST_NAME:-$(hostname)}"
# The interpreter `python`/`python3` in a pod's command maps to (needs TensorFlow for TF pods).
NA_POD_PYTHON="${TFK8S_NODEAGENT_PYTHON:-$REPO_DIR/.venv/bin/python}"
# The interpreter that runs the agent itself (needs the kubernetes client).
NA_AGENT_PYTHON="${TFK8S_NODEAGENT_AGENT_PYTHON:-$REPO_DIR/.venv/bin/python}"
NA_TAINT="${TFK8S_NODEAGENT_TAINT:-1}"              # 1: taint tfk8s.io/node-agent=true:NoSchedule
NA_AGENT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/agent.py"
NA_PID="$NA_HOME/agent.pid"
NA_LOG="$NA_HOME/logs/agent.log"
K8S_KUBECONFIG="$TFK8S_DEVSTACK_HOME/k8s/kubeconfig"

# agent_running: the pid file names a live agent.py process (guards against pid reuse).
agent_running() {
  pid_alive "$NA_PID" || return 1
  tr '\0' ' ' <"/proc/$(cat "$NA_PID")/cmdline" 2>/dev/null | grep -q "agent.py run"
}

kubelet_healthy() {
  curl -skf --max-time 3 "https://127.0.0.1:$NA_PORT/healthz" 2>/dev/null | grep -qx ok
}

# node_ready: the API server has our Node with Ready=True.
node_ready() {
  local kubectl
  kubectl="$("$DEVSTACK_DIR/components/k8s/env" 2>/dev/null | sed -n "s/^export TFK8S_KUBECTL=//p")"
  [ -n "$kubectl" ] || return 1
  [ "$("$kubectl" --kubeconfig="$K8S_KUBECONFIG" --request-timeout=5s get node "$NA_NODE" \
      -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

agent_up() { agent_running && [ -f "$NA_HOME/ready" ] && kubelet_healthy && node_ready; }
