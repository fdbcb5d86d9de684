"""The deferrable job watch: one LIST of the job's pods per poll, judged by status.evaluate.

Why a trigger: a job may train for days; holding a worker slot to poll would
waste it. The triggerer polls with the provider's AsyncKubernetesHook, logs
progress when it changes, and fires once the job succeeded or failed. Transient
API errors are tolerated for a bounded number of polls; a permanent one (403,
404 namespace) fires a failure naming it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from tfk8s_airflow.exceptions import KubernetesApiError, PermanentError
from tfk8s_airflow.job.judge import FAILED, RUNNING, JobPolicy, evaluate

MAX_CONSECUTIVE_ERRORS = 10


class TFJobTrigger(BaseTrigger):
    def __init__(self, *, job: str, namespace: str, selector: str, policy: dict[str, Any],
                 watch_started: float, kubernetes_conn_id: str | None = "kubernetes_default",
                 poll_interval: float = 5.0, config_file: str | None = None) -> None:
        super().__init__()
        self.job = job
        self.namespace = namespace
        self.selector = selector
        self.policy = policy
        self.watch_started = watch_started
        self.kubernetes_conn_id = kubernetes_conn_id
        self.poll_interval = poll_interval
        self.config_file = config_file

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tfk8s_airflow.triggers.job.TFJobTrigger", {
            "job": self.job, "namespace": self.namespace, "selector": self.selector,
            "policy": self.policy, "watch_started": self.watch_started,
            "kubernetes_conn_id": self.kubernetes_conn_id, "poll_interval": self.poll_interval,
            "config_file": self.config_file,
        })

    def _hook(self) -> Any:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
        return AsyncKubernetesHook(conn_id=self.kubernetes_conn_id, config_file=self.config_file)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from tfk8s_airflow.k8s.client import list_pods_async
        hook = self._hook()
        policy = JobPolicy.from_dict(self.policy)
        last_progress = None
        errors = 0
        while True:
            try:
                pods = await list_pods_async(hook, self.namespace, self.selector)
                errors = 0
            except PermanentError as exc:
                yield TriggerEvent({"state": FAILED, "reason": f"cannot watch the job: {exc}",
                                    "summary": {"job": self.job, "namespace": self.namespace}})
                return
            except (TimeoutError, KubernetesApiError, OSError) as exc:
                errors += 1
                self.log.warning("listing pods of %s failed (%d/%d): %s", self.job, errors,
                                 MAX_CONSECUTIVE_ERRORS, exc)
                if errors >= MAX_CONSECUTIVE_ERRORS:
                    yield TriggerEvent({"state": FAILED, "reason": f"Kubernetes API unreachable: {exc}",
                                        "summary": {"job": self.job, "namespace": self.namespace}})
                    return
                await asyncio.sleep(self.poll_interval)
                continue
            status = evaluate(pods, policy, time.time(), self.watch_started)
            progress = status.progress()
            if progress != last_progress:
                self.log.info("TF job %s: %s", self.job, progress)
                last_progress = progress
            if status.state != RUNNING:
                yield TriggerEvent({"state": status.state, "reason": status.reason,
                                    "summary": status.summary(self.job, self.namespace)})
                return
            await asyncio.sleep(self.poll_interval)
