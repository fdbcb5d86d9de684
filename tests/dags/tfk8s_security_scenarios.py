"""DAGs of the security tests (tests/security), run with dag.test().

``tfk8s_t_setup_only``: a job's setup and nothing else, so its teardown never runs (the
ownership test deletes the job's Service and watches the garbage collector remove the rest).
"""
from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from tfk8s_airflow.operators.setup import TFJobSetupOperator

START = pendulum.datetime(2026, 1, 1, tz="UTC")

with DAG("tfk8s_t_setup_only", schedule=None, start_date=START, catchup=False,
         params={"namespace": Param("default", type="string")}, tags=["tfk8s-test"]) as setup_only:
    TFJobSetupOperator(task_id="setup", replica_task_id="replica",
                       spec={"name": "orphan", "namespace": "{{ params.namespace }}", "image": "tfk8s/trainer:0.1",
                             "node_selector": {"type": "kwok"}, "ps": 1, "worker": 2},
                       shards={"worker-0": ["/data/a"], "worker-1": ["/data/b"]})
