"""The rows of the TF jobs view, from the records a run holds (pure: no Airflow, no I/O).

A job's row is assembled from what its task group leaves in XCom and in the task instances:
setup's ``job`` (the plan, in map-index order), each replica task's ``replica`` (once it ended),
the sensor's ``summary`` (once the job ended) and ``progress`` (while it runs), teardown's
return value (the archived files), and, only while the job runs and no ``progress`` is there
yet, the replicas as one LIST of the job's pods shows them. Each replica field is taken from
the latest word that has it: the summary, then the replica's own result, then the progress,
then the pods.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, assert_never
from urllib.parse import quote, urlencode

from tfk8s_airflow.job.policy.tensorboard_url import http_url
from tfk8s_airflow.job.run.records import JobProgress, JobRecord, ReplicaResult
from tfk8s_airflow.job.states import JobState
from tfk8s_airflow.ui import PREFIX
from tfk8s_airflow.ui.charts import charts
from tfk8s_airflow.viewpaths import replica_log_path
from tfk8s_airflow.volume.logs import archive_path, archive_root_of

#: The task ids of a group, after its prefix (``train.``): what the view reads from each.
SETUP, REPLICA, WAIT, TEARDOWN = "setup", "replica", "wait", "teardown"
#: Replica fields the page shows, each from the first source that has it.
REPLICA_FIELDS = ("phase", "restarts", "exit_code", "node")
RUNNING_RUN_STATES = ("queued", "running")


@dataclass(frozen=True)
class ReplicaTask:
    """One mapped replica task instance, as the metadata database has it."""

    map_index: int
    state: str | None
    try_number: int


@dataclass(frozen=True)
class JobSources:
    """Everything one job of one run left, read by one query each (see ``ui.sources``)."""

    dag_id: str
    run_id: str
    run_state: str
    prefix: str  # the group's task-id prefix, "train." (or "" for a setup task outside a group)
    record: JobRecord
    started_at: str | None = None
    tasks: Mapping[int, ReplicaTask] = field(default_factory=dict)
    results: Mapping[int, ReplicaResult] = field(default_factory=dict)
    summary: Mapping[str, Any] | None = None
    progress: JobProgress | None = None
    live: Mapping[str, Mapping[str, Any]] | None = None  # replica key -> its pod's fields, one LIST
    archived: Sequence[str] | None = None  # teardown's return value "archived"; None before teardown ended

    def task_id(self, name: str) -> str:
        return f"{self.prefix}{name}"


def group_prefix(setup_task_id: str) -> str | None:
    """``train.setup`` -> ``train.``; None for a task that is not a group's setup."""
    if setup_task_id == SETUP:
        return ""
    if setup_task_id.endswith("." + SETUP):
        return setup_task_id[: -len(SETUP)]
    return None


def wants_pod_list(run_state: str, summary: Mapping[str, Any] | None, progress: JobProgress | None) -> bool:
    """Whether the view should LIST the job's pods: only while it runs and nothing newer says how."""
    return run_state in RUNNING_RUN_STATES and summary is None and progress is None


@dataclass(frozen=True)
class Links:
    """Where the page's links point: the Airflow UI (``ui``, its base path) and this app (``app``)."""

    ui: str = "/"
    app: str = PREFIX

    def run(self, dag_id: str, run_id: str) -> str:
        return f"{self.ui.rstrip('/')}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"

    def task_log(self, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int) -> str:
        base = f"{self.run(dag_id, run_id)}/tasks/{quote(task_id, safe='')}/mapped/{map_index}"
        return f"{base}?{urlencode({'try_number': try_number})}" if try_number > 0 else base

    def archived_log(self, dag_id: str, run_id: str, job: str, replica: str) -> str:
        return replica_log_path(self.app, dag_id, run_id, job, replica)


