"""TFJobSensor: gates downstream tasks on the job's success by its success policy.

Why a sensor over the whole job rather than per-pod waits: success is a property of the
group (the chief, or worker 0, or all workers), and failure of any replica, tracked or
not, must fail the job fast with the Kubernetes reason. The sensor is the single judge:
the replica tasks report their own replicas, but only this task's outcome says whether
the job succeeded, and evaluation waits on it.

Deferrable (the default), it starts in the triggerer (``start_from_trigger``) and ends
there; its trigger shares the job's one LIST per poll with the replica tasks. On failure
the task log gets the reason, the exit code and the failed replica's log; the failure is
permanent (clear the group to run again). A summary (per-replica phase, exit code,
restarts, node, duration) goes to XCom ``summary``. Non-deferrable, it pokes with one
LIST per poke.

Its extra link **TensorBoard** opens the job's TensorBoard (``tensorboard:`` in the spec, with
the deployment's ``[tfk8s] tensorboard_url``): stored as soon as the TensorBoard is ready, so it
works while the job trains, until teardown deletes the TensorBoard with the job.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, assert_never

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout
from airflow.triggers.base import StartTriggerArgs

from tfk8s_airflow.exceptions import JobFailedError
from tfk8s_airflow.features import trigger_queue_note, worker_start_note
from tfk8s_airflow.job.builders.tensorboard import tensorboard_url
from tfk8s_airflow.job.defaults import POLL_INTERVAL_S
from tfk8s_airflow.job.run.observe import judge_pods
from tfk8s_airflow.job.run.records import JobRecord, JobSummary, TriggerOutcome
from tfk8s_airflow.job.states import EndState, JobState
from tfk8s_airflow.k8s.client import JobClient, pod_dicts
from tfk8s_airflow.links import TensorBoardLink, store_link
from tfk8s_airflow.operators.base import check_trigger_queue, fail_permanently, on_trigger_queue
from tfk8s_airflow.triggers.job import DEFAULT_LOG_BYTES, TFJobTrigger

__all__ = ["TFJobSensor"]


class TFJobSensor(BaseSensorOperator):
    """Waits for a TF job (the setup task's record) to succeed.

    :param job: the job record returned by :class:`TFJobSetupOperator` (XCom ``job``).
    :param poll_interval: seconds between LIST calls when poking (deferred, the job's watch
        uses the interval setup recorded).
    :param deferrable: wait in the triggerer (default) instead of a worker slot.
    :param setup_task_id: the setup task whose XCom ``job`` the trigger reads when it starts
        in the triggerer (default: ``setup`` in this task's group).
    :param log_bytes: bytes of the failed replica's log put in the task log.
    :param trigger_queue: the triggerer queue of the sensor's trigger (``[triggerer] queues_enabled``); it
        then starts on a worker and defers from there (:func:`~tfk8s_airflow.features.trigger_queue_note`).
    """

    template_fields: Sequence[str] = ("job",)
    ui_color = "#d6f5d6"
    operator_extra_links = (TensorBoardLink(),)

    def __init__(self, *, job: Any, kubernetes_conn_id: str = "kubernetes_default",
                 poll_interval: float = POLL_INTERVAL_S, deferrable: bool = True, setup_task_id: str | None = None,
                 log_bytes: int = DEFAULT_LOG_BYTES, trigger_queue: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        # The sensor's own timeout applies only when given; otherwise the job's active_deadline
        # (the spec's, or the deployment's default) bounds the wait.
        self._timeout_given = "timeout" in kwargs
        super().__init__(**kwargs)
        self.job = job
        self.kubernetes_conn_id = kubernetes_conn_id
        self.poll_interval = poll_interval
        self.deferrable = deferrable
        self.setup_task_id = setup_task_id
        self.log_bytes = log_bytes
        self.trigger_queue = check_trigger_queue(trigger_queue)
        if deferrable and not self.trigger_queue:
            self.start_from_trigger = True
            self.start_trigger_args = StartTriggerArgs(
                trigger_cls=TFJobTrigger.classpath, next_method="execute_complete",
                trigger_kwargs={"end_in_trigger": True, "setup_task_id": setup_task_id, "log_bytes": log_bytes,
                                "timeout": self._timeout_s()},
                next_kwargs=None, timeout=None)

    def _timeout_s(self) -> float | None:
        timeout = getattr(self, "timeout", None)
        if timeout is None or not self._timeout_given:
            return None
        return float(timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout)

    def _record(self) -> JobRecord:
        with fail_permanently():
            return JobRecord.from_xcom(self.job)

    def _check(self, record: JobRecord) -> JobSummary:
        """One LIST of the job's pods, judged as the job's watch judges it (:func:`judge_pods`)."""
        client = JobClient.from_conn(self.kubernetes_conn_id)
        with fail_permanently():
            pods = client.list_pods(record.namespace, record.selector)
        items = pod_dicts(pods, client.core.api_client)
        recorded = record.recorded_pods()
        status, tensorboard = judge_pods(items, record.policy, time.time(), record.created_at,
                                         record.tensorboard_pod, recorded)
        if status.strangers and record.templates:  # perhaps pods recovery made: its record is on the Service
            status, tensorboard = judge_pods(items, record.policy, time.time(), record.created_at,
                                             record.tensorboard_pod, client.recorded_pods(record))
        for pod, what in status.ignored:
            self.log.warning("TF job %s: pod %s: ignored: %s", record.job, pod, what)
        self.log.info("TF job %s: %s", record.job, status.progress())
        return JobSummary.of(record, status, tensorboard_url=tensorboard_url(record.tensorboard_url, tensorboard))

    def execute(self, context: Any) -> Any:
        record = self._record()
        if not self.deferrable:
            return super().execute(context)
        if self.start_from_trigger and (note := worker_start_note()):
            self.log.info("%s", note)
        if self.trigger_queue:
            self.log.info("%s", trigger_queue_note(self.trigger_queue))
        on_trigger_queue(self)
        self.defer(trigger=TFJobTrigger(job=record.to_xcom(), log_bytes=self.log_bytes, timeout=self._timeout_s()),
                   method_name="execute_complete")

    def poke(self, context: Any) -> bool:
        record = self._record()
        summary = self._check(record)
        url = summary.tensorboard_url
        if url and url != getattr(self, "_link_stored", None):
            self._link_stored = url if store_link(context["ti"], TensorBoardLink, url) else None
        match summary.state:
            case JobState.RUNNING | JobState.QUEUED | JobState.HELD:
                return False
            case JobState.SUCCEEDED:
                context["ti"].xcom_push(key="summary", value=summary.to_xcom())
                self.log.info("TF job %s succeeded: %s", record.job, summary.reason)
                return True
            case JobState.FAILED:
                context["ti"].xcom_push(key="summary", value=summary.to_xcom())
                message = f"TF job {record.job} failed: {summary.reason}"
                self.log.error("%s", message)
                raise AirflowFailException(str(JobFailedError(message, summary.to_xcom())))
            case _:
                assert_never(summary.state)

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        with fail_permanently():
            outcome = TriggerOutcome.from_payload(event)
        summary = outcome.summary.to_xcom() if outcome.summary is not None else {}
        context["ti"].xcom_push(key="summary", value=summary)
        store_link(context["ti"], TensorBoardLink, summary.get("tensorboard_url"))  # what finalize() keeps
        match outcome.state:
            case EndState.SUCCEEDED:
                return summary
            case EndState.TIMED_OUT:
                raise AirflowSensorTimeout(outcome.reason)
            case EndState.FAILED | EndState.SKIPPED:
                raise AirflowFailException(str(JobFailedError(
                    f"TF job {summary.get('job', '')} failed: {outcome.reason}", summary)))
            case _:
                assert_never(outcome.state)
