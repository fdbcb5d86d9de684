"""``tf_job()``: one call in a DAG gives the whole distributed TensorFlow job.

Why a task group of ordinary tasks: each replica is visible in the grid as a
mapped KubernetesPodOperator task instance labelled by its hostname; the replica counts may come from the UI form
at run time, so the launch tasks map over the setup task's output (dynamic task
mapping) instead of being fixed at parse time. Teardown is the setup's teardown,
so Airflow runs it after failures and user kills, and clears it with the setup.

    setup ─► launch (mapped: chief-0, evaluator-0, ps-0.., worker-0..) ─► wait ─► teardown
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from airflow.sdk import TaskGroup, XComArg

from tfk8s_airflow.operators.replica import TFReplicaPodOperator
from tfk8s_airflow.operators.setup import TFJobSetupOperator
from tfk8s_airflow.operators.teardown import TFJobTeardownOperator
from tfk8s_airflow.sensors.job import TFJobSensor


def tf_job(group_id: str = "train", *, spec: Any, shards: Any = None,
           overrides: Mapping[str, Any] | None = None,
           kubernetes_conn_id: str = "kubernetes_default", deferrable: bool = True,
           poll_interval: float = 5.0, log_tail_lines: int = 100, archive_dir: str | None = None,
           check_quota: bool = True, max_replicas: int | None = None,
           launch_kwargs: Mapping[str, Any] | None = None, setup_retries: int = 2,
           sensor_timeout: float | None = None) -> TaskGroup:
    """Build the job's task group in the current DAG; ``group >> evaluate`` gates on success.

    :param spec: TFJobSpec, dict (Jinja allowed), YAML/JSON path, or ``"{{ params.spec }}"``.
    :param shards: shard assignments or a staging task's output (XComArg).
    :param overrides: merged into the spec at run time, e.g. from ``params``.
    :param launch_kwargs: extra KubernetesPodOperator arguments for every replica task.
    """
    with TaskGroup(group_id=group_id) as group:
        setup = TFJobSetupOperator(
            task_id="setup", spec=spec, shards=shards, overrides=overrides,
            kubernetes_conn_id=kubernetes_conn_id, max_replicas=max_replicas,
            check_quota=check_quota, retries=setup_retries)
        launch = TFReplicaPodOperator.partial(
            task_id="launch", kubernetes_conn_id=kubernetes_conn_id, retries=2,
            map_index_template="{{ task.pod_template_dict['spec']['hostname'] }}",
            **dict(launch_kwargs or {}),
        ).expand_kwargs(setup.output)
        sensor_args: dict[str, Any] = {}
        if sensor_timeout is not None:
            sensor_args["timeout"] = sensor_timeout
        # One retry, for failures of Airflow's own making only: a failed job and the sensor's
        # timeout are AirflowFailException / AirflowSensorTimeout, which never retry. Airflow
        # 3.3.2's scheduler can fail a deferrable task whose trigger fires within seconds of
        # deferring: the stale "success" of the deferring attempt arrives after the trigger
        # requeued the task ("... but the task instance's state attribute is queued"). Seen in
        # backfills on a busy machine; the retry finds the job's pods (teardown waits for this
        # task) and succeeds at once.
        wait = TFJobSensor(
            task_id="wait", job=XComArg(setup, key="job"), kubernetes_conn_id=kubernetes_conn_id,
            poll_interval=poll_interval, deferrable=deferrable, log_tail_lines=log_tail_lines,
            retries=1, retry_delay=timedelta(seconds=5), **sensor_args)
        teardown = TFJobTeardownOperator(
            task_id="teardown", job=XComArg(setup, key="job"), kubernetes_conn_id=kubernetes_conn_id,
            log_tail_lines=log_tail_lines, archive_dir=archive_dir)
        setup >> launch >> wait >> teardown
        teardown.as_teardown(setups=setup)
    return group
