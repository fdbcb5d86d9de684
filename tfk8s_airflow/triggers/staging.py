"""The wait of a staging fan-out, in the triggerer: until every copy pod of the current round has ended.

One LIST of the copy pods per poll (by their ``tfk8s.io/staging`` label), and for each running pod
one bounded read of its log's last lines for its newest progress line (``tfk8s.staging {...}``,
printed by :mod:`tfk8s_airflow.pod.stagecopy`): the task log gets bytes, items, MiB/s and an ETA every
``progress_interval`` seconds without the worker slot being held. The event names each part's pod
phase; the operator reads the parts' records and decides (publish, or retry the failed parts).

While it waits it renews the task's lease (:mod:`tfk8s_airflow.staging.lease`) every quarter of
``[tfk8s] staging_lease``: the pods are owned by the lease, so once nobody waits for them any more
(the task ended while no triggerer ran this trigger) Kubernetes deletes them when the lease runs out.
Cancelling the task (mark failed, clear, the DAG run failed) while this trigger runs calls
:meth:`CopyPodsTrigger.on_kill` (Airflow 3.3+), which does not wait for that: every copy pod is deleted
at once (and, for a Kerberos connection, the delegation token is cancelled and its Secret deleted),
then the lease.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from tfk8s_airflow import untrusted
from tfk8s_airflow.k8s.client import REQUEST_TIMEOUT_S
from tfk8s_airflow.pod.stagecopy import PROGRESS_LINE_MAX, PROGRESS_PREFIX
from tfk8s_airflow.staging.lease import RENEW_FRACTION, has_expired, lease_name, renewed_deadline

__all__ = ["CopyPodsTrigger", "progress_text"]

_ENDED = ("Succeeded", "Failed")


def progress_text(done_bytes: int, total_bytes: int, items: int, total_items: int, elapsed: float,
                  pods: int, unit: str = "items") -> str:
    rate = done_bytes / 2**20 / elapsed if elapsed > 0 else 0.0
    left = (total_bytes - done_bytes) / 2**20 / rate if rate > 0 else None
    eta = f"{left:.0f}s" if left is not None else "unknown"
    return (f"staging progress: {items}/{total_items} {unit}, {done_bytes / 2**20:.1f}/{total_bytes / 2**20:.1f} MiB "
            f"({100.0 * done_bytes / total_bytes if total_bytes else 100.0:.0f}%), {rate:.1f} MiB/s, ETA {eta}, "
            f"{pods} pod(s) running")


def _last_progress(text: str) -> dict[str, int] | None:
    """The newest progress line of a copy pod's log: its ``bytes`` and ``items`` (whole numbers from 0,
    else 0), or None. The log is the pod's, so a line is read bounded (tfk8s_airflow.untrusted): one too
    long, nested too deep or not JSON is skipped, never raised into the trigger."""
    for line in reversed(text.splitlines()):
        if line.startswith(PROGRESS_PREFIX):
            try:
                doc = untrusted.loads(line[len(PROGRESS_PREFIX):], max_bytes=PROGRESS_LINE_MAX,
                                      what="a copy pod's progress line")
            except ValueError:
                continue
            if not isinstance(doc, dict):
                return None
            return {k: v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else 0
                    for k in ("bytes", "items") for v in (doc.get(k),)}
    return None


class CopyPodsTrigger(BaseTrigger):
    """Polls the copy pods ``pods`` (part -> pod name) until each has ended or is gone."""

    def __init__(self, *, namespace: str, key: str, pods: Mapping[str, str], part_bytes: Mapping[str, int],
                 part_items: Mapping[str, int], kubernetes_conn_id: str | None, started: float,
                 poll_interval: float = 3.0, progress_interval: float = 10.0,
                 state: Mapping[str, Any] | None = None, unit: str = "items", lease: int = 300) -> None:
        super().__init__()
        self.namespace, self.key = namespace, key
        self.pods = {str(k): v for k, v in pods.items()}
        self.part_bytes = {str(k): int(v) for k, v in part_bytes.items()}
        self.part_items = {str(k): int(v) for k, v in part_items.items()}
        self.kubernetes_conn_id = kubernetes_conn_id
        self.started = started
        self.poll_interval, self.progress_interval = poll_interval, progress_interval
        self.state = dict(state or {})
        self.unit = unit  # what a part's items are: "items" (file pieces a copy pod copies), "files" (digested)
        self.lease = int(lease)  # [tfk8s] staging_lease of the deployment that started the pods

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("tfk8s_airflow.triggers.staging.CopyPodsTrigger",
                {"namespace": self.namespace, "key": self.key, "pods": self.pods, "part_bytes": self.part_bytes,
                 "part_items": self.part_items, "kubernetes_conn_id": self.kubernetes_conn_id,
                 "started": self.started, "poll_interval": self.poll_interval,
                 "progress_interval": self.progress_interval, "state": self.state,
                 "unit": self.unit, "lease": self.lease})

    def _hook(self) -> Any:
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook

        return AsyncKubernetesHook(conn_id=self.kubernetes_conn_id)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from kubernetes_asyncio import client as async_client

        total_bytes, total_items = sum(self.part_bytes.values()), sum(self.part_items.values())
        last_log = time.monotonic() - self.progress_interval + min(3.0, self.progress_interval)  # first after 3 s
        errors = 0
        renewed = float("-inf")
        async with self._hook().get_conn() as api:
            v1 = async_client.CoreV1Api(api)
            while True:
                if time.monotonic() - renewed >= self.lease * RENEW_FRACTION:
                    renewed = time.monotonic()
                    await self._renew(async_client.BatchV1Api(api))
                try:
                    listed = await v1.list_namespaced_pod(self.namespace, label_selector=f"tfk8s.io/staging={self.key}",
                                                          _request_timeout=REQUEST_TIMEOUT_S)
                    errors = 0
                except (TimeoutError, async_client.ApiException, OSError) as exc:
                    errors += 1
                    self.log.warning("listing the copy pods failed (%d in a row): %s", errors, exc)
                    if errors >= 20:
                        yield TriggerEvent({"status": "error", "message": f"cannot list the copy pods: {exc}",
                                            "state": self.state})
                        return
                    await asyncio.sleep(self.poll_interval)
                    continue
                phases = {p.metadata.name: (p.status.phase or "Pending") for p in listed.items
                          if p.metadata.deletion_timestamp is None}
                ended = {part: phases.get(name, "Gone") for part, name in self.pods.items()
                         if phases.get(name, "Gone") in (*_ENDED, "Gone")}
                if len(ended) == len(self.pods):
                    yield TriggerEvent({"status": "ended", "phases": ended, "state": self.state})
                    return
                if time.monotonic() - last_log >= self.progress_interval:
                    last_log = time.monotonic()
                    done_bytes = sum(self.part_bytes[p] for p in ended)
                    done_items = sum(self.part_items[p] for p in ended)
                    running = [(p, n) for p, n in self.pods.items() if p not in ended and phases.get(n) == "Running"]
                    for part, name in running:
                        try:
                            text = await v1.read_namespaced_pod_log(name, self.namespace, tail_lines=5,
                                                                    _request_timeout=REQUEST_TIMEOUT_S)
                        except (TimeoutError, async_client.ApiException, OSError):
                            continue
                        doc = _last_progress(text or "")
                        if doc:
                            done_bytes += min(int(doc.get("bytes", 0)), self.part_bytes[part])
                            done_items += min(int(doc.get("items", 0)), self.part_items[part])
                    self.log.info(progress_text(done_bytes, total_bytes, done_items, total_items,
                                                time.time() - self.started, len(running), self.unit))
                await asyncio.sleep(self.poll_interval)

    async def _renew(self, batch: Any) -> None:
        """Push the lease's end ``lease`` seconds ahead (a failure is logged: the next renewal tries again,
        and a lease that ran out meanwhile is made anew when the task starts pods again)."""
        from kubernetes_asyncio import client as async_client

        name = lease_name(self.key)
        try:
            job = await batch.read_namespaced_job(name, self.namespace, _request_timeout=REQUEST_TIMEOUT_S)
            if job.metadata.deletion_timestamp is not None or has_expired(job.status.conditions):
                self.log.warning("the lease of staging %s ran out: Kubernetes deletes its pods", self.key)
                return
            started = (job.status.start_time or job.metadata.creation_timestamp).timestamp()
            await batch.patch_namespaced_job(
                name, self.namespace, {"spec": {"activeDeadlineSeconds": renewed_deadline(started, time.time(),
                                                                                          self.lease)}},
                _request_timeout=REQUEST_TIMEOUT_S)
        except (TimeoutError, async_client.ApiException, OSError) as exc:
            self.log.warning("renewing the lease of staging %s failed: %s", self.key, exc)

    async def on_kill(self) -> None:
        """The task was cancelled: delete every copy pod (nothing of a partial copy is published)."""
        from kubernetes_asyncio import client as async_client

        async with self._hook().get_conn() as api:
            v1 = async_client.CoreV1Api(api)
            listed = await v1.list_namespaced_pod(self.namespace, label_selector=f"tfk8s.io/staging={self.key}",
                                                  _request_timeout=REQUEST_TIMEOUT_S)
            for pod in listed.items:
                try:
                    await v1.delete_namespaced_pod(pod.metadata.name, self.namespace, grace_period_seconds=0,
                                                   _request_timeout=REQUEST_TIMEOUT_S)
                except async_client.ApiException as exc:
                    if exc.status != 404:
                        raise
        self.log.info("deleted the copy pods of staging %s", self.key)
        if self.state.get("token_secret"):
            await asyncio.to_thread(_release_token, self.kubernetes_conn_id, self.namespace, self.key,
                                    self.state.get("webhdfs_conn_id"), self.state.get("lease_uid"),
                                    self.state.get("token_handle"))
            self.log.info("cancelled the HDFS delegation token of staging %s and deleted its Secret", self.key)
        await asyncio.to_thread(_end_lease, self.kubernetes_conn_id, self.namespace, self.key)


def _end_lease(kubernetes_conn_id: str | None, namespace: str, key: str) -> None:
    from tfk8s_airflow.k8s import copypods

    copypods.end_lease(copypods.batch(kubernetes_conn_id), namespace, key)


def _release_token(kubernetes_conn_id: str | None, namespace: str, key: str, webhdfs_conn_id: str | None,
                   lease_uid: str | None, handle: str | None = None) -> None:
    """A Kerberos copy was cancelled: cancel its delegation token, delete its Secret (the token's handle
    cancels it when a lease that ran out took the Secret)."""
    from tfk8s_airflow.connections import webhdfs
    from tfk8s_airflow.k8s import copypods, tokensecret

    hdfs = webhdfs(webhdfs_conn_id) if webhdfs_conn_id else None
    tokensecret.release(copypods.core(kubernetes_conn_id), namespace, key, hdfs, lease_uid, handle)