def archive_roots(src: JobSources) -> dict[str, str]:
    """Replica key -> the root its log was archived under, from the files teardown reports."""
    roots: dict[str, str] = {}
    for path in src.archived or ():
        for ref in src.record.replicas:
            root = archive_root_of(str(path), src.record.job, ref.pod)
            if root is not None and str(archive_path(root, src.record.job, ref.pod)) == str(path):
                roots[ref.key] = root
    return roots


def log_roots(src: JobSources) -> dict[str, str]:
    """Replica key -> the directory its log file is read from: teardown's archive, else the job's
    log directory (the record's, from the validated spec) where the replica task streamed the log
    (its result says so) or while the job runs (the replica tasks stream it there)."""
    roots = archive_roots(src)
    live = src.archived is None and src.run_state in RUNNING_RUN_STATES
    if src.record.log_dir:
        for map_index, ref in enumerate(src.record.replicas):
            result = src.results.get(map_index)
            if ref.key not in roots and (live or (result is not None and result.log)):
                roots[ref.key] = src.record.log_dir
    return roots


def job_state(src: JobSources) -> tuple[str, str]:
    """(state, reason): the summary's once the job ended, else the progress', else the run's."""
    if src.summary is not None:
        return str(src.summary.get("state") or "unknown"), str(src.summary.get("reason") or "")
    if src.progress is not None:
        return src.progress.state, src.progress.waiting  # queued in Kueue, or held by another's gate
    if src.run_state in RUNNING_RUN_STATES:
        return JobState.RUNNING, ""
    return src.run_state, "the job's sensor left no summary"


def not_ended(state: str) -> bool:
    """Whether a row's state (a job's, or the run's when the job left none) is a job that has not ended."""
    try:
        job = JobState(state)
    except ValueError:
        return False  # the run's state: the run ended without the job's word
    match job:
        case JobState.RUNNING | JobState.QUEUED | JobState.HELD:
            return True
        case JobState.SUCCEEDED | JobState.FAILED:
            return False
        case _:
            assert_never(job)


def _progress(p: JobProgress | None) -> dict[str, Any] | None:
    if p is None:
        return None
    return {"step": p.step, "target_step": p.target_step, "percent": percent(p.step, p.target_step),
            "loss": p.loss, "examples_per_sec": p.examples_per_sec, "eta_s": p.eta_s, "updated_at": p.updated_at,
            "charts": charts(p.history)}


def percent(step: int | None, target_step: int | None) -> float | None:
    """How far the step is to the target, 0 to 100 (None without both); the page's progress bar."""
    if step is None or not target_step or target_step <= 0:
        return None
    return round(min(100.0, max(0.0, 100.0 * step / target_step)), 1)


def _attempts(p: JobProgress | None, key: str | None = None) -> int:
    """The job's attempt (1 + restarts of the group), or one replica's (those plus its replacements)."""
    if p is None or not p.attempts:
        return 1
    if key is None:
        return max(max(a.number for a in p.attempts), 1 + len(p.attempts))
    return 1 + sum(1 for a in p.attempts if a.action == "restart_group" or key in a.replicas)


def _tensorboard(src: JobSources) -> tuple[str | None, str]:
    """(the TensorBoard link, or None; what the page says instead of a link).

    The link is the progress' URL (an http(s) URL only) until teardown ended: it deletes the
    TensorBoard with the job, and a link to it would lead nowhere.
    """
    url = http_url(src.progress.tensorboard_url) if src.progress is not None else None
    has_one = bool(src.record.tensorboard_pod) or url is not None
    if not has_one:
        return None, "no TensorBoard"
    if src.archived is not None:
        return None, "TensorBoard ended with the job"
    if url is not None:
        return url, ""
    if src.record.tensorboard_pod and not src.record.tensorboard_url:
        return None, "TensorBoard runs without a link ([tfk8s] tensorboard_url is not set)"
    return None, "TensorBoard not ready yet" if not_ended(job_state(src)[0]) else "no TensorBoard"


