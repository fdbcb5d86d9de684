"""DAGs of the security tests (tests/security), run with dag.test().

``tfk8s_t_setup_only``: a job's setup and nothing else, so its teardown never runs (the
ownership test deletes the job's Service and watches the garbage collector remove the rest).

``tfk8s_t_setup_from_conf``: the setup of the job whose spec is the ``spec`` param, and nothing else.

``tfk8s_t_teardown_only``: the teardown of a job whose record (setup's XCom ``job``) is the
``job`` param, so a test can act on the job between its setup and its teardown.

``tfk8s_t_eval_subprocess`` and ``tfk8s_t_eval_pod``: a model evaluated twice, without a
threshold (``evaluate``) and with one it cannot reach (``gate``), in a scrubbed child process
and in an evaluation pod on the devstack's real node; the test hands them a malicious SavedModel.
"""
from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param

from tfk8s_airflow.operators.evaluation import TFEvaluateOperator
from tfk8s_airflow.operators.setup import TFJobSetupOperator
from tfk8s_airflow.operators.teardown import TFJobTeardownOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")
#: The devstack's real node (devstack/components/node): its label, the toleration of its taint, and
#: the training image its registry holds (``TFK8S_TRAINING_IMAGE``, exported by ``devstack/env node``
#: and by the tests' ``realnode`` fixture before they run a DAG).
REAL_NODE = {"tfk8s.io/real-node": "true"}
TOLERATE_NODE = [{"key": "tfk8s.io/real-node", "operator": "Exists", "effect": "NoSchedule"}]
IMAGE = os.environ.get("TFK8S_TRAINING_IMAGE") or "tfk8s/trainer:0.1"

with DAG("tfk8s_t_setup_only", schedule=None, start_date=START, catchup=False,
         params={"namespace": Param("default", type="string")}, tags=["tfk8s-test"]) as setup_only:
    TFJobSetupOperator(task_id="setup", replica_task_id="replica",
                       spec={"name": "orphan", "namespace": "{{ params.namespace }}", "image": "tfk8s/trainer:0.1",
                             "node_selector": {"type": "kwok"}, "ps": 1, "worker": 2},
                       shards={"worker-0": ["/data/a"], "worker-1": ["/data/b"]})

with DAG("tfk8s_t_setup_from_conf", schedule=None, start_date=START, catchup=False,
         params={"spec": Param({}, type="object")}, render_template_as_native_obj=True,
         tags=["tfk8s-test"]) as setup_from_conf:
    TFJobSetupOperator(task_id="setup", replica_task_id="replica", spec="{{ params.spec }}")

with DAG("tfk8s_t_teardown_only", schedule=None, start_date=START, catchup=False,
         params={"job": Param({}, type="object")}, render_template_as_native_obj=True,
         tags=["tfk8s-test"]) as teardown_only:
    TFJobTeardownOperator(task_id="teardown", job="{{ params.job }}", replica_grace=0, wait_timeout=60)

EVAL_PARAMS = {"namespace": Param("default", type="string"), "root": Param("/nonexistent", type="string")}
MODEL, HELDOUT = "{{ params.root }}/models/evil", "{{ params.root }}/cache/heldout.csv"

with DAG("tfk8s_t_eval_subprocess", schedule=None, start_date=START, catchup=False, params=EVAL_PARAMS,
         tags=["tfk8s-test"]) as eval_subprocess:
    TFEvaluateOperator(task_id="evaluate", model_dir=MODEL, heldout=HELDOUT, timeout=300, retries=0)
    TFEvaluateOperator(task_id="gate", model_dir=MODEL, heldout=HELDOUT, threshold=0.9, timeout=300, retries=0)

# The job's spec as a retraining DAG gives it: the evaluation pod takes its image, node
# placement and volumes (the real node; the directory holding model and data).
EVAL_SPEC = {"name": "evil", "namespace": "{{ params.namespace }}", "image": IMAGE,
             "node_selector": REAL_NODE, "tolerations": TOLERATE_NODE,
             "command": ["python", "-m", "tfk8s_airflow.pod.trainer"],
             "resources": {"cpu": "500m", "memory": "1Gi"},
             "volumes": [{"name": "model", "mount_path": "{{ params.root }}", "host_path": "{{ params.root }}"}],
             "ps": 1, "worker": 1}

with DAG("tfk8s_t_eval_pod", schedule=None, start_date=START, catchup=False, params=EVAL_PARAMS,
         render_template_as_native_obj=True, tags=["tfk8s-test"]) as eval_pod:
    # The evaluator's code is the deployment's: [tfk8s] evaluation_image (the tests set the training image).
    TFEvaluateOperator(task_id="evaluate", spec=EVAL_SPEC, model_dir=MODEL, heldout=HELDOUT, timeout=300, retries=0,
                       poll_interval=1)
    TFEvaluateOperator(task_id="gate", spec=EVAL_SPEC, model_dir=MODEL, heldout=HELDOUT, threshold=0.9, timeout=300,
                       retries=0, poll_interval=1)
