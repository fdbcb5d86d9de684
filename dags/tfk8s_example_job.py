"""Example: a parameter-server/worker job as one task group, gating an evaluation task.

Trigger it from the UI with a form (PS and worker counts, namespace) or run
``airflow dags test tfk8s_example_job``. On the devstack the replicas run on KWOK
nodes (see examples/kwok-job.yaml).
"""
from __future__ import annotations

from pathlib import Path

import pendulum

# Named here so Airflow's DAG processor imports the provider once, in its parent, before it
# forks each parse (parsing_pre_import_modules): TFReplicaPodOperator subclasses it.
from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator  # noqa: F401
from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import DAG, Param

from tfk8s_airflow.taskgroup import tf_job

SPEC = str(Path(__file__).resolve().parent.parent / "examples" / "kwok-job.yaml")


def report(**context):
    summary = context["ti"].xcom_pull(task_ids="train.wait", key="summary")
    for name, replica in sorted(summary["replicas"].items()):
        print(f"{name:<10} {replica['phase']:<10} exit={replica.get('exit_code')} "
              f"duration={replica.get('duration_s')}s")
    return summary["state"]


with DAG(
    "tfk8s_example_job",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    render_template_as_native_obj=True,
    params={
        "ps": Param(1, type="integer", minimum=0, maximum=16, description="parameter servers"),
        "workers": Param(2, type="integer", minimum=1, maximum=64, description="workers"),
        "namespace": Param("default", type="string", pattern="^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
    },
    tags=["tfk8s", "example"],
) as dag:
    train = tf_job(
        "train",
        spec=SPEC,
        overrides={"namespace": "{{ params.namespace }}", "ps": {"replicas": "{{ params.ps }}"},
                   "worker": {"replicas": "{{ params.workers }}"}},
        poll_interval=2,
    )
    train >> PythonOperator(task_id="evaluate", python_callable=report)
