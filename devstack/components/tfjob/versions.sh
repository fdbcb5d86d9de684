# Versions and paths of the tfjob devstack component (Kubeflow's training-operator, TFJob only).
# Sourced after _common.sh.
TRAINING_OPERATOR_MODULE="github.com/kubeflow/training-operator"
TRAINING_OPERATOR_VERSION="${TFK8S_TRAINING_OPERATOR_VERSION:-v1.9.4}"
TFJOB_CACHE_DIR="$TFK8S_CACHE/training-operator-$TRAINING_OPERATOR_VERSION"
TFJOB_BIN="$TFJOB_CACHE_DIR/bin/training-operator.v1"
TFJOB_STATE="$TFK8S_DEVSTACK_HOME/tfjob"
# The operator's namespace (MY_POD_NAMESPACE): where its cert rotator keeps the webhook Secret.
TFJOB_NAMESPACE="${TFK8S_TFJOB_NAMESPACE:-tfk8s-training-operator}"
TFJOB_WEBHOOK_PORT="${TFK8S_TFJOB_WEBHOOK_PORT:-16943}"
TFJOB_METRICS_PORT="${TFK8S_TFJOB_METRICS_PORT:-16980}"
TFJOB_HEALTH_PORT="${TFK8S_TFJOB_HEALTH_PORT:-16981}"
# The names the operator's code looks for (cmd/training-operator.v1, pkg/cert).
TFJOB_WEBHOOK_CONFIG="validator.training-operator.kubeflow.org"
TFJOB_WEBHOOK_SECRET="training-operator-webhook-cert"
TFJOB_WEBHOOK_SERVICE="training-operator"
# Where the operator's webhook server and cert rotator read the serving certificate (fixed in its code).
TFJOB_CERT_DIR="/tmp/k8s-webhook-server/serving-certs"
