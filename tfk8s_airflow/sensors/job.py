"""TFJobSensor: gates downstream tasks on the job's success by its success policy.

Why a sensor over the whole job rather than per-pod waits: success is a property
of the group (the chief, or worker 0, or all workers), and failure of any
replica, tracked or not, must fail the job fast with the Kubernetes reason. The
sensor checks once at once (a job may already be done after a retry), then
defers to :class:`TFJobTrigger`. On failure the task log gets the reason, the
exit code and the failed replica's last log lines; the failure is permanent
(retrying the sensor cannot revive a failed job; retry the group instead). A
summary (per-replica phase, exit code, restarts, duration) goes to XCom.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException

from tfk8s_airflow.exceptions import JobFailedError, PermanentError
from tfk8s_airflow.job.judge import FAILED, RUNNING, SUCCEEDED, JobPolicy, evaluate
from tfk8s_airflow.k8s.client import JobClient, pod_dicts
from tfk8s_airflow.triggers.job import TFJobTrigger


class TFJobSensor(BaseSensorOperator):
    """Waits for a TF job (the setup task's record) to succeed.

    :param job: the job record returned by :class:`TFJobSetupOperator` (XComArg).
    :param poll_interval: seconds between LIST calls.
    :param deferrable: wait in the triggerer (default) instead of a worker slot.
    :param log_tail_lines: lines of the failed replica's log put in the task log.
    """

    template_fields: Sequence[str] = ("job",)
    ui_color = "#d6f5d6"

    def __init__(self, *, job: Any, kubernetes_conn_id: str = "kubernetes_default",
                 poll_interval: float = 5.0, deferrable: bool = True, log_tail_lines: int = 50,
                 **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", poll_interval)
        super().__init__(**kwargs)
        self.job = job
        self.kubernetes_conn_id = kubernetes_conn_id
        self.poll_interval = poll_interval
        self.deferrable = deferrable
        self.log_tail_lines = log_tail_lines

    def _check(self) -> dict[str, Any]:
        record = self.job
        client = JobClient.from_conn(self.kubernetes_conn_id)
        try:
            pods = client.list_pods(record["namespace"], record["selector"])
        except PermanentError as exc:
            return {"state": FAILED, "reason": f"cannot watch the job: {exc}", "summary": {}}
        status = evaluate(pod_dicts(pods, client.core.api_client), JobPolicy.from_dict(record["policy"]),
                          time.time(), record["created_at"])
        self.log.info("TF job %s: %s", record["job"], status.progress())
        return {"state": status.state, "reason": status.reason,
                "summary": status.summary(record["job"], record["namespace"])}

    def execute(self, context: Any) -> Any:
        event = self._check()
        if event["state"] != RUNNING:
            return self._finish(context, event)
        if not self.deferrable:
            return super().execute(context)
        record = self.job
        self.defer(
            trigger=TFJobTrigger(job=record["job"], namespace=record["namespace"],
                                 selector=record["selector"], policy=record["policy"],
                                 watch_started=record["created_at"],
                                 kubernetes_conn_id=self.kubernetes_conn_id,
                                 poll_interval=self.poll_interval),
            method_name="execute_complete",
        )

    def poke(self, context: Any) -> bool:
        event = self._check()
        if event["state"] == RUNNING:
            return False
        self._finish(context, event)  # pushes the summary; raises when the job failed
        return True

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        return self._finish(context, event)

    def _finish(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        summary = event.get("summary") or {}
        context["ti"].xcom_push(key="summary", value=summary)
        for key, rep in sorted((summary.get("replicas") or {}).items()):
            duration = rep.get("duration_s")
            self.log.info("  %-12s %-10s exit=%s restarts=%s duration=%s", key, rep.get("phase"),
                          rep.get("exit_code", "-"), rep.get("restarts"),
                          f"{duration}s" if duration is not None else "-")
        if event["state"] == SUCCEEDED:
            self.log.info("TF job %s succeeded: %s", summary.get("job"), event["reason"])
            return summary
        message = f"TF job {summary.get('job', '')} failed: {event['reason']}"
        failed_pod = summary.get("failed_pod")
        if failed_pod and self.log_tail_lines:
            tail = JobClient.from_conn(self.kubernetes_conn_id).log_tail(
                summary["namespace"], failed_pod, self.log_tail_lines)
            if tail.strip():
                message += f"\n--- last {self.log_tail_lines} log lines of {failed_pod} ---\n{tail.rstrip()}"
        self.log.error("%s", message)
        raise AirflowFailException(str(JobFailedError(message, summary)))
