# Versions, paths and ports of the kueue devstack component (Kueue, plain-pod integration only).
# Sourced after _common.sh.
KUEUE_MODULE="sigs.k8s.io/kueue"
KUEUE_VERSION="${TFK8S_KUEUE_VERSION:-v0.19.2}"
KUEUE_CACHE_DIR="$TFK8S_CACHE/kueue-$KUEUE_VERSION"
KUEUE_BIN="$KUEUE_CACHE_DIR/bin/kueue"
KUEUE_STATE="$TFK8S_DEVSTACK_HOME/kueue"
# Loopback ports of its own, away from every other component's.
KUEUE_WEBHOOK_PORT="${TFK8S_KUEUE_WEBHOOK_PORT:-16945}"
KUEUE_HEALTH_PORT="${TFK8S_KUEUE_HEALTH_PORT:-16982}"
KUEUE_METRICS_PORT="${TFK8S_KUEUE_METRICS_PORT:-16983}"
KUEUE_VISIBILITY_PORT="${TFK8S_KUEUE_VISIBILITY_PORT:-16984}"
# Namespaces carrying this label (value "true") are managed by Kueue and intercepted by its pod
# webhooks; no other namespace of the shared devstack is.
KUEUE_OPT_IN_LABEL="tfk8s.io/kueue"
# What `up` leaves for tests: a flavor, a ClusterQueue, a managed namespace with a LocalQueue.
KUEUE_FLAVOR="tfk8s-default"
KUEUE_CLUSTER_QUEUE="tfk8s-test"
KUEUE_NAMESPACE="tfk8s-kueue"
KUEUE_LOCAL_QUEUE="test"
# Kueue's waitForPodsReady timeout (its default is 30 minutes): an admitted pod group whose pods are not all
# Ready this long after admission is evicted whole (docs/jobs.md, "Gang admission with Kueue"). Short on the
# devstack, so that a test sees it; KWOK's pods are Ready within a second of being bound.
KUEUE_PODS_READY_TIMEOUT="${TFK8S_KUEUE_PODS_READY_TIMEOUT:-30s}"
# Webhook configurations registered by `up` (names from Kueue's manifests).
KUEUE_MUTATING_WEBHOOK="kueue-mutating-webhook-configuration"
KUEUE_VALIDATING_WEBHOOK="kueue-validating-webhook-configuration"
# The KWOK process of this component (one stage: deleted pods under Kueue's finalizer end Failed).
KUEUE_KWOK_PORT="${TFK8S_KUEUE_KWOK_PORT:-16985}"
# Kueue's visibility API (a job's place in its queue) is registered with the API server's aggregator,
# which dials a Service's cluster IP (no kube-proxy here): that IP, inside the service range, is added
# to the loopback interface, and the visibility server listens on it alone.
KUEUE_VISIBILITY_IP="${TFK8S_KUEUE_VISIBILITY_IP:-10.96.255.250}"
KUEUE_VISIBILITY_SERVICE="kueue-visibility"