def _archive_state(src: JobSources, roots: Mapping[str, str]) -> str:
    if roots:
        return "archived"
    if src.archived is None and src.run_state in RUNNING_RUN_STATES:
        if src.record.log_dir:
            return f"streamed to {src.record.log_dir} while the replicas run"
        return "not archived yet (teardown archives them when the group has an archive directory)"
    return "not archived"


def job_row(src: JobSources, links: Links) -> dict[str, Any]:
    """The row of one job: plain JSON data the page renders (every value escaped there)."""
    state, reason = job_state(src)
    tensorboard_url, tensorboard_note = _tensorboard(src)
    summary_replicas = (src.summary or {}).get("replicas") or {}
    progress_replicas = src.progress.replicas if src.progress is not None else {}
    roots = archive_roots(src)
    readable = log_roots(src)
    replicas = []
    for map_index, ref in enumerate(src.record.replicas):
        result = src.results.get(map_index)
        sources: list[Mapping[str, Any]] = [summary_replicas.get(ref.key) or {},
                                            _result_fields(result), progress_replicas.get(ref.key) or {},
                                            (src.live or {}).get(ref.key) or {}]
        fields = {name: next((s[name] for s in sources if s.get(name) is not None), None) for name in REPLICA_FIELDS}
        task = src.tasks.get(map_index)
        try_number = task.try_number if task is not None else 0
        replicas.append({
            "key": ref.key, "role": ref.role, "index": ref.index, "pod": ref.pod, "tracked": ref.tracked,
            **fields, "attempt": _attempts(src.progress, ref.key),
            "task_state": task.state if task is not None else None, "try_number": try_number,
            "result": result.state if result is not None else None,
            "log_url": links.task_log(src.dag_id, src.run_id, src.task_id(REPLICA), map_index, try_number),
            "archive_url": (links.archived_log(src.dag_id, src.run_id, src.record.job, ref.key)
                            if ref.key in readable else None),
        })
    return {
        "dag_id": src.dag_id, "run_id": src.run_id, "run_state": src.run_state,
        "run_url": links.run(src.dag_id, src.run_id), "started_at": src.started_at,
        "group": src.prefix.rstrip("."), "job": src.record.job, "namespace": src.record.namespace,
        "state": state, "reason": reason, "attempt": _attempts(src.progress),
        "progress": _progress(src.progress),
        "tensorboard_url": tensorboard_url, "tensorboard_note": tensorboard_note,
        "replica_source": _replica_source(src), "archive": _archive_state(src, roots),
        "replicas": replicas,
    }


def _result_fields(result: ReplicaResult | None) -> dict[str, Any]:
    if result is None:
        return {}
    return {"phase": result.phase or None, "restarts": result.restarts, "exit_code": result.exit_code,
            "node": result.node}


def _replica_source(src: JobSources) -> str:
    """Which record the replicas' phases mostly come from (the page says so)."""
    if src.summary is not None:
        return "summary"
    if src.progress is not None:
        return "progress"
    if src.live is not None:
        return "pods"
    return "results" if src.results else "plan"


def mark_task(rows: Sequence[dict[str, Any]], task_id: str, map_index: int = -1) -> list[dict[str, Any]]:
    """The rows with the job of a task instance marked (``marked``: the task is one of the job's group)
    and, for one of its replica tasks (``<group>.replica``, ``map_index``), that replica's row too;
    the marked job first. What the task-instance tab of the view shows: a task of no job marks nothing.
    """
    group = task_id.rpartition(".")[0]
    out = []
    for row in rows:
        mine = row["group"] == group
        replica_task = (f"{group}." if group else "") + REPLICA
        replicas = [{**r, "marked": mine and task_id == replica_task and i == map_index}
                    for i, r in enumerate(row["replicas"])]
        out.append({**row, "marked": mine, "replicas": replicas})
    return sorted(out, key=lambda r: not r["marked"])


def sort_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Running jobs first, each part most recently started first."""
    newest_first = sorted(rows, key=lambda r: r.get("started_at") or "", reverse=True)
    return sorted(newest_first, key=lambda r: not not_ended(r["state"]))
