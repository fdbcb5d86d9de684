"""Teardown of a TF job: archive every replica's log tail, then delete everything of it.

A replica whose task streamed its whole log into the job's log directory
(:mod:`tfk8s_airflow.k8s.logstream`) keeps that file: teardown neither reads its log again nor
replaces it, so teardown never waits on a huge log. The tail below is the fallback for
replicas whose log was not streamed (no log directory visible to the triggerer, a simulated node).

Why archive first: TFJob users lost the logs of failed and healthy peers at
cleanup (kubeflow/training-operator#536, #877, #1059). Each replica task has already
written its replica's log into its own task log; when the job has an archive
directory (``archive_dir`` or a ``logs`` volume with a host path visible here), each
replica's tail (and its previous container's, after restarts) also goes into this
task's log and into ``<dir>/<job>/<pod>.log``, through the volume's safe-file rules
(:mod:`tfk8s_airflow.volume.logs`): the pods write to that directory too, so a link, a FIFO
or a hard link planted there is never written through, and a log that cannot be read (a
retry after the pods are gone) never replaces an archive already written. Then every pod,
Service and ConfigMap with the job label is deleted, parameter servers included,
and the task waits until they are gone: nothing of a job outlives its run. A job with a Kueue
``queue`` has its Workloads deleted first (:mod:`tfk8s_airflow.k8s.kueue`): that releases the
ClusterQueue's quota, and Kueue's finalizer on the pods, at once.
Idempotent: a second run finds nothing and succeeds.

With the spec's ``clean_pod_policy`` Running or None (TFJob's ``cleanPodPolicy``), the finished pods
(phase Succeeded or Failed) are kept, so their status and logs stay readable with kubectl: teardown
releases them from the Service's ownership (deleting the Service would collect them), deletes the
rest as above (the running pods too: a parameter server never exits on its own, and TFJob's ``None``
leaving it running is not followed), then defers for ``finished_pod_ttl`` on Airflow's
``TimeDeltaTrigger`` (no worker slot is held) and deletes the kept pods when it resumes. The DAG run
ends after that. A re-run during the wait keeps the finished pods again and waits anew.

Why teardown follows the sensor and not the replica tasks: a replica task that does not end (a
triggerer that died or hung) must never keep the parameter servers running. Teardown starts once the
sensor has its verdict, first records it on the job's Service (a watch still running then takes the
deletions that follow for the end of the job, never for lost replicas to recover), then gives the
replica tasks up to ``replica_grace`` seconds to end (they stream the last of their logs) and goes on
without the ones that have not: their pods are deleted all the same, and each of those tasks then
ends from the sensor's recorded verdict.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from tfk8s_airflow.exceptions import DataError, KubernetesApiError
from tfk8s_airflow.job.run.jobmetrics import job_tags
from tfk8s_airflow.job.run.records import JobRecord
from tfk8s_airflow.job.run.verdict import summary_verdict
from tfk8s_airflow.k8s.client import JobClient, Owned
from tfk8s_airflow.k8s.kueue import KueueObjects, release_quota
from tfk8s_airflow.metricnames import Point
from tfk8s_airflow.metrics import emit
from tfk8s_airflow.operators.base import check_trigger_queue, fail_permanently, on_trigger_queue
from tfk8s_airflow.triggers.job import sibling_task_id
from tfk8s_airflow.volume import logs

#: Seconds teardown waits, once the sensor has its verdict, for the replica tasks to end.
REPLICA_GRACE_S = 60.0
REPLICA_POLL_S = 2.0
#: Task instance states that have ended.
ENDED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


def replicas_not_ended(states: dict[str, Any], task_id: str, record: JobRecord) -> list[str]:
    """The replicas (by key) whose task has not ended, from ``get_task_states``' ``{"<task_id>_<i>": state}``."""
    out = []
    for key, state in states.items():
        base, _, index = key.rpartition("_")
        if base != task_id or not index.isdigit() or state in ENDED_STATES:
            continue
        i = int(index)
        out.append(record.replicas[i].key if i < len(record.replicas) else f"{task_id}[{i}]")
    return sorted(out)


