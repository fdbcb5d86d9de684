"""``tf_job()``: one call in a DAG gives the whole distributed TensorFlow job.

Why a task group of ordinary tasks: each replica is visible in the grid as a mapped
KubernetesPodOperator task instance, its replica's live view (its own outcome, its own
log); the replica counts may come from the UI form at run time, so the replica tasks map
over the setup task's output (dynamic task mapping) instead of being fixed at parse time.
Teardown is the setup's teardown, so Airflow runs it after failures and user kills, and
clears it with the setup.

    setup ─┬─► replica (mapped: chief-0, evaluator-0, ps-0.., worker-0..)
           └─► wait (the job sensor: the success policy) ─► teardown

The replica tasks and the sensor wait side by side (in the triggerer, sharing one LIST
per poll); ``group >> evaluate`` makes evaluation wait for both, and so for the sensor's
verdict. Teardown follows the sensor alone: once the job has its verdict, it gives the replica
tasks a bounded time (``replica_grace``) to stream the last of their logs and end, then deletes
the job whatever they do, so a replica task that never ends cannot keep a parameter server running.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import TaskGroup, XComArg

from tfk8s_airflow.job.defaults import POLL_INTERVAL_S
from tfk8s_airflow.k8s.client import DEFAULT_CONCURRENCY
from tfk8s_airflow.operators.base import check_trigger_queue
from tfk8s_airflow.operators.replica import TFReplicaPodOperator, TFReplicaWorkerStartPodOperator
from tfk8s_airflow.operators.setup import TFJobSetupOperator
from tfk8s_airflow.operators.teardown import REPLICA_GRACE_S, TFJobTeardownOperator
from tfk8s_airflow.sensors.job import TFJobSensor
from tfk8s_airflow.triggers.job import DEFAULT_LOG_BYTES

__all__ = ["tf_job"]


def tf_job(group_id: str = "train", *, spec: Any, shards: Any = None,
           overrides: Mapping[str, Any] | None = None,
           kubernetes_conn_id: str = "kubernetes_default", deferrable: bool = True,
           poll_interval: float = POLL_INTERVAL_S, log_tail_lines: int = 100, archive_dir: str | None = None,
           check_quota: bool = True, max_replicas: int | None = None,
           replica_kwargs: Mapping[str, Any] | None = None, setup_retries: int = 2,
           sensor_timeout: float | None = None, replicas_start_from_trigger: bool = True,
           log_bytes: int = DEFAULT_LOG_BYTES, create_concurrency: int = DEFAULT_CONCURRENCY,
           replica_grace: float = REPLICA_GRACE_S, preflight: str | None = None,
           trigger_queue: str | None = None) -> TaskGroup:
    """Build the job's task group in the current DAG; ``group >> evaluate`` gates on success.

    :param spec: TFJobSpec, dict (Jinja allowed), YAML/JSON path, or ``"{{ params.spec }}"``.
    :param shards: shard assignments or a staging task's output (XComArg).
    :param overrides: merged into the spec at run time, e.g. from ``params``.
    :param replica_kwargs: extra arguments of every replica task (``TFReplicaPodOperator``).
    :param replicas_start_from_trigger: replica tasks start and end in the triggerer (no worker
        process per replica); False starts each on a worker (labelled by hostname in the grid).
    :param log_bytes: bytes of each replica's log written into its task log.
    :param archive_dir: the job's log directory (a path the triggerer and the workers see; the
        pods need not mount it): each replica task streams its replica's whole log there while it
        runs, and its **Replica log** link opens it; teardown keeps those files and archives a tail
        of any replica not streamed. Default: the spec's ``logs`` volume's host path.
    :param replica_grace: seconds teardown gives the replica tasks, once the sensor has the job's
        verdict, to end before it deletes the job anyway.
    :param preflight: the pre-flight's mode for this job (enforce, warn, off); default: the deployment's.
    :param trigger_queue: the triggerer queue of every trigger of the job (the replica tasks', the sensor's,
        teardown's): with ``[triggerer] queues_enabled``, a triggerer started with ``airflow triggerer
        --queues <name>`` runs them, apart from other DAGs' triggers. The replica tasks and the sensor then
        start on a worker and defer from there (a trigger the scheduler starts gets no queue).
    """
    check_trigger_queue(trigger_queue)  # a bad value fails when the DAG is parsed (the replicas are mapped)
    with TaskGroup(group_id=group_id) as group:
        setup = TFJobSetupOperator(
            task_id="setup", spec=spec, shards=shards, overrides=overrides,
            kubernetes_conn_id=kubernetes_conn_id, max_replicas=max_replicas, check_quota=check_quota,
            poll_interval=poll_interval, create_concurrency=create_concurrency, retries=setup_retries,
            log_dir=archive_dir, preflight=preflight)
        job = XComArg(setup, key="job")
        extra = dict(replica_kwargs or {})
        if not replicas_start_from_trigger:
            extra["start_from_trigger"] = False
        if trigger_queue is not None:
            extra["trigger_queue"] = trigger_queue  # the operator checks it and starts on a worker
            extra["start_from_trigger"] = False
        # No retries: a replica task reports its pod's outcome; a retry would report it again.
        operator = TFReplicaWorkerStartPodOperator if extra.get("start_from_trigger") is False else TFReplicaPodOperator
        replicas = operator.partial(
            task_id="replica", kubernetes_conn_id=kubernetes_conn_id, job=job, log_bytes=log_bytes, retries=0,
            map_index_template="{{ task.replica }}", **extra,
        ).expand_kwargs(setup.output)
        sensor_args: dict[str, Any] = {}
        if sensor_timeout is not None:
            sensor_args["timeout"] = sensor_timeout
        # No retries either: a failed job and the sensor's timeout are final (clear the group to
        # run again). Started in the triggerer, it never races its own deferral.
        wait = TFJobSensor(
            task_id="wait", job=job, kubernetes_conn_id=kubernetes_conn_id, poll_interval=poll_interval,
            deferrable=deferrable, log_bytes=log_bytes, retries=0, trigger_queue=trigger_queue, **sensor_args)
        teardown = TFJobTeardownOperator(
            task_id="teardown", job=job, kubernetes_conn_id=kubernetes_conn_id,
            log_tail_lines=log_tail_lines, archive_dir=archive_dir, replica_grace=replica_grace,
            trigger_queue=trigger_queue)
        setup >> [replicas, wait]
        wait >> teardown
        teardown.as_teardown(setups=setup)
    return group
