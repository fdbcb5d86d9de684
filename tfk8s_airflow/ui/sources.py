"""What the TF jobs view reads: the metadata database (XCom, task instances, runs) and one LIST per job.

Three queries per page, whatever the number of jobs and replicas: the setups' job records
(newest runs first, only of DAGs the caller may read), every XCom the view shows of those runs,
and their replica task instances. Pods are listed only for a job that runs and has no
``progress`` yet, with one LIST of the job's selector, kept for a few seconds so that many open
pages cost one LIST per job and poll.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tfk8s_airflow.exceptions import RecordError
from tfk8s_airflow.job.run.judge import replica_state
from tfk8s_airflow.job.run.records import JobProgress, JobRecord, ReplicaResult
from tfk8s_airflow.ui.bounded import VIEW_REQUEST_TIMEOUT_S, SingleFlight, ViewRequestError, list_pods_bounded
from tfk8s_airflow.ui.rows import REPLICA, TEARDOWN, WAIT, JobSources, ReplicaTask, group_prefix, wants_pod_list

POD_LIST_TTL_S = 5.0
#: Seconds one page of the view may spend on LISTs of its jobs' pods, in all.
PAGE_LIST_BUDGET_S = 10.0
#: Jobs a page shows by default (``?limit=``), and the most one request may ask for.
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
#: Running jobs whose pods one page lists at most (one LIST each): the rest show what their records give.
PAGE_MAX_POD_LISTS = 50
_log = logging.getLogger(__name__)


def _value(row: Any) -> Any:
    from airflow.models.xcom import XComModel

    return XComModel.deserialize_value(row)


def find_jobs(session: Session, dag_ids: Collection[str], *, run: tuple[str, str] | None = None,
              limit: int = DEFAULT_LIMIT, list_pods: bool = True) -> list[JobSources]:
    """The jobs of the newest runs of ``dag_ids`` (or of one ``(dag_id, run_id)``), with all they left."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel

    if not dag_ids:
        return []
    stmt = (select(XComModel.dag_id, XComModel.run_id, XComModel.dag_run_id, XComModel.task_id, XComModel.value,
                   DagRun.state, DagRun.start_date)
            .join(DagRun, DagRun.id == XComModel.dag_run_id)
            .where(XComModel.key == "job", XComModel.map_index == -1, XComModel.dag_id.in_(list(dag_ids))))
    if run is not None:
        stmt = stmt.where(XComModel.dag_id == run[0], XComModel.run_id == run[1])
    setups = session.execute(stmt.order_by(DagRun.id.desc(), XComModel.task_id).limit(limit)).all()

    jobs: dict[tuple[int, str], dict[str, Any]] = {}
    for row in setups:
        prefix = group_prefix(row.task_id)
        if prefix is None:
            continue
        try:
            record = JobRecord.from_xcom(_value(row))
        except RecordError:
            continue  # an XCom "job" of some other task, or of another release
        jobs[(row.dag_run_id, prefix)] = {
            "dag_id": row.dag_id, "run_id": row.run_id, "run_state": str(row.state or ""), "prefix": prefix,
            "record": record, "started_at": row.start_date.isoformat() if row.start_date else None,
            "tasks": {}, "results": {}}
    if not jobs:
        return []
    run_pks = sorted({pk for pk, _ in jobs})
    # (run, task id) -> (which task of its group, the job): every row below finds its job at once.
    owner = {(pk, prefix + name): (name, job) for (pk, prefix), job in jobs.items()
             for name in (REPLICA, WAIT, TEARDOWN)}
    names = {task_id for _, task_id in owner}

    xcoms = session.execute(
        select(XComModel.dag_run_id, XComModel.task_id, XComModel.map_index, XComModel.key, XComModel.value)
        .where(XComModel.dag_run_id.in_(run_pks), XComModel.task_id.in_(sorted(names)),
               XComModel.key.in_(("replica", "summary", "progress", "return_value")))).all()
    for x in xcoms:
        if (hit := owner.get((x.dag_run_id, x.task_id))) is not None:
            _take_xcom(hit[1], hit[0], x)

    tis = session.execute(
        select(DagRun.id, TaskInstance.task_id, TaskInstance.map_index, TaskInstance.state, TaskInstance.try_number)
        .join(DagRun, (DagRun.dag_id == TaskInstance.dag_id) & (DagRun.run_id == TaskInstance.run_id))
        .where(DagRun.id.in_(run_pks), TaskInstance.task_id.in_(sorted(n for n in names if n.endswith(REPLICA))))
    ).all()
    for t in tis:
        if (hit := owner.get((t.id, t.task_id))) is not None and hit[0] == REPLICA:
            hit[1]["tasks"][t.map_index] = ReplicaTask(t.map_index, t.state, int(t.try_number or 0))

    out = []
    for job in jobs.values():
        if (final := final_progress(job.get("summary"))) is not None:
            job["progress"] = final  # the sensor's last word: it pushes no XCom 'progress' when it ends
        out.append(JobSources(**job))
    return with_live(out) if list_pods else out


