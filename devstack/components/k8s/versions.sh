# Versions and paths of the k8s devstack component. Sourced after _common.sh.
K8S_VERSION="${TFK8S_K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${TFK8S_ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${TFK8S_KWOK_VERSION:-v0.8.0}"
K8S_CACHE_DIR="$TFK8S_CACHE/k8s-$K8S_VERSION"
K8S_BIN_DIR="$K8S_CACHE_DIR/bin"
K8S_STATE="$TFK8S_DEVSTACK_HOME/k8s"

# Loopback ports, away from the defaults so a real cluster on this machine does not clash.
ETCD_CLIENT_PORT="${TFK8S_ETCD_CLIENT_PORT:-12379}"
ETCD_PEER_PORT="${TFK8S_ETCD_PEER_PORT:-12380}"
APISERVER_PORT="${TFK8S_APISERVER_PORT:-16443}"
KCM_PORT="${TFK8S_KCM_PORT:-16457}"
SCHEDULER_PORT="${TFK8S_SCHEDULER_PORT:-16459}"
KWOK_PORT="${TFK8S_KWOK_PORT:-16250}"
APISERVER_URL="https://127.0.0.1:$APISERVER_PORT"

# Kubernetes' own gang scheduling (KEP-4671): the Workload and PodGroup API (scheduling.k8s.io/v1beta1,
# beta in 1.37 but off by default, as every beta API) and the scheduler's GangScheduling plugin, both
# behind GenericWorkload. The API server, the controller manager and the scheduler take the same gates.
# Set to empty (scripts/test-k8s-floor does, for a minor without the API) they pass no gate at all.
K8S_FEATURE_GATES="${TFK8S_K8S_FEATURE_GATES-GenericWorkload=true}"
K8S_RUNTIME_CONFIG="${TFK8S_K8S_RUNTIME_CONFIG-scheduling.k8s.io/v1beta1=true}"
# The scheduler profile's plugin settings (KubeSchedulerConfiguration v1 `plugins`, as YAML flow). 1.37.2's
# DynamicResources plugin fails the PodGroupPostFilter of every PodGroup whose pods claim no device ("error in
# \"DynamicResources\" PodGroupPostFilter plugins: not found"), so a PodGroup that can place its minCount but not
# all of its pods is never placed (docs/jobs.md, "Admission"); it is disabled at that extension point alone. Empty:
# the scheduler's defaults (scripts/test-k8s-floor: 1.36 has no such extension point).
_plugins='{podGroupPostFilter: {disabled: [{name: DynamicResources}]}}'
K8S_SCHEDULER_PLUGINS="${TFK8S_K8S_SCHEDULER_PLUGINS-$_plugins}"

PKI="$K8S_STATE/pki"
KUBECONFIG_ADMIN="$K8S_STATE/kubeconfig"
# Start order; `down` stops them in reverse.
K8S_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
