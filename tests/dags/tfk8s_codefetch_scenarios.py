"""Scenario DAGs whose replicas run code fetched when they start (the job's ``code:`` field).

Every pod of the job runs the ``fetch-code`` init container (``python3 -m
tfk8s_airflow.pod.codefetch``) on the devstack's real node, so the fetch happens inside the pod's
own network namespace: it reaches the host only at the node's host address
(10.214.0.1), never at the host's 127.0.0.1. The training container then runs the fetched
entrypoint with ``sh``. ``params.code`` is the whole ``code:`` mapping (uri, entrypoint,
sha256); ``params.out_dir`` is a host directory mounted at ``OUT`` in every pod, where the
fetched code leaves its markers.
"""
from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param

from tfk8s_airflow.taskgroup import tf_job

START = pendulum.datetime(2026, 1, 1, tz="UTC")
OUT = "/mnt/tfk8s-codefetch/out"
#: The devstack's real node (devstack/components/node): its label, the toleration of its taint, and
#: the training image its registry holds (``TFK8S_TRAINING_IMAGE``, exported by ``devstack/env node``
#: and by the tests' ``realnode`` fixture before they run a DAG).
REAL_NODE = {"tfk8s.io/real-node": "true"}
TOLERATE_NODE = [{"key": "tfk8s.io/real-node", "operator": "Exists", "effect": "NoSchedule"}]
IMAGE = os.environ.get("TFK8S_TRAINING_IMAGE") or "tfk8s/trainer:0.1"
# Far beyond what a fetch takes: a job that fails only when this passes did not see the
# fetcher's failure (the tests check the reason and the restart counts, not the clock).
STARTUP_TIMEOUT_S = 900


def code_dag(dag_id: str, roles: dict, **spec_extra) -> DAG:
    spec = {
        "name": "cf", "namespace": "{{ params.namespace }}", "image": IMAGE,
        "node_selector": REAL_NODE, "tolerations": TOLERATE_NODE,
        "code": "{{ params.code }}",
        "volumes": [{"name": "out", "mount_path": OUT, "host_path": "{{ params.out_dir }}"}],
        "success_policy": "all_workers", "startup_timeout": STARTUP_TIMEOUT_S, **spec_extra, **roles,
    }
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, render_template_as_native_obj=True,
             params={"namespace": Param("default", type="string"),
                     "code": Param({"uri": "http://10.214.0.1:8000/algo.tar.gz"}, type="object"),
                     "out_dir": Param("/nonexistent", type="string")},
             tags=["tfk8s-test", "realpods", "codefetch"]) as dag:
        tf_job("train", spec=spec, poll_interval=1, sensor_timeout=STARTUP_TIMEOUT_S + 300)
    return dag


WORKERS_ONLY_MAX_RESTARTS = 1

# A parameter server (restartPolicy Never: its failed fetch fails the pod) and two workers,
# which wait for the PS's marker ($CF_WAIT_FOR, read by the tests' fetched code).
with_ps = code_dag("tfk8s_cf_with_ps", {"ps": 1, "worker": {"replicas": 2, "env": {"CF_WAIT_FOR": "ps-0"}}})
# Workers only, restarted in place (OnFailure): a failed fetch would crash-loop the init
# container; the judge must fail the job from the fetcher's exit code and message instead.
workers_only = code_dag("tfk8s_cf_workers_only", {"worker": {"replicas": 2}},
                        restart_policy="OnFailure", max_restarts=WORKERS_ONLY_MAX_RESTARTS)
