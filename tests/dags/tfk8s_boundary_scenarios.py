"""DAGs of the second trust-boundary tests (tests/security/test_admission_everywhere.py,
tests/security/test_job_objects.py), run with dag.test().

``tfk8s_t_hostile_setup`` / ``tfk8s_t_hostile_eval``: the same hostile spec (hostPath /, a
privileged container, ServiceAccount tf-admin and its token, Secret prod-db) given to setup and
to the evaluation: both must refuse it for the same five problems, before any pod exists.

``tfk8s_t_form_image``: the retraining DAG's own job spec (dags/tfk8s_retrain.py), its image
chosen by the form (``params.image``), handed to the evaluation.

``tfk8s_t_setup_volumes``: setup of a KWOK job mounting ``params.root``/scratch and
``params.root``/scratch/x (the recovery test plants ``x -> /`` afterwards).
"""
from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from tfk8s_airflow.operators.evaluation import TFEvaluateOperator
from tfk8s_airflow.operators.setup import TFJobSetupOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")
NS = {"namespace": Param("default", type="string")}

HOSTILE = {"name": "evil", "namespace": "{{ params.namespace }}", "image": "tfk8s/trainer:0.1",
           "node_selector": {"type": "kwok"}, "worker": 1,
           "service_account": "tf-admin", "automount_service_account_token": True,
           "volumes": [{"name": "root", "mount_path": "/host", "host_path": "/"}],
           "env": {"DB_PASSWORD": {"value_from": {"secret_key_ref": {"name": "prod-db", "key": "password"}}}},
           "pod_template": {"spec": {"containers": [{"name": "tensorflow", "securityContext": {"privileged": True}}]}}}

with DAG("tfk8s_t_hostile_setup", schedule=None, start_date=START, catchup=False, params=NS,
         tags=["tfk8s-test"]) as hostile_setup:
    TFJobSetupOperator(task_id="setup", replica_task_id="replica", spec=HOSTILE, retries=0)

with DAG("tfk8s_t_hostile_eval", schedule=None, start_date=START, catchup=False, params=NS,
         tags=["tfk8s-test"]) as hostile_eval:
    TFEvaluateOperator(task_id="evaluate", spec=HOSTILE, model_dir="/host/model", heldout="/host/heldout.csv",
                       timeout=60, retries=0, poll_interval=1)


def _form_image_dag() -> DAG:
    import tfk8s_retrain

    with DAG("tfk8s_t_form_image", schedule=None, start_date=START, catchup=False,
             params={**tfk8s_retrain.COMMON_PARAMS, "root": Param("/nonexistent", type="string")},
             render_template_as_native_obj=True, tags=["tfk8s-test"]) as dag:
        spec = tfk8s_retrain.training_spec("{{ params.root }}/models/none")
        spec["volumes"] = [{"name": "model", "mount_path": "{{ params.root }}", "host_path": "{{ params.root }}"}]
        TFEvaluateOperator(task_id="evaluate", spec=spec, model_dir="{{ params.root }}/models/none",
                           heldout="{{ params.root }}/heldout.csv", timeout=60, retries=0, poll_interval=1)
    return dag


form_image = _form_image_dag()

with DAG("tfk8s_t_setup_volumes", schedule=None, start_date=START, catchup=False,
         params={**NS, "root": Param("/nonexistent", type="string")}, tags=["tfk8s-test"]) as setup_volumes:
    TFJobSetupOperator(task_id="setup", replica_task_id="replica",
                       spec={"name": "planted", "namespace": "{{ params.namespace }}", "image": "tfk8s/trainer:0.1",
                             "node_selector": {"type": "kwok"}, "ps": 1, "worker": 1, "restart_policy": "OnFailure",
                             "volumes": [{"name": "scratch", "mount_path": "/scratch",
                                          "host_path": "{{ params.root }}/scratch"},
                                         {"name": "x", "mount_path": "/x",
                                          "host_path": "{{ params.root }}/scratch/x"}]},
                       shards={"worker-0": ["/data/a"]}, retries=0)
