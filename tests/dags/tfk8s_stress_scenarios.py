"""The stress DAG of the replica-task lifecycle test (tests/e2e/test_replica_tasks_end.py).

``tfk8s_t_stress`` takes its whole spec from ``params`` (as the UI form or the REST API give it),
polls every second and lets many runs go at once, so that a test can start many short jobs
together on the real scheduler stack: pods on the real node that print without pause (a parameter
server and untracked workers forever, tracked workers for a few seconds), with and without a
log directory (log streaming) and a TensorBoard.
"""
from __future__ import annotations

import pendulum
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Param

from tfk8s_airflow.taskgroup import tf_job

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def _record(**_context) -> dict:
    return {"evaluated": True}


with DAG("tfk8s_t_stress", schedule=None, start_date=START, catchup=False, max_active_runs=32,
         max_active_tasks=64, render_template_as_native_obj=True,
         params={"namespace": Param("default", type="string"), "spec": Param({}, type="object")},
         tags=["tfk8s-test"]) as stress:
    tf_job("train", spec="{{ params.spec }}", poll_interval=1) >> PythonOperator(
        task_id="evaluate", python_callable=_record)