def with_live(jobs: list[JobSources], budget_s: float | None = None) -> list[JobSources]:
    """Each running job with its pods' live state, within one page's bounds: the LISTs of a page take
    :data:`PAGE_LIST_BUDGET_S` in all (plus the one in flight), they are asked for
    :data:`PAGE_MAX_POD_LISTS` jobs at most, and once a cluster (a connection) failed to answer, the page
    asks it no more. The jobs past any of these show what their records give, as a failed LIST's do.
    Without them a page of 500 jobs on a dead cluster waited 500 bounded requests (~40 min), and on a live
    one made 500 LISTs of pods at each refresh."""
    deadline = time.monotonic() + (PAGE_LIST_BUDGET_S if budget_s is None else budget_s)
    dead: set[str | None] = set()
    asked = 0
    out = []
    for src in jobs:
        if wants_pod_list(src.run_state, src.summary, src.progress):
            conn = src.record.kubernetes_conn_id
            live = None
            if conn not in dead and asked < PAGE_MAX_POD_LISTS and time.monotonic() < deadline:
                asked += 1
                live = live_replicas(src.record)
                if live is None:
                    dead.add(conn)
            src = dataclasses.replace(src, live=live)
        out.append(src)
    return out


def final_progress(summary: Any) -> JobProgress | None:
    """The progress a job ended with, from the sensor's summary (None: no summary, or unreadable)."""
    if not isinstance(summary, dict) or not isinstance(summary.get("progress"), dict):
        return None
    try:
        return JobProgress.from_xcom(summary["progress"])
    except (RecordError, TypeError):
        return None


def _take_xcom(job: dict[str, Any], task: str, x: Any) -> None:
    """One XCom row into its job's sources (``task``: which task of the group pushed it)."""
    try:
        if task == REPLICA and x.key == "replica":
            job["results"][x.map_index] = ReplicaResult.from_xcom(_value(x))
        elif task == WAIT and x.key == "summary":
            value = _value(x)
            job["summary"] = value if isinstance(value, dict) else None
        elif task == WAIT and x.key == "progress":
            job["progress"] = JobProgress.from_xcom(_value(x))
        elif task == TEARDOWN and x.key == "return_value":
            value = _value(x)
            job["archived"] = [str(p) for p in value.get("archived") or ()] if isinstance(value, dict) else []
    except (RecordError, TypeError):
        pass  # a record this release cannot read: the row shows what the others give


_cache: dict[tuple[str | None, str, str], tuple[float, dict[str, dict[str, Any]] | None]] = {}
_cache_lock = threading.Lock()
_lists: SingleFlight[dict[str, dict[str, Any]]] = SingleFlight()


def live_replicas(record: JobRecord) -> dict[str, dict[str, Any]] | None:
    """Replica key -> phase, restarts, exit code, node of its pod: one LIST of the job's selector.

    None when the cluster cannot be reached or does not answer within
    :data:`~tfk8s_airflow.ui.bounded.VIEW_REQUEST_TIMEOUT_S` (the row then shows what the records
    give). Bounded, never retried, one LIST in flight per job shared by every page that asks
    meanwhile, and its answer (or its failure) kept :data:`POD_LIST_TTL_S` seconds.
    """
    key = (record.kubernetes_conn_id, record.namespace, record.selector)
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and now - hit[0] < POD_LIST_TTL_S:
            return hit[1]

    def list_once() -> dict[str, dict[str, Any]]:
        pods = list_pods_bounded(record.kubernetes_conn_id or "kubernetes_default", record.namespace,
                                 record.selector, timeout=VIEW_REQUEST_TIMEOUT_S)
        return _by_key(replica_state(p) for p in pods if _own(record, p))

    found: dict[str, dict[str, Any]] | None
    try:
        found = _lists.do(key, list_once, VIEW_REQUEST_TIMEOUT_S + 1.0)
    except ViewRequestError as exc:
        _log.warning("TF jobs view: the pods of %s in %s were not listed: %s", record.job, record.namespace, exc)
        found = None
    now = time.monotonic()
    with _cache_lock:
        _cache[key] = (now, found)
        for stale in [k for k, (at, _) in _cache.items() if now - at >= POD_LIST_TTL_S]:
            del _cache[stale]
    return found


def _own(record: JobRecord, pod: Any) -> bool:
    """A pod of the job's own (setup's by its recorded UID, or owned by the job's Service: recovery's), not
    one that only carries its labels; a record without UIDs (an earlier release's): every labelled pod."""
    if not record.service_uid or not isinstance(pod, Mapping):
        return True
    meta = pod.get("metadata") or {}
    recorded = record.recorded_pods() or {}
    return meta.get("uid") in recorded or any(
        isinstance(ref, Mapping) and ref.get("uid") == record.service_uid for ref in meta.get("ownerReferences") or ())


def _by_key(states: Iterable[Any]) -> dict[str, dict[str, Any]]:
    return {st.key: st.summary() for st in states if st is not None}