class TFJobTeardownOperator(BaseOperator):
    """Archives log tails and deletes every object of the job; always runs (a teardown task). Under
    ``clean_pod_policy`` Running or None the finished pods are deleted only ``finished_pod_ttl`` later
    (the task defers meanwhile).

    :param job: the job record returned by :class:`TFJobSetupOperator` (XComArg).
    :param log_tail_lines: lines archived per replica.
    :param archive_dir: directory for archived logs (default: the record's log directory: ``tf_job``'s
        ``archive_dir``, else the spec's ``logs`` host path).
    :param grace_period_seconds: grace given to replicas on delete.
    :param wait_timeout: seconds to wait for the objects to be gone.
    :param replica_grace: seconds to wait, once the sensor has its verdict, for the replica tasks to end
        before deleting the pods anyway (0: do not wait).
    :param replica_task_id: the replica tasks (default: ``replica`` of this task's group, as ``tf_job()``
        names it); ``sensor_task_id`` likewise (default: ``wait``), whose XCom ``summary`` is the verdict.
    :param trigger_queue: the triggerer queue of the ``finished_pod_ttl`` wait's trigger
        (``[triggerer] queues_enabled``).
    """

    template_fields: Sequence[str] = ("job", "archive_dir")
    ui_color = "#f5d6d6"

    def __init__(self, *, job: Any, kubernetes_conn_id: str = "kubernetes_default",
                 log_tail_lines: int = 100, archive_dir: str | None = None,
                 grace_period_seconds: int = 5, wait_timeout: float = 180,
                 replica_grace: float = REPLICA_GRACE_S, replica_task_id: str | None = None,
                 sensor_task_id: str | None = None, trigger_queue: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.trigger_queue = check_trigger_queue(trigger_queue)
        self.replica_grace = replica_grace
        self.replica_task_id = replica_task_id
        self.sensor_task_id = sensor_task_id
        self.job = job
        self.kubernetes_conn_id = kubernetes_conn_id
        self.log_tail_lines = log_tail_lines
        self.archive_dir = archive_dir
        self.grace_period_seconds = grace_period_seconds
        self.wait_timeout = wait_timeout

    def _archive_root(self, record: JobRecord) -> Path | None:
        if self.archive_dir:
            return Path(self.archive_dir)
        if record.log_dir and os.path.isdir(record.log_dir):
            return Path(record.log_dir)
        return None

    def _verdict(self, context: Any) -> tuple[str, str] | None:
        """(state, reason) of the job sensor's XCom ``summary``, when it has a final one."""
        source = self.sensor_task_id or sibling_task_id(self.task_id, "wait")
        try:
            summary = context["ti"].xcom_pull(task_ids=source, key="summary", map_indexes=-1)
        except Exception as exc:  # noqa: BLE001 - no verdict readable: teardown goes on without it
            self.log.warning("reading the job's verdict (XCom 'summary' of %s) failed: %s", source, exc)
            return None
        verdict = summary_verdict(summary)
        return (verdict[0], verdict[1]) if verdict is not None else None

    def _wait_for_replicas(self, context: Any, record: JobRecord) -> list[str]:
        """Wait up to ``replica_grace`` seconds for the replica tasks to end; the ones that did not."""
        ti = context["ti"]
        task_id = self.replica_task_id or sibling_task_id(self.task_id, "replica")
        if self.replica_grace <= 0 or not hasattr(ti, "get_task_states"):
            return []
        deadline = time.monotonic() + self.replica_grace
        said = False
        while True:
            try:
                states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[task_id], run_ids=[ti.run_id])
            except Exception as exc:  # noqa: BLE001 - teardown never waits on what it cannot read
                self.log.warning("reading the states of the replica tasks failed: %s", exc)
                return []
            waiting = replicas_not_ended(states.get(ti.run_id) or {}, task_id, record)
            if not waiting:
                if said:
                    self.log.info("every replica task has ended")
                return []
            if time.monotonic() >= deadline:
                self.log.warning("replica task(s) %s had not ended %.0fs after the job's verdict: their pods are "
                                 "deleted all the same, and the tasks end from the recorded verdict",
                                 ", ".join(waiting), self.replica_grace)
                return waiting
            if not said:
                self.log.info("waiting up to %.0fs for replica task(s) %s to end (they stream the last of their "
                              "logs)", self.replica_grace, ", ".join(waiting))
                said = True
            time.sleep(REPLICA_POLL_S)

    def _release_quota(self, client: JobClient, record: JobRecord) -> list[str]:
        """A job with a queue: its Kueue Workloads are deleted before anything else, so Kueue releases the
        ClusterQueue's quota and its finalizer on the pods at once (docs/jobs.md)."""
        if not record.queue:
            return []
        pods = client.list_pods(record.namespace, record.selector)
        return release_quota(client.core.api_client, record.namespace, record.job, pods, self.log, Owned.of(record))

    def _release_held(self, client: JobClient, record: JobRecord) -> None:
        """A job with a queue: a pod of the job still held by Kueue's finalizer after a bounded wait has that
        finalizer (only it) removed, with a warning; its Workload is gone, so Kueue no longer needs it."""
        if record.queue:
            KueueObjects(client.core.api_client, self.log).release_held(record.namespace, record.selector,
                                                                        owned=Owned.of(record))

    def _say_strangers(self, client: JobClient, record: JobRecord) -> None:
        """Objects with the job's label that setup and recovery did not make: left alone, said once."""
        owned = Owned.of(record)
        if owned is None:
            return
        strangers = client.job_objects(record.namespace, record.selector, owned)[3]
        if strangers:
            self.log.warning("job %s: left alone, not made by its setup or recovery though they carry its label "
                             "(%s): %s", record.job, record.selector, ", ".join(strangers))

    def _wait_gone(self, client: JobClient, record: JobRecord, keep: Sequence[str] = ()) -> None:
        """Wait until nothing of the job is left but the pods named in ``keep``; fail naming what is."""
        left = client.wait_gone(record.namespace, record.selector, timeout=self.wait_timeout, keep=keep,
                                owned=Owned.of(record))
        emit([Point("tfk8s.teardown.leftovers", len(left), job_tags(record, self.dag_id, self.task_id))])
        if left:
            raise AirflowException(f"teardown of {record.job}: still present after {self.wait_timeout:.0f}s: "
                                   f"{', '.join(left)}")

    def execute(self, context: Any) -> dict[str, Any]:
        if not self.job:
            self.log.info("no job record (setup did not finish): nothing to tear down")
            return {}
        with fail_permanently():
            record = JobRecord.from_xcom(self.job)
        ns, selector, job = record.namespace, record.selector, record.job
        client = JobClient.from_conn(self.kubernetes_conn_id)
        owned = Owned.of(record)
        verdict = self._verdict(context)
        state, reason = verdict if verdict else ("ended", "teardown ran before the job sensor had a verdict")
        self.log.info("job %s: %s (%s)", job, state, reason)
        try:
            if client.record_verdict(ns, record.service, state, reason, "teardown"):
                self.log.info("recorded the verdict on Service %s", record.service)
        except KubernetesApiError as exc:  # best effort (RBAC may not grant patch on services): delete anyway
            self.log.warning("the verdict was not recorded on Service %s: %s", record.service, exc)
        if verdict is not None:
            self._wait_for_replicas(context, record)
        root = self._archive_root(record)
        archived = []
        # Each replica task already wrote its replica's log into its own task log; teardown
        # reads the logs again only to archive them.
        # Replicas only: the TensorBoard pod is deleted with the job, its log not archived.
        pods = sorted((p for p in client.list_pods(ns, selector) if p.metadata.name != record.tensorboard_pod
                       and (owned is None or owned.pod(p))), key=lambda p: p.metadata.name) if root is not None else []
        if root is None:
            self.log.info("no archive directory (archive_dir, or a 'logs' volume with a host path): the replicas' "
                          "logs are in the replica tasks' logs")
        streamed_root = root if root is not None and record.log_dir and str(root) == record.log_dir else None
        for pod in pods:
            name = pod.metadata.name
            size = logs.streamed_size(streamed_root, job, name) if streamed_root is not None else None
            if size is not None and streamed_root is not None:
                # Its replica task streamed the whole log here: kept as it is, not read again.
                self.log.info("log of %s: streamed in full by its replica task (%d bytes), kept", name, size)
                archived.append(str(streamed_root / logs.log_path(job, name)))
                continue
            text, error = client.try_log_tail(ns, name, self.log_tail_lines)
            if error is not None:
                text = f"<log unavailable: {error}>"
            restarts = sum((cs.restart_count or 0) for cs in (pod.status.container_statuses or []))
            if restarts:
                text = (f"--- previous container (restarts: {restarts}) ---\n"
                        + client.log_tail(ns, name, self.log_tail_lines, previous=True)
                        + "\n--- current container ---\n" + text)
            self.log.info("=== %s (phase %s): last %d log lines ===\n%s", name, pod.status.phase,
                          self.log_tail_lines, text.rstrip())
            if root is not None:
                try:
                    # An empty tail (a pod never started, its log gone) replaces no archive either.
                    outcome = logs.archive_tail(root, job, name, text, available=error is None and bool(text))
                except (DataError, OSError) as exc:  # archiving never stops the deletion below
                    self.log.warning("log of %s not archived: %s", name, exc)
                    continue
                if outcome == "kept":
                    self.log.info("log of %s %s: the archive written earlier is kept", name,
                                  f"unavailable ({error})" if error else "empty")
                archived.append(str(root / logs.log_path(job, name)))
        # clean_pod_policy Running or None: the finished pods stay for finished_pod_ttl; running ones never do.
        skip = {record.tensorboard_pod} if record.tensorboard_pod else set()
        kept = (client.keep_finished_pods(ns, selector, record.service, skip=skip, owned=owned)
                if record.keeps_finished_pods else [])
        workloads = self._release_quota(client, record)
        self._say_strangers(client, record)
        counts = client.delete_job_objects(ns, selector, self.grace_period_seconds, keep=kept, owned=owned)
        self.log.info("deleted %s of job %s", counts, job)
        self._release_held(client, record)
        self._wait_gone(client, record, keep=kept)
        result: dict[str, Any] = {"job": job, "deleted": counts, "archived": archived}
        if workloads:
            result["workloads"] = workloads
        if not kept:
            return result
        ttl = record.finished_pod_ttl
        until = datetime.now(UTC) + timedelta(seconds=ttl)
        self.log.info("clean_pod_policy %s: kept %d finished pod(s) of job %s until %s (finished_pod_ttl %ds), "
                      "then deleted: %s", record.clean_pod_policy, len(kept), job,
                      until.isoformat(timespec="seconds"), ttl, ", ".join(sorted(kept)))
        on_trigger_queue(self)
        self.defer(trigger=TimeDeltaTrigger(timedelta(seconds=ttl)), method_name="execute_complete",
                   kwargs={"result": {**result, "kept": sorted(kept)}})
        return result  # not reached: defer() raises

    def execute_complete(self, context: Any, event: Any = None, result: dict[str, Any] | None = None
                         ) -> dict[str, Any]:
        """After ``finished_pod_ttl``: delete the kept pods (and anything else of the job) and wait for them."""
        with fail_permanently():
            record = JobRecord.from_xcom(self.job)
        ns, selector, job = record.namespace, record.selector, record.job
        client = JobClient.from_conn(self.kubernetes_conn_id)
        # The pods still there are the kept ones (``result`` says which were kept, where the deferral's
        # kwargs reach this method; dag.test() passes only the event).
        owned = Owned.of(record)
        kept = sorted(p.metadata.name for p in client.list_pods(ns, selector) if owned is None or owned.pod(p))
        self._release_quota(client, record)
        counts = client.delete_job_objects(ns, selector, self.grace_period_seconds, owned=owned)
        self.log.info("finished_pod_ttl (%ds) is over: deleted %s of job %s (%s)", record.finished_pod_ttl, counts,
                      job, ", ".join(kept) or "no pod left")
        self._release_held(client, record)
        self._wait_gone(client, record)
        return {"job": job, "kept": kept, **(result or {}), "deleted_after_ttl": counts}
