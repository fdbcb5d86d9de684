"""The pod contract: every name that the objects we create and the code inside the pods must agree on.

Why one module: the builders (:mod:`tfk8s_airflow.job.builders.objects`) write these names into pods,
and the pod side (:mod:`tfk8s_airflow.pod.runtime`, the code fetcher, the reference trainer)
reads them back. Spelled once here, the two sides cannot drift. Standard library only: the
code fetcher runs in an init container with nothing but ``python3`` and this package, and
the runtime runs in training images without Airflow.

Changing a value here changes the pod contract (see CHANGELOG.md): images built against an
older release read the old names.
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- containers
#: The training container, named as Kubeflow's TFJob names it (tools look for it).
CONTAINER_NAME = "tensorflow"
#: The named port of every replica, as TFJob names it.
PORT_NAME = "tfjob-port"
DEFAULT_PORT = 2222
#: The init container that fetches the training code (``code:`` in the spec).
FETCH_CONTAINER = "fetch-code"
#: The job's TensorBoard (``tensorboard:`` in the spec): its container, its named port (on the
#: container and on the job's Service) and its hostname, ``tensorboard.<service>.<namespace>.svc``.
TENSORBOARD_CONTAINER = "tensorboard"
TENSORBOARD_PORT_NAME = "tensorboard"
TENSORBOARD_HOSTNAME = "tensorboard"

# ----------------------------------------------------------------------------- volumes and paths
CODE_VOLUME = "tfk8s-code"
SHARDS_VOLUME = "tfk8s-shards"
SHARDS_MOUNT = "/etc/tfk8s/shards"
SHARDS_KEY = "shards.json"
DEFAULT_SHARDS_FILE = f"{SHARDS_MOUNT}/{SHARDS_KEY}"
DEFAULT_CODE_DIR = "/opt/tfk8s/code"
TERMINATION_LOG = "/dev/termination-log"
#: Where the termination message goes instead, when set (a program run outside a container: tests, a local run).
TERMINATION_LOG_ENV = "TFK8S_TERMINATION_LOG"
#: A spec volume of this name with a host path is where teardown archives the replicas' logs.
LOGS_VOLUME = "logs"
#: A spec volume of this name with a host path holds the chief's checkpoints: its ``checkpoint`` file
#: tells the job sensor the latest step (progress) even for programs that report nothing.
MODEL_VOLUME = "model"
#: Where the reference trainer's chief writes its TensorBoard summaries, under the model directory.
SUMMARY_DIR = "train"
#: Volume names the builders add to every pod that has them; a spec may not reuse them.
RESERVED_VOLUMES = frozenset({CODE_VOLUME, SHARDS_VOLUME})

# ----------------------------------------------------------------------------- labels
#: The names of what a staging task makes (its pods, lease and delegation-token Secrets): reserved, so no job
#: spec may name such a Secret, whatever [tfk8s] allowed_secrets says.
STAGING_NAME_PREFIX = "tfk8s-stage-"
#: The label of the package's own Secrets (a staging task's HDFS delegation token, value ``hdfs-delegation``):
#: no job may read a Secret carrying it, whatever its name or [tfk8s] allowed_secrets says.
LABEL_SECRET = "tfk8s.io/secret"
LABEL_PREFIX = "tfk8s.io/"
LABEL_JOB = "tfk8s.io/job"
LABEL_ROLE = "tfk8s.io/role"
LABEL_INDEX = "tfk8s.io/index"
LABEL_TRACKED = "tfk8s.io/tracked"
LABEL_RUN = "tfk8s.io/run"
LABEL_DAG = "tfk8s.io/dag"
#: The job's attempt a pod belongs to (1, then one more per group restart or replacement).
LABEL_ATTEMPT = "tfk8s.io/attempt"
#: An evaluation pod (``TFEvaluateOperator``): the evaluation's name. Not a job's pod (no ``tfk8s.io/job``).
LABEL_EVALUATION = "tfk8s.io/evaluation"
#: The app.kubernetes.io labels every object of a job gets (a pod template may not set them).
APP_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/part-of",
              "app.kubernetes.io/managed-by", "app.kubernetes.io/component")
#: Labels the cncf.kubernetes provider's KubernetesPodOperator finds a replica task's pod by.
TASK_LABELS = ("dag_id", "task_id", "run_id", "kubernetes_pod_operator", "map_index", "try_number",
               "already_checked", "airflow-worker")

#: The labels Kubeflow's TFJob operator puts on its pods, which programs written for TFJob read (a
#: ``fieldRef`` to ``metadata.labels['training.kubeflow.org/replica-index']``); a spec's
#: ``kubeflow_labels`` adds them. Not its ``operator-name`` label: a training-operator in the same
#: cluster selects its pods by that one, and must never take a job's pods for its own.
KUBEFLOW_JOB_NAME = "training.kubeflow.org/job-name"
KUBEFLOW_REPLICA_TYPE = "training.kubeflow.org/replica-type"
KUBEFLOW_REPLICA_INDEX = "training.kubeflow.org/replica-index"
KUBEFLOW_JOB_ROLE = "training.kubeflow.org/job-role"
KUBEFLOW_LABELS = (KUBEFLOW_JOB_NAME, KUBEFLOW_REPLICA_TYPE, KUBEFLOW_REPLICA_INDEX, KUBEFLOW_JOB_ROLE)

#: The scheduling gate that holds every pod of a job until all of them exist.
GANG_GATE = "tfk8s.io/gang"

# ----------------------------------------------------------------------------- environment
TF_CONFIG_ENV = "TF_CONFIG"
ENV_PREFIX = "TFK8S_"
JOB_NAME_ENV = "TFK8S_JOB_NAME"
NAMESPACE_ENV = "TFK8S_NAMESPACE"
ROLE_ENV = "TFK8S_ROLE"
INDEX_ENV = "TFK8S_INDEX"
SHARDS_FILE_ENV = "TFK8S_SHARDS_FILE"
SHARD_FILES_ENV = "TFK8S_SHARD_FILES"
CODE_DIR_ENV = "TFK8S_CODE_DIR"
DATA_DIR_ENV = "TFK8S_DATA_DIR"
MODEL_DIR_ENV = "TFK8S_MODEL_DIR"
LOG_DIR_ENV = "TFK8S_LOG_DIR"
#: Variables the pods get from us; a spec's ``env`` may not set them.
RESERVED_ENV = frozenset({TF_CONFIG_ENV})


def volume_dir_env(volume_name: str) -> str:
    """``TFK8S_<NAME>_DIR``: where a spec volume is mounted (``data`` -> ``TFK8S_DATA_DIR``)."""
    return ENV_PREFIX + volume_name.upper().replace("-", "_").replace(".", "_") + "_DIR"


# ----------------------------------------------------------------------------- progress
#: A program reports progress with one line on stdout: ``tfk8s.progress {"step": 120, "loss": 0.31}``
#: (:func:`tfk8s_airflow.pod.runtime.report` writes it). The job sensor reads the lead replica's
#: newest such line (the chief, else worker 0) from its log. Keys: step (int, required), loss,
#: examples_per_sec, target_step.
PROGRESS_PREFIX = "tfk8s.progress "

# ----------------------------------------------------------------------------- evaluation
#: The evaluator's result (``python -m tfk8s_airflow.pod.trainer.evaluate``), the only keys the worker accepts.
EVAL_RESULT_KEYS = ("accuracy", "examples", "global_step", "source", "positive_rate")
#: The largest result the worker reads: a kubelet's termination message limit.
EVAL_RESULT_MAX_BYTES = 4096

# ----------------------------------------------------------------------------- exit codes
#: As Kubeflow's TFJob ``ExitCode`` restart policy reads them: 1-127 permanent, >= 128 retryable.
EXIT_SUCCESS = 0
EXIT_PERMANENT = 1
EXIT_RETRYABLE = 138
RETRYABLE_MIN = 128


def is_retryable_exit(code: int) -> bool:
    """TFJob's ExitCode policy: >= 128 retryable (signals, OOM kill, our 138), 1-127 not."""
    return code >= RETRYABLE_MIN
