"""Kueue's side of a job's watch: where the job waits in its queue, and why it never will be admitted.

Why inside the job's shared watch (:mod:`tfk8s_airflow.k8s.watch`): the sensor, every replica task
and the TF jobs view must say the same thing about a queued job, at no more than one extra request
per poll. While any pod of the job holds Kueue's gate, each poll GETs the job's Workload (one
request); about once a minute (:data:`~tfk8s_airflow.job.kueue.POSITION_INTERVAL_S`) it also asks
Kueue's visibility API, through the API server, for the Workload's position in its LocalQueue. A
cluster that does not serve that API (it is an aggregated API Kueue registers) is asked again only
after :data:`UNREACHABLE_RETRY_S`; the position is then simply not shown.

What the Workload decides here (:func:`~tfk8s_airflow.job.kueue.read_workload`):

* queued: the job runs on (it is not failed by ``startup_timeout``), and the line
  ``queued in <queue>, position N, since T: <Kueue's message>`` is published with the snapshot;
* never (the LocalQueue or ClusterQueue does not exist, or the job asks for more than the
  ClusterQueue's maximum): the job fails at once, class ``config``, with Kueue's own reason;
* preempted (a job that failed as ``infrastructure`` while its Workload is Evicted by Kueue's
  preemption): the reason says "preempted by Kueue", and recovery treats it as any other
  infrastructure failure (a new attempt, as a new pod group; never the code budget).
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from tfk8s_airflow.job import kueue
from tfk8s_airflow.job.run.judge import CONFIG, INFRASTRUCTURE, JobStatus
from tfk8s_airflow.job.run.records import JobRecord
from tfk8s_airflow.job.states import JobState, is_final
from tfk8s_airflow.k8s.client import REQUEST_TIMEOUT_S

#: A cluster without Kueue's visibility API is asked again after this long.
UNREACHABLE_RETRY_S = 600.0
#: A Workload the visibility API does not list yet is looked for again after this long.
UNLISTED_RETRY_S = 5.0


class QueueWatch:
    """The Kueue reads of one job's watch (one per :class:`~tfk8s_airflow.k8s.watch.JobWatch`)."""

    def __init__(self, record: JobRecord) -> None:
        assert record.queue
        self.record = record
        self.queue: str = record.queue
        self._position: int | None = None
        self._position_at = 0.0
        self._position_retry_at = 0.0
        self.workload_reads = 0  # GETs of the Workload (tests and benchmarks read it)

    async def judge(self, status: JobStatus, api: Any) -> tuple[JobStatus, kueue.Admission | None]:
        """The status as Kueue's Workload amends it, and what the Workload says (None: not read this poll)."""
        held = [st for st in status.replicas.values() if kueue.kueue_gates(st.held_by)]
        preempted = status.state == JobState.FAILED and status.failure_class == INFRASTRUCTURE
        if not held and not preempted:
            return status, None
        attempt = max((st.attempt for st in status.replicas.values()), default=1)
        name = kueue.group_name(self.record.job, attempt)
        admission = kueue.read_workload(await self._workload(api, name), name, self.queue)
        if preempted:
            if admission.state == kueue.EVICTED and admission.reason == kueue.PREEMPTED_REASON:
                why = admission.message or "a higher-priority job took the quota"
                reason = f"preempted by Kueue in queue {self.queue}: {why} ({status.reason})"
                return dataclasses.replace(status, reason=reason), admission
            if admission.state == kueue.EVICTED:  # e.g. PodsReadyTimeout: Kueue's waitForPodsReady
                why = f": {admission.message}" if admission.message else ""
                reason = (f"evicted by Kueue from queue {self.queue} ({admission.reason or 'Evicted'}){why} "
                          f"({status.reason})")
                return dataclasses.replace(status, reason=reason), admission
            return status, admission
        if is_final(status.state):  # e.g. admission_timeout: where Kueue had it, in the reason
            if admission.state == kueue.QUEUED:
                admission = dataclasses.replace(admission, position=await self._position_of(api, name))
            return dataclasses.replace(status, reason=f"{status.reason}; {admission.describe()}"), admission
        if admission.never:
            first = min(held, key=lambda st: st.key)
            reason = (f"Kueue can never admit job {self.record.job} in queue {self.queue} "
                      f"(Workload {name}, {admission.reason}): {admission.message}")
            failed = JobStatus(JobState.FAILED, reason, status.replicas, first.pod, status.counts, None, CONFIG,
                               first.key)
            return failed, admission
        if admission.state == kueue.QUEUED:
            admission = dataclasses.replace(admission, position=await self._position_of(api, name))
        return status, admission

    async def _workload(self, api: Any, name: str) -> dict[str, Any] | None:
        from kubernetes_asyncio import client as async_client

        self.workload_reads += 1
        try:
            resp = await async_client.CustomObjectsApi(api).get_namespaced_custom_object(
                kueue.GROUP, kueue.VERSION, self.record.namespace, kueue.PLURAL, name,
                _request_timeout=REQUEST_TIMEOUT_S, _preload_content=False)
            return json.loads(await resp.read())
        except async_client.ApiException as exc:
            if exc.status == 404:
                return None  # not made yet (Kueue makes it once every pod of the group exists)
            raise

    async def _position_of(self, api: Any, name: str) -> int | None:
        """The Workload's position in its LocalQueue, asked at most about once a minute."""
        from kubernetes_asyncio import client as async_client

        now = time.monotonic()
        if now - self._position_at < kueue.POSITION_INTERVAL_S or now < self._position_retry_at:
            return self._position
        self._position_at = now
        path = (f"/apis/{kueue.VISIBILITY_GROUP}/{kueue.VISIBILITY_VERSION}/namespaces/{self.record.namespace}"
                f"/localqueues/{self.queue}/pendingworkloads")
        try:
            resp = await api.call_api(path, "GET", header_params={"Accept": "application/json"},
                                      auth_settings=["BearerToken"], _return_http_data_only=True,
                                      _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S)
            self._position = kueue.position_in(json.loads(await resp.read()), name)
            if self._position is None:  # not listed yet (Kueue queues a new Workload a moment after making it)
                self._position_at = now - kueue.POSITION_INTERVAL_S + UNLISTED_RETRY_S
        except (async_client.ApiException, OSError, TimeoutError, ValueError, TypeError, AttributeError):
            # Not served here (no aggregated visibility API), or not understood: shown without a position.
            self._position = None
            self._position_retry_at = now + UNREACHABLE_RETRY_S
        return self._position


__all__ = ["QueueWatch", "UNREACHABLE_RETRY_S"]
