"""The pre-flight's reads of the cluster, and setup's wait for capacity.

Why here: the verdict itself is pure (:mod:`tfk8s_airflow.job.policy.preflight`); this module makes
its two requests, one LIST of the nodes and one LIST of the pods bound to a node and not
ended (a field selector, so finished pods and pods still pending never cross the wire), each
bounded by :data:`~tfk8s_airflow.k8s.client.REQUEST_TIMEOUT_S` and paged. The bodies are read
as the API's JSON, without the client's models (10,000 pods are parsed in a fraction of the
time). Both are cluster-wide reads: without permission to list nodes or pods in every namespace
(``deploy/rbac.yaml``'s ClusterRole) the pre-flight is skipped with a warning, never failed.

:func:`admit` is setup's one call: it judges the job, waits while the verdict is ``waits``
(mode ``enforce``), publishes the record, and raises :class:`~tfk8s_airflow.exceptions.CapacityError`
for ``never`` or for a wait that outlasts its bound.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException

from tfk8s_airflow.contract import LABEL_JOB
from tfk8s_airflow.exceptions import CapacityError, KubernetesApiError
from tfk8s_airflow.job.policy.preflight import (
    ENFORCE,
    NEVER,
    OFF,
    RUNS_NOW,
    SKIPPED,
    WAITS,
    WARN,
    PreflightRecord,
    bound_usage,
    judge,
    node_from_api,
    pod_demand,
    preflight_applies,
)
from tfk8s_airflow.k8s.client import REQUEST_TIMEOUT_S, JobClient, wrap_api_error

__all__ = ["BOUND_NOT_ENDED", "PAGE", "PROGRESS_EVERY_S", "read_cluster", "admit", "preflight"]



class Log(Protocol):
    """What the pre-flight logs to (a task's logger)."""

    def info(self, event: Any, *args: Any, **kw: Any) -> Any: ...

    def warning(self, event: Any, *args: Any, **kw: Any) -> Any: ...


#: The pods that hold node resources: bound, and not ended.
BOUND_NOT_ENDED = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
#: Items per page of the LISTs.
PAGE = 2000
#: While waiting, the verdict is logged when it changes and at least this often.
PROGRESS_EVERY_S = 30.0


def _list(fn: Callable[..., Any], what: str, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        try:
            resp = fn(limit=PAGE, _continue=token, _preload_content=False, _request_timeout=REQUEST_TIMEOUT_S,
                      **kwargs)
        except ApiException as exc:
            raise wrap_api_error(f"listing {what}", exc) from exc
        body = json.loads(resp.data)
        items += body.get("items") or []
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return items


def read_cluster(client: JobClient) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(nodes, bound pods not ended) as the API's JSON: one LIST of each (paged)."""
    nodes = _list(client.core.list_node, "nodes")
    pods = _list(client.core.list_pod_for_all_namespaces, "the pods bound to nodes", field_selector=BOUND_NOT_ENDED)
    return nodes, pods


def admit(client: JobClient, job: str, pods: Sequence[Mapping[str, Any]], *, mode: str, wait_s: float,
          poll_s: float, log: Log, publish: Callable[[PreflightRecord], None], gang: bool = False) -> PreflightRecord:
    """Judge the job's ``pods`` (as setup will create them) and act on the verdict by ``mode``.

    ``enforce``: ``runs now`` returns; ``never`` raises CapacityError at once; ``waits`` polls every
    ``poll_s`` until the verdict changes, for at most ``wait_s`` (then CapacityError). ``warn``: logs the
    verdict and returns. ``gang``: a ``waits`` verdict returns at once under ``enforce`` too (the scheduler
    holds the job's PodGroup until all of it fits). The record is published (setup's XCom) before returning
    or raising.
    """
    demands = [pod_demand(p) for p in pods]
    t0 = time.monotonic()
    last_reason, last_logged = "", 0.0
    while True:
        started = time.monotonic()
        try:
            nodes, bound = read_cluster(client)
        except KubernetesApiError as exc:
            if exc.status not in (401, 403):
                raise
            record = PreflightRecord(SKIPPED, f"the connection may not list nodes and pods cluster-wide ({exc})",
                                     mode, pods=len(demands))
            log.warning("pre-flight skipped: %s; grant deploy/rbac.yaml's ClusterRole, or set [tfk8s] preflight = "
                        "off", record.reason)
            publish(record)
            return record
        verdict = judge([node_from_api(n) for n in nodes], bound_usage(bound, skip_label=(LABEL_JOB, job)),
                        demands)
        now = time.monotonic()
        waited = now - t0
        record = PreflightRecord(verdict.verdict, verdict.reason, mode, nodes=verdict.nodes, pods=len(demands),
                                 waited_s=waited, seconds=now - started)
        if verdict.verdict != WAITS or mode != ENFORCE or waited >= wait_s:
            log.info("pre-flight (%s): %s: %s (%d node(s) listed, %d bound pod(s), %.2fs%s)", mode,
                     verdict.verdict, verdict.reason, len(nodes), len(bound), record.seconds,
                     f", after waiting {waited:.0f}s" if waited >= 1 else "")
            publish(record)
            if mode == ENFORCE and verdict.verdict == NEVER:
                raise CapacityError(f"job {job} can never be placed on the cluster's nodes; nothing was created: "
                                    f"{verdict.reason} (fix: change the spec's resources, node_selector or "
                                    "tolerations, or add nodes that fit)")
            if mode == ENFORCE and verdict.verdict == WAITS and gang:
                log.info("pre-flight says waits; the job is created and its PodGroup waits whole for room "
                         "(admission workload)")
                return record
            if mode == ENFORCE and verdict.verdict == WAITS:
                raise CapacityError(f"job {job} found no room within schedule_timeout {wait_s:.0f}s; nothing was "
                                    f"created: {verdict.reason}")
            if verdict.verdict != RUNS_NOW and mode == WARN:
                log.warning("pre-flight says %s; creating the job anyway (preflight = warn)", verdict.verdict)
            return record
        if verdict.reason != last_reason or now - last_logged >= PROGRESS_EVERY_S:
            log.info("pre-flight: waits (%.0fs of at most %.0fs): %s (%d node(s) listed, %.2fs)", waited, wait_s,
                     verdict.reason, len(nodes), record.seconds)
            last_reason, last_logged = verdict.reason, now
        time.sleep(max(0.0, min(poll_s, wait_s - waited)))


def preflight(client: JobClient, spec: Any, job: str, pods: Sequence[Mapping[str, Any]], *, mode: str,
              queue: str | None, poll_s: float, log: Log,
              publish: Callable[[PreflightRecord], None], gang: bool = False) -> PreflightRecord:
    """Setup's pre-flight: :func:`admit` when it applies to the job
    (:func:`~tfk8s_airflow.job.policy.preflight.preflight_applies`: not off, no Kueue ``queue``), else a ``skipped``
    record saying why. A ``waits`` verdict waits at most the spec's ``schedule_timeout``; with ``gang`` (the pods
    form a PodGroup, which kube-scheduler holds until all of them fit) it does not wait: the job is created and
    waits whole on the cluster, where its place is visible. ``never`` fails either way."""
    if not preflight_applies(queue, mode):
        why = "preflight = off" if mode == OFF else f"Kueue admits the job (queue {queue})"
        record = PreflightRecord(SKIPPED, why, mode, pods=len(pods))
        log.info("pre-flight skipped: %s", why)
        publish(record)
        return record
    return admit(client, job, pods, mode=mode, wait_s=0.0 if gang else float(spec.schedule_timeout), poll_s=poll_s,
                 log=log, publish=publish, gang=gang)
